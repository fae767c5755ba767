//! The MCP server as the real binary over its stdio: a daemon that is down, a broken
//! policy file, SIGTERM and stdout hygiene, host variables handed through, `cleanup`
//! after a SIGKILL, and a terminal on stdin.
//!
//! Tests that run code need Docker (`common::DOCKER`); container assertions use an
//! image tag of their own (`TestImage`).

use crate::common;

use crate::common::mcp_client::{is_error, structured, text_of, RpcClient, TestImage};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;

crate::common::harness::tests! {
    current_thread the_binary_starts_and_answers_while_the_daemon_is_down;
    current_thread a_bad_policy_file_is_served_and_every_call_says_what_is_wrong;
    current_thread sigterm_removes_every_container_and_exits_zero_with_only_json_rpc_on_stdout needs common::DOCKER;
    current_thread pass_through_env_hands_only_named_host_variables_to_the_sandbox needs common::DOCKER;
    multi_thread(2) cleanup_removes_what_a_killed_server_left_and_nothing_of_a_live_one needs common::DOCKER;
    multi_thread(2) the_boxes_of_a_killed_server_stop_on_their_own needs common::DOCKER;
    sync started_in_a_terminal_the_server_says_what_it_waits_for;
}

/// The binary started as an MCP client starts it: `code-sandbox-mcp` with no arguments.
fn spawn_binary(policy: &Path, extra_env: &[(&str, &str)]) -> tokio::process::Child {
    spawn_binary_with_args(&[], policy, extra_env)
}

fn spawn_binary_with_args(
    args: &[&str],
    policy: &Path,
    extra_env: &[(&str, &str)],
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_code-sandbox-mcp"));
    command
        .args(args)
        .env("CODE_SANDBOX_POLICY", policy)
        // The engine client's own debug lines are many (whole request bodies); ours are what
        // the tests read.
        .env("RUST_LOG", "debug,bollard=info,hyper=info,hyper_util=info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (key, value) in extra_env {
        command.env(key, value);
    }
    command.spawn().expect("start the binary")
}

type ProcessClient = RpcClient<tokio::process::ChildStdout, tokio::process::ChildStdin>;

fn process_client(child: &mut tokio::process::Child) -> ProcessClient {
    RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap())
}

async fn the_binary_starts_and_answers_while_the_daemon_is_down() {
    let dir = std::env::temp_dir();
    let socket = dir.join(format!("no-docker-here-{}.sock", std::process::id()));
    let host = format!("unix://{}", socket.display());
    let mut child = spawn_binary(&common::local_image_policy(), &[("DOCKER_HOST", &host)]);
    let mut client = process_client(&mut child);
    let info = client.initialize().await;
    assert!(info["capabilities"]["tools"].is_object(), "{info}");
    let result = client
        .call_tool("run_python_code", json!({"code": "print(1)"}))
        .await;
    assert!(is_error(&result), "{result}");
    assert_eq!(structured(&result)["status"], "engine_error", "{result}");
    let result = client
        .call_tool(
            "check_code",
            json!({"code": "print(1)", "language": "python"}),
        )
        .await;
    assert!(!is_error(&result), "checking needs no daemon: {result}");
    client.close_input().await;
    let status = child.wait().await.unwrap();
    assert!(status.success(), "exit status {status}");
}

async fn a_bad_policy_file_is_served_and_every_call_says_what_is_wrong() {
    let dir = common::scratch("bad-policy-serve");
    let policy = dir.join(".code-sandbox.yaml");
    std::fs::write(
        &policy,
        "version: 1\nlimits:\n  memory: 512MB\n  timeout: 30 s\nnetwork: host\n",
    )
    .unwrap();
    let mut child = spawn_binary(&policy, &[]);
    let mut client = process_client(&mut child);
    let info = client.initialize().await;
    let instructions = info["instructions"].as_str().unwrap_or_default();
    // All three errors, each with its line, column and key; never the absolute path.
    for error in [
        ".code-sandbox.yaml:3:11: limits.memory",
        ".code-sandbox.yaml:4:12: limits.timeout",
        ".code-sandbox.yaml:5:10: network",
    ] {
        assert!(instructions.contains(error), "{error} in {instructions}");
    }
    assert!(
        !instructions.contains(dir.to_str().unwrap()),
        "{instructions}"
    );
    let tools = client.request("tools/list", json!({})).await;
    for tool in tools["result"]["tools"].as_array().unwrap() {
        let description = tool["description"].as_str().unwrap();
        assert!(description.contains("limits.memory"), "{tool}");
    }
    let run = client
        .call_tool("run_python_code", json!({"code": "print(1)"}))
        .await;
    assert!(is_error(&run), "{run}");
    assert_eq!(structured(&run)["status"], "policy_error", "{run}");
    assert!(
        text_of(&run).contains("network: unknown variant `host`"),
        "{run}"
    );
    for (tool, arguments) in [
        (
            "check_code",
            json!({"code": "print(1)", "language": "python"}),
        ),
        ("end_session", json!({"session": "s"})),
    ] {
        let result = client.call_tool(tool, arguments).await;
        assert!(is_error(&result), "{result}");
        assert!(text_of(&result).contains("limits.timeout"), "{result}");
    }
    client.close_input().await;
    let status = child.wait().await.unwrap();
    assert!(status.success(), "exit status {status}");
}

async fn sigterm_removes_every_container_and_exits_zero_with_only_json_rpc_on_stdout() {
    let image = TestImage::new("sigterm", 2);
    let mut child = spawn_binary(&image.policy_path, &[]);
    let mut client = process_client(&mut child);
    client.initialize().await;
    let result = client
        .call_tool("run_python_code", json!({"code": "print('hi')"}))
        .await;
    assert_eq!(structured(&result)["stdout"], "hi\n", "{result}");
    // A run in flight when the signal comes is killed too.
    client
        .start_request("tools/call", json!({"name": "run_python_code", "arguments": {"code": "import time\ntime.sleep(600)"}}))
        .await;
    image.wait_for_containers(|c| !c.is_empty()).await;
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().await.unwrap();
    assert!(status.success(), "exit status {status}");
    // Every line left on stdout is JSON-RPC too (next_message asserts it).
    while client.next_message().await.is_some() {}
    let mut stderr = String::new();
    use tokio::io::AsyncReadExt;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    assert!(stderr.contains("SIGTERM"), "logs go to stderr: {stderr}");
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

async fn pass_through_env_hands_only_named_host_variables_to_the_sandbox() {
    let image = TestImage::new("env", 0);
    let policy = image.policy_path.to_str().unwrap().to_string();
    let mut child = spawn_binary_with_args(
        &[
            "serve",
            "--policy",
            &policy,
            "--pass-through-env",
            "SANDBOX_SECRET,SANDBOX_NOT_SET_ON_HOST",
        ],
        // The environment variable names another file; --policy wins.
        Path::new("/nonexistent/policy.yaml"),
        &[("SANDBOX_SECRET", "s3cret"), ("SANDBOX_NOT_PASSED", "x")],
    );
    let mut client = process_client(&mut child);
    client.initialize().await;
    let tools = client.request("tools/list", json!({})).await;
    let description = tools["result"]["tools"][2]["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(description.contains("SANDBOX_SECRET"), "{description}");
    assert!(
        !description.contains("s3cret"),
        "values stay out: {description}"
    );
    let code =
        "import os\nprint(os.environ.get('SANDBOX_SECRET'), os.environ.get('SANDBOX_NOT_PASSED'))";
    let result = client
        .call_tool("run_python_code", json!({"code": code}))
        .await;
    assert_eq!(structured(&result)["stdout"], "s3cret None\n", "{result}");
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
    let mut stderr = String::new();
    use tokio::io::AsyncReadExt;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    assert!(
        stderr.contains("SANDBOX_NOT_SET_ON_HOST"),
        "a missing variable is logged: {stderr}"
    );
    assert!(image.containers().is_empty());
}

async fn cleanup_removes_what_a_killed_server_left_and_nothing_of_a_live_one() {
    let killed = TestImage::new("cleanup-killed", 2);
    // With an allowlist, so that it also leaves its egress socket's folder.
    let text = std::fs::read_to_string(&killed.policy_path).unwrap();
    std::fs::write(
        &killed.policy_path,
        format!("{text}network:\n  allow: [\"localhost:1\"]\n"),
    )
    .unwrap();
    let live = TestImage::new("cleanup-live", 1);
    let mut victim = spawn_binary(&killed.policy_path, &[]);
    let victim_pid = victim.id().unwrap();
    // Under /dev/shm where it is a folder, else the temporary directory.
    let socket_folders = || -> Vec<std::path::PathBuf> {
        [std::path::PathBuf::from("/dev/shm"), std::env::temp_dir()]
            .iter()
            .filter_map(|base| std::fs::read_dir(base).ok())
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                std::fs::read_to_string(path.join("owner.json")).is_ok_and(|owner| {
                    owner.contains(&format!("\"code-sandbox-mcp.pid\":\"{victim_pid}\""))
                })
            })
            .collect()
    };
    let mut survivor = spawn_binary(&live.policy_path, &[]);
    let mut victim_client = process_client(&mut victim);
    let mut survivor_client = process_client(&mut survivor);
    victim_client.initialize().await;
    survivor_client.initialize().await;
    let left = killed.wait_for_containers(|now| now.len() >= 2).await;
    assert!(left.len() >= 2, "the pool filled: {left:?}");
    live.wait_for_containers(|now| !now.is_empty()).await;
    assert_eq!(
        socket_folders().len(),
        1,
        "the killed server's socket folder"
    );
    // SIGKILL: no chance to remove anything.
    victim.kill().await.unwrap();
    // Nothing was removed (the pool may have been making one more at that moment).
    let after = killed.containers();
    assert!(
        left.iter().all(|id| after.contains(id)),
        "{left:?} / {after:?}"
    );

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_code-sandbox-mcp"))
        .args(["cleanup", "--policy"])
        .arg(&killed.policy_path)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let removed: usize = stdout
        .strip_prefix("removed ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(removed >= left.len(), "{stdout}");
    assert!(killed.containers().is_empty(), "{:?}", killed.containers());
    assert!(socket_folders().is_empty(), "{:?}", socket_folders());
    // The live server's warm container is its own business.
    assert!(
        !live.containers().is_empty(),
        "a live server's container was removed"
    );
    survivor_client.close_input().await;
    assert!(survivor.wait().await.unwrap().success());
}

fn started_in_a_terminal_the_server_says_what_it_waits_for() {
    // `script` gives the server a terminal as its stdin; our stdin's end (null) ends it.
    let command = format!(
        "{} --policy {}",
        env!("CARGO_BIN_EXE_code-sandbox-mcp"),
        common::local_image_policy().display()
    );
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .stdin(Stdio::null())
        .output()
        .expect("run script(1)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("code-sandbox-mcp is an MCP server: it now waits for JSON-RPC messages"),
        "{text}"
    );
    // Not in a terminal (every other test), nothing of the kind is said.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_code-sandbox-mcp"))
        .args(["--policy", "default"])
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    child.wait().unwrap();
    assert!(!stderr.contains("waits for JSON-RPC"), "{stderr}");
}

/// A server killed with SIGKILL removes nothing; its boxes end themselves, because the
/// engine closes a box's input when its attached client goes and the box's supervisor
/// takes that as the server's end. A session's box, with a program still running in
/// it, stops as a warm one does; only the stopped boxes are left for `cleanup` (or the
/// next server's sweep) to remove.
async fn the_boxes_of_a_killed_server_stop_on_their_own() {
    let image = TestImage::new("killed-server-boxes", 1);
    let mut server = spawn_binary(&image.policy_path, &[]);
    let mut client = process_client(&mut server);
    client.initialize().await;
    let opened = client
        .call_tool(
            "run_python_code",
            json!({"code": "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=False).start()\nprint('open')", "session": "left-open"}),
        )
        .await;
    assert!(text_of(&opened).contains("open"), "{opened}");
    let boxes = image.wait_for_containers(|now| now.len() >= 2).await;
    assert!(boxes.len() >= 2, "a session box and a warm one: {boxes:?}");
    let running = |ids: &[String]| -> Vec<String> {
        ids.iter()
            .filter(|id| {
                let out = std::process::Command::new("docker")
                    .args(["inspect", "--format", "{{.State.Running}}", id])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).trim() == "true"
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        running(&boxes).len(),
        boxes.len(),
        "all running before the kill"
    );
    server.kill().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !running(&boxes).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        running(&boxes).is_empty(),
        "still running a minute after their server died: {:?}",
        running(&boxes)
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_code-sandbox-mcp"))
        .args(["cleanup", "--policy"])
        .arg(&image.policy_path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(image.containers().is_empty(), "{:?}", image.containers());
}
