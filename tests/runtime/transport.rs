//! The stdio transport under floods, with raw bytes written to the real binary's stdin
//! and with the official Python SDK: a request over the limit gets a JSON-RPC error for
//! its id and the session goes on; a line that never ends is not held; a batch gets an
//! error for each request in it; a request larger than rmcp's default 16 MiB but within
//! what the policy allows gets through; progress output that never ends its line is not
//! held. Each flood prints the server's peak memory and its descriptors (run with
//! `--nocapture` to read them), and asserts they stay bounded.

use crate::common;
use crate::common::mcp_client::{is_error, structured, RpcClient, TestImage};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;

crate::common::harness::tests! {
    current_thread an_oversize_request_gets_an_error_for_its_id_and_memory_stays_bounded;
    current_thread a_line_that_never_ends_is_not_held;
    current_thread a_batch_gets_an_error_for_each_request;
    multi_thread(2) a_progress_flood_without_line_ends_is_not_held needs common::DOCKER;
    sync the_python_sdk_sends_more_than_16_mib_and_hears_back_when_over needs common::DOCKER, crate::e2e_clients::MCP_CLIENTS;
}

/// A policy whose request limit is the least (16 MiB): small code and scratch limits.
fn small_limits_policy(dir: &Path) -> std::path::PathBuf {
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nextends: {}\nlimits:\n  code: 64KiB\n  tmpfs: 8MiB\npool:\n  size: 0\n",
            common::local_image_policy().display()
        ),
    )
    .unwrap();
    policy
}

fn spawn(policy: &Path) -> tokio::process::Child {
    tokio::process::Command::new(common::binary_path())
        .env("CODE_SANDBOX_POLICY", policy)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the binary")
}

/// (resident, peak resident) memory of `pid`, in MiB.
fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Open descriptors of `pid`.
fn descriptors_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

type Client = RpcClient<tokio::process::ChildStdout, tokio::process::ChildStdin>;

async fn started(policy: &Path) -> (tokio::process::Child, Client, u32) {
    let mut child = spawn(policy);
    let pid = child.id().unwrap();
    let mut client = RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    client.initialize().await;
    (child, client, pid)
}

async fn a_check_still_answers(client: &mut Client) {
    let checked = client
        .call_tool(
            "check_code",
            json!({"code": "print(1)", "language": "python"}),
        )
        .await;
    assert_eq!(structured(&checked)["allowed"], true, "{checked}");
}

async fn an_oversize_request_gets_an_error_for_its_id_and_memory_stays_bounded() {
    let dir = common::scratch("transport-oversize");
    let (mut child, mut client, pid) = started(&small_limits_policy(&dir)).await;
    let limit = 16 << 20;
    let (_, before) = memory_of(pid);
    let fds_before = descriptors_of(pid);
    // 40 MiB of base64 in one tools/call, with its id after the arguments.
    let content = "A".repeat(40 << 20);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"name\":\"run_python_code\",\
         \"arguments\":{{\"code\":\"print(1)\",\"files\":[{{\"path\":\"big.bin\",\"content\":\"{content}\",\
         \"encoding\":\"base64\"}}]}}}},\"id\":41}}"
    );
    drop(content);
    client.send_line(&line).await;
    let answer = client.response(41).await;
    let (_, peak) = memory_of(pid);
    let fds_after = descriptors_of(pid);
    eprintln!(
        "oversize request ({} MiB, limit 16 MiB): server peak memory {before} -> {peak} MiB, \
         descriptors {fds_before} -> {fds_after}",
        line.len() >> 20
    );
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["error"]["data"]["limit"], limit, "{answer}");
    assert_eq!(answer["error"]["data"]["size"], line.len() + 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("limits.tmpfs"), "{message}");
    // The line was never held: the peak grew by less than the line, let alone twice it.
    assert!(peak < before + 40, "peak {peak} MiB from {before} MiB");
    assert!(fds_after <= fds_before + 2, "{fds_before} -> {fds_after}");
    a_check_still_answers(&mut client).await;
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
}

async fn a_line_that_never_ends_is_not_held() {
    let dir = common::scratch("transport-endless");
    let (mut child, mut client, pid) = started(&small_limits_policy(&dir)).await;
    let (_, before) = memory_of(pid);
    let chunk = vec![b'x'; 1 << 20];
    client
        .send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"params\":\"")
        .await;
    for _ in 0..256 {
        client.send_raw(&chunk).await;
    }
    let (_, peak) = memory_of(pid);
    eprintln!("a 256 MiB line without an end: server peak memory {before} -> {peak} MiB");
    // Up to the limit (16 MiB) is held before the line is known to be too long.
    assert!(peak < before + 40, "peak {peak} MiB from {before} MiB");
    // The line ends at last: its request is answered, and the next one too.
    client.send_raw(b"\"}\n").await;
    let answer = client.response(5).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    a_check_still_answers(&mut client).await;
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
}

async fn a_batch_gets_an_error_for_each_request() {
    let dir = common::scratch("transport-batch");
    let (mut child, mut client, _) = started(&small_limits_policy(&dir)).await;
    client
        .send_line(
            r#"[{"jsonrpc":"2.0","id":101,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#,
        )
        .await;
    let line = client.next_raw_line().await.expect("an answer");
    let answers: Vec<Value> = serde_json::from_str(&line).expect("an array of answers");
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(ids, [&json!(101), &json!("b")], "{line}");
    for answer in &answers {
        assert_eq!(answer["error"]["code"], -32600, "{line}");
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("batches"));
    }
    a_check_still_answers(&mut client).await;
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
}

/// Red until the run's output filter for progress (`GuardLines` in
/// src/sandbox/protocol.rs) stops holding a line that starts with the guard's marker
/// byte past a bound: today it holds the whole line, so the second flood costs the
/// server as much memory as it writes.
async fn a_progress_flood_without_line_ends_is_not_held() {
    let image = TestImage::new("progress-flood", 0);
    let (mut child, mut client, pid) = started(&image.policy_path).await;
    // The same flood twice: first with ordinary stderr, then with a line that starts
    // with the guard's marker byte and never ends; the second may not cost more.
    let mut growth = Vec::new();
    for (first, token) in [("'y'", "plain"), ("'\\x1e'", "marker")] {
        let (_, before) = memory_of(pid);
        let fds_before = descriptors_of(pid);
        let code = format!(
            "import sys, time\nsys.stderr.write({first})\nchunk = 'x' * (1 << 20)\n\
             end = time.time() + 10\nwritten = 0\nwhile time.time() < end and written < 512:\n    \
             sys.stderr.write(chunk)\n    written += 1\nprint(written)"
        );
        let id = client
            .start_call_with_progress("run_python_code", json!({"code": code}), token)
            .await;
        let result = client.response(id).await["result"].clone();
        let (_, peak) = memory_of(pid);
        let fds_after = descriptors_of(pid);
        assert!(!is_error(&result), "{result}");
        assert_eq!(structured(&result)["truncated"], true, "{result}");
        let written = structured(&result)["stdout"]
            .as_str()
            .unwrap()
            .trim()
            .to_string();
        eprintln!(
            "progress flood, {token} ({written} MiB of stderr in one line): server peak memory \
             {before} -> {peak} MiB, descriptors {fds_before} -> {fds_after}"
        );
        growth.push(peak.saturating_sub(before));
    }
    assert!(
        growth[1] <= growth[0] + 16,
        "peak growth (MiB), plain then marker: {growth:?}"
    );
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
}

fn the_python_sdk_sends_more_than_16_mib_and_hears_back_when_over() {
    let clients = crate::e2e_clients::clients();
    let image = TestImage::new("python-sdk-transport", 0);
    let policy = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!("{policy}limits:\n  tmpfs: 32MiB\n"),
    )
    .unwrap();
    let mut command = std::process::Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/python_sdk_transport.py"))
        .arg(common::binary_path())
        .arg(&image.policy_path);
    let (ok, stdout, stderr) = crate::e2e_clients::run(command);
    eprintln!("{stdout}");
    assert!(
        ok,
        "the Python SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for scenario in [
        "ok: 20 MiB file",
        "ok: oversize refused",
        "ok: session goes on",
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
