//! What ending TLS at the egress proxy costs (secrets, issue 25): HTTPS requests from a
//! sandbox (Python's `requests`) to a host that has a secret, which the proxy
//! intercepts (its own TLS to the box, its own TLS to the host, the placeholder
//! swapped), against the same requests to a host without secrets, which goes through a
//! plain tunnel. Both hosts are HTTPS servers this program runs on loopback with a CA
//! of its own, which the server trusts through `SSL_CERT_FILE`.
//!
//! Two ways a client uses them: a new connection (and TLS handshake) per request, and
//! requests on one kept-alive connection. Prints p50/p95/mean per path.
//!
//! Run through `benches/egress-tls.sh` (it starts the engine and builds the images
//! first). Arguments: `[ITERATIONS]` (default 100); `--bench` from cargo is ignored.

use code_sandbox_mcp::analysis::{Language, SourceKind};
use code_sandbox_mcp::policy::PolicySource;
use code_sandbox_mcp::sandbox::{images, RunRequest, Sandbox};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

fn main() {
    let iterations: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map(|a| a.parse().expect("ITERATIONS is a number"))
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, issuer) = test_ca();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    // Read when the policy loads and when the proxy first verifies a host: set before
    // anything else runs (one thread so far).
    std::env::set_var("SSL_CERT_FILE", &ca_file);
    std::env::set_var("EGRESS_BENCH_KEY", "bench-secret-value");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let intercepted = https_server(&issuer, "api.localhost").await;
        let tunnelled = https_server(&issuer, "plain.localhost").await;
        let image = images::built_image(Language::Python);
        let policy_path = dir.path().join("policy.yaml");
        std::fs::write(
            &policy_path,
            format!(
                "version: 1\nextends: default\nimages:\n  python: \"{image}\"\npool:\n  size: 1\n\
                 limits:\n  timeout: 300s\n\
                 network:\n  allow: [\"plain.localhost:{tunnelled}\"]\n\
                 secrets:\n  API_KEY: {{ from: EGRESS_BENCH_KEY, hosts: [\"api.localhost:{intercepted}\"] }}\n"
            ),
        )
        .unwrap();
        let policy = PolicySource::File(policy_path).load().expect("the bench policy");
        policy.check_secrets().expect("the secret's value");
        let sandbox = Sandbox::new(Arc::new(policy));
        let code = format!(
            "import os, time, statistics, requests\n\
             key = os.environ['API_KEY']\n\
             def stats(samples):\n\
             \x20   samples = sorted(samples)\n\
             \x20   p = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] * 1000\n\
             \x20   return f'{{p(0.5):8.2f}} {{p(0.95):8.2f}} {{statistics.mean(samples) * 1000:8.2f}}'\n\
             for name, url in [('plain tunnel', 'https://plain.localhost:{tunnelled}/'), ('intercepted (secret swapped)', 'https://api.localhost:{intercepted}/')]:\n\
             \x20   requests.get(url, headers={{'X-Api-Key': key}}, timeout=30)\n\
             \x20   fresh = []\n\
             \x20   for _ in range({iterations}):\n\
             \x20       start = time.perf_counter()\n\
             \x20       requests.get(url, headers={{'X-Api-Key': key}}, timeout=30).raise_for_status()\n\
             \x20       fresh.append(time.perf_counter() - start)\n\
             \x20   session = requests.Session()\n\
             \x20   session.get(url, headers={{'X-Api-Key': key}}, timeout=30)\n\
             \x20   kept = []\n\
             \x20   for _ in range({iterations}):\n\
             \x20       start = time.perf_counter()\n\
             \x20       session.get(url, headers={{'X-Api-Key': key}}, timeout=30).raise_for_status()\n\
             \x20       kept.append(time.perf_counter() - start)\n\
             \x20   print(f'{{name + \", new connection\":<44}} {{stats(fresh)}}')\n\
             \x20   print(f'{{name + \", kept alive\":<44}} {{stats(kept)}}')\n"
        );
        let request = RunRequest {
            kind: SourceKind::Python,
            code,
            timeout: None,
            env: Vec::new(),
            tap: None,
            files: Vec::new(),
            approved: Vec::new(),
            packages: Vec::new(),
        };
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "HTTPS GET from a sandbox (Python requests, {image}), {iterations} per path; {cores} cores, load average {}",
            load.split_whitespace().next().unwrap_or("?")
        );
        println!("{:<44} {:>8} {:>8} {:>8}", "path", "p50 ms", "p95 ms", "mean ms");
        let outcome = sandbox.run(request, CancellationToken::new()).await;
        match outcome {
            Ok(outcome) if outcome.exit_code == 0 => print!("{}", outcome.stdout),
            Ok(outcome) => eprintln!("the run failed: {}\n{}", outcome.exit_code, outcome.stderr),
            Err(error) => eprintln!("the run could not happen: {error}"),
        }
        sandbox.shutdown().await;
    });
}

/// A CA of the bench's own: its certificate (PEM) and its issuer.
fn test_ca() -> (String, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "egress bench CA");
    let pem = params.self_signed(&key).unwrap().pem();
    (pem, rcgen::Issuer::new(params, key))
}

/// An HTTPS server for `name` on loopback answering every request with `ok`; its port.
async fn https_server(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>, name: &str) -> u16 {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, issuer).unwrap();
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], private)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        buffer.drain(..end + 4);
                        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if stream.write_all(answer).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => buffer.extend_from_slice(&chunk[..read]),
                    }
                }
            });
        }
    });
    port
}
