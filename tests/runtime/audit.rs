//! The audit log: one valid JSON line per tool call, whatever became of it (checked,
//! refused, completed, blocked at run time, timed out, killed for memory, cancelled),
//! also when calls come at once; and a log that cannot be written stops every call.

use crate::common;
use crate::common::mcp_client::{is_error, structured, InProcess, TestImage};
use serde_json::{json, Value};

crate::common::harness::tests! {
    multi_thread(2) every_call_is_one_line_whatever_became_of_it needs common::DOCKER;
    multi_thread(2) a_log_that_cannot_be_written_stops_every_call;
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

async fn every_call_is_one_line_whatever_became_of_it() {
    let image = TestImage::new("audit", 0);
    let dir = image.policy_path.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    // dynamic-code only warns here, so that code the static check lets through can be
    // stopped by the run-time guard (process-exec still denies).
    std::fs::write(
        &image.policy_path,
        format!("{text}limits: {{ memory: 64MiB }}\naudit: {{ path: logs/audit.jsonl }}\nrules:\n  - {{ id: dynamic-code, action: warn }}\n"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let log = dir.join("logs/audit.jsonl");
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let python = |code: &str| json!({ "code": code });

    let calls: Vec<(&str, Value)> = vec![
        ("check_code", json!({"code": "print(1)", "language": "python"})),
        ("run_python_code", python("import os\nos.system('id')")),
        ("run_python_code", python("print('done')")),
        // `import os; os.system('true')`, as bytes the static check cannot read.
        ("run_python_code", python("exec(bytes([105, 109, 112, 111, 114, 116, 32, 111, 115, 59, 32, 111, 115, 46, 115, 121, 115, 116, 101, 109, 40, 39, 116, 114, 117, 101, 39, 41]).decode())")),
        ("run_python_code", json!({"code": "while True:\n    pass", "timeout": 1})),
        ("run_python_code", python("hog = bytearray(200 * 1024 * 1024)\nprint(len(hog))")),
        ("end_session", json!({"session": "none-such"})),
    ];
    for (tool, arguments) in &calls {
        server.client.call_tool(tool, arguments.clone()).await;
    }
    // And one the client cancels mid-run.
    let id = server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": {"code": "import time\ntime.sleep(600)"}}),
        )
        .await;
    image.wait_for_containers(|c| !c.is_empty()).await;
    server
        .client
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "test"}}))
        .await;
    image.wait_for_containers(|c| c.is_empty()).await;
    // The cancelled call's line is written as its handler goes.
    let mut entries = lines(&log);
    for _ in 0..50 {
        if entries.len() == calls.len() + 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        entries = lines(&log);
    }
    let phases: Vec<&str> = entries
        .iter()
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "checked",
            "refused",
            "completed",
            "blocked",
            "timed_out",
            "oom",
            "checked",
            "cancelled"
        ],
        "{entries:#?}"
    );
    let tools: Vec<&str> = entries
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools[0], "check_code");
    assert_eq!(tools[6], "end_session");
    assert_eq!(entries[1]["verdict"], "denied");
    assert_eq!(entries[1]["stopped_by"], "static");
    assert_eq!(entries[1]["findings"][0]["rule"], "process-exec");
    assert_eq!(entries[2]["exit_code"], 0);
    assert_eq!(entries[2]["stdout_bytes"], 5);
    assert_eq!(entries[3]["stopped_by"], "python-audit-hook");
    assert_eq!(entries[4]["stopped_by"], "limits.timeout");
    assert_eq!(entries[5]["stopped_by"], "limits.memory");
    for entry in &entries {
        assert_eq!(entry["policy"], "policy.yaml");
        assert_eq!(entry["policy_sha256"].as_str().unwrap().len(), 64);
        assert!(entry["time"].as_str().unwrap().ends_with('Z'), "{entry}");
    }
    // The code's hash, so a line can be matched with the code that was sent.
    assert_eq!(entries[2]["code_sha256"], code_sha256("print('done')"));
    assert_eq!(entries[2]["code_sha256"].as_str().unwrap().len(), 64);

    // Calls made at once: one whole line each.
    let before = lines(&log).len();
    let mut pending = Vec::new();
    for n in 0..8 {
        let code = if n % 2 == 0 {
            format!("print({n})")
        } else {
            format!("x = {n}")
        };
        let tool = if n < 4 {
            "check_code"
        } else {
            "run_python_code"
        };
        let arguments = if tool == "check_code" {
            json!({"code": code, "language": "python"})
        } else {
            json!({"code": code})
        };
        pending.push(
            server
                .client
                .start_request("tools/call", json!({"name": tool, "arguments": arguments}))
                .await,
        );
    }
    for id in pending {
        let answer = server.client.response(id).await;
        assert!(answer.get("error").is_none(), "{answer}");
    }
    let after = lines(&log);
    assert_eq!(after.len(), before + 8);
    server.close().await;
}

fn code_sha256(code: &str) -> String {
    code_sandbox_mcp::digest::sha256_hex(code.as_bytes())
}

async fn a_log_that_cannot_be_written_stops_every_call() {
    let dir = common::scratch("audit-unwritable");
    let policy = dir.join(".code-sandbox.yaml");
    // A folder that does not exist: the log cannot be opened.
    std::fs::write(
        &policy,
        "version: 1\naudit: { path: missing/audit.jsonl }\n",
    )
    .unwrap();
    let mut server = InProcess::start(&policy, Vec::new()).await;
    let result = server
        .client
        .call_tool("run_python_code", json!({"code": "print(1)"}))
        .await;
    assert!(is_error(&result), "{result}");
    assert_eq!(structured(&result)["status"], "policy_error");
    let message = structured(&result)["message"].as_str().unwrap();
    assert!(
        message.contains("audit.path: cannot write the audit log `missing/audit.jsonl`"),
        "{message}"
    );
    server.close().await;
}
