//! The MCP server driven over JSON-RPC lines, in-process over in-memory pipes: the
//! tools, their results, progress, cancellation and what a run hands in and back. The
//! real binary over its stdio is `mcp_binary`.
//!
//! Tests that run code need Docker (`common::DOCKER`); container assertions use
//! an image tag of their own (`support::TestImage`), so tests running in parallel, here
//! or elsewhere on the machine, do not confuse them.

use crate::common;

use crate::common::mcp_client::{is_error, structured, text_of, InProcess, TestImage};
use code_sandbox_mcp::mcp::ServeEnd;
use code_sandbox_mcp::policy::Policy;
use serde_json::{json, Value};

crate::common::harness::tests! {
    current_thread initialize_answers_and_the_tools_describe_the_policy;
    current_thread a_network_policy_makes_the_run_tools_open_world;
    current_thread check_code_reports_findings_without_running_anything;
    current_thread noqa_comments_suppress_nothing_for_an_agent;
    current_thread a_denial_runs_nothing_and_names_rule_line_and_column;
    current_thread oversize_and_non_utf8_code_are_error_results_and_the_server_stays_up;
    current_thread python_and_javascript_runs_return_exit_code_and_both_streams needs common::DOCKER;
    current_thread warnings_ride_along_with_a_successful_run needs common::DOCKER;
    current_thread a_timeout_kills_the_run_and_progress_is_reported_meanwhile needs common::DOCKER;
    current_thread output_comes_as_progress_while_the_run_lasts needs common::DOCKER;
    current_thread cancelling_a_call_kills_the_run_and_removes_its_container needs common::DOCKER;
    current_thread end_of_input_removes_every_container needs common::DOCKER;
    current_thread stop_cancels_a_run_in_flight_and_removes_every_container needs common::DOCKER;
    current_thread a_missing_image_is_an_error_result_and_the_next_call_succeeds needs common::DOCKER;
    multi_thread(2) files_handed_in_are_in_the_working_directory_and_bad_paths_are_refused needs common::DOCKER;
    multi_thread(2) a_stdout_flood_keeps_the_traceback_and_the_reply_stays_small needs common::DOCKER;
    current_thread a_line_that_is_not_json_gets_a_parse_error_and_the_session_goes_on;
    multi_thread(2) no_absolute_host_path_reaches_a_description_or_a_result needs common::DOCKER;
}

async fn initialize_answers_and_the_tools_describe_the_policy() {
    let mut server = InProcess::start(
        &common::local_image_policy(),
        vec![("SANDBOX_TOKEN".into(), "x".into())],
    )
    .await;
    let tools = server.client.request("tools/list", json!({})).await;
    let tools = tools["result"]["tools"]
        .as_array()
        .expect("a tool list")
        .clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "check_code",
            "end_session",
            "run_javascript_code",
            "run_python_code"
        ]
    );
    // Every tool but `end_session` (which has no findings to give) speaks of the policy.
    for tool in tools.iter().filter(|t| t["name"] != "end_session") {
        let description = tool["description"].as_str().unwrap();
        assert!(description.contains("policy"), "{description}");
        assert!(
            tool["outputSchema"]["properties"]["findings"].is_object(),
            "{tool}"
        );
        assert!(
            tool["outputSchema"]["properties"]["policy"].is_object(),
            "{tool}"
        );
        assert_eq!(
            tool["annotations"]["openWorldHint"], false,
            "network is none: {tool}"
        );
    }
    let run = &tools[3];
    assert_eq!(run["name"], "run_python_code");
    let description = run["description"].as_str().unwrap();
    for fact in [
        "session",
        "Network: none",
        "512MiB",
        "30s",
        "process-exec",
        "subprocess",
        "SANDBOX_TOKEN",
    ] {
        assert!(
            description.contains(fact),
            "`{fact}` missing from: {description}"
        );
    }
    for field in [
        "exit_code",
        "stdout",
        "stderr",
        "timed_out",
        "oom_killed",
        "truncated",
        "duration_ms",
    ] {
        assert!(
            run["outputSchema"]["properties"][field].is_object(),
            "{field} missing: {run}"
        );
    }
    assert_eq!(run["inputSchema"]["required"], json!(["code"]));
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(run["annotations"]["readOnlyHint"], false);
    assert_eq!(server.close().await, ServeEnd::InputClosed);
}

async fn a_network_policy_makes_the_run_tools_open_world() {
    let mut policy = Policy::preset("default").unwrap();
    policy.network = code_sandbox_mcp::policy::NetworkMode::Bridge;
    let mut server = InProcess::start_with(policy, vec![]).await;
    let tools = server.client.request("tools/list", json!({})).await;
    for tool in tools["result"]["tools"].as_array().unwrap() {
        // Only the run tools reach the network; checking and ending a session do not.
        let open = tool["name"].as_str().unwrap().starts_with("run_");
        assert_eq!(tool["annotations"]["openWorldHint"], open, "{tool}");
    }
    server.close().await;
}

async fn check_code_reports_findings_without_running_anything() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "const fs = require('fs');\nconst { execSync } = require('child_process');\n";
    let result = server
        .client
        .call_tool(
            "check_code",
            json!({"code": code, "language": "javascript"}),
        )
        .await;
    assert!(!is_error(&result), "{result}");
    let check = structured(&result);
    assert_eq!(check["allowed"], false, "{result}");
    assert_eq!(check["language"], "javascript", "{result}");
    let finding = &check["findings"][0];
    assert_eq!(finding["rule"], "process-exec", "{result}");
    assert_eq!(finding["action"], "deny", "{result}");
    assert_eq!(finding["line"], 2, "{result}");
    assert!(text_of(&result).contains("process-exec"), "{result}");

    let result = server
        .client
        .call_tool(
            "check_code",
            json!({"code": "console.log(1)", "language": "js"}),
        )
        .await;
    assert_eq!(structured(&result)["allowed"], true, "{result}");

    let code = "import os\nos.system('ls')\n";
    let result = server
        .client
        .call_tool("check_code", json!({"code": code, "language": "python"}))
        .await;
    let check = structured(&result);
    assert_eq!(check["allowed"], false, "{result}");
    assert_eq!(check["findings"][0]["rule"], "process-exec", "{result}");
    assert_eq!(check["findings"][0]["line"], 2, "{result}");
    server.close().await;
}

/// `# noqa` comments are the linter's (`check`): an agent's code cannot switch a rule
/// off by writing one, whether it is checked or run.
async fn noqa_comments_suppress_nothing_for_an_agent() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "import os  # noqa: process-exec\nos.system('id')  # noqa: process-exec\n";
    let result = server
        .client
        .call_tool("check_code", json!({"code": code, "language": "python"}))
        .await;
    let check = structured(&result);
    assert_eq!(check["allowed"], false, "{result}");
    assert_eq!(check["findings"][0]["rule"], "process-exec", "{result}");
    let result = server
        .client
        .call_tool("run_python_code", json!({"code": code}))
        .await;
    let run = structured(&result);
    assert_eq!(run["status"], "denied", "{result}");
    assert_eq!(run["findings"][0]["rule"], "process-exec", "{result}");
    server.close().await;
}

async fn a_denial_runs_nothing_and_names_rule_line_and_column() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "console.log('before');\nconst cp = require('child_process');\ncp.execSync('ls');\n";
    let result = server
        .client
        .call_tool("run_javascript_code", json!({"code": code}))
        .await;
    assert!(is_error(&result), "{result}");
    let run = structured(&result);
    assert_eq!(run["status"], "denied", "{result}");
    assert_eq!(run["exit_code"], Value::Null, "{result}");
    assert_eq!(run["stdout"], "", "nothing ran: {result}");
    let finding = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "process-exec")
        .expect("a process-exec finding");
    assert_eq!(finding["line"], 2, "{result}");
    assert!(finding["column"].as_u64().unwrap() >= 1, "{result}");
    let text = text_of(&result);
    assert!(
        text.contains("nothing was run") && text.contains("line 2"),
        "{text}"
    );
    server.close().await;
}

async fn oversize_and_non_utf8_code_are_error_results_and_the_server_stays_up() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let huge = "x = 1\n".repeat(100_000);
    let result = server
        .client
        .call_tool("run_python_code", json!({"code": huge}))
        .await;
    assert!(is_error(&result), "{result}");
    assert_eq!(structured(&result)["status"], "invalid_input");
    assert!(
        text_of(&result).contains("limits.code"),
        "{}",
        text_of(&result)
    );

    // A lone surrogate is valid JSON syntax but not Unicode: it must be answered.
    let id = 4242;
    server
        .client
        .send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"run_javascript_code","arguments":{{"code":"console.log('\udc80')"}}}}}}"#
        ))
        .await;
    let response = server.client.response(id).await;
    let result = &response["result"];
    assert!(is_error(result), "{response}");
    assert!(text_of(result).contains("not valid UTF-8"), "{response}");

    let result = server
        .client
        .call_tool("check_code", json!({"code": huge, "language": "python"}))
        .await;
    assert!(is_error(&result), "{result}");

    let result = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "print(1)", "timeout": -3}),
        )
        .await;
    assert!(is_error(&result), "{result}");
    assert!(text_of(&result).contains("timeout"), "{result}");

    let pong = server.client.request("ping", json!({})).await;
    assert!(pong.get("result").is_some(), "{pong}");
    server.close().await;
}

async fn python_and_javascript_runs_return_exit_code_and_both_streams() {
    let mut server = InProcess::start(
        &common::local_image_policy(),
        vec![("SANDBOX_GREETING".into(), "hello".into())],
    )
    .await;
    let result = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import os, sys\nprint(os.environ.get('SANDBOX_GREETING'), 6 * 7)\nprint('oops', file=sys.stderr)\n"}),
        )
        .await;
    assert!(!is_error(&result), "{result}");
    let run = structured(&result);
    assert_eq!(run["status"], "completed", "{result}");
    assert_eq!(run["exit_code"], 0, "{result}");
    assert_eq!(run["stdout"], "hello 42\n", "{result}");
    assert_eq!(run["stderr"], "oops\n", "{result}");
    assert_eq!(run["language"], "python");
    assert!(text_of(&result).contains("hello 42"), "{result}");

    let result = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": "console.log('out'); console.error('err'); process.exit(3);"}),
        )
        .await;
    assert!(
        !is_error(&result),
        "a failing program is still a completed run: {result}"
    );
    let run = structured(&result);
    assert_eq!(run["exit_code"], 3, "{result}");
    assert_eq!(run["stdout"], "out\n", "{result}");
    assert_eq!(run["stderr"], "err\n", "{result}");
    let text = text_of(&result);
    assert!(
        text.starts_with("exit code 3") && text.contains("out") && text.contains("err"),
        "{text}"
    );
    server.close().await;
}

async fn warnings_ride_along_with_a_successful_run() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "const net = require('net');\nconsole.log('ran', typeof net.connect);\n";
    let result = server
        .client
        .call_tool("run_javascript_code", json!({"code": code}))
        .await;
    assert!(!is_error(&result), "{result}");
    let run = structured(&result);
    assert_eq!(run["stdout"], "ran function\n", "{result}");
    assert_eq!(run["findings"][0]["rule"], "network", "{result}");
    assert_eq!(run["findings"][0]["action"], "warn", "{result}");
    assert!(text_of(&result).contains("Warnings"), "{result}");
    server.close().await;
}

async fn a_timeout_kills_the_run_and_progress_is_reported_meanwhile() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "print('started', flush=True)\nwhile True:\n    pass\n";
    let id = server
        .client
        .start_call_with_progress(
            "run_python_code",
            json!({"code": code, "timeout": 3}),
            "tick",
        )
        .await;
    let response = server.client.response(id).await;
    let result = &response["result"];
    let run = structured(result);
    assert_eq!(run["status"], "completed", "{response}");
    assert_eq!(run["timed_out"], true, "{response}");
    assert_eq!(
        run["stdout"], "started\n",
        "output before the kill is kept: {response}"
    );
    let progress: Vec<&Value> = server
        .client
        .notifications
        .iter()
        .filter(|n| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == "tick"
        })
        .collect();
    assert!(
        !progress.is_empty(),
        "a 3 s run reports progress: {:?}",
        server.client.notifications
    );
    assert_eq!(progress[0]["params"]["total"], 3.0, "{progress:?}");
    server.close().await;
}

async fn output_comes_as_progress_while_the_run_lasts() {
    let mut server = InProcess::start(&common::local_image_policy(), vec![]).await;
    let code = "import sys, time\nprint('first line', flush=True)\n\
                print('a warning', file=sys.stderr, flush=True)\ntime.sleep(3)\nprint('last line')\n";
    let id = server
        .client
        .start_call_with_progress("run_python_code", json!({"code": code}), "live")
        .await;
    let carrying = |text: &'static str| {
        move |n: &Value| {
            n["method"] == "notifications/progress"
                && n["params"]["progressToken"] == "live"
                && n["params"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(text))
        }
    };
    server.client.notification(carrying("first line")).await;
    server
        .client
        .notification(carrying("stderr| a warning"))
        .await;
    assert!(
        !server.client.answered(id),
        "the output arrived while the program was still sleeping"
    );
    let response = server.client.response(id).await;
    let run = structured(&response["result"]);
    assert_eq!(run["stdout"], "first line\nlast line\n", "{response}");
    assert_eq!(run["stderr"], "a warning\n", "{response}");
    let progress: Vec<f64> = server
        .client
        .notifications
        .iter()
        .filter(|n| n["params"]["progressToken"] == "live")
        .filter_map(|n| n["params"]["progress"].as_f64())
        .collect();
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress only grows: {progress:?}"
    );
    server.close().await;
}

async fn cancelling_a_call_kills_the_run_and_removes_its_container() {
    // No warm pool: every container of this tag belongs to a run.
    let image = TestImage::new("cancel", 0);
    let mut server = InProcess::start(&image.policy_path, vec![]).await;
    let id = server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": {"code": "import time\ntime.sleep(600)\n"}}),
        )
        .await;
    let running = image.wait_for_containers(|c| !c.is_empty()).await;
    assert!(!running.is_empty(), "the run never started a container");
    server
        .client
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "test"}}))
        .await;
    let left = image.wait_for_containers(|c| c.is_empty()).await;
    assert!(
        left.is_empty(),
        "the cancelled run's container is still there: {left:?}"
    );

    // The server goes on serving.
    let result = server
        .client
        .call_tool("run_python_code", json!({"code": "print('after')"}))
        .await;
    assert_eq!(structured(&result)["stdout"], "after\n", "{result}");
    server.close().await;
    assert!(image.containers().is_empty());
}

async fn end_of_input_removes_every_container() {
    let image = TestImage::new("eof", 2);
    let mut server = InProcess::start(&image.policy_path, vec![]).await;
    let result = server
        .client
        .call_tool("run_javascript_code", json!({"code": "console.log(1 + 1)"}))
        .await;
    assert_eq!(structured(&result)["stdout"], "2\n", "{result}");
    assert_eq!(server.close().await, ServeEnd::InputClosed);
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

async fn stop_cancels_a_run_in_flight_and_removes_every_container() {
    let image = TestImage::new("stop", 1);
    let mut server = InProcess::start(&image.policy_path, vec![]).await;
    server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": {"code": "import time\ntime.sleep(600)\n"}}),
        )
        .await;
    image.wait_for_containers(|c| !c.is_empty()).await;
    server.stop.cancel();
    assert_eq!(server.served.await.unwrap(), ServeEnd::Stopped);
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

async fn a_missing_image_is_an_error_result_and_the_next_call_succeeds() {
    let dir = std::env::temp_dir().join(format!("code-sandbox-mcp-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let policy_path = dir.join("policy.yaml");
    std::fs::write(
        &policy_path,
        "version: 1\nextends: default\npool: {size: 0}\nimages:\n  python: code-sandbox-mcp-runtime:no-such-tag\n  \
         javascript: code-sandbox-mcp-runtime:trixie\n",
    )
    .unwrap();
    let mut server = InProcess::start(&policy_path, vec![]).await;
    let result = server
        .client
        .call_tool("run_python_code", json!({"code": "print(1)"}))
        .await;
    assert!(is_error(&result), "{result}");
    assert_eq!(structured(&result)["status"], "engine_error", "{result}");
    assert!(
        text_of(&result).contains("no-such-tag"),
        "the message names the image: {result}"
    );
    let result = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": "console.log('fine')"}),
        )
        .await;
    assert_eq!(structured(&result)["stdout"], "fine\n", "{result}");
    server.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

// ---- the real binary over its stdio ----

async fn files_handed_in_are_in_the_working_directory_and_bad_paths_are_refused() {
    let image = TestImage::new("files", 0);
    let mut server = InProcess::start(&image.policy_path, vec![]).await;
    let files = json!([
        {"path": "data.csv", "content": "a,b\n1,2\n"},
        {"path": "in/deep/blob.bin", "content": "AP8Q", "encoding": "base64"},
    ]);
    let python = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "print(open('data.csv').read().split()[1], list(open('in/deep/blob.bin', 'rb').read()))", "files": files}),
        )
        .await;
    assert_eq!(
        structured(&python)["stdout"],
        "1,2 [0, 255, 16]\n",
        "{python}"
    );
    let node = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": "const fs = require('fs');\nconsole.log(fs.readFileSync('data.csv', 'utf8').length, [...fs.readFileSync('in/deep/blob.bin')].join(','))", "files": files, "session": "f"}),
        )
        .await;
    assert_eq!(structured(&node)["stdout"], "8 0,255,16\n", "{node}");
    // A link a session made earlier does not lead a handed-in file out of /sandbox.
    let made = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import os\nos.symlink('/tmp', 'out')", "session": "links"}),
        )
        .await;
    assert_eq!(structured(&made)["exit_code"], 0, "{made}");
    let files = json!([{"path": "out/x", "content": "no"}, {"path": "out/y/z", "content": "no"}]);
    let probed = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import os\nprint(os.path.exists('/tmp/x'), os.path.exists('/tmp/y'))", "session": "links", "files": files}),
        )
        .await;
    assert_eq!(structured(&probed)["stdout"], "False False\n", "{probed}");
    let stderr = structured(&probed)["stderr"].as_str().unwrap();
    assert!(stderr.contains("leads out through a link"), "{probed}");
    // Node's permission model does not let the link be made at all.
    let refused = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({"code": "require('fs').symlinkSync('/tmp', 'out')", "session": "links-js"}),
        )
        .await;
    assert_eq!(structured(&refused)["status"], "blocked", "{refused}");

    // A module handed in is code the checker never saw: importing it is refused.
    let module = server
        .client
        .call_tool(
            "run_python_code",
            json!({"code": "import helper", "files": [{"path": "helper.py", "content": "print('ran')"}]}),
        )
        .await;
    assert_eq!(structured(&module)["status"], "blocked", "{module}");
    assert_eq!(structured(&module)["stdout"], "", "{module}");
    for (file, why) in [
        (json!({"path": "/etc/x", "content": ""}), "absolute"),
        (json!({"path": "../x", "content": ""}), "`..`"),
        (json!({"path": "main.py", "content": ""}), "program itself"),
        (
            json!({"path": "x.bin", "content": "not base64!", "encoding": "base64"}),
            "not valid base64",
        ),
    ] {
        let refused = server
            .client
            .call_tool(
                "run_python_code",
                json!({"code": "print(1)", "files": [file]}),
            )
            .await;
        assert!(is_error(&refused), "{refused}");
        assert_eq!(structured(&refused)["status"], "invalid_input", "{refused}");
        let message = structured(&refused)["message"].as_str().unwrap();
        assert!(message.contains(why), "{message}");
    }
    server.close().await;
    assert!(image
        .wait_for_containers(|now| now.is_empty())
        .await
        .is_empty());
}

async fn a_stdout_flood_keeps_the_traceback_and_the_reply_stays_small() {
    // The default cap (the test policy extends `default`).
    let cap = Policy::preset("default").unwrap().limits.output.bytes() as usize;
    assert!(cap <= 64 << 10, "a default cap sized for a model's context");
    let mut server = InProcess::start(&common::local_image_policy(), Vec::new()).await;
    let id = server
        .client
        .start_request(
            "tools/call",
            json!({"name": "run_python_code", "arguments": {"code":
                "for i in range(200_000):\n    print('row', i)\nraise ValueError('the real error')\n"}}),
        )
        .await;
    let response = server.client.response(id).await;
    let reply = response.to_string().len();
    assert!(reply < 2 * cap + 8 * 1024, "a reply of {reply} bytes");
    let result = &response["result"];
    let structured = structured(result);
    assert_eq!(structured["exit_code"], 1);
    assert_eq!(structured["truncated"], true);
    let stderr = structured["stderr"].as_str().unwrap();
    assert!(
        stderr.trim_end().ends_with("ValueError: the real error"),
        "{stderr}"
    );
    assert!(structured["stdout"]
        .as_str()
        .unwrap()
        .starts_with("row 0\nrow 1\n"));
    assert!(structured["stdout"]
        .as_str()
        .unwrap()
        .ends_with("row 199999\n"));
    // The text has the ends of stdout and the whole traceback.
    let text = text_of(result);
    assert!(text.contains("row 199999\n"), "{}", &text[..200]);
    assert!(text.contains("ValueError: the real error"));
    server.close().await;
}

async fn a_line_that_is_not_json_gets_a_parse_error_and_the_session_goes_on() {
    let mut server = InProcess::start(&common::local_image_policy(), Vec::new()).await;
    server.client.send_line("this is not json").await;
    let answer = server.client.next_message().await.expect("an answer");
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Parse error"),
        "{answer}"
    );
    let checked = server
        .client
        .call_tool(
            "check_code",
            json!({"code": "print(1)", "language": "python"}),
        )
        .await;
    assert_eq!(structured(&checked)["allowed"], true, "{checked}");
    server.close().await;
}

async fn no_absolute_host_path_reaches_a_description_or_a_result() {
    // A policy outside the working directory, as Claude Desktop users name theirs.
    let image = TestImage::new("privacy", 0);
    let dir = image.policy_path.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!("{text}mounts:\n  - {{ source: data, target: /data }}\noutputs:\n  export: {{ path: out }}\n"),
    )
    .unwrap();
    let hidden = dir.to_str().unwrap().to_string();
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let mut seen = Vec::new();
    seen.push(server.client.request("tools/list", json!({})).await);
    seen.push(
        server
            .client
            .call_tool("run_python_code", json!({"code": "open('r.txt', 'w').write('x')\nprint(open('/etc/hostname').read())"}))
            .await,
    );
    seen.push(
        server
            .client
            .call_tool(
                "run_python_code",
                json!({"code": "import os\nos.system('id')"}),
            )
            .await,
    );
    seen.push(
        server
            .client
            .call_tool(
                "check_code",
                json!({"code": "open('/x/y')", "language": "python"}),
            )
            .await,
    );
    for uri in ["sandbox://policy", "sandbox://environments"] {
        seen.push(
            server
                .client
                .request("resources/read", json!({"uri": uri}))
                .await,
        );
    }
    assert_eq!(
        structured(&seen[1])["files"][0]["exported_to"],
        "out/r.txt",
        "{}",
        seen[1]
    );
    for message in &seen {
        let text = message.to_string();
        assert!(!text.contains(&hidden), "{hidden} in {text}");
    }
    assert_eq!(structured(&seen[1])["policy"], "policy.yaml");
    server.close().await;
}
