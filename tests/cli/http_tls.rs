//! `serve --http --tls-cert --tls-key`: TLS terminated by the server, with a test CA
//! and certificate made here with openssl, checked by a rustls client that trusts only
//! that CA; a key that is not the certificate's stops the start.

crate::common::harness::tests! {
    sync tls_with_the_servers_own_certificate;
}

use crate::common::http::{initialize_message, post_mcp, HttpServer};
use crate::common::{self, binary, text};
use std::path::Path;
use std::time::Duration;

fn quiet_policy() -> std::path::PathBuf {
    common::scratch_file(
        "tls-no-pool.yaml",
        b"version: 1\nextends: default\npool:\n  size: 0\n",
    )
}

fn tls_with_the_servers_own_certificate() {
    let dir = common::scratch("http-tls");
    let (cert, key, ca) = (
        dir.join("cert.pem"),
        dir.join("key.pem"),
        dir.join("ca.pem"),
    );
    make_certificate(&dir, &cert, &key, &ca);
    let policy = quiet_policy();
    let server = HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let reply = runtime.block_on(tls_initialize(server.port, &ca)).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        reply.to_ascii_lowercase().contains("mcp-session-id"),
        "{reply}"
    );
    // Plain HTTP on the TLS port gets nothing served.
    let reply = post_mcp(server.port, &[], &initialize_message());
    assert_ne!(reply.status, 200);
    // SIGHUP takes a renewed certificate (here from another CA) without a restart.
    let renewed = dir.join("renewed");
    std::fs::create_dir_all(&renewed).unwrap();
    let (cert2, key2, ca2) = (
        renewed.join("cert.pem"),
        renewed.join("key.pem"),
        renewed.join("ca.pem"),
    );
    make_certificate(&renewed, &cert2, &key2, &ca2);
    std::fs::copy(&cert2, &cert).unwrap();
    std::fs::copy(&key2, &key).unwrap();
    server.signal("HUP");
    let log = server.wait_for_log("TLS certificate read again");
    assert!(log.contains("TLS certificate read again"), "{log}");
    let reply = runtime.block_on(tls_initialize(server.port, &ca2)).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(runtime.block_on(tls_initialize(server.port, &ca)).is_err());
    // A key that is not the certificate's is an error at start.
    let other = dir.join("other-key.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success());
    let output = binary()
        .args(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("--tls-key"),
        "{}",
        text(&output.stderr)
    );
}

/// A test CA and a certificate for 127.0.0.1 and localhost signed by it.
fn make_certificate(dir: &Path, cert: &Path, key: &Path, ca: &Path) {
    let ca_key = dir.join("ca-key.pem");
    let csr = dir.join("cert.csr");
    let ext = dir.join("ext.cnf");
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    let steps: Vec<Vec<String>> = vec![
        vec![
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=test CA",
            "-keyout",
        ]
        .into_iter()
        .map(String::from)
        .chain([
            ca_key.display().to_string(),
            "-out".into(),
            ca.display().to_string(),
        ])
        .collect(),
        vec![
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
        ]
        .into_iter()
        .map(String::from)
        .chain([
            key.display().to_string(),
            "-out".into(),
            csr.display().to_string(),
        ])
        .collect(),
        vec!["x509", "-req", "-days", "2", "-in"]
            .into_iter()
            .map(String::from)
            .chain([
                csr.display().to_string(),
                "-CA".into(),
                ca.display().to_string(),
                "-CAkey".into(),
                ca_key.display().to_string(),
                "-CAcreateserial".into(),
                "-extfile".into(),
                ext.display().to_string(),
                "-out".into(),
                cert.display().to_string(),
            ])
            .collect(),
    ];
    for args in steps {
        let output = std::process::Command::new("openssl")
            .args(&args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "openssl {args:?}: {}",
            text(&output.stderr)
        );
    }
}

/// `initialize` over TLS, trusting `ca` only; the raw answer, or why the handshake
/// failed.
async fn tls_initialize(port: u16, ca: &std::path::Path) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut stream = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let body = initialize_message().to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer)).await;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}
