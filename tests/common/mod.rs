//! Shared by the integration tests that need a real container engine.
#![allow(dead_code)]

pub mod http;
pub mod mcp_client;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The policy file that points both languages at the offline test image.
pub fn local_image_policy() -> PathBuf {
    root().join("tests/policies/local-image.yaml")
}

/// Makes sure dockerd answers and the offline image exists, starting and building
/// them with the project's scripts if needed (once per test process).
///
/// Returns false (after a loud message) when that is impossible on this machine;
/// with `CI=true` it panics instead, because in CI a missing engine is a failure.
pub fn docker_ready() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let result = READY.get_or_init(|| {
        for script in ["scripts/start-docker.sh", "scripts/build-offline-image.sh"] {
            let output = Command::new("bash")
                .arg(root().join(script))
                .output()
                .map_err(|e| format!("cannot start {script}: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "{script} failed ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => true,
        Err(reason) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("CI=true and no container engine is available: {reason}")
        }
        Err(reason) => {
            eprintln!("\n!!!!!!!! SKIPPING: this test needs Docker, which is not available here !!!!!!!!\n!!!!!!!! {reason}\n");
            false
        }
    }
}

/// Containers (running or not) whose labels match `filter` (`key` or `key=value`).
pub fn containers_labelled(filter: &str) -> Vec<String> {
    let output = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter"])
        .arg(format!("label={filter}"))
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Containers carrying our label, running or not.
pub fn leftover_containers() -> Vec<String> {
    containers_labelled(code_sandbox_mcp::sandbox::LABEL)
}

/// The offline image scripts/build-offline-image.sh builds (Python 3.13, Node 20).
pub const LOCAL_IMAGE: &str = "code-sandbox-mcp-runtime:trixie";

/// An image whose `node` says it is Node 18 (no permission model), built from the
/// offline image with a stand-in `node` first on the PATH.
pub const OLD_NODE_IMAGE: &str = "code-sandbox-mcp-test-old-node:1";

/// Builds [`OLD_NODE_IMAGE`] once (offline: its base is the local image).
pub fn old_node_image_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let exists = Command::new("docker")
            .args(["image", "inspect", OLD_NODE_IMAGE])
            .output()
            .is_ok_and(|o| o.status.success());
        if exists {
            return true;
        }
        let dir = scratch("old-node-image");
        std::fs::write(
            dir.join("Dockerfile"),
            format!(
                "FROM {LOCAL_IMAGE}\nRUN printf '#!/bin/sh\\necho v18.19.0\\n' > /usr/local/bin/node && chmod 755 /usr/local/bin/node\n"
            ),
        )
        .unwrap();
        let built = Command::new("docker")
            .args(["build", "-q", "-t", OLD_NODE_IMAGE])
            .arg(&dir)
            .output()
            .expect("docker build");
        assert!(built.status.success(), "{built:?}");
        true
    })
}

/// The library image for `language` (`code-sandbox-mcp image build`), built from the
/// offline image when it is missing or was built from another definition: minutes the
/// first time, about a second when it is up to date. CI builds it before the tests.
pub fn library_image(language: code_sandbox_mcp::analysis::Language) -> &'static str {
    static BUILT: std::sync::Mutex<Vec<code_sandbox_mcp::analysis::Language>> =
        std::sync::Mutex::new(Vec::new());
    let tag = code_sandbox_mcp::sandbox::image::build::built_image(language);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.contains(&language) {
        let output = Command::new(binary_path())
            .args(["image", "build", "--base", LOCAL_IMAGE, language.name()])
            .output()
            .expect("run code-sandbox-mcp image build");
        assert!(
            output.status.success(),
            "image build {} failed: {}",
            language.name(),
            String::from_utf8_lossy(&output.stderr)
        );
        built.push(language);
    }
    tag
}

/// A fresh, empty directory for one test under target/.
pub fn scratch(name: &str) -> PathBuf {
    let dir = root()
        .join("target/test-scratch")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether the engine has the container runtime `name` registered. Outside CI a
/// missing one skips loudly; CI installs gVisor (scripts/start-docker.sh), so there it
/// is a failure.
pub fn runtime_available(name: &str) -> bool {
    let output = Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output()
        .expect("docker info");
    let found = String::from_utf8_lossy(&output.stdout).contains(&format!("\"{name}\""));
    if !found {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true and the engine has no `{name}` runtime");
        }
        eprintln!("\n!!!!!!!! SKIPPING: the engine has no `{name}` runtime !!!!!!!!\n");
    }
    found
}

/// The binary under test, without the caller's policy or log settings.
pub fn binary() -> Command {
    let mut command = Command::new(binary_path());
    command
        .env_remove("CODE_SANDBOX_POLICY")
        .env_remove("RUST_LOG");
    command
}

/// Starts `command` with all three streams piped, writes `input` to its stdin and
/// closes it. A binary that exits without reading its input (a usage error) closes the
/// pipe first: that is its answer, not the test's failure.
pub fn spawn_with_input(mut command: Command, input: &[u8]) -> Child {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let written = child.stdin.take().expect("piped stdin").write_all(input);
    if let Err(error) = written {
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::BrokenPipe,
            "write to the binary's stdin: {error}"
        );
    }
    child
}

pub fn binary_path() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_code-sandbox-mcp"))
}

/// Output bytes as text (invalid UTF-8 replaced).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A file with `contents` in a scratch directory of its own.
pub fn scratch_file(name: &str, contents: &[u8]) -> PathBuf {
    let path = scratch(&format!("file-{name}")).join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// The local-image test policy with `adjust` applied (pool sizes, limits a test wants
/// to hit quickly), ready for a `Sandbox`.
pub fn test_policy(
    adjust: impl FnOnce(&mut code_sandbox_mcp::policy::Policy),
) -> std::sync::Arc<code_sandbox_mcp::policy::Policy> {
    let path = local_image_policy();
    let mut policy =
        code_sandbox_mcp::policy::Policy::discover(Some(path.to_str().unwrap()), root())
            .expect("the test policy loads");
    adjust(&mut policy);
    std::sync::Arc::new(policy)
}

/// Every rule at `warn`: nothing is refused and no run-time layer is installed, for
/// tests of the container itself.
pub fn warn_only(policy: &mut code_sandbox_mcp::policy::Policy) {
    for rule in &mut policy.rules {
        rule.action = code_sandbox_mcp::policy::Action::Warn;
    }
}

/// A request for `code`, with the source kind the check would have found.
pub fn request(
    language: code_sandbox_mcp::analysis::Language,
    code: &str,
) -> code_sandbox_mcp::sandbox::RunRequest {
    code_sandbox_mcp::sandbox::RunRequest {
        kind: code_sandbox_mcp::analysis::analyze(language, code).kind,
        code: code.to_string(),
        timeout: None,
        env: Vec::new(),
        tap: None,
        files: Vec::new(),
        approved: Vec::new(),
        packages: Vec::new(),
    }
}
