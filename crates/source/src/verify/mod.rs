//! Verification: a revision is rendered only if it carries the signatures
//! its source requires, made by a trusted OpenPGP or SSH key.
//!
//! Signatures are read from the raw objects as `git` writes them: a commit's
//! `gpgsig` header (the signed data is the commit without that header) and
//! an annotated tag's trailing signature block (the signed data is the tag
//! before it).

mod openpgp;
mod ssh;

pub use openpgp::TrustedPgpKey;
pub use ssh::{AllowedSigner, parse_allowed_signers};

use crate::spec::{Verification, VerifyMode};

/// The digest a provenance's signed text gives `file` (the `files:` map
/// after the chart's metadata: `  web-1.2.3.tgz: sha256:…`).
fn provenance_digest(text: &str, file: &str) -> Option<String> {
    let mut in_files = false;
    for line in text.lines() {
        if line.trim_end() == "files:" {
            in_files = true;
            continue;
        }
        if in_files {
            let (name, digest) = line.trim().split_once(':')?;
            if name.trim() == file {
                return Some(digest.trim().to_string());
            }
        }
    }
    None
}

/// Why a signature was not accepted, with the key it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub key: String,
    pub reason: String,
}

/// Why a revision was refused. Never retryable: the caller keeps the last
/// verified revision in force until a new, correctly signed one appears.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("{object}: {reason}")]
    Unsigned { object: String, reason: String },
    #[error("{object}: signed by key {key}: {reason}")]
    Refused {
        object: String,
        key: String,
        reason: String,
    },
    #[error("trusted keys: {0}")]
    BadTrustedKey(String),
}

/// Trusted keys, parsed once per source.
pub struct Verifier {
    mode: VerifyMode,
    pgp: Vec<TrustedPgpKey>,
    ssh: Vec<AllowedSigner>,
}

impl Verifier {
    pub fn new(verification: &Verification) -> Result<Verifier, VerifyError> {
        let pgp = verification
            .openpgp_keys
            .iter()
            .map(|armored| TrustedPgpKey::parse(armored))
            .collect::<Result<Vec<_>, _>>()
            .map_err(VerifyError::BadTrustedKey)?;
        let ssh = parse_allowed_signers(&verification.allowed_signers)
            .map_err(VerifyError::BadTrustedKey)?;
        if verification.mode != VerifyMode::None && pgp.is_empty() && ssh.is_empty() {
            return Err(VerifyError::BadTrustedKey(
                "verification is required but no trusted key is configured".into(),
            ));
        }
        Ok(Verifier {
            mode: verification.mode,
            pgp,
            ssh,
        })
    }

    pub fn mode(&self) -> VerifyMode {
        self.mode
    }

    /// Verifies a raw commit object; `name` is how messages call it
    /// (`commit 1a2b3c4`). Returns the signing key.
    pub fn verify_commit(&self, name: &str, raw: &[u8]) -> Result<String, VerifyError> {
        let (signature, data) = split_commit(raw).ok_or_else(|| unsigned(name))?;
        self.verify_signature(name, &signature, &data)
    }

    /// Verifies a Helm provenance file (`NAME.tgz.prov`: the chart's
    /// metadata and its archive's digest, clear-signed with OpenPGP) for
    /// the archive `file` whose digest is `digest` (`sha256:…`). Returns
    /// the signing key.
    pub fn verify_provenance(
        &self,
        name: &str,
        provenance: &str,
        file: &str,
        digest: &str,
    ) -> Result<String, VerifyError> {
        let (text, key) = openpgp::verify_cleartext(provenance, &self.pgp).map_err(|refusal| {
            VerifyError::Refused {
                object: name.to_string(),
                key: refusal.key,
                reason: refusal.reason,
            }
        })?;
        let signed = provenance_digest(&text, file).ok_or_else(|| VerifyError::Unsigned {
            object: name.to_string(),
            reason: format!("the provenance lists no digest for {file}"),
        })?;
        if signed != digest {
            return Err(VerifyError::Refused {
                object: name.to_string(),
                key,
                reason: format!("the provenance signs {signed}, the archive is {digest}"),
            });
        }
        Ok(key)
    }

    /// Verifies a raw annotated tag object. Returns the signing key.
    pub fn verify_tag(&self, name: &str, raw: &[u8]) -> Result<String, VerifyError> {
        let (signature, data) = split_tag(raw).ok_or_else(|| unsigned(name))?;
        self.verify_signature(name, signature, data)
    }

    fn verify_signature(
        &self,
        name: &str,
        signature: &str,
        data: &[u8],
    ) -> Result<String, VerifyError> {
        let outcome = if signature.contains("-----BEGIN SSH SIGNATURE-----") {
            ssh::verify(signature, data, &self.ssh)
        } else {
            openpgp::verify(signature, data, &self.pgp)
        };
        outcome.map_err(|refusal| VerifyError::Refused {
            object: name.to_string(),
            key: refusal.key,
            reason: refusal.reason,
        })
    }
}

fn unsigned(name: &str) -> VerifyError {
    VerifyError::Unsigned {
        object: name.to_string(),
        reason: "not signed".into(),
    }
}

/// Splits a commit into its `gpgsig` header value and the signed bytes (the
/// commit without that header and its continuation lines).
fn split_commit(raw: &[u8]) -> Option<(String, Vec<u8>)> {
    let text = std::str::from_utf8(raw).ok()?;
    let header_end = text.find("\n\n").map_or(text.len(), |i| i + 1);
    let (headers, message) = text.split_at(header_end);
    let mut signature: Option<String> = None;
    let mut data = String::with_capacity(raw.len());
    let mut in_signature = false;
    for line in headers.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("gpgsig ") {
            in_signature = true;
            signature = Some(rest.to_string());
        } else if in_signature && line.starts_with(' ') {
            signature.as_mut()?.push_str(&line[1..]);
        } else {
            in_signature = false;
            data.push_str(line);
        }
    }
    data.push_str(message);
    Some((signature?, data.into_bytes()))
}

/// Splits an annotated tag into its trailing signature and the signed bytes.
fn split_tag(raw: &[u8]) -> Option<(&str, &[u8])> {
    let text = std::str::from_utf8(raw).ok()?;
    let start = [
        "-----BEGIN PGP SIGNATURE-----",
        "-----BEGIN SSH SIGNATURE-----",
    ]
    .iter()
    .filter_map(|marker| {
        text.match_indices(marker)
            .map(|(i, _)| i)
            .find(|i| *i == 0 || text.as_bytes()[i - 1] == b'\n')
    })
    .min()?;
    Some((&text[start..], &raw[..start]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_signature_header_is_cut_out_of_the_signed_data() {
        let raw = b"tree abc\nauthor A <a> 1 +0000\ncommitter A <a> 1 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n AAAA\n -----END SSH SIGNATURE-----\n\nmessage\n";
        let (signature, data) = split_commit(raw).unwrap();
        assert_eq!(
            signature,
            "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"
        );
        assert_eq!(
            String::from_utf8(data).unwrap(),
            "tree abc\nauthor A <a> 1 +0000\ncommitter A <a> 1 +0000\n\nmessage\n"
        );
        assert!(split_commit(b"tree abc\n\nno signature\n").is_none());
    }

    #[test]
    fn a_tag_signature_is_the_trailing_block() {
        let raw = b"object abc\ntype commit\ntag v1\n\nrelease\n-----BEGIN PGP SIGNATURE-----\nx\n-----END PGP SIGNATURE-----\n";
        let (signature, data) = split_tag(raw).unwrap();
        assert!(signature.starts_with("-----BEGIN PGP SIGNATURE-----"));
        assert!(data.ends_with(b"release\n"));
    }

    #[test]
    fn required_verification_without_keys_is_a_configuration_error() {
        let verification = Verification {
            mode: VerifyMode::Head,
            ..Default::default()
        };
        let error = Verifier::new(&verification).err().unwrap();
        assert!(error.to_string().contains("no trusted key"), "{error}");
    }
}
