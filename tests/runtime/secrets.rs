//! Secrets that never enter the sandbox (issue 25), against the real binary, the real
//! engine and the library images (Python's urllib and requests, Node's https and
//! axios): HTTPS servers the test runs on loopback with a CA of its own (which the
//! server trusts through its own SSL_CERT_FILE), reached by names under `localhost`.
//!
//! The listed host receives the real value; a host of another secret receives nothing
//! secret and the refusal is reported; a host without secrets (a plain tunnel) receives
//! the placeholder at most; plain HTTP never carries one; a redirect to another host
//! does not carry the value; the sandbox's environment holds placeholders only; and the
//! value is nowhere in the results, progress, audit lines or the server's log.

use crate::common;
use crate::common::mcp_client::{structured, RpcClient, TestImage};
use code_sandbox_mcp::analysis::Language;
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

crate::common::harness::tests! {
    multi_thread(2) secrets_reach_their_hosts_only_and_never_the_sandbox needs common::DOCKER;
}

/// The value: recognisable anywhere it might leak.
const VALUE: &str = "sk-test-5f3a9c1e-REAL-VALUE";
const OTHER_VALUE: &str = "other-token-REAL-VALUE-77";

/// What one test server received, each request head as text.
type Received = Arc<Mutex<Vec<String>>>;

/// A CA of the test's own.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pub pem: String,
}

impl TestCa {
    pub fn new() -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "code-sandbox-mcp test CA");
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// A TLS acceptor for `name`, signed by this CA.
    pub fn acceptor(&self, name: &str) -> tokio_rustls::TlsAcceptor {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).unwrap();
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], private)
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

/// How a test server answers a request head.
type Answer = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// A server on loopback (HTTPS with `tls`), answering each request with `answer`
/// and recording each request head.
pub async fn server(tls: Option<tokio_rustls::TlsAcceptor>, answer: Answer) -> (u16, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received: Received = Arc::default();
    let record = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (tls, answer, record) = (tls.clone(), answer.clone(), record.clone());
            tokio::spawn(async move {
                match tls {
                    Some(tls) => {
                        if let Ok(stream) = tls.accept(stream).await {
                            serve_requests(stream, answer, record).await;
                        }
                    }
                    None => serve_requests(stream, answer, record).await,
                }
            });
        }
    });
    (port, received)
}

async fn serve_requests<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    answer: Answer,
    record: Received,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            buffer.drain(..end + 4);
            record.lock().unwrap().push(head.clone());
            let response = answer(&head);
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

/// `200` with a body that says what the request carried, never the value itself.
fn summary(head: &str) -> String {
    let path = head.split(' ').nth(1).unwrap_or("?");
    let path = path.split('?').next().unwrap_or(path);
    let body = format!(
        "{path} value={} other={} placeholder={}",
        head.contains(VALUE),
        head.contains(OTHER_VALUE),
        head.contains("csm-secret-")
    );
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn all(received: &Received) -> String {
    received.lock().unwrap().join("\n---\n")
}

async fn secrets_reach_their_hosts_only_and_never_the_sandbox() {
    let ca = TestCa::new();
    // A host without secrets (a plain tunnel), where a redirect of the secret's host
    // leads; then the secret's host, another secret's host, and plain HTTP.
    let (plain_port, plain_seen) =
        server(Some(ca.acceptor("plain.localhost")), Arc::new(summary)).await;
    let redirect_to = format!("https://plain.localhost:{plain_port}/landed");
    let (api_port, api_seen) = server(
        Some(ca.acceptor("api.localhost")),
        Arc::new(move |head: &str| {
            if head.starts_with("GET /redirect") {
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: {redirect_to}\r\nContent-Length: 0\r\n\r\n"
                )
            } else {
                summary(head)
            }
        }),
    )
    .await;
    let (other_port, other_seen) =
        server(Some(ca.acceptor("other.localhost")), Arc::new(summary)).await;
    let (web_port, web_seen) = server(None, Arc::new(summary)).await;

    let python = TestImage::of(common::library_image(Language::Python), "secrets-py", 1);
    let javascript = TestImage::of(common::library_image(Language::JavaScript), "secrets-js", 1);
    let dir = python.policy_path.parent().unwrap().to_path_buf();
    let ca_file = dir.join("test-ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let policy = dir.join("secrets.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nextends: default\n\
             images:\n  python: \"{}\"\n  javascript: \"{}\"\n\
             pool:\n  size: 1\n\
             audit:\n  path: audit.jsonl\n\
             network:\n  allow: [\"plain.localhost:{plain_port}\", \"web.localhost:{web_port}\"]\n\
             secrets:\n\
             \x20 API_KEY: {{ from: TEST_EGRESS_API_KEY, hosts: [\"api.localhost:{api_port}\"] }}\n\
             \x20 OTHER_TOKEN: {{ hosts: [\"other.localhost:{other_port}\"] }}\n",
            python.tag, javascript.tag
        ),
    )
    .unwrap();

    let mut child = tokio::process::Command::new(common::binary_path())
        .env("CODE_SANDBOX_POLICY", &policy)
        .env("TEST_EGRESS_API_KEY", VALUE)
        .env("OTHER_TOKEN", OTHER_VALUE)
        .env("SSL_CERT_FILE", &ca_file)
        .env(
            "RUST_LOG",
            "debug,bollard=info,hyper=info,hyper_util=info,rustls=debug",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut client = RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let info = client.initialize().await;
    let tools = client.request("tools/list", json!({})).await;
    let description = tools.to_string();
    assert!(
        description.contains("API_KEY (for api.localhost"),
        "{description}"
    );
    let mut transcript = vec![info, tools];

    let python_code = format!(
        "import os, json, urllib.request, requests\n\
         key = os.environ['API_KEY']\n\
         print('placeholder', key.startswith('csm-secret-'))\n\
         request = urllib.request.Request('https://api.localhost:{api_port}/urllib?key=' + key, headers={{'Authorization': 'Bearer ' + key}})\n\
         print('urllib', urllib.request.urlopen(request, timeout=30).read().decode())\n\
         print('requests', requests.get('https://api.localhost:{api_port}/requests', headers={{'X-Api-Key': key}}, timeout=30).text)\n\
         print('basic', requests.get('https://api.localhost:{api_port}/basic', auth=('user', key), timeout=30).text)\n\
         reply = requests.get('https://other.localhost:{other_port}/other', headers={{'X-Api-Key': key}}, timeout=30)\n\
         print('other', reply.status_code)\n\
         print('other-own', requests.get('https://other.localhost:{other_port}/own', headers={{'X-Token': os.environ['OTHER_TOKEN']}}, timeout=30).text)\n\
         print('plain', requests.get('https://plain.localhost:{plain_port}/plain', headers={{'X-Api-Key': key}}, timeout=30).text)\n\
         print('http', requests.get('http://web.localhost:{web_port}/http', headers={{'X-Api-Key': key}}, timeout=30).status_code)\n\
         reply = requests.get('https://api.localhost:{api_port}/redirect', headers={{'X-Api-Key': key}}, timeout=30)\n\
         print('redirect', reply.url.split('/')[-1], reply.text)\n\
         print(json.dumps(dict(os.environ)))\n"
    );
    let id = client
        .start_call_with_progress(
            "run_python_code",
            json!({ "code": python_code }),
            "secrets-progress",
        )
        .await;
    let result = client.response(id).await;
    let python_result = result["result"].clone();
    transcript.push(result);
    let out = structured(&python_result)["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no `{name}` line: {python_result}"))
            .to_string()
    };
    assert_eq!(line("placeholder"), "placeholder True", "{python_result}");
    assert_eq!(
        line("urllib"),
        "urllib /urllib value=true other=false placeholder=false"
    );
    assert_eq!(
        line("requests"),
        "requests /requests value=true other=false placeholder=false"
    );
    assert_eq!(
        line("basic"),
        "basic /basic value=false other=false placeholder=false"
    );
    assert_eq!(line("other"), "other 403", "{python_result}");
    assert_eq!(
        line("other-own"),
        "other-own /own value=false other=true placeholder=false"
    );
    assert_eq!(
        line("plain"),
        "plain /plain value=false other=false placeholder=true"
    );
    assert_eq!(line("http"), "http 403", "{python_result}");
    assert_eq!(
        line("redirect"),
        "redirect landed /landed value=false other=false placeholder=true"
    );
    // Basic credentials carry the value base64-encoded.
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{VALUE}"));
    assert!(
        all(&api_seen).contains(&format!("Authorization: Basic {basic}")),
        "{}",
        all(&api_seen)
    );
    // The environment: placeholders, and the trust of the proxy's CA.
    let env_line = out.lines().find(|l| l.starts_with('{')).unwrap();
    let env: Value = serde_json::from_str(env_line).unwrap();
    assert!(
        env["API_KEY"].as_str().unwrap().starts_with("csm-secret-"),
        "{env}"
    );
    assert!(
        env["OTHER_TOKEN"]
            .as_str()
            .unwrap()
            .starts_with("csm-secret-"),
        "{env}"
    );
    assert_eq!(env["SSL_CERT_FILE"], "/run/code-sandbox/trust.pem", "{env}");
    assert_eq!(
        env["NODE_EXTRA_CA_CERTS"], "/run/code-sandbox/trust.pem",
        "{env}"
    );
    // The refusals: which secret, which host.
    let refused: Vec<String> = structured(&python_result)["secret_refused"]
        .as_array()
        .unwrap_or_else(|| panic!("no secret_refused: {python_result}"))
        .iter()
        .map(|r| {
            format!(
                "{} {}:{}",
                r["secret"].as_str().unwrap(),
                r["host"].as_str().unwrap(),
                r["port"]
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            format!("API_KEY other.localhost:{other_port}"),
            format!("API_KEY web.localhost:{web_port}")
        ],
        "{python_result}"
    );

    // Node: https through the proxy (https-proxy-agent, as the library image has it)
    // and axios (which sends `GET https://…` to the proxy).
    let node_code = format!(
        "const https = require('https');\n\
         const axios = require('axios');\n\
         const {{ HttpsProxyAgent }} = require('https-proxy-agent');\n\
         const key = process.env.API_KEY;\n\
         const agent = new HttpsProxyAgent(process.env.HTTPS_PROXY);\n\
         https.get({{ host: 'api.localhost', port: {api_port}, path: '/node-https', headers: {{ 'x-api-key': key }}, agent }}, (response) => {{\n\
         \x20 let body = '';\n\
         \x20 response.on('data', (chunk) => (body += chunk));\n\
         \x20 response.on('end', async () => {{\n\
         \x20   console.log('https', body);\n\
         \x20   const reply = await axios.get('https://api.localhost:{api_port}/axios', {{ headers: {{ 'X-Api-Key': key }} }});\n\
         \x20   console.log('axios', reply.data);\n\
         \x20 }});\n\
         }}).on('error', (error) => console.log('https error', error.message));\n"
    );
    let result = client
        .request(
            "tools/call",
            json!({"name": "run_javascript_code", "arguments": { "code": node_code }}),
        )
        .await;
    let node_result = result["result"].clone();
    transcript.push(result);
    assert_eq!(
        structured(&node_result)["stdout"],
        "https /node-https value=true other=false placeholder=false\naxios /axios value=true other=false placeholder=false\n",
        "{node_result}"
    );

    // Where the value went: the listed host alone, never a placeholder there.
    assert!(
        all(&api_seen).contains(&format!("Bearer {VALUE}")),
        "{}",
        all(&api_seen)
    );
    assert!(
        !all(&api_seen).contains("csm-secret-"),
        "{}",
        all(&api_seen)
    );
    for (name, seen) in [
        ("other", &other_seen),
        ("plain", &plain_seen),
        ("web", &web_seen),
    ] {
        assert!(
            !all(seen).contains(VALUE),
            "{name} got the value: {}",
            all(seen)
        );
    }
    assert!(
        !all(&web_seen).contains("/http"),
        "plain HTTP with a placeholder was forwarded"
    );

    // Nothing of the value anywhere else: results and progress (the transcript and
    // every notification), the audit log, the server's own log.
    client.close_input().await;
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status}");
    let server_log = log.await.unwrap();
    assert!(
        server_log.contains("egress refused a secret's placeholder"),
        "the log says what was refused"
    );
    let progress: Vec<&Value> = client
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "progress was sent");
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(
        audit.contains("API_KEY"),
        "the audit line names the refused secret: {audit}"
    );
    for (channel, text) in [
        ("results", serde_json::to_string(&transcript).unwrap()),
        (
            "notifications",
            serde_json::to_string(&client.notifications).unwrap(),
        ),
        ("audit log", audit),
        ("server log", server_log),
    ] {
        assert!(!text.contains(VALUE), "the value is in the {channel}");
        assert!(
            !text.contains(OTHER_VALUE),
            "the other value is in the {channel}"
        );
    }
}
