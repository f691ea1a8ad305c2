//! Firmware packages (issue 40): their ids, status and the rules a package's declared
//! metadata and an owner's signing key must meet. No I/O.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::model::error::ValidationError;

/// Smallest image accepted, in bytes (an empty image is never firmware).
pub const MIN_IMAGE_BYTES: u64 = 1;
/// Largest image accepted, in bytes: 256 MiB, beyond any microcontroller or Linux-gateway
/// image the fleet carries, and small enough for the service to read and hash it within one
/// API request (S3 in-region reads well above the 9 MB/s that 256 MiB in 29 s needs).
pub const MAX_IMAGE_BYTES: u64 = 256 * 1024 * 1024;
/// Longest version accepted, in characters.
pub const MAX_VERSION_LEN: usize = 64;
/// How long an upload URL stays valid, in seconds: long enough for one large upload, short
/// enough that a leaked URL is soon useless.
pub const UPLOAD_URL_SECONDS: u64 = 15 * 60;

/// A firmware package's id: `f-{epoch millis, 15 digits}-{16 random hex digits}`, so an
/// owner's packages list in creation order. Validated like every key part.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct FirmwareId(String);

impl FirmwareId {
    /// A new id for a package created at `created`.
    pub fn generate(created: crate::model::timestamp::Timestamp) -> Self {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).expect("the OS has a random source");
        Self(format!(
            "f-{:015}-{:016x}",
            created.epoch_millis().max(0),
            u64::from_be_bytes(bytes)
        ))
    }

    /// Validates an id from a path or a stored item: exactly the generated shape.
    pub fn parse(value: impl Into<String>) -> Result<Self, ValidationError> {
        let value = value.into();
        let bad = || ValidationError::new("firmwareId", "is not a firmware id");
        let rest = value.strip_prefix("f-").ok_or_else(bad)?;
        let (millis, random) = rest.split_once('-').ok_or_else(bad)?;
        let digits = |s: &str, n: usize, hex: bool| {
            s.len() == n
                && s.chars()
                    .all(|c| c.is_ascii_digit() || (hex && matches!(c, 'a'..='f')))
        };
        if !digits(millis, 15, false) || !digits(random, 16, true) {
            return Err(bad());
        }
        Ok(Self(value))
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FirmwareId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for FirmwareId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::parse(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Where a package is: waiting for its image, checked and usable, or refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FirmwareStatus {
    /// Created; its image is not uploaded or not checked yet.
    Pending,
    /// The service read the stored image: its size and SHA-256 are the declared ones (and its
    /// signature verifies, where the device type has a key).
    Ready,
    /// The stored image did not match (see the package's `reason`); it never becomes ready.
    Rejected,
}

/// A version: semver-ish, `MAJOR.MINOR.PATCH` with optional `-prerelease` and `+build` of
/// letters, digits, `.` and `-`; at most [`MAX_VERSION_LEN`] characters.
pub fn check_version(value: &str) -> Result<(), ValidationError> {
    let bad = || {
        ValidationError::new(
            "version",
            "must be MAJOR.MINOR.PATCH (digits), optionally with -prerelease or +build",
        )
    };
    if value.len() > MAX_VERSION_LEN {
        return Err(ValidationError::new(
            "version",
            format!("must be at most {MAX_VERSION_LEN} characters"),
        ));
    }
    let (core, build) = match value.split_once('+') {
        Some((core, build)) => (core, Some(build)),
        None => (value, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (core, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() != 3
        || numbers
            .iter()
            .any(|n| n.is_empty() || n.len() > 9 || !n.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(bad());
    }
    let label_ok = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    if pre.is_some_and(|p| !label_ok(p)) || build.is_some_and(|b| !label_ok(b)) {
        return Err(bad());
    }
    Ok(())
}

/// A SHA-256 as 64 lowercase hex digits (uppercase is accepted and lowered).
pub fn parse_sha256(value: &str) -> Result<String, ValidationError> {
    if value.len() != 64 || !value.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ValidationError::new(
            "sha256",
            "must be the image's SHA-256 as 64 hex digits",
        ));
    }
    Ok(value.to_ascii_lowercase())
}

/// A declared size, within [`MIN_IMAGE_BYTES`]..=[`MAX_IMAGE_BYTES`].
pub fn check_size(size: u64) -> Result<(), ValidationError> {
    if !(MIN_IMAGE_BYTES..=MAX_IMAGE_BYTES).contains(&size) {
        return Err(ValidationError::new(
            "size",
            format!("must be {MIN_IMAGE_BYTES}..{MAX_IMAGE_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// An Ed25519 public key, base64 of its 32 bytes (and a valid curve point).
pub fn parse_public_key(value: &str) -> Result<[u8; 32], ValidationError> {
    let bad = || {
        ValidationError::new(
            "publicKey",
            "must be an Ed25519 public key: 32 bytes, base64",
        )
    };
    let bytes: [u8; 32] = STANDARD
        .decode(value)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(bad)?;
    ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(|_| bad())?;
    Ok(bytes)
}

/// An Ed25519 signature, base64 of its 64 bytes.
pub fn parse_signature(value: &str) -> Result<[u8; 64], ValidationError> {
    STANDARD
        .decode(value)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            ValidationError::new(
                "signature",
                "must be an Ed25519 signature: 64 bytes, base64",
            )
        })
}

/// Whether `signature` (base64) is the Ed25519 signature by `public_key` (base64) of the
/// image's SHA-256 digest: the 32 raw bytes of `sha256_hex`, not its hex text. Signing the
/// digest lets a device check the signature after hashing its download as it streams, without
/// holding the image; the digest is the one the service computed itself.
pub fn signature_verifies(public_key: &str, signature: &str, sha256_hex: &str) -> bool {
    let (Ok(key), Ok(signature)) = (parse_public_key(public_key), parse_signature(signature))
    else {
        return false;
    };
    let Some(digest) = hex_bytes(sha256_hex) else {
        return false;
    };
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&key) else {
        return false;
    };
    key.verify_strict(&digest, &ed25519_dalek::Signature::from_bytes(&signature))
        .is_ok()
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::timestamp::Timestamp;

    #[test]
    fn a_maintenance_window_holds_its_hours_across_midnight_and_a_bad_one_names_its_field() {
        let at =
            |hhmm: &str| Timestamp::parse_field("at", &format!("2026-11-29T{hhmm}:00Z")).unwrap();
        let window = |v: serde_json::Value| MaintenanceWindow::parse(Some(&v));
        let night = window(serde_json::json!({"startHour": 22, "endHour": 4}))
            .unwrap()
            .unwrap();
        for (time, inside) in [
            ("21:59", false),
            ("22:00", true),
            ("23:30", true),
            ("00:00", true),
            ("03:59", true),
            ("04:00", false),
            ("12:00", false),
        ] {
            assert_eq!(night.contains(at(time)), inside, "{time}");
        }
        let day = window(serde_json::json!({"startHour": 9, "endHour": 17}))
            .unwrap()
            .unwrap();
        assert!(day.contains(at("09:00")) && day.contains(at("16:59")));
        assert!(!day.contains(at("08:59")) && !day.contains(at("17:00")));
        assert_eq!(MaintenanceWindow::parse(None).unwrap(), None);
        for (bad, field) in [
            (serde_json::json!([22, 4]), "maintenanceWindow"),
            (
                serde_json::json!({"startHour": 22}),
                "maintenanceWindow.endHour",
            ),
            (
                serde_json::json!({"startHour": 24, "endHour": 4}),
                "maintenanceWindow.startHour",
            ),
            (
                serde_json::json!({"startHour": 2.5, "endHour": 4}),
                "maintenanceWindow.startHour",
            ),
            (
                serde_json::json!({"startHour": "2", "endHour": 4}),
                "maintenanceWindow.startHour",
            ),
            (
                serde_json::json!({"startHour": 4, "endHour": 4}),
                "maintenanceWindow.endHour",
            ),
            (
                serde_json::json!({"startHour": 1, "endHour": 4, "tz": "CET"}),
                "maintenanceWindow.tz",
            ),
        ] {
            assert_eq!(window(bad.clone()).unwrap_err().field, field, "{bad}");
        }
    }

    #[test]
    fn ids_round_trip_and_hostile_ids_are_refused() {
        let id = FirmwareId::generate(Timestamp::now());
        assert_eq!(FirmwareId::parse(id.as_str()).unwrap(), id);
        for bad in [
            "",
            "f-",
            "f-1-2",
            "../x",
            "f-000000000000001-ABCDEF0123456789",
            "x-000000000000001-abcdef0123456789",
        ] {
            assert!(FirmwareId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_are_semver_ish() {
        for good in [
            "1.0.0",
            "10.20.30",
            "1.2.3-rc.1",
            "1.2.3+build.5",
            "1.2.3-beta-2+x",
        ] {
            assert!(check_version(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1",
            "1.2",
            "1.2.3.4",
            "v1.2.3",
            "1.2.x",
            "1.2.3-",
            "1.2.3+",
            "1..3",
            "1.2.3-a..b",
            &"1".repeat(70),
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hashes_sizes_and_keys_are_checked() {
        assert!(parse_sha256(&"a".repeat(64)).is_ok());
        assert_eq!(parse_sha256(&"A".repeat(64)).unwrap(), "a".repeat(64));
        assert!(parse_sha256(&"g".repeat(64)).is_err());
        assert!(parse_sha256(&"a".repeat(63)).is_err());
        assert!(check_size(0).is_err());
        assert!(check_size(MAX_IMAGE_BYTES + 1).is_err());
        assert!(check_size(MAX_IMAGE_BYTES).is_ok());
        assert!(parse_public_key("AAAA").is_err());
        assert!(parse_signature(&STANDARD.encode([0u8; 63])).is_err());
    }

    #[test]
    fn a_signature_verifies_only_over_its_digest_with_its_key() {
        use ed25519_dalek::{Signer, SigningKey};
        let signing = SigningKey::from_bytes(&[7u8; 32]);
        let public = STANDARD.encode(signing.verifying_key().to_bytes());
        let digest = "ab".repeat(32);
        let signature = STANDARD.encode(signing.sign(&hex_bytes(&digest).unwrap()).to_bytes());
        assert!(signature_verifies(&public, &signature, &digest));
        assert!(!signature_verifies(&public, &signature, &"cd".repeat(32)));
        let other = STANDARD.encode(
            SigningKey::from_bytes(&[8u8; 32])
                .verifying_key()
                .to_bytes(),
        );
        assert!(!signature_verifies(&other, &signature, &digest));
    }
}

/// Most stages a firmware rollout may have.
pub const MAX_STAGES: usize = 10;
/// The stages when none are given: 1 %, 5 %, 25 %, then every device.
pub const DEFAULT_STAGES: [u8; 4] = [1, 5, 25, 100];
/// Longest soak between stages, in seconds (30 days).
pub const MAX_SOAK_SECONDS: u64 = 30 * 24 * 3600;
/// The soak when none is given, in seconds (one hour).
pub const DEFAULT_SOAK_SECONDS: u64 = 3600;
/// Most healthy check-ins a device may be asked for after reporting the new version.
pub const MAX_HEALTHY_CHECK_INS: u64 = 100;
/// Healthy check-ins asked for when none are given.
pub const DEFAULT_HEALTHY_CHECK_INS: u64 = 2;
/// The share of a stage's devices that must succeed before the next opens, when not given.
pub const DEFAULT_SUCCESS_PERCENT: u64 = 95;
/// The share of a stage's finished devices whose failure pauses the rollout, when not given.
pub const DEFAULT_FAILURE_PERCENT: u64 = 10;
/// Finished devices of a stage before its failure share can pause the rollout, when not given.
pub const DEFAULT_MIN_FINISHED: u64 = 20;
/// Most finished devices a stage may be asked to wait for before judging its failures.
pub const MAX_MIN_FINISHED: u64 = 1_000_000;

/// When a stage stops the rollout by itself: failures of any class reach `failure_percent`
/// of its finished devices, once at least `min_finished` of them have finished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbortRule {
    /// Percent (1 to 100) of a stage's finished devices.
    pub failure_percent: u8,
    /// Finished devices (1 to [`MAX_MIN_FINISHED`]) before the rule applies.
    pub min_finished: u32,
}

/// A staged firmware rollout's plan (issue 40 item 2): the package, copied from the checked
/// `ready` package so devices get exactly what was checked, and how it proceeds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FirmwarePlan {
    /// The package.
    pub firmware_id: FirmwareId,
    /// Its version.
    pub version: String,
    /// Its device type: only devices of this type are offered it (a tag may carry others).
    pub device_type: crate::model::ids::DeviceType,
    /// Cumulative percents of the target, increasing, the last 100.
    pub stages: Vec<u8>,
    /// How long a stage that met `success_percent` soaks before the next opens.
    pub soak_seconds: u32,
    /// Check-ins after reporting the new version, without failure, before a device counts as
    /// succeeded.
    pub healthy_check_ins: u8,
    /// Percent of a stage's devices that must succeed before the next opens.
    pub success_percent: u8,
    /// When a stage pauses the rollout.
    pub abort: AbortRule,
    /// The UTC hours in which devices are offered the image (none: any hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindow>,
}

/// What a device needs to download and check a firmware rollout's image, copied onto the
/// rollout from the checked package when it starts: a check-in reads the rollout anyway (for
/// its status), so it presigns the download without reading the package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferedImage {
    /// The image's SHA-256, as the service computed it.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The package's Ed25519 signature of its digest, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Where the image is in the bucket.
    pub object_key: String,
    /// The object version the service checked (a download is presigned for exactly it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_version: Option<String>,
}

/// The UTC hours in which a firmware rollout offers its image to devices that have no offer
/// yet: from `start_hour` (included) to `end_hour` (excluded), across midnight when
/// `end_hour` is the smaller. Outside it the rollout makes no new offer; a device offered
/// before it closed goes on (its download link is renewed at each check-in, so an update
/// under way is not stranded), and soaks, counts and timeouts go on too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// The first hour, 0 to 23.
    pub start_hour: u8,
    /// The hour it closes, 0 to 23, not `start_hour`.
    pub end_hour: u8,
}

impl MaintenanceWindow {
    /// Validates `{"startHour", "endHour"}` (errors name `maintenanceWindow.startHour` and so
    /// on); `None` when absent.
    pub fn parse(value: Option<&serde_json::Value>) -> Result<Option<Self>, ValidationError> {
        const FIELD: &str = "maintenanceWindow";
        let Some(value) = value else {
            return Ok(None);
        };
        let map = value.as_object().ok_or_else(|| {
            ValidationError::new(FIELD, "must be an object {startHour, endHour} (UTC hours)")
        })?;
        if let Some(other) = map.keys().find(|k| *k != "startHour" && *k != "endHour") {
            return Err(ValidationError::new(
                format!("{FIELD}.{other}"),
                "is not a field of maintenanceWindow (startHour, endHour)",
            ));
        }
        let hour = |name: &str| -> Result<u8, ValidationError> {
            let field = format!("{FIELD}.{name}");
            match map.get(name) {
                None => Err(ValidationError::new(field, "is required")),
                Some(v) => v
                    .as_u64()
                    .filter(|h| *h <= 23)
                    .map(|h| h as u8)
                    .ok_or_else(|| {
                        ValidationError::new(field, "must be a whole hour from 0 to 23 (UTC)")
                    }),
            }
        };
        let window = Self {
            start_hour: hour("startHour")?,
            end_hour: hour("endHour")?,
        };
        if window.start_hour == window.end_hour {
            return Err(ValidationError::new(
                format!("{FIELD}.endHour"),
                "must differ from startHour (omit maintenanceWindow for any hour)",
            ));
        }
        Ok(Some(window))
    }

    /// Whether `at` falls in the window.
    pub fn contains(&self, at: crate::model::timestamp::Timestamp) -> bool {
        let hour = (at.epoch_seconds().rem_euclid(86_400) / 3_600) as u8;
        if self.start_hour < self.end_hour {
            (self.start_hour..self.end_hour).contains(&hour)
        } else {
            hour >= self.start_hour || hour < self.end_hour
        }
    }
}

/// How a firmware rollout proceeds, as the owner asked, before its package is read: the
/// stages and numbers, validated (each a 400 naming the field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagePlan {
    /// Cumulative percents, increasing, the last 100.
    pub stages: Vec<u8>,
    /// Soak between stages, seconds.
    pub soak_seconds: u32,
    /// Healthy check-ins for success.
    pub healthy_check_ins: u8,
    /// Success share for the next stage to open.
    pub success_percent: u8,
    /// When a stage pauses the rollout.
    pub abort: AbortRule,
    /// When devices are offered the image (none: any hour).
    pub maintenance_window: Option<MaintenanceWindow>,
}

/// A whole number from `min` to `max` (JSON `2.5`, `"3"` or `-1` are not), or `default` when
/// absent; the error names `field`.
fn whole(
    field: &str,
    value: Option<&serde_json::Value>,
    min: u64,
    max: u64,
    default: u64,
) -> Result<u64, ValidationError> {
    match value {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| {
                ValidationError::new(field, format!("must be a whole number from {min} to {max}"))
            }),
    }
}

impl StagePlan {
    /// Validates the owner's stages and numbers (each absent one takes its default). `abort`
    /// is `{"failurePercent", "minFinished"}`; errors name `abort.failurePercent` and so on.
    pub fn parse(
        stages: Option<&serde_json::Value>,
        soak_seconds: Option<&serde_json::Value>,
        healthy_check_ins: Option<&serde_json::Value>,
        success_percent: Option<&serde_json::Value>,
        abort: Option<&serde_json::Value>,
        maintenance_window: Option<&serde_json::Value>,
    ) -> Result<Self, ValidationError> {
        let stages = match stages {
            None => DEFAULT_STAGES.to_vec(),
            Some(value) => {
                let bad = || {
                    ValidationError::new(
                        "stages",
                        format!(
                            "must be 1 to {MAX_STAGES} whole percents from 1 to 100, increasing, the last 100"
                        ),
                    )
                };
                let list = value.as_array().ok_or_else(bad)?;
                if list.is_empty() || list.len() > MAX_STAGES {
                    return Err(bad());
                }
                let mut percents = Vec::with_capacity(list.len());
                for entry in list {
                    let p = entry
                        .as_u64()
                        .filter(|p| (1..=100).contains(p))
                        .ok_or_else(bad)? as u8;
                    if percents.last().is_some_and(|&last| p <= last) {
                        return Err(bad());
                    }
                    percents.push(p);
                }
                if percents.last() != Some(&100) {
                    return Err(bad());
                }
                percents
            }
        };
        let soak_seconds = whole(
            "soakSeconds",
            soak_seconds,
            0,
            MAX_SOAK_SECONDS,
            DEFAULT_SOAK_SECONDS,
        )? as u32;
        let healthy_check_ins = whole(
            "healthyCheckIns",
            healthy_check_ins,
            0,
            MAX_HEALTHY_CHECK_INS,
            DEFAULT_HEALTHY_CHECK_INS,
        )? as u8;
        let success_percent = whole(
            "successPercent",
            success_percent,
            1,
            100,
            DEFAULT_SUCCESS_PERCENT,
        )? as u8;
        let abort = match abort {
            None => serde_json::Map::new(),
            Some(serde_json::Value::Object(map)) => {
                if let Some(other) = map
                    .keys()
                    .find(|k| *k != "failurePercent" && *k != "minFinished")
                {
                    return Err(ValidationError::new(
                        format!("abort.{other}"),
                        "is not a field of abort (failurePercent, minFinished)",
                    ));
                }
                map.clone()
            }
            Some(_) => {
                return Err(ValidationError::new(
                    "abort",
                    "must be an object {failurePercent, minFinished}",
                ))
            }
        };
        let abort = AbortRule {
            failure_percent: whole(
                "abort.failurePercent",
                abort.get("failurePercent"),
                1,
                100,
                DEFAULT_FAILURE_PERCENT,
            )? as u8,
            min_finished: whole(
                "abort.minFinished",
                abort.get("minFinished"),
                1,
                MAX_MIN_FINISHED,
                DEFAULT_MIN_FINISHED,
            )? as u32,
        };
        Ok(Self {
            stages,
            soak_seconds,
            healthy_check_ins,
            success_percent,
            abort,
            maintenance_window: MaintenanceWindow::parse(maintenance_window)?,
        })
    }
}

/// Buckets a device's place in a staged rollout is drawn from: 10,000, so a stage's percent
/// resolves to 0.01 % of the target.
pub const STAGE_BUCKETS: u64 = 10_000;

/// A device's stable place in staged rollouts, `0..STAGE_BUCKETS`: the first 8 bytes of the
/// SHA-256 of its id (big-endian) mod [`STAGE_BUCKETS`]. It needs no stored state, so a
/// device that joins the target while a rollout runs has its place at once, and a device's
/// stage never changes between runs. It does not depend on the rollout: the same devices are
/// every rollout's first stage, a known canary cohort.
pub fn stage_bucket(device: &crate::model::ids::DeviceId) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(device.as_str().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) % STAGE_BUCKETS
}

/// The first stage (index into `stages`, cumulative percents) that takes `device`: the first
/// whose `percent × 100` is above its [`stage_bucket`]. `None` only for a plan whose last stage
/// is not 100 (a validated [`StagePlan`] always ends at 100).
pub fn stage_of(stages: &[u8], device: &crate::model::ids::DeviceId) -> Option<usize> {
    let bucket = stage_bucket(device);
    stages
        .iter()
        .position(|&percent| bucket < u64::from(percent) * (STAGE_BUCKETS / 100))
}

#[cfg(test)]
mod stage_membership_tests {
    use super::*;
    use crate::model::ids::DeviceId;

    #[test]
    fn a_device_joins_one_stage_by_a_stable_hash_and_stages_take_their_share() {
        let id = |i: u32| DeviceId::parse(format!("meter-{i:06}")).unwrap();
        // Stable: the same id, the same place, every time.
        assert_eq!(stage_bucket(&id(7)), stage_bucket(&id(7)));
        let stages = [1u8, 5, 25, 100];
        let mut counts = [0u32; 4];
        for i in 0..20_000 {
            let stage = stage_of(&stages, &id(i)).expect("the last stage is 100");
            counts[stage] += 1;
        }
        // Cumulative 1 %, 5 %, 25 %, 100 % of 20,000: 200, 800, 4,000, 15,000 new devices per
        // stage, within a few standard deviations.
        let expected: [f64; 4] = [200.0, 800.0, 4_000.0, 15_000.0];
        for (stage, (&got, want)) in counts.iter().zip(expected).enumerate() {
            let sigma = (want * (1.0 - want / 20_000.0)).sqrt();
            assert!(
                (f64::from(got) - want).abs() < 5.0 * sigma,
                "stage {stage}: {got} devices, expected about {want}"
            );
        }
        // A wider stage list keeps every device at or before its place in a narrower one.
        for i in 0..1_000 {
            let d = id(i);
            let coarse = stage_of(&[25, 100], &d).unwrap();
            let fine = stage_of(&stages, &d).unwrap();
            assert_eq!(coarse == 0, fine <= 2, "{d:?}");
        }
        assert_eq!(
            stage_of(&[1, 5], &id(1)).is_none(),
            stage_bucket(&id(1)) >= 500
        );
    }
}

#[cfg(test)]
mod stage_plan_tests {
    use super::*;
    use serde_json::json;

    fn stages(v: serde_json::Value) -> Result<StagePlan, ValidationError> {
        StagePlan::parse(Some(&v), None, None, None, None, None)
    }

    #[test]
    fn stages_are_increasing_percents_ending_at_100_and_defaults_fill_the_rest() {
        let plan = StagePlan::parse(None, None, None, None, None, None).unwrap();
        assert_eq!(plan.stages, vec![1, 5, 25, 100]);
        assert_eq!(plan.success_percent, 95);
        assert_eq!(plan.abort.failure_percent, 10);
        assert_eq!(stages(json!([100])).unwrap().stages, vec![100]);
        for bad in [
            json!([]),
            json!([1, 5, 25]),
            json!([5, 1, 100]),
            json!([5, 5, 100]),
            json!([0, 100]),
            json!([1.5, 100]),
            json!([1, 101]),
            json!("1,100"),
            json!((1..=11).map(|i| i * 9).chain([100]).collect::<Vec<_>>()),
        ] {
            assert_eq!(stages(bad.clone()).unwrap_err().field, "stages", "{bad}");
        }
        let abort = |v: serde_json::Value| StagePlan::parse(None, None, None, None, Some(&v), None);
        assert_eq!(
            abort(json!({"failurePercent": 0})).unwrap_err().field,
            "abort.failurePercent"
        );
        assert_eq!(
            abort(json!({"minFinished": 2.5})).unwrap_err().field,
            "abort.minFinished"
        );
        assert_eq!(abort(json!({"x": 1})).unwrap_err().field, "abort.x");
        assert_eq!(abort(json!(3)).unwrap_err().field, "abort");
    }
}
