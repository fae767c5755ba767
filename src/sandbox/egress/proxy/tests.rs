//! The proxy in this process, on a socket of the test's own, against upstreams the
//! test runs on loopback (plain HTTP, and HTTPS with a CA the test makes).

use super::*;
use crate::sandbox::backend::BoxId;
use crate::sandbox::egress::authority::Authority;
use crate::sandbox::egress::intercept::Interceptor;
use crate::sandbox::egress::limits::Caps;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;

/// A listener whose connections come from no box.
struct Unattributed(tokio::net::UnixListener);

#[async_trait::async_trait]
impl EgressListener for Unattributed {
    async fn accept(&self) -> std::io::Result<(Box<dyn EgressStream>, Option<BoxId>)> {
        let (client, _) = self.0.accept().await?;
        Ok((Box::new(client), None))
    }
}

/// What an upstream saw: each connection's bytes, as they came.
type Seen = Arc<Mutex<Vec<Vec<u8>>>>;

/// An HTTP server on loopback that answers every request head with `seen: <request
/// line>` (keeping the connection), and records the raw bytes of each connection.
async fn upstream() -> (u16, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer(stream, record.clone()));
        }
    });
    (port, seen)
}

/// Answers the requests of one connection (plain or TLS), recording its bytes.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, seen: Seen) {
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.push(Vec::new());
        seen.len() - 1
    };
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if buffer.len() < end + 4 + length {
                break;
            }
            buffer.drain(..end + 4 + length);
            let body = format!("seen: {}", head.lines().next().unwrap_or_default());
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
            // As servers do: a request that says `Connection: close` is the last.
            if head.to_ascii_lowercase().contains("\r\nconnection: close") {
                let _ = stream.shutdown().await;
                return;
            }
        }
        let read = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        seen.lock().unwrap()[index].extend_from_slice(&chunk[..read]);
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// Everything `seen` recorded, as text.
fn all_seen(seen: &Seen) -> String {
    seen.lock()
        .unwrap()
        .iter()
        .map(|bytes| String::from_utf8_lossy(bytes).to_string())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

struct Running {
    socket: PathBuf,
    log: Arc<RefusalLog>,
    task: tokio::task::JoinHandle<()>,
    interceptor: Option<Arc<Interceptor>>,
    secrets: Option<Arc<Secrets>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    async fn connect(&self) -> UnixStream {
        UnixStream::connect(&self.socket).await.unwrap()
    }

    /// Sends `request` on a new connection, closes its sending side, and reads until
    /// the proxy closes.
    async fn ask(&self, request: &str) -> String {
        let mut stream = self.connect().await;
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).to_string()
    }

    fn refused(&self, since: Instant) -> Vec<String> {
        self.log
            .take("", since)
            .into_iter()
            .map(|r| format!("{}:{} {}", r.host, r.port, r.reason))
            .collect()
    }
}

/// Options of a test proxy.
#[derive(Default)]
struct Setup {
    allow: Vec<&'static str>,
    caps: Option<Arc<Caps>>,
    answers: Option<crate::sandbox::egress::dial::Answers>,
    secrets: Vec<crate::policy::secrets::Secret>,
    roots: Vec<CertificateDer<'static>>,
}

fn start(setup: Setup, extra_allow: Vec<String>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("proxy.sock");
    let listener = Box::new(Unattributed(
        tokio::net::UnixListener::bind(&socket).unwrap(),
    ));
    let mut allow: Vec<HostRule> = setup
        .allow
        .iter()
        .map(|e| e.to_string())
        .chain(extra_allow)
        .map(|e| HostRule::parse(&e).unwrap())
        .collect();
    let log = Arc::new(RefusalLog::default());
    let (secrets, interceptor) = if setup.secrets.is_empty() {
        (None, None)
    } else {
        let hosts: Vec<HostRule> = setup.secrets.iter().flat_map(|s| s.hosts.clone()).collect();
        allow.extend(hosts.iter().cloned());
        let authority = Authority::new("test-instance", &hosts).unwrap();
        (
            Some(Arc::new(Secrets::new(&setup.secrets).unwrap())),
            Some(Arc::new(Interceptor::new(authority))),
        )
    };
    let proxy = Proxy {
        allow,
        surroundings: Arc::default(),
        log: log.clone(),
        caps: setup.caps.unwrap_or_else(|| Caps::new(128, 10_000)),
        secrets: secrets.clone(),
        interceptor: interceptor.clone(),
        upstream_tls: upstream_tls::UpstreamTls::with_roots(setup.roots),
        resolve: setup.answers,
    };
    let task = tokio::spawn(serve(listener, Arc::new(proxy)));
    Running {
        socket,
        log,
        task,
        interceptor,
        secrets,
        _dir: dir,
    }
}

#[tokio::test]
async fn listed_hosts_are_reached_and_the_rest_refused_and_recorded() {
    let (port, seen) = upstream().await;
    let proxy = start(Setup::default(), vec![format!("localhost:{port}")]);
    let since = Instant::now();
    let answer = proxy
        .ask(&format!("GET http://localhost:{port}/x HTTP/1.1\r\nHost: localhost:{port}\r\nProxy-Connection: keep-alive\r\n\r\n"))
        .await;
    assert!(answer.contains("seen: GET /x HTTP/1.1"), "{answer}");
    // Node's `http` with the proxy as its target names the proxy as `Host`: that names
    // no site, and the target's host is sent in its place.
    let answer = proxy
        .ask(&format!(
            "GET http://localhost:{port}/node HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n"
        ))
        .await;
    assert!(answer.contains("seen: GET /node HTTP/1.1"), "{answer}");
    assert!(all_seen(&seen).contains(&format!("GET /node HTTP/1.1\r\nHost: localhost:{port}\r\n")));
    assert!(
        all_seen(&seen).contains("Connection: close"),
        "{}",
        all_seen(&seen)
    );
    assert!(!all_seen(&seen).contains("Proxy-Connection"));
    let answer = proxy
        .ask(&format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"))
        .await;
    assert!(
        answer.starts_with("HTTP/1.1 200 Connection Established"),
        "{answer}"
    );
    assert!(answer.contains("seen: GET /tunnel"), "{answer}");
    let other = port.wrapping_add(1).max(1);
    for target in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{other}"),
        "example.com:443".to_string(),
    ] {
        let answer = proxy
            .ask(&format!(
                "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
            ))
            .await;
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden"),
            "{target}: {answer}"
        );
        assert!(
            answer.contains("not in the policy's network.allow"),
            "{answer}"
        );
    }
    let refused = proxy.refused(since);
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(
        refused[0].starts_with(&format!("127.0.0.1:{port} ")),
        "{refused:?}"
    );
    assert!(proxy.refused(since).is_empty(), "taken once");
}

#[tokio::test]
async fn requests_in_disguise_never_reach_the_upstream() {
    let (port, seen) = upstream().await;
    let proxy = start(Setup::default(), vec![format!("localhost:{port}")]);
    let host = format!("localhost:{port}");
    // Each of these is refused before anything is sent upstream.
    for (request, status) in [
        // A bare LF puts a Host of the client's choice first.
        (format!("GET http://{host}/ HTTP/1.1\nHost: evil.example\r\nHost: {host}\r\n\r\n"), "400"),
        (format!("GET http://{host}/ HTTP/1.1\r\nX: 1\nHost: evil.example\r\n\r\n"), "400"),
        (format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nHost: evil.example\r\n\r\n"), "400"),
        (format!("GET http://{host}/ HTTP/1.1\r\nHost: evil.example\r\n\r\n"), "400"),
        (format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\n folded: yes\r\n\r\n"), "400"),
        (format!("POST http://{host}/ HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), "400"),
        (format!("POST http://{host}/ HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\nContent-Length: 50\r\n\r\nhello"), "400"),
        (format!("GET http://user:pw@{host}/ HTTP/1.1\r\nHost: {host}\r\n\r\n"), "400"),
        (format!("GET http://localhost%2e:{port}/ HTTP/1.1\r\nHost: {host}\r\n\r\n"), "400"),
        (format!("GET /local HTTP/1.1\r\nHost: {host}\r\n\r\n"), "400"),
        (format!("CONNECT {host} HTTP/1.1\r\nHost: evil.example:443\r\n\r\n"), "400"),
    ] {
        let answer = proxy.ask(&request).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{request:?}: {answer}");
    }
    assert_eq!(all_seen(&seen), "", "nothing reached the upstream");

    // A second request on a proxied connection, after a body, or pipelined: the first
    // alone goes through; the rest is never sent.
    for request in [
        format!("GET http://{host}/one HTTP/1.1\r\nHost: {host}\r\n\r\nGET /two HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
        format!("POST http://{host}/one HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\n\r\nhelloGET /two HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
        format!("POST http://{host}/one HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /two HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
    ] {
        let answer = proxy.ask(&request).await;
        assert!(answer.contains("seen: "), "{request:?}: {answer}");
    }
    let upstream_saw = all_seen(&seen);
    assert_eq!(upstream_saw.matches("/one").count(), 3, "{upstream_saw}");
    assert!(
        !upstream_saw.contains("evil") && !upstream_saw.contains("/two"),
        "{upstream_saw}"
    );

    // A tunnel to the allowed port carries requests for its host only: one for
    // another site is refused in order, after the answers owed before it.
    seen.lock().unwrap().clear();
    let answer = proxy
        .ask(&format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\nGET /mine HTTP/1.1\r\nHost: {host}\r\n\r\nGET /theirs HTTP/1.1\r\nHost: evil.example\r\n\r\n"))
        .await;
    let mine = answer.find("seen: GET /mine").expect(&answer);
    let refused = answer.find("HTTP/1.1 403 Forbidden").expect(&answer);
    assert!(mine < refused, "{answer}");
    assert!(
        answer.contains("the Host header names `evil.example`"),
        "{answer}"
    );
    let answer = proxy
        .ask(&format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\nGET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n"))
        .await;
    assert!(answer.contains("HTTP/1.1 400"), "{answer}");
    // Neither TLS nor HTTP: the tunnel closes, nothing is sent.
    let answer = proxy
        .ask(&format!(
            "CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\nSSH-2.0-OpenSSH_9.6\r\n"
        ))
        .await;
    assert_eq!(answer, "HTTP/1.1 200 Connection Established\r\n\r\n");
    let upstream_saw = all_seen(&seen);
    assert!(upstream_saw.contains("/mine"), "{upstream_saw}");
    assert!(
        !upstream_saw.contains("evil") && !upstream_saw.contains("SSH"),
        "{upstream_saw}"
    );
}

#[tokio::test]
async fn the_address_is_judged_whatever_the_name_says() {
    let (port, seen) = upstream().await;
    let answers: crate::sandbox::egress::dial::Answers = Arc::new(|name: &str| {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        match name {
            "rebind.test" => vec![ip("::ffff:127.0.0.1")],
            "nat64.test" => vec![ip("64:ff9b::7f00:1")],
            "metadata.test" => vec![ip("169.254.169.254")],
            "zero.test" => vec![ip("0.0.0.0"), ip("::")],
            // A private address first, unroutable: if it were tried, the test would
            // wait for its connection timeout.
            "mixed.test" => vec![ip("10.255.255.1"), ip("127.0.0.1")],
            _ => Vec::new(),
        }
    });
    let names = [
        "rebind.test",
        "nat64.test",
        "metadata.test",
        "zero.test",
        "mixed.test",
    ];
    let entries = |extra: &[String]| -> Vec<String> {
        names
            .iter()
            .map(|name| format!("{name}:{port}"))
            .chain(extra.iter().cloned())
            .collect()
    };
    // Names only (and every address but the special ones, by range): whatever their
    // DNS says, loopback, link-local and unspecified addresses are not reached.
    let by_name = start(
        Setup {
            answers: Some(answers.clone()),
            ..Setup::default()
        },
        entries(&[format!("0.0.0.0/0:{port}")]),
    );
    let since = Instant::now();
    for name in names {
        let answer = by_name
            .ask(&format!(
                "GET http://{name}:{port}/ HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
            ))
            .await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{name}: {answer}");
    }
    let refused = by_name.refused(since).join("\n");
    for (what, why) in [
        (
            "rebind.test",
            "::ffff:127.0.0.1 (that is 127.0.0.1) is loopback",
        ),
        ("nat64.test", "(that is 127.0.0.1) is loopback"),
        ("metadata.test", "link-local"),
        ("zero.test", "unspecified"),
        ("mixed.test", "10.255.255.1 is a private range"),
    ] {
        assert!(
            refused.contains(what) && refused.contains(why),
            "{what}: {refused}"
        );
    }
    // `0.0.0.0/0` lets addresses be named, but not loopback.
    assert!(by_name
        .ask(&format!(
            "GET http://127.0.0.2:{port}/ HTTP/1.1\r\nHost: 127.0.0.2:{port}\r\n\r\n"
        ))
        .await
        .starts_with("HTTP/1.1 403"));
    assert_eq!(all_seen(&seen), "", "nothing reached the upstream");

    // With loopback's 127.0.0.1 listed by address, it is reached, whatever the name
    // (or spelling) that leads there; the unroutable private address is skipped.
    let proxy = start(
        Setup {
            answers: Some(answers),
            ..Setup::default()
        },
        entries(&[format!("127.0.0.1:{port}")]),
    );
    let started = Instant::now();
    let answer = proxy
        .ask(&format!(
            "GET http://mixed.test:{port}/m HTTP/1.1\r\nHost: mixed.test:{port}\r\n\r\n"
        ))
        .await;
    assert!(answer.contains("seen: GET /m"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the private address was tried"
    );
    assert!(proxy
        .ask(&format!(
            "GET http://[::ffff:7f00:1]:{port}/v6 HTTP/1.1\r\nHost: [::ffff:7f00:1]:{port}\r\n\r\n"
        ))
        .await
        .contains("seen: GET /v6"));
    // Addresses in other spellings are no hosts at all.
    for spelling in ["2130706433", "0x7f.1", "0177.0.0.1", "127.1"] {
        let answer = proxy
            .ask(&format!(
                "GET http://{spelling}:{port}/ HTTP/1.1\r\nHost: {spelling}:{port}\r\n\r\n"
            ))
            .await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{spelling}: {answer}");
    }
    assert_eq!(
        all_seen(&seen).matches("GET").count(),
        2,
        "{}",
        all_seen(&seen)
    );
}

#[tokio::test]
async fn one_box_holds_at_most_its_cap_of_connections() {
    let (port, _seen) = upstream().await;
    let proxy = start(
        Setup {
            caps: Some(Caps::new(5, 1_000)),
            ..Setup::default()
        },
        vec![format!("localhost:{port}")],
    );
    let since = Instant::now();
    // Five connections that never finish their head (slowloris) hold the box's slots.
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut stream = proxy.connect().await;
        stream.write_all(b"GET http://localhost").await.unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = proxy
        .ask(&format!(
            "GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
        ))
        .await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("5 connections open"), "{answer}");
    held.pop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = proxy
        .ask(&format!(
            "GET http://localhost:{port}/again HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"
        ))
        .await;
    assert!(answer.contains("seen: GET /again"), "{answer}");
    let refused = proxy.refused(since);
    assert_eq!(refused.len(), 1, "{refused:?}");
}

// ---- TLS: a test CA, HTTPS upstreams on loopback ----

/// A CA of the test's own and an HTTPS server for each of `names` (all on loopback).
struct TestTls {
    ca: CertificateDer<'static>,
    servers: Vec<(u16, Seen)>,
}

async fn https_upstreams(names: &[&str]) -> TestTls {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut servers = Vec::new();
    for name in names {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(upstream_tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], private)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, record) = (acceptor.clone(), record.clone());
                tokio::spawn(async move {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        answer(stream, record).await;
                    }
                });
            }
        });
        servers.push((port, seen));
    }
    TestTls {
        ca: ca_cert.der().clone(),
        servers,
    }
}

/// The DER of the first certificate in `pem`.
fn der_of(pem: &str) -> CertificateDer<'static> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    CertificateDer::from(
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap(),
    )
}

/// Opens a tunnel to `target` and starts TLS in it for `server_name`, trusting `ca`.
async fn tls_through(
    proxy: &Running,
    target: &str,
    server_name: &str,
    ca: CertificateDer<'static>,
) -> Result<tokio_rustls::client::TlsStream<UnixStream>, String> {
    let mut stream = proxy.connect().await;
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = vec![0u8; 39];
    stream
        .read_exact(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(answer, b"HTTP/1.1 200 Connection Established\r\n\r\n");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(upstream_tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            ServerName::try_from(server_name.to_string()).unwrap(),
            stream,
        )
        .await
        .map_err(|e| e.to_string())
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, request: &str) -> String {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).to_string()
}

const SECRET: &str = "the-real-secret-value-42";

fn secret_for(hosts: &[String]) -> Vec<crate::policy::secrets::Secret> {
    crate::policy::secrets::declare(
        "test.yaml",
        "",
        vec![(
            "API_KEY".to_string(),
            crate::policy::secrets::SecretFile {
                from: None,
                hosts: hosts.to_vec(),
            },
        )],
        &|_| Some(SECRET.to_string()),
    )
}

#[tokio::test]
async fn tls_to_a_host_with_secrets_is_ended_there_and_the_value_swapped() {
    let tls = https_upstreams(&["api.localhost", "plain.localhost"]).await;
    let (api_port, api_seen) = tls.servers[0].clone();
    let (plain_port, plain_seen) = tls.servers[1].clone();
    let proxy = start(
        Setup {
            secrets: secret_for(&[format!("api.localhost:{api_port}")]),
            roots: vec![tls.ca.clone()],
            ..Setup::default()
        },
        vec![format!("plain.localhost:{plain_port}")],
    );
    let since = Instant::now();
    let proxy_ca = der_of(proxy.interceptor.as_ref().unwrap().certificate_pem());
    // The placeholder a box of this proxy would be given.
    let (env, _ticket) = proxy.secrets.as_ref().unwrap().issue();
    let placeholder = env[0].1.clone();
    assert_eq!(env[0].0, "API_KEY");

    // To the listed host, the proxy's certificate for it is what the box sees, and the
    // upstream gets the value in place of the placeholder (header and query), on two
    // requests of one connection.
    let api = format!("api.localhost:{api_port}");
    let mut stream = tls_through(&proxy, &api, "api.localhost", proxy_ca.clone())
        .await
        .unwrap();
    let answer = exchange(
        &mut stream,
        &format!(
            "GET /v1?key={placeholder} HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {placeholder}\r\n\r\n\
             GET /again HTTP/1.1\r\nHost: {api}\r\nX-Key: {placeholder}\r\n\r\n\
             GET /third HTTP/1.1\r\nHost: plain.localhost:{plain_port}\r\n\r\n"
        ),
    )
    .await;
    assert!(
        answer.contains("seen: GET /v1?key=the-real-secret-value-42"),
        "{answer}"
    );
    assert!(answer.contains("seen: GET /again"), "{answer}");
    assert!(
        answer.contains("HTTP/1.1 403"),
        "another Host in the TLS: {answer}"
    );
    let upstream_saw = all_seen(&api_seen);
    assert!(
        upstream_saw.contains(&format!("Authorization: Bearer {SECRET}")),
        "{upstream_saw}"
    );
    assert!(
        upstream_saw.contains(&format!("X-Key: {SECRET}")),
        "{upstream_saw}"
    );
    assert!(!upstream_saw.contains("csm-secret-"), "{upstream_saw}");
    assert!(!upstream_saw.contains("/third"), "{upstream_saw}");

    // TLS asking for another name in a tunnel to the listed host: refused.
    assert!(
        tls_through(&proxy, &api, "plain.localhost", proxy_ca.clone())
            .await
            .is_err()
    );

    // A host without secrets keeps a plain tunnel: the box sees the real certificate
    // (the test CA's), and a placeholder sent there stays a placeholder.
    let plain = format!("plain.localhost:{plain_port}");
    let mut stream = tls_through(&proxy, &plain, "plain.localhost", tls.ca.clone())
        .await
        .unwrap();
    let answer = exchange(
        &mut stream,
        &format!(
            "GET /p HTTP/1.1\r\nHost: {plain}\r\nX-Key: {placeholder}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.contains("seen: GET /p"), "{answer}");
    assert!(!all_seen(&plain_seen).contains(SECRET));
    // In a tunnel to that host, TLS naming the secret's host is refused.
    assert!(tls_through(&proxy, &plain, "api.localhost", tls.ca.clone())
        .await
        .is_err());

    // Through plain HTTP to either host, a placeholder is refused and recorded.
    let answer = proxy
        .ask(&format!(
            "GET http://{plain}/q HTTP/1.1\r\nHost: {plain}\r\nX-Key: {placeholder}\r\n\r\n"
        ))
        .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    // `https://` sent to the proxy as such (what axios does): the proxy makes the TLS
    // and swaps the value for the listed host.
    let answer = proxy
        .ask(&format!(
            "GET https://{api}/axios HTTP/1.1\r\nHost: {api}\r\nX-Key: {placeholder}\r\n\r\n"
        ))
        .await;
    assert!(answer.contains("seen: GET /axios"), "{answer}");
    assert!(all_seen(&api_seen).contains(&format!("X-Key: {SECRET}\r\n")));
    let refused = proxy.log.take_secrets("", since);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(
        (refused[0].secret.as_str(), refused[0].host.as_str()),
        ("API_KEY", "plain.localhost")
    );
    let everything = format!("{:?} {:?}", refused, proxy.refused(since));
    assert!(!everything.contains(SECRET), "{everything}");
}
