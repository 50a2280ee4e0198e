//! Where the dashboard may listen. It acts with the user's own
//! kubeconfig, so anyone who reaches the port acts as that user: only a
//! loopback address unless the user says otherwise.

use std::net::SocketAddr;

/// A listening address refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "--address {0}: not a loopback address; the dashboard acts with your kubeconfig, so anyone \
     who can reach this port would act as you. Use 127.0.0.1 (or ::1), or pass --allow-remote \
     if that is what you want"
)]
pub struct RemoteRefused(pub SocketAddr);

/// An address the dashboard may listen on: only [`checked`] makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listen(SocketAddr);

impl Listen {
    pub fn address(self) -> SocketAddr {
        self.0
    }
}

/// `address`, if the dashboard may listen there.
pub fn checked(address: SocketAddr, allow_remote: bool) -> Result<Listen, RemoteRefused> {
    if address.ip().is_loopback() || allow_remote {
        Ok(Listen(address))
    } else {
        Err(RemoteRefused(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_allowed_unless_remote_is_asked_for() {
        let at = |text: &str| text.parse::<SocketAddr>().unwrap();
        assert!(checked(at("127.0.0.1:8080"), false).is_ok());
        assert!(checked(at("[::1]:8080"), false).is_ok());
        let error = checked(at("0.0.0.0:8080"), false).unwrap_err().to_string();
        assert!(
            error.starts_with("--address 0.0.0.0:8080: not a loopback"),
            "{error}"
        );
        assert!(error.contains("--allow-remote"), "{error}");
        assert!(checked(at("10.0.0.5:80"), false).is_err());
        assert!(checked(at("0.0.0.0:8080"), true).is_ok());
    }
}
