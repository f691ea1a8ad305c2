//! Standard Webhooks signatures: `webhook-signature` is `v1,<base64 HMAC-SHA256>` of
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the secret's base64-decoded bytes; a
//! space-separated list of them while a rotated-out secret still signs.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::model::error::FleetError;
use crate::model::webhook::WebhookSecret;

/// One `v1,...` signature of a message.
pub fn sign(
    secret: &WebhookSecret,
    message_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, FleetError> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret.key()?).map_err(FleetError::internal)?;
    mac.update(message_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

/// The `webhook-signature` header: one signature per secret that signs now.
pub fn signature_header(
    secrets: &[&WebhookSecret],
    message_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, FleetError> {
    let signatures = secrets
        .iter()
        .map(|s| sign(s, message_id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's published example (its README's test vector).
    #[test]
    fn the_specification_example_signs_to_its_published_signature() {
        let secret: WebhookSecret =
            serde_json::from_str("\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_rotation_signs_with_every_secret_space_separated() {
        let a = WebhookSecret::generate().unwrap();
        let b = WebhookSecret::generate().unwrap();
        let header = signature_header(&[&a, &b], "msg_1", 1, b"{}").unwrap();
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], sign(&a, "msg_1", 1, b"{}").unwrap());
        assert_eq!(parts[1], sign(&b, "msg_1", 1, b"{}").unwrap());
    }
}
