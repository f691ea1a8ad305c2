//! Starts moto's server (`moto[server]` from PyPI, installed by `make moto-server` into
//! `.venv-moto/`) on a free loopback port: a real S3 and SQS API for the AWS SDK for Rust
//! (issues 40 and 41), found by the functions through the SDK's standard
//! `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL_SQS`.
//!
//! As with DynamoDB Local, the server runs under a small shell guard that kills it as soon as
//! our end of its stdin closes, so it never outlives the process that started it.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Why moto's server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MotoError {
    /// The virtualenv is not installed.
    #[error("moto's server is not installed under {0}: run `make moto-server` (or `make test`/`make dev`, which install it)")]
    NotInstalled(PathBuf),
    /// Process or socket failure.
    #[error("starting moto's server: {0}")]
    Io(#[from] std::io::Error),
    /// It did not answer in time.
    #[error("moto's server did not answer on {0} within 30 s")]
    NotReady(String),
}

/// Where `make moto-server` installs it (override with `MOTO_VENV`).
pub fn default_venv_dir() -> PathBuf {
    std::env::var_os("MOTO_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join(".venv-moto"))
}

/// A running moto server; stops when dropped.
pub struct MotoServer {
    endpoint: String,
    guard: Child,
    // Closing this makes the guard kill the server.
    lifeline: Option<ChildStdin>,
}

impl MotoServer {
    /// Starts moto's server from `venv_dir` on a free loopback port and waits until it answers.
    pub fn start(venv_dir: &Path) -> Result<Self, MotoError> {
        let server = venv_dir.join("bin/moto_server");
        if !server.is_file() {
            return Err(MotoError::NotInstalled(venv_dir.to_path_buf()));
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let guard_script = r#""$1" -H 127.0.0.1 -p "$2" </dev/null >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT INT TERM HUP
read -r _ignored || true
kill $server 2>/dev/null
wait $server 2>/dev/null
"#;
        let mut guard = Command::new("sh")
            .arg("-c")
            .arg(guard_script)
            .arg("moto-server-guard")
            .arg(&server)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let lifeline = guard.stdin.take();
        let moto = Self {
            endpoint: format!("http://127.0.0.1:{port}"),
            guard,
            lifeline,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if answers_http(port) {
                return Ok(moto);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(MotoError::NotReady(moto.endpoint.clone()))
    }

    /// Starts it from [`default_venv_dir`].
    pub fn start_default() -> Result<Self, MotoError> {
        Self::start(&default_venv_dir())
    }

    /// `http://127.0.0.1:{port}`: the value of `AWS_ENDPOINT_URL_S3` and `AWS_ENDPOINT_URL_SQS`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        if let Some(mut lifeline) = self.lifeline.take() {
            let _ = lifeline.write_all(b"stop\n");
        }
        let _ = self.guard.wait();
    }
}

/// Whether moto answers its own API on `port` (`GET /moto-api/data.json` is 200 once ready).
fn answers_http(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(
            b"GET /moto-api/data.json HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// The firmware image store (issue 40) on a local S3-compatible server at `endpoint` (moto's):
/// path-style, static credentials, as the functions reach it through `AWS_ENDPOINT_URL_S3`.
/// Building it makes no request: presigning works offline.
pub fn local_firmware_images(
    endpoint: &str,
    bucket: &str,
) -> shared::store::firmware_images::FirmwareImages {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "local", "local", None, None, "local",
        ))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    shared::store::firmware_images::FirmwareImages::new(
        aws_sdk_s3::Client::from_conf(config),
        bucket,
    )
}

/// Creates `bucket`, versioned as the template's `FirmwareBucket` is, on the server of
/// `images`.
pub async fn create_versioned_bucket(
    images: &shared::store::firmware_images::FirmwareImages,
) -> Result<(), String> {
    images
        .client
        .create_bucket()
        .bucket(&images.bucket)
        .send()
        .await
        .map_err(|e| format!("creating {}: {e}", images.bucket))?;
    images
        .client
        .put_bucket_versioning()
        .bucket(&images.bucket)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .map_err(|e| format!("versioning {}: {e}", images.bucket))?;
    Ok(())
}

/// Lets browsers at `origins` PUT to the bucket (presigned uploads from the console), as
/// template.yaml's `FirmwareBucket` lets the console's origins: moto's server answers the
/// preflight by the bucket's CORS rules as S3 does.
pub async fn allow_browser_uploads(
    images: &shared::store::firmware_images::FirmwareImages,
    origins: &[&str],
) -> Result<(), String> {
    use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
    let rule = CorsRule::builder()
        .id("console-uploads")
        .allowed_methods("PUT")
        .set_allowed_origins(Some(origins.iter().map(|o| o.to_string()).collect()))
        .allowed_headers("content-type")
        .max_age_seconds(600)
        .build()
        .map_err(|e| format!("a CORS rule: {e}"))?;
    images
        .client
        .put_bucket_cors()
        .bucket(&images.bucket)
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(rule)
                .build()
                .map_err(|e| format!("a CORS configuration: {e}"))?,
        )
        .send()
        .await
        .map_err(|e| format!("CORS on {}: {e}", images.bucket))?;
    Ok(())
}

/// moto's server of the whole process, started on first use by [`endpoint_or_process_server`].
static PROCESS_SERVER: OnceLock<Result<MotoServer, String>> = OnceLock::new();

/// The endpoint the environment variable `variable` names (`AWS_ENDPOINT_URL_SQS`,
/// `AWS_ENDPOINT_URL_S3`), else that of a moto server this process starts once and keeps (the
/// reference dataset's queue and bucket live there; `make moto-server` installs it).
pub fn endpoint_or_process_server(variable: &str) -> Result<String, String> {
    if let Ok(endpoint) = std::env::var(variable) {
        return Ok(endpoint);
    }
    PROCESS_SERVER
        .get_or_init(|| MotoServer::start_default().map_err(|e| e.to_string()))
        .as_ref()
        .map(|moto| moto.endpoint().to_string())
        .map_err(Clone::clone)
}

/// The image buckets made for tables (the reference dataset's), by table name: the S3
/// endpoint and the bucket.
static TABLE_BUCKETS: Mutex<BTreeMap<String, (String, String)>> = Mutex::new(BTreeMap::new());

/// Records that the firmware images of the table named `table` are in `bucket` on the S3
/// server at `endpoint` ([`firmware_images_for_table`]).
pub fn register_bucket(table: &str, endpoint: &str, bucket: &str) {
    if let Ok(mut buckets) = TABLE_BUCKETS.lock() {
        buckets.insert(
            table.to_string(),
            (endpoint.to_string(), bucket.to_string()),
        );
    }
}

/// The S3 endpoint and bucket registered for the table named `table`, if any (the bench gives
/// them to the bootstraps that read images).
pub fn registered_bucket(table: &str) -> Option<(String, String)> {
    TABLE_BUCKETS.lock().ok()?.get(table).cloned()
}

/// The image store registered for `table` ([`register_bucket`]), else the one the environment
/// names ([`firmware_images_from_env`]). Built per call, like `webhook_queue::queue_for_table`'s
/// client: a client's connections belong to the runtime that made them.
pub fn firmware_images_for_table(
    table: &shared::FleetTable,
) -> shared::store::firmware_images::FirmwareImages {
    match registered_bucket(table.name()) {
        Some((endpoint, bucket)) => local_firmware_images(&endpoint, &bucket),
        None => firmware_images_from_env(),
    }
}

/// The firmware function's image store for in-process runs (tests, the dev server): the
/// server at `AWS_ENDPOINT_URL_S3` and the bucket `FIRMWARE_BUCKET` when set, otherwise a
/// closed loopback port and `firmware-images` (routes that need no S3 request still answer).
pub fn firmware_images_from_env() -> shared::store::firmware_images::FirmwareImages {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL_S3").unwrap_or_else(|_| "http://127.0.0.1:9".to_string());
    let bucket = std::env::var(shared::store::firmware_images::FIRMWARE_BUCKET_ENV)
        .unwrap_or_else(|_| "firmware-images".to_string());
    local_firmware_images(&endpoint, &bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_install_says_how_to_install_it() {
        let Err(error) = MotoServer::start(Path::new("/nonexistent-moto-venv")) else {
            panic!("started without an install");
        };
        assert!(error.to_string().contains("make moto-server"), "{error}");
    }
}
