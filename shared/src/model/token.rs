//! Device tokens: issued once at registration, stored only as a SHA-256 digest, compared in
//! constant time.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::model::error::FleetError;

/// Prefix that makes a leaked token recognisable to secret scanners.
pub const TOKEN_PREFIX: &str = "dft_";

/// A device's bearer token. Shown to the owner once; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceToken(String);

impl DeviceToken {
    /// A new token with 256 bits from the operating system's CSPRNG.
    pub fn generate() -> Result<Self, FleetError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(FleetError::internal)?;
        Ok(Self(format!(
            "{TOKEN_PREFIX}{}",
            URL_SAFE_NO_PAD.encode(secret)
        )))
    }

    /// The token text, for the one response that returns it.
    pub fn reveal(&self) -> &str {
        &self.0
    }

    /// Hex SHA-256 of the token: what the registration item stores.
    pub fn sha256_hex(&self) -> String {
        sha256_hex(&self.0)
    }
}

impl fmt::Debug for DeviceToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeviceToken(<redacted>)")
    }
}

/// Hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `presented` hashes to `stored_sha256_hex`, compared in constant time so response
/// timing reveals nothing about the stored digest.
pub fn token_matches(presented: &str, stored_sha256_hex: &str) -> bool {
    let presented = sha256_hex(presented);
    presented
        .as_bytes()
        .ct_eq(stored_sha256_hex.as_bytes())
        .into()
}

/// A random opaque id (URL-safe base64 of 128 random bits), e.g. for idempotency tokens.
pub fn random_id() -> Result<String, FleetError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(FleetError::internal)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_verifiable_by_digest_only() {
        let a = DeviceToken::generate().unwrap();
        let b = DeviceToken::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.reveal().starts_with(TOKEN_PREFIX));
        assert_eq!(a.reveal().len(), TOKEN_PREFIX.len() + 43);
        let stored = a.sha256_hex();
        assert_eq!(stored.len(), 64);
        assert!(!stored.contains(a.reveal()));
        assert!(token_matches(a.reveal(), &stored));
        assert!(!token_matches(b.reveal(), &stored));
        assert!(!token_matches("", &stored));
        assert_eq!(format!("{a:?}"), "DeviceToken(<redacted>)");
    }

    #[test]
    fn digest_is_standard_sha256() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
