//! The proxy's own TLS to real hosts (for `https://` requests sent to the proxy as
//! such, and behind the TLS it terminates for hosts that have secrets): verified
//! against the roots this server trusts, which are the system's, or the file or folder
//! named by `SSL_CERT_FILE` / `SSL_CERT_DIR` in the server's own environment (how a
//! private CA is trusted, tests' included). Read once, on first use.
//!
//! The policy's `certificates:` (a CA bundle for a network whose proxy inspects TLS)
//! are trusted besides them.
//!
//! The same roots, as PEM, are the trust the boxes get when the proxy terminates TLS
//! for them (with this instance's CA added), so a box verifies exactly what the server
//! would.

use crate::policy::allowlist::Host;
use base64::Engine;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::{Arc, OnceLock};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The crypto provider of every TLS the proxy makes: ring.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The roots this server trusts, read once.
pub struct Roots {
    pub certificates: Vec<CertificateDer<'static>>,
    /// Why some could not be read (logged once).
    pub problems: Vec<String>,
}

impl Roots {
    pub fn get() -> &'static Roots {
        static ROOTS: OnceLock<Roots> = OnceLock::new();
        ROOTS.get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let problems: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
            if !problems.is_empty() {
                tracing::warn!(?problems, "some trusted roots could not be read");
            }
            tracing::debug!(count = found.certs.len(), "trusted roots read");
            Roots {
                certificates: found.certs,
                problems,
            }
        })
    }

    /// The roots as PEM, one certificate after another.
    pub fn pem(&self) -> String {
        self.certificates
            .iter()
            .map(|der| pem_certificate(der))
            .collect()
    }
}

/// The certificates of a PEM text (blocks other than certificates are skipped, as is
/// a block whose base64 does not decode).
pub fn certificates_from_pem(pem: &str) -> Vec<CertificateDer<'static>> {
    let mut found = Vec::new();
    let mut body: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (Some(text), "-----END CERTIFICATE-----") => {
                if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(text.as_bytes()) {
                    found.push(CertificateDer::from(der));
                }
                body = None;
            }
            (Some(text), line) => text.push_str(line),
            (None, _) => {}
        }
    }
    found
}

/// One certificate as PEM.
pub fn pem_certificate(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// The client side of the proxy's TLS: the roots it verifies with, made into a
/// configuration on first use.
pub struct UpstreamTls {
    roots: Option<Vec<CertificateDer<'static>>>,
    /// Trusted besides the system's (the policy's `certificates:`).
    extra: Vec<CertificateDer<'static>>,
    config: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl UpstreamTls {
    /// Verifying with the roots this server trusts ([`Roots`]) and `extra`.
    pub fn system_and(extra: Vec<CertificateDer<'static>>) -> UpstreamTls {
        UpstreamTls {
            roots: None,
            extra,
            config: OnceLock::new(),
        }
    }

    /// Verifying with these roots alone (tests bring their own CA).
    #[cfg(test)]
    pub fn with_roots(roots: Vec<CertificateDer<'static>>) -> UpstreamTls {
        UpstreamTls {
            roots: Some(roots),
            extra: Vec::new(),
            config: OnceLock::new(),
        }
    }

    fn config(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.config
            .get_or_init(|| {
                let system = Roots::get();
                let (certificates, problems) = match &self.roots {
                    Some(roots) => (roots.as_slice(), &[][..]),
                    None => (system.certificates.as_slice(), system.problems.as_slice()),
                };
                let mut store = rustls::RootCertStore::empty();
                let (added, _) = store
                    .add_parsable_certificates(certificates.iter().chain(&self.extra).cloned());
                if added == 0 {
                    return Err(format!(
                        "this server trusts no certificate authority (none found on the \
                         system, nor in SSL_CERT_FILE / SSL_CERT_DIR){}",
                        if problems.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", problems.join("; "))
                        }
                    ));
                }
                let mut config = rustls::ClientConfig::builder_with_provider(provider())
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS setup: {e}"))?
                    .with_root_certificates(store)
                    .with_no_client_auth();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                Ok(Arc::new(config))
            })
            .clone()
    }

    /// TLS over `stream` to `host`, its certificate verified for that name (or
    /// address).
    pub async fn connect(
        &self,
        stream: TcpStream,
        host: &Host,
    ) -> Result<TlsStream<TcpStream>, String> {
        let config = self.config()?;
        let name = match host {
            Host::Name(name) => ServerName::try_from(name.clone())
                .map_err(|e| format!("{name} is no TLS server name: {e}"))?,
            Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
        };
        tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS to {host} failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pem_bundle_gives_its_certificates_and_nothing_else() {
        let one = pem_certificate(b"first");
        let two = pem_certificate(b"second");
        let bundle = format!(
            "# a comment\n{one}-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n{two}\
             -----BEGIN CERTIFICATE-----\n!!not base64!!\n-----END CERTIFICATE-----\n"
        );
        let found = certificates_from_pem(&bundle);
        let found: Vec<&[u8]> = found.iter().map(|der| der.as_ref()).collect();
        assert_eq!(found, [&b"first"[..], &b"second"[..]]);
        // Written back, each is the same PEM.
        assert_eq!(pem_certificate(found[0]), one);
    }
}
