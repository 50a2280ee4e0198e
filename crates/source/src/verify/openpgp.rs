//! OpenPGP signatures (`gpgsig` as `git` writes it with gpg), checked in
//! pure Rust against trusted public keys.
//!
//! Policy: the signature must come from the primary key or a subkey of a
//! trusted, unrevoked certificate whose bindings verify; SHA-1 and MD5
//! signatures are refused.

use pgp::composed::{CleartextSignedMessage, Deserializable, DetachedSignature, SignedPublicKey};
use pgp::crypto::hash::HashAlgorithm;
use pgp::types::KeyDetails;

use super::Refusal;

/// A trusted OpenPGP certificate.
pub struct TrustedPgpKey {
    key: SignedPublicKey,
}

impl TrustedPgpKey {
    /// Reads an ASCII-armored public key; its self-signatures must verify.
    pub fn parse(armored: &str) -> Result<TrustedPgpKey, String> {
        let (key, _) = SignedPublicKey::from_string(armored)
            .map_err(|e| format!("not an OpenPGP public key: {e}"))?;
        key.verify_bindings()
            .map_err(|e| format!("key {}: bad self-signature: {e}", key.fingerprint()))?;
        Ok(TrustedPgpKey { key })
    }
}

/// Checks an armored OpenPGP signature over `data` against `keys`; returns
/// the signing key's fingerprint.
pub fn verify(signature: &str, data: &[u8], keys: &[TrustedPgpKey]) -> Result<String, Refusal> {
    let (signature, _) = DetachedSignature::from_string(signature).map_err(|e| Refusal {
        key: "unknown".into(),
        reason: format!("unreadable OpenPGP signature: {e}"),
    })?;
    verify_packet(&signature.signature, data, keys)
}

/// Checks a clear-signed message (as a Helm `.prov` file is) against
/// `keys`; returns the signed text and the signing key's fingerprint.
pub fn verify_cleartext(
    message: &str,
    keys: &[TrustedPgpKey],
) -> Result<(String, String), Refusal> {
    let (message, _) = CleartextSignedMessage::from_string(message).map_err(|e| Refusal {
        key: "unknown".into(),
        reason: format!("not a clear-signed OpenPGP message: {e}"),
    })?;
    let text = message.signed_text();
    let mut refusal = Refusal {
        key: "unknown".into(),
        reason: "no signature".into(),
    };
    for signature in message.signatures() {
        match verify_packet(signature, text.as_bytes(), keys) {
            Ok(key) => return Ok((text.replace("\r\n", "\n"), key)),
            Err(refused) => refusal = refused,
        }
    }
    Err(refusal)
}

fn verify_packet(
    packet: &pgp::packet::Signature,
    data: &[u8],
    keys: &[TrustedPgpKey],
) -> Result<String, Refusal> {
    let issuer = packet
        .issuer_fingerprint()
        .first()
        .map(|f| format!("{f:X}"))
        .or_else(|| packet.issuer_key_id().first().map(hex::encode_upper))
        .unwrap_or_else(|| "unknown".into());
    let refuse = |reason: &str| Refusal {
        key: issuer.clone(),
        reason: reason.to_string(),
    };
    if matches!(
        packet.hash_alg(),
        Some(HashAlgorithm::Sha1 | HashAlgorithm::Md5) | None
    ) {
        return Err(refuse("weak hash algorithm (SHA-1/MD5) is not accepted"));
    }
    let mut matched_key = false;
    for trusted in keys {
        let cert = &trusted.key;
        let matches = |key: &dyn KeyDetails| {
            issuer == format!("{:X}", key.fingerprint())
                || issuer == hex::encode_upper(key.legacy_key_id())
        };
        if matches(&cert.primary_key) {
            matched_key = true;
            if !cert.details.revocation_signatures.is_empty() {
                return Err(refuse("key is revoked"));
            }
            if packet.verify(&cert.primary_key, data).is_ok() {
                return Ok(issuer);
            }
        }
        for subkey in &cert.public_subkeys {
            if matches(&subkey.key) {
                matched_key = true;
                if packet.verify(&subkey.key, data).is_ok() {
                    return Ok(issuer);
                }
            }
        }
    }
    Err(refuse(if matched_key {
        "signature does not verify"
    } else {
        "signed by an untrusted key"
    }))
}
