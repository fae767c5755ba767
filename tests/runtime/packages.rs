//! Package installs against a package index of the test's own: a PEP 503 simple index
//! this test serves on the host's loopback, with a wheel it builds itself. The install
//! step reaches it through the egress proxy; the run itself keeps `network: none`.

use crate::common;
use crate::common::mcp_client::{is_error, structured, InProcess, TestImage};
use code_sandbox_mcp::analysis::Language;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

crate::common::harness::tests! {
    multi_thread(2) an_allowed_package_installs_once_and_the_rest_is_refused needs common::DOCKER;
    multi_thread(2) an_allowed_npm_package_installs_once needs common::DOCKER;
    multi_thread(2) a_failed_install_is_install_failed_with_the_installers_words_and_no_volume needs common::DOCKER;
    multi_thread(2) an_index_nobody_serves_is_install_failed_naming_the_connection needs common::DOCKER;
    sync cleanup_packages_removes_the_sets_unused_for_that_many_days needs common::DOCKER;
}

/// Removes a package set's volume when dropped, however the test ends: a set asked for
/// from this test's own index (on a port of its own) is no other run's cache.
pub(crate) struct SetVolume(pub(crate) String);

impl SetVolume {
    pub(crate) fn of(language: Language, image: &str, index: &str, spec: &str) -> SetVolume {
        let key =
            code_sandbox_mcp::sandbox::install::key(language, image, index, &[spec.to_string()]);
        SetVolume(code_sandbox_mcp::sandbox::install::volume_name(&key))
    }

    pub(crate) fn exists(&self) -> bool {
        std::process::Command::new("docker")
            .args(["volume", "inspect", &self.0])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for SetVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["volume", "rm", &self.0])
            .output();
    }
}

/// A wheel of `tinypkg` 1.0, built with the host's Python (zipfile, a RECORD). It also
/// carries what would run before the sandbox's guard in a Python started the usual
/// way (a `sitecustomize`, a `usercustomize`, a `.pth` file): each leaves a file in
/// /tmp if it ever runs.
pub(crate) fn tiny_wheel() -> Vec<u8> {
    let dir = common::scratch("tiny-wheel");
    let path = dir.join("tinypkg-1.0-py3-none-any.whl");
    let script = "import base64, hashlib, sys, zipfile\n\
                  files = {'tinypkg/__init__.py': \"VALUE = 'from the local index'\\n\",\n\
                  \x20        'sitecustomize.py': \"open('/tmp/ran-sitecustomize', 'w').close()\\n\",\n\
                  \x20        'usercustomize.py': \"open('/tmp/ran-usercustomize', 'w').close()\\n\",\n\
                  \x20        'tinypkg-start.pth': \"import os; open('/tmp/ran-pth', 'w').close()\\n\",\n\
                  \x20        'tinypkg-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 1.0\\n',\n\
                  \x20        'tinypkg-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}\n\
                  record = []\n\
                  with zipfile.ZipFile(sys.argv[1], 'w') as whl:\n\
                  \x20   for name, text in files.items():\n\
                  \x20       data = text.encode()\n\
                  \x20       whl.writestr(name, data)\n\
                  \x20       digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()\n\
                  \x20       record.append('%s,sha256=%s,%d' % (name, digest, len(data)))\n\
                  \x20   record.append('tinypkg-1.0.dist-info/RECORD,,')\n\
                  \x20   whl.writestr('tinypkg-1.0.dist-info/RECORD', '\\n'.join(record) + '\\n')\n";
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(&path).unwrap()
}

/// An HTTP server on loopback answering each path with `answer` (content type and
/// body; `None` is a 404); returns its port and how many requests it has had.
async fn serve_http(
    answer: impl Fn(&str) -> Option<(&'static str, Vec<u8>)> + Send + Sync + 'static,
) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (answer, counter) = (answer.clone(), counter.clone());
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                let read = stream.read(&mut buffer).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&buffer[..read]).to_string();
                let path = request.split(' ').nth(1).unwrap_or("/").to_string();
                counter.fetch_add(1, Ordering::SeqCst);
                let (status, (kind, body)) = match answer(&path) {
                    Some(found) => ("200 OK", found),
                    None => ("404 Not Found", ("text/plain", b"not found".to_vec())),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    (port, requests)
}

/// A PEP 503 simple index with `tinypkg` (the page and the wheel).
async fn serve_index(wheel: Vec<u8>) -> (u16, Arc<AtomicUsize>) {
    serve_http(move |path| {
        let name = "tinypkg-1.0-py3-none-any.whl";
        if path.starts_with("/files/") {
            Some(("application/octet-stream", wheel.clone()))
        } else if path.trim_end_matches('/').ends_with("/simple/tinypkg") {
            let page = format!("<html><body><a href=\"/files/{name}\">{name}</a></body></html>");
            Some(("text/html", page.into_bytes()))
        } else {
            None
        }
    })
    .await
}

async fn an_allowed_package_installs_once_and_the_rest_is_refused() {
    let (port, requests) = serve_index(tiny_wheel()).await;
    let base = common::library_image(Language::Python);
    let image = TestImage::of(base, "packages", 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!(
            "{text}packages:\n  python: [tinypkg]\n  index:\n    python: \"http://localhost:{port}/simple\"\n"
        ),
    )
    .unwrap();
    let index = format!("http://localhost:{port}/simple");
    let volume = SetVolume::of(Language::Python, &image.tag, &index, "tinypkg");
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let code = "import socket, tinypkg\nprint(tinypkg.VALUE)\n\
                try:\n    socket.create_connection(('127.0.0.1', 1), timeout=1)\nexcept OSError as error:\n    print('run network:', type(error).__name__)\n";
    let first = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": code, "packages": ["tinypkg"]}),
        )
        .await;
    assert!(!is_error(&first), "{first}");
    assert!(
        structured(&first)["stdout"]
            .as_str()
            .unwrap()
            .starts_with("from the local index\nrun network:"),
        "{first}"
    );
    let fetched = requests.load(Ordering::SeqCst);
    assert!(fetched >= 2, "the index page and the wheel: {fetched}");

    // The same set again: installed already, the index is not asked.
    let second = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import os, tinypkg\nprint(tinypkg.VALUE, sorted(n for n in os.listdir('/tmp') if n.startswith('ran-')))", "packages": ["TinyPkg"]}),
        )
        .await;
    // The interpreter starts isolated: nothing of the set ran before (or after) the guard.
    assert_eq!(
        structured(&second)["stdout"],
        "from the local index []\n",
        "{second}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        fetched,
        "the cache served it"
    );

    // Without asking for it, the run does not have it.
    let without = server
        .client
        .call_tool("run_python_code", json!({"code": "import tinypkg"}))
        .await;
    assert!(
        structured(&without)["stderr"]
            .as_str()
            .unwrap()
            .contains("ModuleNotFoundError"),
        "{without}"
    );

    // A package the policy does not list is refused before anything runs.
    let refused = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "print(1)", "packages": ["requests"]}),
        )
        .await;
    assert!(is_error(&refused), "{refused}");
    assert_eq!(structured(&refused)["status"], "invalid_input");
    assert!(
        structured(&refused)["message"]
            .as_str()
            .unwrap()
            .contains("`requests` is not allowed"),
        "{refused}"
    );
    server.close().await;
    // The set's volume stays for the next server: it is the cache.
    assert!(volume.exists(), "the set's volume {} was kept", volume.0);
}

/// A tarball of the npm package `tinylib` 1.0.0, and its sha1 and sha512 integrity.
fn tiny_tarball() -> (Vec<u8>, String, String) {
    let dir = common::scratch("tiny-tarball");
    let path = dir.join("tinylib-1.0.0.tgz");
    let script = "import base64, hashlib, io, json, sys, tarfile\n\
                  files = {'package/package.json': json.dumps({'name': 'tinylib', 'version': '1.0.0', 'main': 'index.js'}),\n\
                  \x20        'package/index.js': \"module.exports = { value: 'from the local registry' };\\n\"}\n\
                  buffer = io.BytesIO()\n\
                  with tarfile.open(fileobj=buffer, mode='w:gz') as tar:\n\
                  \x20   for name, text in files.items():\n\
                  \x20       data = text.encode()\n\
                  \x20       info = tarfile.TarInfo(name)\n\
                  \x20       info.size = len(data)\n\
                  \x20       info.mode = 0o644\n\
                  \x20       tar.addfile(info, io.BytesIO(data))\n\
                  data = buffer.getvalue()\n\
                  open(sys.argv[1], 'wb').write(data)\n\
                  print(hashlib.sha1(data).hexdigest(), 'sha512-' + base64.b64encode(hashlib.sha512(data).digest()).decode())\n";
    let output = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (sha1, integrity) = text.trim().split_once(' ').unwrap();
    (
        std::fs::read(&path).unwrap(),
        sha1.to_string(),
        integrity.to_string(),
    )
}

/// An npm registry with `tinylib` (its metadata, which names the tarball by the
/// registry's own port, and the tarball).
async fn serve_registry() -> (u16, Arc<AtomicUsize>) {
    let (tarball, sha1, integrity) = tiny_tarball();
    let port = Arc::new(std::sync::OnceLock::<u16>::new());
    let known = port.clone();
    let (port_number, requests) = serve_http(move |path| {
        if path.ends_with(".tgz") {
            return Some(("application/octet-stream", tarball.clone()));
        }
        if !path.trim_end_matches('/').ends_with("/tinylib") {
            return None;
        }
        let port = known.get().copied().unwrap_or_default();
        let metadata = json!({
            "name": "tinylib",
            "dist-tags": {"latest": "1.0.0"},
            "versions": {"1.0.0": {
                "name": "tinylib", "version": "1.0.0", "main": "index.js",
                "dist": {
                    "tarball": format!("http://localhost:{port}/tinylib/-/tinylib-1.0.0.tgz"),
                    "shasum": sha1, "integrity": integrity
                }
            }}
        });
        Some(("application/json", metadata.to_string().into_bytes()))
    })
    .await;
    port.set(port_number).unwrap();
    (port_number, requests)
}

async fn an_allowed_npm_package_installs_once() {
    let (port, requests) = serve_registry().await;
    let base = common::library_image(Language::JavaScript);
    let image = TestImage::of(base, "npm-packages", 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    let registry = format!("http://localhost:{port}");
    std::fs::write(
        &image.policy_path,
        format!(
            "{text}packages:\n  javascript: [tinylib]\n  index:\n    javascript: \"{registry}\"\n"
        ),
    )
    .unwrap();
    let volume = SetVolume::of(Language::JavaScript, &image.tag, &registry, "tinylib");
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let code = "console.log(require('tinylib').value);";
    let first = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": code, "packages": ["tinylib"]}),
        )
        .await;
    assert_eq!(
        structured(&first)["stdout"],
        "from the local registry\n",
        "{first}"
    );
    let fetched = requests.load(Ordering::SeqCst);
    assert!(fetched >= 2, "the metadata and the tarball: {fetched}");
    let second = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": code, "packages": ["tinylib"]}),
        )
        .await;
    assert_eq!(
        structured(&second)["stdout"],
        "from the local registry\n",
        "{second}"
    );
    assert_eq!(
        requests.load(Ordering::SeqCst),
        fetched,
        "the cache served it"
    );
    let refused = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": code, "packages": ["left-pad"]}),
        )
        .await;
    assert_eq!(structured(&refused)["status"], "invalid_input", "{refused}");
    server.close().await;
    assert!(volume.exists(), "the set's volume {} was kept", volume.0);
}

async fn a_failed_install_is_install_failed_with_the_installers_words_and_no_volume() {
    // An index that has nothing: pip finds no version of the package.
    let (port, requests) = serve_http(|_| None).await;
    let image = TestImage::of(
        common::library_image(Language::Python),
        "packages-failed",
        0,
    );
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!(
            "{text}packages:\n  python: [tinypkg]\n  index:\n    python: \"http://localhost:{port}/simple\"\n"
        ),
    )
    .unwrap();
    let index = format!("http://localhost:{port}/simple");
    let volume = SetVolume::of(Language::Python, &image.tag, &index, "tinypkg");
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    for attempt in 1..=2 {
        let result = server
            .client
            .call_tool(
                "run_python_code",
                json!({"code": "import tinypkg", "packages": ["tinypkg"]}),
            )
            .await;
        assert!(is_error(&result), "{result}");
        let structured = structured(&result);
        assert_eq!(structured["status"], "install_failed", "{result}");
        assert_eq!(
            structured["exit_code"],
            serde_json::Value::Null,
            "nothing ran: {result}"
        );
        let message = structured["message"].as_str().unwrap();
        // pip's own words, and no invitation to loop.
        assert!(
            message.contains("No matching distribution found for tinypkg"),
            "attempt {attempt}: {message}"
        );
        assert!(!message.contains("again may succeed"), "{message}");
        assert!(message.contains("fails the same way"), "{message}");
        // The index answered (with nothing): no connection is blamed.
        assert!(!message.contains("could not reach"), "{message}");
        // Nothing of the failed install is left behind.
        assert!(
            !volume.exists(),
            "attempt {attempt}: {} was left behind",
            volume.0
        );
    }
    // Each attempt asked the index again: a failure is not cached as an install.
    assert!(requests.load(Ordering::SeqCst) >= 2);
    server.close().await;
}

async fn an_index_nobody_serves_is_install_failed_naming_the_connection() {
    // A loopback port that was free a moment ago and that nobody listens on now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let image = TestImage::of(
        common::library_image(Language::Python),
        "packages-unreachable",
        0,
    );
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    let index = format!("http://localhost:{port}/simple");
    std::fs::write(
        &image.policy_path,
        format!("{text}packages:\n  python: [tinypkg]\n  index:\n    python: \"{index}\"\n"),
    )
    .unwrap();
    let volume = SetVolume::of(Language::Python, &image.tag, &index, "tinypkg");
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let result = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import tinypkg", "packages": ["tinypkg"]}),
        )
        .await;
    assert!(is_error(&result), "{result}");
    let structured = structured(&result);
    assert_eq!(structured["status"], "install_failed", "{result}");
    let message = structured["message"].as_str().unwrap();
    // pip's words (it found no version), and the proxy's: why not.
    assert!(
        message.contains("No matching distribution found for tinypkg"),
        "{message}"
    );
    assert!(
        message.contains(&format!("could not reach: localhost:{port}")),
        "{message}"
    );
    assert!(!message.contains("again may succeed"), "{message}");
    assert!(!volume.exists(), "{} was left behind", volume.0);
    server.close().await;
}

/// A package set's volume made for this test, with a last use recorded in `cache`
/// `days_ago` days ago.
fn recorded_set(cache: &std::path::Path, name: &str, days_ago: u64) -> SetVolume {
    let made = std::process::Command::new("docker")
        .args([
            "volume",
            "create",
            "--label",
            "code-sandbox-mcp.packages=test",
            name,
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let record = cache.join("package-sets").join(name);
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    let file = std::fs::File::create(&record).unwrap();
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(days_ago * 86_400);
    file.set_modified(when).unwrap();
    SetVolume(name.to_string())
}

fn cleanup_packages_removes_the_sets_unused_for_that_many_days() {
    let dir = common::scratch("cleanup-packages");
    let cache = dir.join("cache");
    let unique = format!("code-sandbox-mcp-packages-test-{}", std::process::id());
    // Ten thousand days: no set of anyone's is that old, so only this test's go.
    let stale = recorded_set(&cache, &format!("{unique}-stale"), 20_000);
    let fresh = recorded_set(&cache, &format!("{unique}-fresh"), 1);
    let busy = recorded_set(&cache, &format!("{unique}-busy"), 20_000);
    let user = std::process::Command::new("docker")
        .args(["run", "-d", "--rm", "--network", "none", "-v"])
        .arg(format!("{}:/set:ro", busy.0))
        .args([common::LOCAL_IMAGE, "sleep", "120"])
        .output()
        .unwrap();
    assert!(user.status.success(), "{user:?}");
    let container = common::text(&user.stdout).trim().to_string();

    let output = common::binary()
        .args(["cleanup", "--packages", "10000"])
        .env("CODE_SANDBOX_CACHE_DIR", &cache)
        .output()
        .unwrap();
    let _ = std::process::Command::new("docker")
        .args(["rm", "-f", &container])
        .output();
    let stdout = common::text(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(!stale.exists(), "{stdout}");
    assert!(stdout.contains(&format!("removed {}", stale.0)), "{stdout}");
    assert!(fresh.exists(), "used a day ago: {stdout}");
    assert!(busy.exists(), "a container uses it: {stdout}");
    assert!(stdout.contains("1 in use by a container now"), "{stdout}");
    // The removed set's record went with it.
    assert!(!cache.join("package-sets").join(&stale.0).exists());
    let _ = std::fs::remove_dir_all(&dir);
}
