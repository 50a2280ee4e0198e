//! SSH signatures as `git` writes them with `gpg.format=ssh`, checked
//! against an `allowed_signers` list (the format `ssh-keygen -Y verify`
//! reads): `principals [options] key-type base64-key [comment]`.

use ssh_key::{HashAlg, PublicKey, SshSig};

use super::Refusal;

/// One trusted SSH key and the principals it speaks for.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    pub principals: Vec<String>,
    pub key: PublicKey,
}

/// Parses `allowed_signers` text. Comments and blank lines are skipped; a
/// `namespaces=` option that does not include `git` drops the key, and
/// `cert-authority` lines are refused (certificates are not supported).
pub fn parse_allowed_signers(text: &str) -> Result<Vec<AllowedSigner>, String> {
    let mut signers = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let error = |reason: &str| format!("allowed_signers:{}: {reason}", index + 1);
        let mut fields = line.split_whitespace();
        let principals = fields.next().ok_or_else(|| error("missing principals"))?;
        let mut next = fields.next().ok_or_else(|| error("missing key"))?;
        let mut for_git = true;
        if !is_key_type(next) {
            for option in next.split(',') {
                let (name, value) = option.split_once('=').unwrap_or((option, ""));
                match name.to_ascii_lowercase().as_str() {
                    "cert-authority" => return Err(error("cert-authority keys are not supported")),
                    "namespaces" => {
                        for_git = value.trim_matches('"').split(',').any(|n| n == "git");
                    }
                    _ => {}
                }
            }
            next = fields.next().ok_or_else(|| error("missing key type"))?;
        }
        let data = fields.next().ok_or_else(|| error("missing key data"))?;
        let key = PublicKey::from_openssh(&format!("{next} {data}"))
            .map_err(|e| error(&format!("bad key: {e}")))?;
        if for_git {
            signers.push(AllowedSigner {
                principals: principals.split(',').map(str::to_string).collect(),
                key,
            });
        }
    }
    Ok(signers)
}

fn is_key_type(field: &str) -> bool {
    field.starts_with("ssh-") || field.starts_with("ecdsa-") || field.starts_with("sk-")
}

/// Checks an armored SSH signature over `data` (namespace `git`); returns
/// the signing key's `SHA256:` fingerprint and principal.
pub fn verify(signature: &str, data: &[u8], signers: &[AllowedSigner]) -> Result<String, Refusal> {
    let signature = SshSig::from_pem(signature).map_err(|e| Refusal {
        key: "unknown".into(),
        reason: format!("unreadable SSH signature: {e}"),
    })?;
    let key = PublicKey::from(signature.public_key().clone());
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    let refuse = |reason: &str| Refusal {
        key: fingerprint.clone(),
        reason: reason.to_string(),
    };
    if signature.namespace() != "git" {
        return Err(refuse("signature namespace is not `git`"));
    }
    let signer = signers
        .iter()
        .find(|s| s.key.key_data() == key.key_data())
        .ok_or_else(|| refuse("signed by an untrusted key"))?;
    signer
        .key
        .verify("git", data, &signature)
        .map_err(|_| refuse("signature does not verify"))?;
    Ok(format!("{fingerprint} ({})", signer.principals.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq0Xd8q+vjJzCYKD8Be3yfSNENbCUF2JKd9W5GmrJwV";

    #[test]
    fn allowed_signers_lines_with_options_and_comments_parse() {
        let text = format!(
            "# trusted\nops@example.com {KEY} laptop\nci,bot namespaces=\"git\" {KEY}\nmail namespaces=\"file\" {KEY}\n"
        );
        let signers = parse_allowed_signers(&text).unwrap();
        assert_eq!(signers.len(), 2);
        assert_eq!(signers[1].principals, vec!["ci", "bot"]);
        let error = parse_allowed_signers("x cert-authority ssh-ed25519 AAAA").unwrap_err();
        assert_eq!(
            error,
            "allowed_signers:1: cert-authority keys are not supported"
        );
    }
}
