//! Shared by the integration tests that need a real container engine.
#![allow(dead_code)]

pub mod harness;
pub mod http;
pub mod mcp_client;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The policy file that points both languages at the offline test image.
pub fn local_image_policy() -> PathBuf {
    root().join("tests/policies/local-image.yaml")
}

/// Docker answering, with the offline image: started and built with the project's
/// scripts if needed (both idempotent), once per test process.
pub static DOCKER: harness::Prerequisite = harness::Prerequisite {
    name: "Docker",
    prepare: prepare_docker,
};

fn prepare_docker() -> Result<(), String> {
    for script in ["scripts/start-docker.sh", "scripts/build-offline-image.sh"] {
        let output = Command::new("bash")
            .arg(root().join(script))
            .output()
            .map_err(|e| format!("cannot start {script}: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("{script} failed ({}): {last}", output.status));
        }
    }
    Ok(())
}

/// The engine's gVisor runtime, `runsc` (scripts/start-docker.sh registers it when it
/// can). Declared after [`DOCKER`], which it needs to be asked.
pub static GVISOR: harness::Prerequisite = harness::Prerequisite {
    name: "gVisor (the engine's `runsc` runtime)",
    prepare: || {
        let output = Command::new("docker")
            .args(["info", "--format", "{{json .Runtimes}}"])
            .output()
            .map_err(|e| format!("cannot run docker info: {e}"))?;
        let runtimes = String::from_utf8_lossy(&output.stdout);
        if runtimes.contains("\"runsc\"") {
            Ok(())
        } else {
            Err(format!("the engine's runtimes are {}", runtimes.trim()))
        }
    },
};

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
/// offline image with a stand-in `node` first on the PATH, and removed when dropped. Its
/// tag is this process's, so runs sharing an engine do not remove each other's.
pub struct OldNodeImage {
    pub tag: String,
}

impl OldNodeImage {
    /// Builds it (offline: its base is the local image).
    pub fn build() -> OldNodeImage {
        let image = OldNodeImage {
            tag: format!("code-sandbox-mcp-test-old-node:{}", std::process::id()),
        };
        let dir = scratch("old-node-image");
        std::fs::write(
            dir.join("Dockerfile"),
            format!(
                "FROM {LOCAL_IMAGE}\nRUN printf '#!/bin/sh\\necho v18.19.0\\n' > /usr/local/bin/node && chmod 755 /usr/local/bin/node\n"
            ),
        )
        .unwrap();
        let built = Command::new("docker")
            .args(["build", "-q", "-t", &image.tag])
            .arg(&dir)
            .output()
            .expect("docker build");
        assert!(built.status.success(), "{built:?}");
        image
    }
}

impl Drop for OldNodeImage {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["image", "rm", &self.tag])
            .output();
    }
}

/// The library image for `language` (`code-sandbox-mcp image build`), built from the
/// offline image when it is missing or was built from another definition: minutes the
/// first time, about a second when it is up to date. CI builds it before the tests.
pub fn library_image(language: code_sandbox_mcp::analysis::Language) -> &'static str {
    static BUILT: std::sync::Mutex<Vec<code_sandbox_mcp::analysis::Language>> =
        std::sync::Mutex::new(Vec::new());
    let tag = code_sandbox_mcp::sandbox::images::built_image(language);
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
