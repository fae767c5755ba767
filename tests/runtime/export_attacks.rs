//! The export folder attacked from inside the sandbox, through the MCP server and the
//! real engine: a run names the files it leaves behind, so it tries the names other
//! programs read as configuration or run as code, their lookalikes (case, full-width
//! forms, invisible characters) and names with line breaks and direction overrides.
//! None of them lands in the project; the run's result says why for each, the audit
//! line of the call is written, and the project holds nothing else afterwards. A policy
//! that would hand the sandbox its own policy file, the audit log or the project root
//! is refused when the server starts, with its file, line and key.

use crate::common;
use crate::common::mcp_client::{is_error, structured, text_of, InProcess, RpcClient, TestImage};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;

crate::common::harness::tests! {
    multi_thread(2) a_run_cannot_export_what_other_tools_read_or_run needs common::DOCKER;
    current_thread a_policy_whose_export_reaches_the_policy_or_an_rw_mount_is_refused_when_served;
}

/// Names a run tries to plant, each with what its refusal must say.
const HOSTILE: &[(&str, &str)] = &[
    (".git/hooks/pre-commit", "protected name"),
    (".git/info/attributes", "protected name"),
    (".claude/settings.json", "protected name"),
    (".mcp.json", "protected name"),
    (".vscode/tasks.json", "protected name"),
    (".envrc", "protected name"),
    ("conftest.py", "protected name"),
    ("sitecustomize.py", "protected name"),
    ("evil.pth", "protected name"),
    ("sub/.code-sandbox.yaml", "protected name"),
    (".GIT/config", "protected name"),
    (
        "\u{200c}.git/config",
        "control, invisible or direction-changing",
    ),
    (
        "\u{ff23}\u{ff2f}\u{ff2e}\u{ff26}\u{ff34}\u{ff25}\u{ff33}\u{ff34}.py",
        "protected name",
    ),
    ("Makefile", "protected name"),
    ("AGENTS.md", "protected name"),
    (
        "line\nbreak.txt",
        "control, invisible or direction-changing",
    ),
    (
        "report\u{202e}txt.exe",
        "control, invisible or direction-changing",
    ),
];

async fn a_run_cannot_export_what_other_tools_read_or_run() {
    let project = common::scratch("export-attacks");
    std::fs::create_dir_all(project.join("logs")).unwrap();
    let image = TestImage::new("export-attacks", 0);
    let base = std::fs::read_to_string(&image.policy_path).unwrap();
    let policy_text = format!(
        "{base}outputs:\n  max_files: 40\n  export:\n    path: results\n    overwrite: true\n\
         audit:\n  path: logs/audit.jsonl\n"
    );
    let policy = project.join(".code-sandbox.yaml");
    std::fs::write(&policy, &policy_text).unwrap();
    let mut server = InProcess::start(&policy, Vec::new()).await;

    let names: Vec<&str> = HOSTILE.iter().map(|(name, _)| *name).collect();
    let code = format!(
        "import os\nfor name in {names}:\n    folder = os.path.dirname(name)\n    if folder:\n        \
         os.makedirs(folder, exist_ok=True)\n    with open(name, 'w') as f:\n        f.write('planted')\n\
         open('fine.txt', 'w').write('fine')\nprint('wrote', len(os.listdir('.')))",
        names = serde_json::to_string(&names).unwrap()
    );
    let result = server
        .client
        .call_tool("run_python_code", json!({ "code": code }))
        .await;
    assert!(!is_error(&result), "{result}");
    let files = structured(&result)["files"].as_array().unwrap().clone();
    let entry = |path: &str| -> &Value {
        files
            .iter()
            .find(|file| file["path"] == path)
            .unwrap_or_else(|| panic!("{path:?} is not listed: {result}"))
    };
    assert_eq!(
        entry("fine.txt")["exported_to"],
        "results/fine.txt",
        "{result}"
    );
    for (name, reason) in HOSTILE {
        let file = entry(name);
        assert!(
            file.get("exported_to").is_none(),
            "{name:?} exported: {file}"
        );
        let error = file["export_error"].as_str().unwrap_or_default();
        assert!(error.contains(reason), "{name:?}: {error}");
        // What the agent reads names the file with its hidden characters spelled out.
        assert!(
            !error.contains('\n') && !error.contains('\u{202e}'),
            "{error:?}"
        );
    }
    let text = text_of(&result);
    assert!(!text.contains('\u{202e}'), "{text}");

    // The project holds its policy, the log and the one file; the policy is untouched.
    let mut found = Vec::new();
    walk(&project, &project, &mut found);
    found.sort();
    assert_eq!(
        found,
        [".code-sandbox.yaml", "logs/audit.jsonl", "results/fine.txt"],
        "{result}"
    );
    assert_eq!(std::fs::read_to_string(&policy).unwrap(), policy_text);
    server.close().await;
    let log = std::fs::read_to_string(project.join("logs/audit.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert_eq!(lines[0]["tool"], "run_python_code", "{log}");
}

/// Every file under `dir`, relative to `root`.
fn walk(root: &Path, dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            walk(root, &path, found);
        } else {
            found.push(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
}

async fn a_policy_whose_export_reaches_the_policy_or_an_rw_mount_is_refused_when_served() {
    let project = common::scratch("export-refused");
    std::fs::create_dir_all(project.join("work")).unwrap();
    for (policy_text, expected) in [
        (
            "version: 1\noutputs:\n  export:\n    path: .\n    overwrite: true\n",
            ".code-sandbox.yaml:4: outputs.export.path: `.` is the project's own folder",
        ),
        (
            "version: 1\nmounts:\n  - source: work\n    target: /sandbox/work\n    rw: true\n\
             outputs:\n  export: { path: work/out }\n",
            ".code-sandbox.yaml:7: outputs.export.path: `work/out` overlaps the rw mount `work`",
        ),
        (
            "version: 1\nmounts:\n  - source: .\n    target: /sandbox/project\n    rw: true\n",
            ".code-sandbox.yaml:3: mounts[].source: the rw mount `.` holds the policy file",
        ),
    ] {
        let policy = project.join(".code-sandbox.yaml");
        std::fs::write(&policy, policy_text).unwrap();
        let mut child = tokio::process::Command::new(common::binary_path())
            .env("CODE_SANDBOX_POLICY", &policy)
            .env_remove("RUST_LOG")
            .current_dir(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut client = RpcClient::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let info = client.initialize().await;
        let instructions = info["instructions"].as_str().unwrap_or_default();
        assert!(
            instructions.contains(expected),
            "{expected}\n in {instructions}"
        );
        let run = client
            .call_tool("run_python_code", json!({"code": "print(1)"}))
            .await;
        assert_eq!(structured(&run)["status"], "policy_error", "{run}");
        client.close_input().await;
        assert!(child.wait().await.unwrap().success());
    }
}
