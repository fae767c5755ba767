//! What a client pays for the tool list: `tools/list` is answered without waiting for
//! any container, fits in 8 KiB with the library images' packages named, and names
//! them from the first listing once an earlier server has probed the images (the probe
//! is kept on disk per image id). How soon it comes is a benchmark's number, not a
//! test's: benches/tools-list.py.

use crate::common;
use crate::common::mcp_client::RpcClient;
use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::sandbox::environment_cache::CACHE_DIR_VAR;
use serde_json::json;
use std::path::Path;
use std::process::Stdio;

crate::common::harness::tests! {
    multi_thread(2) the_tool_list_fits_in_8_kib_and_names_the_packages_once_probed needs common::DOCKER;
}

/// The limit the issue sets for the whole `tools/list` answer.
const TOOL_LIST_LIMIT: usize = 8 * 1024;

type ProcessClient = RpcClient<tokio::process::ChildStdout, tokio::process::ChildStdin>;

fn spawn(policy: &Path, cache: &Path) -> (tokio::process::Child, ProcessClient) {
    let mut child = tokio::process::Command::new(common::binary_path())
        .env("CODE_SANDBOX_POLICY", policy)
        .env(CACHE_DIR_VAR, cache)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the binary");
    let client = RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    (child, client)
}

/// The `tools/list` answer, its size as sent (compact JSON), and the run tools'
/// descriptions.
async fn list(client: &mut ProcessClient) -> (usize, String, String) {
    let answer = client.request("tools/list", json!({})).await;
    let size = serde_json::to_string(&answer).unwrap().len();
    let description = |name: &str| -> String {
        answer["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|tool| tool["name"] == name))
            .and_then(|tool| tool["description"].as_str())
            .unwrap_or_else(|| panic!("no {name} in {answer}"))
            .to_string()
    };
    (
        size,
        description("run_python_code"),
        description("run_javascript_code"),
    )
}

async fn the_tool_list_fits_in_8_kib_and_names_the_packages_once_probed() {
    let (python, javascript) = (
        common::library_image(Language::Python),
        common::library_image(Language::JavaScript),
    );
    let dir = common::scratch("tools-list");
    let cache = dir.join("cache");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nextends: default\nimages:\n  python: \"{python}\"\n  javascript: \"{javascript}\"\npool:\n  size: 1\n"
        ),
    )
    .unwrap();

    // A machine that never ran the server: the list comes at once, naming the images
    // but not their packages, and is announced as changed once the warm-up probed them.
    let (mut child, mut client) = spawn(&policy, &cache);
    let info = client.initialize().await;
    assert_eq!(info["capabilities"]["tools"]["listChanged"], true, "{info}");
    let (size, python_text, _) = list(&mut client).await;
    assert!(size <= TOOL_LIST_LIMIT, "{size} bytes");
    assert!(
        python_text.contains(&format!("Image {python}")),
        "{python_text}"
    );
    assert!(
        !python_text.contains("numpy"),
        "not probed yet: {python_text}"
    );
    client
        .notification(|n| n["method"] == "notifications/tools/list_changed")
        .await;
    let (size, python_text, javascript_text) = list(&mut client).await;
    assert!(
        size <= TOOL_LIST_LIMIT,
        "{size} bytes with the packages named"
    );
    assert!(python_text.contains("numpy"), "{python_text}");
    assert!(javascript_text.contains("lodash"), "{javascript_text}");
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
    let kept: Vec<_> = std::fs::read_dir(cache.join("environments"))
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(kept.len(), 2, "one probe per image id: {kept:?}");

    // The next server names them in its first answer, from the cache.
    let (mut child, mut client) = spawn(&policy, &cache);
    client.initialize().await;
    let (size, python_text, javascript_text) = list(&mut client).await;
    assert!(size <= TOOL_LIST_LIMIT, "{size} bytes");
    assert!(
        python_text.contains("numpy"),
        "from the cache: {python_text}"
    );
    assert!(javascript_text.contains("lodash"), "{javascript_text}");
    // The description's claims about installing hold under this policy.
    assert!(
        python_text.contains("Code cannot install packages"),
        "{python_text}"
    );
    client.close_input().await;
    assert!(child.wait().await.unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
