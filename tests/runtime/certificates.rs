//! The policy's `certificates:` against an HTTPS package index of the test's own, on the
//! host's loopback, whose certificate is signed by a CA the test makes (openssl): what
//! a network behind a TLS-inspecting proxy looks like from the sandbox. With the CA
//! bundle named, the install step and the run's own request trust it; without it, the
//! install is `install_failed` with the certificate error in pip's words.

use crate::common;
use crate::common::mcp_client::{is_error, structured, InProcess, RpcClient, TestImage};
use code_sandbox_mcp::analysis::Language;
use serde_json::json;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

crate::common::harness::tests! {
    multi_thread(2) a_ca_bundle_in_the_policy_is_trusted_by_installs_and_runs needs common::DOCKER;
    multi_thread(2) under_secrets_the_proxy_trusts_the_policy_s_ca_bundle_too needs common::DOCKER;
}

/// `openssl` with `args` in `dir`; the test fails with its stderr if it does.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl on the PATH");
    assert!(output.status.success(), "openssl {args:?}: {output:?}");
}

/// A CA (`ca.pem`) and a certificate for `localhost` it signed (`leaf.pem`,
/// `leaf.key`), with the extensions Python 3.13's strict verification wants.
fn make_ca(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=code-sandbox-mcp test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n\
         subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            "leaf.pem",
        ],
    );
}

/// A host HTTPS server (Python's http.server) of the folder `root` on a loopback port;
/// stopped when dropped.
struct HttpsServer {
    child: Child,
    port: u16,
}

impl HttpsServer {
    fn start(root: &Path, cert: &Path, key: &Path) -> HttpsServer {
        let script = "import http.server, ssl, sys\n\
                      class Quiet(http.server.SimpleHTTPRequestHandler):\n\
                      \x20   def __init__(self, *a, **k): super().__init__(*a, directory=sys.argv[1], **k)\n\
                      \x20   def log_message(self, *a): pass\n\
                      \x20   def do_GET(self):\n\
                      \x20       if not self.path.startswith('/echo'): return super().do_GET()\n\
                      \x20       body = ('key=' + str(self.headers.get('X-Api-Key'))).encode()\n\
                      \x20       self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n\
                      \x20       self.wfile.write(body)\n\
                      context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
                      context.load_cert_chain(sys.argv[2], sys.argv[3])\n\
                      server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Quiet)\n\
                      server.socket = context.wrap_socket(server.socket, server_side=True)\n\
                      print(server.server_address[1], flush=True)\n\
                      server.serve_forever()\n";
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(script)
            .args([root, cert, key])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the HTTPS server did not say its port: {line:?}")
        });
        HttpsServer { child, port }
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A policy file for a new tag of the Python library image, with `extra` appended.
fn policy_with(name: &str, extra: &str) -> (TestImage, PathBuf) {
    let image = TestImage::of(common::library_image(Language::Python), name, 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(&image.policy_path, format!("{text}{extra}")).unwrap();
    let path = image.policy_path.clone();
    (image, path)
}

async fn a_ca_bundle_in_the_policy_is_trusted_by_installs_and_runs() {
    let dir = common::scratch("certificates");
    make_ca(&dir);
    // The index: a PEP 503 page for tinypkg and its wheel, and a file for the run.
    let root = dir.join("site");
    let wheel = "tinypkg-1.0-py3-none-any.whl";
    std::fs::create_dir_all(root.join("simple/tinypkg")).unwrap();
    std::fs::create_dir_all(root.join("files")).unwrap();
    std::fs::write(
        root.join("simple/tinypkg/index.html"),
        format!("<html><body><a href=\"/files/{wheel}\">{wheel}</a></body></html>"),
    )
    .unwrap();
    std::fs::write(
        root.join("files").join(wheel),
        crate::packages::tiny_wheel(),
    )
    .unwrap();
    std::fs::write(root.join("hello.txt"), "hello over TLS\n").unwrap();
    let server = HttpsServer::start(&root, &dir.join("leaf.pem"), &dir.join("leaf.key"));
    let port = server.port;
    let index = format!("https://localhost:{port}/simple");
    let section = format!(
        "network:\n  allow: [\"localhost:{port}\"]\n\
         packages:\n  python: [tinypkg]\n  index:\n    python: \"{index}\"\n"
    );

    // Trusted: the install step and the run's own request both pass.
    let (image, policy) = policy_with(
        "certificates",
        &format!(
            "{section}certificates: \"{}\"\n",
            dir.join("ca.pem").display()
        ),
    );
    let volume = crate::packages::SetVolume::of(Language::Python, &image.tag, &index, "tinypkg");
    let mut server_mcp = InProcess::start(&policy, Vec::new()).await;
    let code = format!(
        "import tinypkg, urllib.request\nprint(tinypkg.VALUE)\n\
         print(urllib.request.urlopen('https://localhost:{port}/hello.txt', timeout=10).read().decode(), end='')\n"
    );
    let trusted = server_mcp
        .client
        .call_tool(
            "run_python_code",
            json!({"code": code, "packages": ["tinypkg"]}),
        )
        .await;
    assert!(!is_error(&trusted), "{trusted}");
    assert_eq!(
        structured(&trusted)["stdout"],
        "from the local index\nhello over TLS\n",
        "{trusted}"
    );
    server_mcp.close().await;
    drop(volume);

    // Not trusted: the image's own CAs do not know the test's CA.
    let (image, policy) = policy_with("certificates-untrusted", &section);
    let volume = crate::packages::SetVolume::of(Language::Python, &image.tag, &index, "tinypkg");
    let mut server_mcp = InProcess::start(&policy, Vec::new()).await;
    let untrusted = server_mcp
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import tinypkg", "packages": ["tinypkg"]}),
        )
        .await;
    assert!(is_error(&untrusted), "{untrusted}");
    let result = structured(&untrusted);
    assert_eq!(result["status"], "install_failed", "{untrusted}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("CERTIFICATE_VERIFY_FAILED")
            || message.contains("certificate verify failed"),
        "{message}"
    );
    assert!(!volume.exists(), "{} was left behind", volume.0);
    server_mcp.close().await;
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn under_secrets_the_proxy_trusts_the_policy_s_ca_bundle_too() {
    // The proxy ends TLS for a secret's host and makes its own to the host: with the
    // policy's bundle (and no SSL_CERT_FILE in the server's environment) it trusts the
    // test's CA, swaps the placeholder and hands the box a bundle that trusts it too.
    let dir = common::scratch("certificates-secrets");
    make_ca(&dir);
    let root = dir.join("site");
    std::fs::create_dir_all(&root).unwrap();
    let server = HttpsServer::start(&root, &dir.join("leaf.pem"), &dir.join("leaf.key"));
    let port = server.port;
    let (image, policy) = policy_with(
        "certificates-secrets",
        &format!(
            "network:\n  allow: [\"localhost:{port}\"]\n\
             secrets:\n  API_KEY: {{ from: TEST_CA_SECRET, hosts: [\"localhost:{port}\"] }}\n\
             certificates: \"{}\"\n",
            dir.join("ca.pem").display()
        ),
    );
    let mut child = tokio::process::Command::new(common::binary_path())
        .env("CODE_SANDBOX_POLICY", &policy)
        .env("TEST_CA_SECRET", "the-real-value")
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut client = RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    client.initialize().await;
    let code = format!(
        "import os, requests\n\
         print(requests.get('https://localhost:{port}/echo', headers={{'X-Api-Key': os.environ['API_KEY']}}, timeout=30).text)\n\
         print(os.environ['SSL_CERT_FILE'])\n"
    );
    let result = client
        .call_tool("run_python_code", json!({ "code": code }))
        .await;
    client.close_input().await;
    let _ = child.wait().await;
    assert!(!is_error(&result), "{result}");
    assert_eq!(
        structured(&result)["stdout"],
        "key=the-real-value\n/run/code-sandbox/trust.pem\n",
        "{result}"
    );
    drop(image);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
