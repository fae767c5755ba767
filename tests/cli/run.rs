//! `code-sandbox-mcp run` as a process: the policy check first, then the run, with the
//! snippet's output and exit code passed through (or one JSON object), and exit codes
//! 1 (denied), 2 (bad input), 125 (no engine), 128+N (killed by a signal).

use crate::common::{self, binary, text};
use std::process::{Command, Output};
use std::time::Duration;

crate::common::harness::tests! {
    sync text_format_passes_output_and_the_exit_code_through needs common::DOCKER;
    sync text_format_prints_output_as_it_comes_and_only_once needs common::DOCKER;
    sync json_format_prints_the_whole_result needs common::DOCKER;
    sync a_denial_prints_the_findings_and_runs_nothing;
    sync warnings_are_printed_and_the_run_goes_ahead needs common::DOCKER;
    sync bad_input_is_a_usage_error;
    sync an_unreachable_engine_says_which_socket_and_exits_125;
    sync the_engine_flag_overrides_the_policy;
    sync a_timeout_kills_the_run needs common::DOCKER;
    sync sigterm_kills_the_run_and_removes_its_container needs common::DOCKER;
    sync files_a_run_writes_are_listed_in_json_and_named_in_text needs common::DOCKER;
    sync a_socket_that_refuses_the_user_says_permission_and_the_fix needs common::DOCKER;
    sync the_original_servers_variables_take_effect needs common::DOCKER;
}

/// `run ARGS… --policy tests/policies/local-image.yaml` with `stdin` as input.
fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_with(binary(), args, stdin)
}

fn run_with(mut command: Command, args: &[&str], stdin: &[u8]) -> Output {
    command
        .arg("run")
        .args(args)
        .arg("--policy")
        .arg(common::local_image_policy());
    common::spawn_with_input(command, stdin)
        .wait_with_output()
        .unwrap()
}

/// `run - --language python` with `code` on stdin, left running.
fn spawn_python(code: &[u8]) -> std::process::Child {
    let mut command = binary();
    command
        .args(["run", "-", "--language", "python", "--policy"])
        .arg(common::local_image_policy());
    common::spawn_with_input(command, code)
}

fn text_format_passes_output_and_the_exit_code_through() {
    let file = common::scratch_file(
        "exit5.py",
        b"import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(5)\n",
    );
    let output = run(&[file.to_str().unwrap()], b"");
    assert_eq!(text(&output.stdout), "to stdout\n");
    assert_eq!(text(&output.stderr), "to stderr\n");
    assert_eq!(output.status.code(), Some(5));
}

fn text_format_prints_output_as_it_comes_and_only_once() {
    let mut child =
        spawn_python(b"import time\nprint('first', flush=True)\ntime.sleep(3)\nprint('second')\n");
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert_eq!(first, "first\n");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first line came while the program was still running"
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert_eq!(rest, "second\n", "nothing is printed twice");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

fn json_format_prints_the_whole_result() {
    let output = run(
        &["-", "--language", "javascript", "--format", "json"],
        b"console.log('hi'); console.error('there');",
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(result["stdout"], "hi\n");
    assert_eq!(result["stderr"], "there\n");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["timed_out"], false);
    assert_eq!(result["oom_killed"], false);
    assert_eq!(result["truncated"], false);
    assert_eq!(result["denied"], false);
    assert_eq!(result["language"], "javascript");
    assert!(result["duration_ms"].is_u64());
    assert!(result["findings"].as_array().unwrap().is_empty());
    // Named relative to the project, never by the absolute host path it was given as.
    assert_eq!(result["policy"], "tests/policies/local-image.yaml");
}

fn a_denial_prints_the_findings_and_runs_nothing() {
    // The check comes before the engine is contacted, so no engine is needed, and an
    // unreachable one proves nothing was sent to it.
    let mut command = binary();
    command.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let output = run_with(
        command,
        &["-", "--language", "javascript"],
        b"console.log('ran');\nconst { execSync } = require('child_process');\nexecSync('ls');\n",
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("-:2:") && l.contains(": process-exec [deny] ")),
        "findings as path:line:col: rule [deny] message lines: {stderr}"
    );
    assert!(stderr.contains("nothing was run"), "{stderr}");
    assert!(!stderr.contains("cannot reach"), "{stderr}");
}

fn warnings_are_printed_and_the_run_goes_ahead() {
    let output = run(
        &["-", "--language", "javascript"],
        b"if (process.argv.length > 99) fetch('http://example.com');\nconsole.log('ran');\n",
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(text(&output.stdout), "ran\n");
    let stderr = text(&output.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("-:1:") && l.contains(": network [warn] ")),
        "{stderr}"
    );
}

fn bad_input_is_a_usage_error() {
    // Standard input needs a language.
    let output = run(&["-"], b"print(1)");
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--language"));

    // Not UTF-8.
    let output = run(&["-", "--language", "python"], b"print('\xff')");
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("not valid UTF-8"));

    // Over limits.code.
    let policy = common::scratch_file(
        "small-code.yaml",
        b"version: 1\nextends: default\nlimits: { code: 1KiB }\nimages: { python: code-sandbox-mcp-runtime:trixie, javascript: code-sandbox-mcp-runtime:trixie }\n",
    );
    let big = common::scratch_file("big.py", &[b'#'; 2048]);
    let output = binary()
        .args(["run", big.to_str().unwrap(), "--policy"])
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("limits.code"),
        "{}",
        text(&output.stderr)
    );
    let output = binary()
        .args(["run", "-", "--language", "python", "--policy"])
        .arg(&policy)
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("limits.code"),
        "{}",
        text(&output.stderr)
    );

    // Unknown extension, no --language.
    let file = common::scratch_file("notes.txt", b"print(1)");
    let output = run(&[file.to_str().unwrap()], b"");
    assert_eq!(output.status.code(), Some(2));
}

fn an_unreachable_engine_says_which_socket_and_exits_125() {
    let mut command = binary();
    command.env("DOCKER_HOST", "unix:///nonexistent/docker.sock");
    let output = run_with(command, &["-", "--language", "python"], b"print(1)");
    assert_eq!(output.status.code(), Some(125));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unix:///nonexistent/docker.sock"),
        "{stderr}"
    );
    assert!(stderr.contains("start Docker"), "{stderr}");
}

fn the_engine_flag_overrides_the_policy() {
    let mut command = binary();
    command
        .env("XDG_RUNTIME_DIR", "/nonexistent-runtime-dir")
        .env_remove("CONTAINER_HOST");
    let output = run_with(
        command,
        &["-", "--language", "python", "--engine", "podman"],
        b"print(1)",
    );
    if std::path::Path::new("/run/podman/podman.sock").exists() {
        return; // a real Podman answers here
    }
    assert_eq!(output.status.code(), Some(125));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("/nonexistent-runtime-dir/podman/podman.sock"),
        "{stderr}"
    );
    assert!(stderr.contains("engine: podman"), "{stderr}");

    let output = run(
        &["-", "--language", "python", "--engine", "lxc"],
        b"print(1)",
    );
    assert_eq!(output.status.code(), Some(2));
}

fn a_timeout_kills_the_run() {
    let output = run(
        &["-", "--language", "python", "--timeout", "1"],
        b"import time\nprint('started', flush=True)\ntime.sleep(600)\n",
    );
    assert_eq!(output.status.code(), Some(137));
    assert_eq!(text(&output.stdout), "started\n");
    assert!(text(&output.stderr).contains("wall-clock limit"));
}

fn sigterm_kills_the_run_and_removes_its_container() {
    let child = spawn_python(b"import time\nprint('started', flush=True)\ntime.sleep(600)\n");
    let pid = child.id();
    let ours = || common::containers_labelled(&format!("code-sandbox-mcp.pid={pid}")).len();
    // Wait until its container exists (bounded), then ask it to stop.
    for _ in 0..300 {
        if ours() > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ours(), 1, "the run's container exists");
    std::thread::sleep(Duration::from_millis(300));
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(143), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("interrupted"));
    assert_eq!(ours(), 0, "no container left");
}

fn files_a_run_writes_are_listed_in_json_and_named_in_text() {
    let code = b"open('table.csv', 'w').write('a,b\\n1,2\\n')\nprint('done')\n";
    let output = run(&["-", "--language", "python", "--format", "json"], code);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        json["files"],
        serde_json::json!([{"path": "table.csv", "size": 8, "mime_type": "text/csv"}]),
        "{json}"
    );
    let output = run(&["-", "--language", "python"], code);
    assert_eq!(text(&output.stdout), "done\n");
    assert!(
        text(&output.stderr)
            .contains("[file table.csv (8 bytes); set the policy's outputs.export to keep it]"),
        "{}",
        text(&output.stderr)
    );
}

/// A user the engine's socket refuses is told so, and how to fix it, rather than to
/// start an engine that is running.
fn a_socket_that_refuses_the_user_says_permission_and_the_fix() {
    let root = Command::new("id").arg("-u").output().unwrap();
    if text(&root.stdout).trim() != "0" {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI runs as root, which this test needs"
        );
        eprintln!("\n!!!!!!!! SKIPPING: switching to an unprivileged user needs root !!!!!!!!\n");
        return;
    }
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(common::binary_path())
        .env_remove("DOCKER_HOST")
        .env_remove("XDG_RUNTIME_DIR")
        .env("HOME", "/nonexistent");
    let output = run_with(command, &["-", "--language", "python"], b"print(1)\n");
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("unix:///var/run/docker.sock (docker): permission denied"),
        "{stderr}"
    );
    assert!(stderr.contains("usermod -aG docker"), "{stderr}");
    assert!(!stderr.contains("systemctl start docker"), "{stderr}");
}

/// The original code-sandbox-mcp's variables, as its users' client configurations set
/// them, take effect over the policy.
fn the_original_servers_variables_take_effect() {
    let code = b"import sys\nprint(sys.version_info[:2] >= (3, 13))\n";
    // CONTAINER_IMAGE: the image for the run (the default policy would choose another).
    let mut command = binary();
    command
        .args(["run", "-", "--language", "python", "--policy", "default"])
        .env("CONTAINER_IMAGE", common::LOCAL_IMAGE)
        .env("VERBOSE", "1");
    let output = common::spawn_with_input(command, code)
        .wait_with_output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(text(&output.stdout), "True\n", "{stderr}");
    // VERBOSE: debug lines on stderr, naming the image used.
    assert!(stderr.contains("DEBUG"), "{stderr}");
    assert!(stderr.contains(common::LOCAL_IMAGE), "{stderr}");

    // BACKEND=podman: only Podman's sockets are tried (none here).
    let mut command = binary();
    command
        .args(["run", "-", "--language", "python", "--policy", "default"])
        .env("BACKEND", "podman")
        .env_remove("CONTAINER_HOST");
    let output = common::spawn_with_input(command, code)
        .wait_with_output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("engine: podman"), "{stderr}");
    assert!(!stderr.contains("docker.sock"), "{stderr}");

    let mut command = binary();
    command
        .args(["run", "-", "--language", "python"])
        .env("BACKEND", "lxc");
    let output = common::spawn_with_input(command, code)
        .wait_with_output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("$BACKEND: `lxc` is not a container engine"),
        "{}",
        text(&output.stderr)
    );
}
