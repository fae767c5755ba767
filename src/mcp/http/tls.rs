//! `--tls-cert`/`--tls-key`: TLS terminated by the server itself (rustls with the ring
//! provider; TLS 1.2 and 1.3). The files are PEM: the certificate chain, leaf first,
//! and its private key (PKCS#8, PKCS#1 or SEC1). They are read at start and again on
//! SIGHUP, so a renewed certificate is taken without a restart; a reading that fails
//! keeps the one in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The certificate and key files, and the acceptor made from them.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    acceptor: RwLock<tokio_rustls::TlsAcceptor>,
}

impl Tls {
    /// Reads both files; an error names the file and what is wrong with it.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
        let acceptor = acceptor(cert, key)?;
        Ok(Tls {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            acceptor: RwLock::new(acceptor),
        })
    }

    /// The acceptor in force.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        self.acceptor
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the files again; on an error the old certificate stays.
    pub fn reload(&self) -> Result<(), String> {
        let acceptor = acceptor(&self.cert, &self.key)?;
        *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = acceptor;
        Ok(())
    }
}

fn acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "--tls-key {}: no usable PEM private key: {e}",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            format!(
                "--tls-cert {} and --tls-key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
