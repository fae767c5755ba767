//! What a box can learn of the host from its mount table (`/proc/self/mountinfo`),
//! against the real engine: the egress proxy's socket comes from a folder whose path
//! names neither the user nor a temporary directory, and no path of the project, the
//! server's working directory or its home shows unless the policy mounts it. What
//! remains (the engine's own data folder; a `mounts:` source under runc) is printed, and
//! gVisor is checked to show none of it (docs/security.md lists the measurement).

use crate::common;
use crate::common::mcp_client::{structured, InProcess, TestImage};
use serde_json::json;
use std::path::Path;

crate::common::harness::tests! {
    multi_thread(2) the_mount_table_shows_no_project_home_or_temporary_path needs common::DOCKER;
    multi_thread(2) under_gvisor_a_mounted_folder_s_path_is_hidden_too needs common::DOCKER, common::GVISOR;
}

/// The box's mount table, read by a run of the server with `policy_text`.
async fn mount_table(project: &Path, policy_text: &str) -> String {
    let policy = project.join(".code-sandbox.yaml");
    std::fs::write(&policy, policy_text).unwrap();
    let mut server = InProcess::start(&policy, Vec::new()).await;
    let result = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "print(open('/proc/self/mountinfo').read())"}),
        )
        .await;
    server.close().await;
    let table = structured(&result)["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(table.contains(" / / "), "no mount table read: {result}");
    table
}

/// The lines of `table` that name `needle`.
fn naming<'a>(table: &'a str, needle: &str) -> Vec<&'a str> {
    table.lines().filter(|line| line.contains(needle)).collect()
}

async fn the_mount_table_shows_no_project_home_or_temporary_path() {
    let project = common::scratch("privacy");
    std::fs::create_dir_all(project.join("data")).unwrap();
    let image = TestImage::new("privacy", 0);
    let base = std::fs::read_to_string(&image.policy_path).unwrap();
    // An allowlist: the box gets the egress proxy's socket.
    let table = mount_table(
        &project,
        &format!("{base}network:\n  allow: [\"localhost:9\"]\n"),
    )
    .await;
    let socket = naming(&table, " /run/code-sandbox ");
    assert_eq!(socket.len(), 1, "the socket is not mounted:\n{table}");
    let source = socket[0].split(' ').nth(3).unwrap();
    assert!(
        source.starts_with("/code-sandbox-mcp-egress-") && source.ends_with("/socket"),
        "the socket's source path names more than its folder: {source}"
    );
    assert!(
        socket[0].contains(" ro,"),
        "the socket's folder is writable: {}",
        socket[0]
    );
    let temporary = std::env::temp_dir();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/nonexistent-home".into());
    let cwd = std::env::current_dir().unwrap();
    for (what, path) in [
        ("the project", project.to_string_lossy().into_owned()),
        ("the working directory", cwd.to_string_lossy().into_owned()),
        ("the home folder", home),
        (
            "a temporary folder of the server",
            format!("{}/code-sandbox", temporary.display()),
        ),
    ] {
        assert!(
            naming(&table, &path).is_empty(),
            "{what} ({path}) shows:\n{table}"
        );
    }
    let engine: Vec<&str> = naming(&table, "/var/lib/docker");
    eprintln!(
        "mountinfo of a box with an egress route: {} lines, {} naming the engine's data folder \
         (layers, /etc/hosts, /etc/resolv.conf, /etc/hostname, volumes); the socket from {source}",
        table.lines().count(),
        engine.len()
    );

    // A mounted folder's path shows under runc: the kernel names a bind mount's source
    // by its path within its filesystem (docs/security.md says so).
    let table = mount_table(
        &project,
        &format!("{base}mounts:\n  - {{ source: ./data, target: /data }}\n"),
    )
    .await;
    let data = project.join("data").canonicalize().unwrap();
    assert_eq!(naming(&table, &data.to_string_lossy()).len(), 1, "{table}");
}

async fn under_gvisor_a_mounted_folder_s_path_is_hidden_too() {
    let project = common::scratch("privacy-gvisor");
    std::fs::create_dir_all(project.join("data")).unwrap();
    let image = TestImage::new("privacy-gvisor", 0);
    let base = std::fs::read_to_string(&image.policy_path).unwrap();
    let table = mount_table(
        &project,
        &format!(
            "{base}runtime: runsc\nnetwork:\n  allow: [\"localhost:9\"]\nmounts:\n  - {{ source: ./data, target: /data }}\n"
        ),
    )
    .await;
    assert!(naming(&table, " /data ").len() == 1, "{table}");
    for hidden in [
        project.to_string_lossy().into_owned(),
        "/var/lib/docker".to_string(),
        "code-sandbox-mcp-egress".to_string(),
    ] {
        assert!(
            naming(&table, &hidden).is_empty(),
            "{hidden} shows under gVisor:\n{table}"
        );
    }
}
