//! The real binary driven by MCP clients nobody here wrote: the official MCP Python SDK,
//! fastmcp (the README's example, run as written) and the MCP Inspector's CLI mode.
//!
//! The clients are installed by scripts/install-test-clients.sh (under target/), which
//! this test runs when they are missing. When they cannot be installed the tests are
//! reported ignored (tests/common/harness.rs), except with CI=true, where that is a
//! failure. Each test's policy uses an image tag of its own, so "no container left"
//! means this test's containers only.

use crate::common;

use crate::common::mcp_client::TestImage;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

crate::common::harness::tests! {
    sync the_official_python_sdk_drives_both_run_tools_a_denial_a_timeout_cancellation_and_a_session needs common::DOCKER, MCP_CLIENTS;
    sync the_official_python_sdk_receives_a_plot_a_file_and_the_environments needs common::DOCKER, MCP_CLIENTS;
    sync the_wheel_installs_a_command_that_the_python_sdk_drives needs common::DOCKER, MCP_CLIENTS;
    sync a_person_approves_ask_code_through_the_python_sdks_elicitation needs common::DOCKER, MCP_CLIENTS;
    sync the_fastmcp_readme_example_runs_as_written needs common::DOCKER, MCP_CLIENTS;
    sync the_inspector_cli_lists_the_tools_runs_code_and_sees_a_denial needs common::DOCKER, MCP_CLIENTS;
}

/// How long one client run may take before it is killed (a hang guard, not a timing
/// assertion).
const CLIENT_LIMIT: Duration = Duration::from_secs(600);

pub(crate) struct Clients {
    /// The venv's Python, with `mcp` and `fastmcp`.
    pub(crate) python: PathBuf,
    /// The Inspector's launcher (`mcp-inspector`).
    inspector: PathBuf,
    /// maturin, which builds the wheel.
    maturin: PathBuf,
    /// uv's `uvx`, which runs a command from a wheel without installing it anywhere.
    uvx: PathBuf,
}

fn clients_dir() -> PathBuf {
    std::env::var_os("CODE_SANDBOX_TEST_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::root().join("target/test-clients"))
}

fn installed() -> Option<Clients> {
    let dir = clients_dir();
    let clients = Clients {
        python: dir.join("venv/bin/python"),
        inspector: dir.join("node/node_modules/.bin/mcp-inspector"),
        maturin: dir.join("venv/bin/maturin"),
        uvx: dir.join("venv/bin/uvx"),
    };
    let python_ok = Command::new(&clients.python)
        .args(["-c", "import mcp, fastmcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let tools = [&clients.inspector, &clients.maturin, &clients.uvx];
    (python_ok && tools.iter().all(|tool| tool.exists())).then_some(clients)
}

/// The MCP test clients, installed by scripts/install-test-clients.sh when missing.
pub(crate) static MCP_CLIENTS: common::harness::Prerequisite = common::harness::Prerequisite {
    name: "the MCP test clients (scripts/install-test-clients.sh)",
    prepare: || {
        clients_installed()
            .as_ref()
            .map(|_| ())
            .map_err(Clone::clone)
    },
};

/// The installed clients, installing them once per test process if needed, or why
/// they cannot be had here.
fn clients_installed() -> &'static Result<Clients, String> {
    static CLIENTS: OnceLock<Result<Clients, String>> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        if let Some(clients) = installed() {
            return Ok(clients);
        }
        let output = Command::new("bash")
            .arg(common::root().join("scripts/install-test-clients.sh"))
            .output()
            .map_err(|e| format!("cannot run scripts/install-test-clients.sh: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!(
                "scripts/install-test-clients.sh failed ({}): {last}",
                output.status
            ));
        }
        installed()
            .ok_or_else(|| "the clients are still missing after the install script".to_string())
    })
}

/// The installed clients, for a test that declares [`MCP_CLIENTS`].
pub(crate) fn clients() -> &'static Clients {
    match clients_installed() {
        Ok(clients) => clients,
        Err(reason) => panic!("the MCP test clients are unavailable: {reason}"),
    }
}

/// Runs `command` to completion (killing it past `CLIENT_LIMIT`); returns (success,
/// stdout, stderr).
pub(crate) fn run(mut command: Command) -> (bool, String, String) {
    let dir = tempdir("client-output");
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > CLIENT_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    match status {
        Some(status) => (status.success(), stdout, stderr),
        None => panic!(
            "{command:?} did not finish in {CLIENT_LIMIT:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        ),
    }
}

fn tempdir(name: &str) -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "code-sandbox-mcp-e2e-{name}-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn the_official_python_sdk_drives_both_run_tools_a_denial_a_timeout_cancellation_and_a_session() {
    let clients = clients();
    // No warm pool, so that the script can watch the cancelled run's container go.
    let image = TestImage::new("python-sdk", 0);
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/python_sdk_client.py"))
        .arg(common::binary_path())
        .arg(&image.policy_path)
        .arg(&image.tag);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the Python SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for scenario in [
        "ok: tools/list",
        "ok: run_python_code",
        "ok: run_javascript_code",
        "ok: denial",
        "ok: timeout",
        "ok: cancellation",
        "ok: session",
        "ok: session closed",
    ] {
        assert!(
            stdout.contains(scenario),
            "`{scenario}` missing:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

fn the_official_python_sdk_receives_a_plot_a_file_and_the_environments() {
    let clients = clients();
    let base = common::library_image(code_sandbox_mcp::analysis::Language::Python);
    let image = TestImage::of(base, "python-sdk-plot", 0);
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/python_sdk_plot.py"))
        .arg(common::binary_path())
        .arg(&image.policy_path);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the Python SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for scenario in [
        "ok: image content",
        "ok: embedded resource",
        "ok: environments resource",
    ] {
        assert!(
            stdout.contains(scenario),
            "`{scenario}` missing:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    assert!(image.containers().is_empty(), "{:?}", image.containers());
}

/// The wheel in target/wheels (maturin's bin bindings): .ci/run builds it before the
/// tests, so that no build swaps the binary under the tests running meanwhile;
/// elsewhere a missing one is built here.
fn wheel(clients: &Clients) -> PathBuf {
    let dir = common::root().join("target/wheels");
    let find = || {
        std::fs::read_dir(&dir).ok().and_then(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .find(|path| {
                    path.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|name| {
                            name.starts_with(&format!(
                                "code_sandbox_mcp_server-{}-",
                                env!("CARGO_PKG_VERSION")
                            )) && name.ends_with(".whl")
                        })
                })
        })
    };
    if let Some(wheel) = find() {
        return wheel;
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "CI=true and no wheel in target/wheels: .ci/run builds it before the tests"
    );
    let output = Command::new(&clients.maturin)
        .args(["build", "--profile", "dev", "--out"])
        .arg(&dir)
        .current_dir(common::root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "maturin build: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    find().expect("the wheel maturin built")
}

fn the_wheel_installs_a_command_that_the_python_sdk_drives() {
    let clients = clients();
    let wheel = wheel(clients);
    // A fresh venv, the wheel alone (no index): what `pip install code-sandbox-mcp-server`
    // does.
    let venv = tempdir("wheel-venv");
    let created = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--no-index", "--no-deps"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "pip install: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let command = venv.join("bin/code-sandbox-mcp");
    let expected = format!("code-sandbox-mcp {}", env!("CARGO_PKG_VERSION"));
    let version = Command::new(&command).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), expected);
    // `uvx --from code-sandbox-mcp-server code-sandbox-mcp`, as a client configuration
    // would start it (from the wheel here: it is on no index).
    let uvx = Command::new(&clients.uvx)
        .args(["--offline", "--from"])
        .arg(&wheel)
        .args(["code-sandbox-mcp", "--version"])
        .env("UV_CACHE_DIR", venv.join("uv-cache"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&uvx.stdout).trim(),
        expected,
        "{}",
        String::from_utf8_lossy(&uvx.stderr)
    );
    // The whole SDK scenario, against the installed command.
    let image = TestImage::new("wheel", 0);
    let mut client = Command::new(&clients.python);
    client
        .arg(common::root().join("tests/e2e/python_sdk_client.py"))
        .arg(&command)
        .arg(&image.policy_path)
        .arg(&image.tag);
    let (ok, stdout, stderr) = run(client);
    let _ = std::fs::remove_dir_all(&venv);
    assert!(
        ok,
        "the SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("ok: session closed"), "{stdout}");
    assert!(image.containers().is_empty(), "{:?}", image.containers());
}

fn a_person_approves_ask_code_through_the_python_sdks_elicitation() {
    let clients = clients();
    let image = TestImage::new("approval", 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    let dir = image.policy_path.parent().unwrap().to_path_buf();
    std::fs::write(
        &image.policy_path,
        format!("{text}audit: {{ path: audit.jsonl }}\nrules:\n  - {{ id: process-exec, action: ask }}\n"),
    )
    .unwrap();
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/python_sdk_approval.py"))
        .arg(common::binary_path())
        .arg(&image.policy_path);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for scenario in [
        "ok: approved once, and asked again",
        "ok: not run after decline",
        "ok: not run after cancel",
        "ok: not run after accept",
        "ok: the question shows every line, escaped, and the files",
        "ok: a client without elicitation is refused",
    ] {
        assert!(
            stdout.contains(scenario),
            "`{scenario}` missing:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    // The audit log has the asking and its answers.
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let phases: Vec<String> = log
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["phase"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        phases,
        [
            "completed",
            "completed",
            "declined",
            "declined",
            "declined",
            "declined",
            "declined"
        ],
        "{log}"
    );
    assert!(image.containers().is_empty(), "{:?}", image.containers());
}

fn the_fastmcp_readme_example_runs_as_written() {
    let clients = clients();
    let image = TestImage::new("fastmcp", 1);
    let bin_dir = common::binary_path().parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/fastmcp_example.py"))
        .env("PATH", path)
        .env("CODE_SANDBOX_POLICY", &image.policy_path);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the fastmcp example failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("tools: check_code, end_session, run_javascript_code, run_python_code"),
        "{stdout}"
    );
    assert!(stdout.contains("stdout: 6"), "{stdout}");
    assert!(stdout.contains("exit code: 0"), "{stdout}");
    assert!(stdout.contains("denied: True"), "{stdout}");
    assert!(stdout.contains("process-exec"), "{stdout}");
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

/// One Inspector CLI call against a fresh server process; returns its JSON output.
fn inspector(clients: &Clients, policy: &Path, args: &[&str]) -> serde_json::Value {
    let mut command = Command::new(&clients.inspector);
    command
        .arg("--cli")
        .arg("-e")
        .arg(format!("CODE_SANDBOX_POLICY={}", policy.display()))
        .arg(common::binary_path())
        .args(args);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "mcp-inspector --cli {args:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the Inspector printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

fn the_inspector_cli_lists_the_tools_runs_code_and_sees_a_denial() {
    let clients = clients();
    let image = TestImage::new("inspector", 2);
    let policy = &image.policy_path;

    let tools = inspector(clients, policy, &["--method", "tools/list"]);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "check_code",
            "end_session",
            "run_javascript_code",
            "run_python_code"
        ],
        "{tools}"
    );

    let call = |tool: &str, args: &[&str]| {
        let mut all = vec!["--method", "tools/call", "--tool-name", tool];
        for arg in args {
            all.push("--tool-arg");
            all.push(arg);
        }
        inspector(clients, policy, &all)
    };
    let result = call("run_python_code", &["code=print(2 ** 10)", "timeout=20"]);
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["stdout"], "1024\n", "{result}");

    let result = call("run_javascript_code", &["code=console.log(typeof require)"]);
    assert_eq!(
        result["structuredContent"]["stdout"], "function\n",
        "{result}"
    );

    let result = call(
        "run_javascript_code",
        &["code=require('child_process').execSync('id')"],
    );
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["status"], "denied", "{result}");
    assert_eq!(
        result["structuredContent"]["findings"][0]["rule"], "process-exec",
        "{result}"
    );

    let result = call("check_code", &["code=eval('1')", "language=javascript"]);
    assert_eq!(result["structuredContent"]["allowed"], false, "{result}");

    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}
