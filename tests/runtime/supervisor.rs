//! The box's supervisor as a program would meet it: what the program prints is only
//! output (nothing it writes can end the run, or say how it ended), the kernel's
//! refusals come back in the result and the audit line with the rule, the layer and
//! the system call, and in a session no thread but the interpreter's main one can take
//! the next call.

use crate::common;
use crate::common::mcp_client::{structured, InProcess, TestImage};
use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::Layer;
use code_sandbox_mcp::sandbox::{RunOutcome, Sandbox};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) printed_frames_and_end_lines_are_only_output needs common::DOCKER;
    multi_thread(2) a_kernel_refusal_is_in_the_result_and_the_audit_line needs common::DOCKER;
    multi_thread(2) only_the_main_thread_takes_the_next_call needs common::DOCKER;
    multi_thread(2) a_program_that_kills_itself_is_reported_as_killed needs common::DOCKER;
    multi_thread(2) a_flood_of_refusals_is_counted_not_kept needs common::DOCKER;
    multi_thread(2) a_childs_exit_is_not_the_runs needs common::DOCKER;
}

/// Runs the Python `code` once in `sandbox`, then shuts the sandbox down.
async fn run_once(sandbox: Sandbox, code: &str) -> RunOutcome {
    let outcome = sandbox
        .run(
            common::request(Language::Python, code),
            CancellationToken::new(),
        )
        .await
        .expect("the run happens");
    sandbox.shutdown().await;
    outcome
}

/// Bytes that would have ended a run before the supervisor (an end line) or that look
/// like the supervisor's own frames: printed, they are the program's output and no
/// more, and the run's end and status are the process's.
async fn printed_frames_and_end_lines_are_only_output() {
    let sandbox = Sandbox::new(common::test_policy(|p| p.pool.size = 0));
    let code = "import sys\n\
        sys.stdout.buffer.write(b'E\\x20\\x00\\x00\\x00' + bytes(32))\n\
        sys.stdout.write('\\n\\x1ecode-sandbox-mcp 0\\n')\n\
        sys.stderr.write('\\x1edone 0\\n')\n\
        sys.stdout.write('still running\\n')\n\
        sys.exit(7)\n";
    let outcome = run_once(sandbox, code).await;
    assert_eq!(outcome.exit_code, 7, "{outcome:?}");
    assert!(outcome.stdout.contains("still running"), "{outcome:?}");
    assert!(
        outcome.stdout.contains("\u{1e}code-sandbox-mcp 0"),
        "{outcome:?}"
    );
    assert!(outcome.stderr.contains("\u{1e}done 0"), "{outcome:?}");
    assert!(outcome.blocked.is_empty(), "{outcome:?}");
    assert!(!outcome.timed_out);
}

/// A process start that the static check and the hooks let through (the policy's rule
/// names `os.system` only, which turns the kernel floor on, not `os.fork`) is refused
/// by the kernel, and the refusal is in the result (`blocked`, with the rule, the
/// kernel as its layer and the system call) and in the audit line.
async fn a_kernel_refusal_is_in_the_result_and_the_audit_line() {
    let image = TestImage::new("kernel-refusal", 0);
    let dir = image.policy_path.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!(
            "{text}audit: {{ path: audit.jsonl }}\nrules:\n  - id: process-exec\n    python: {{ references: [os.system] }}\n"
        ),
    )
    .unwrap();
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let code = "import os\ntry:\n    os.fork()\n    print('forked')\nexcept OSError as error:\n    print('fork', error.errno)\n";
    let result = server
        .client
        .call_tool("run_python_code", json!({ "code": code }))
        .await;
    server.close().await;
    let run = structured(&result);
    assert_eq!(run["stdout"], "fork 1\n", "{result}");
    assert_eq!(run["status"], "blocked", "{result}");
    let refusal = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["layer"] == "kernel")
        .unwrap_or_else(|| panic!("no kernel finding: {result}"));
    assert_eq!(refusal["rule"], "process-exec");
    assert!(
        refusal["message"].as_str().unwrap().contains("clone"),
        "{refusal}"
    );
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(line["phase"], "blocked", "{line}");
    assert_eq!(line["stopped_by"], "kernel", "{line}");
    assert!(
        line["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["layer"] == "kernel" && f["rule"] == "process-exec"),
        "{line}"
    );
}

/// A thread of the session's own program asks for the next call the way the bootstrap
/// does: the supervisor refuses it (only the main thread takes calls) and says so, and
/// the session goes on with its next call as sent.
async fn only_the_main_thread_takes_the_next_call() {
    let image = TestImage::new("main-thread", 0);
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;
    let first = "import os, threading\n\
        errors = []\n\
        def take():\n\
        \x20   try:\n\
        \x20       os.read(0x7FFF0000, 1 << 20)\n\
        \x20   except OSError as error:\n\
        \x20       errors.append(error.errno)\n\
        t = threading.Thread(target=take)\n\
        t.start()\n\
        t.join()\n\
        print('taken?', errors)\n";
    let result = server
        .client
        .call_tool("run_python_code", json!({ "code": first, "session": "s" }))
        .await;
    let run = structured(&result);
    assert_eq!(run["stdout"], "taken? [1]\n", "{result}");
    assert!(
        run["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["layer"] == Layer::Supervisor.as_str()),
        "{result}"
    );
    assert!(run["session"]["ended"].is_null(), "{result}");
    let second = server
        .client
        .call_tool(
            "run_python_code",
            json!({ "code": "print('call', len(errors) + 1)", "session": "s" }),
        )
        .await;
    assert_eq!(structured(&second)["stdout"], "call 2\n", "{second}");
    server.close().await;
}

/// A program that kills itself ends its run as killed (137), and not as the OOM
/// killer's doing: the supervisor saw the signal and the cgroup's count did not move.
async fn a_program_that_kills_itself_is_reported_as_killed() {
    let sandbox = Sandbox::new(common::test_policy(|p| p.pool.size = 0));
    let code = "import os, sys\nprint('before', flush=True)\nos.kill(os.getpid(), 9)\n";
    let outcome = run_once(sandbox, code).await;
    assert_eq!(outcome.stdout, "before\n", "{outcome:?}");
    assert_eq!(outcome.exit_code, 137, "{outcome:?}");
    assert!(!outcome.oom_killed, "{outcome:?}");
}

/// Five thousand refused forks: each is refused, the first ones are findings, and the
/// rest are counted in one more, so the result (and the server's memory) stays small.
async fn a_flood_of_refusals_is_counted_not_kept() {
    let sandbox = Sandbox::new(common::test_policy(|p| {
        p.pool.size = 0;
        for rule in &mut p.rules {
            if rule.id == "process-exec" {
                // The kernel floor stays on (os.system is denied); os.fork is left to it.
                rule.python.references = vec!["os.system".into()];
            }
        }
    }));
    let code = "import os\nrefused = 0\nfor _ in range(5000):\n    try:\n        os.fork()\n    except OSError:\n        refused += 1\nprint(refused)\n";
    let outcome = run_once(sandbox, code).await;
    assert_eq!(outcome.stdout, "5000\n", "{outcome:?}");
    let limit = code_sandbox_mcp::sandbox::MAX_REPORTS;
    assert_eq!(
        outcome.blocked.len(),
        limit + 1,
        "{:?}",
        outcome.blocked.last()
    );
    let last = outcome.blocked.last().unwrap();
    assert!(
        last.message.contains(&format!("{} more", 5000 - limit)),
        "{last:?}"
    );
    assert_eq!(last.layer, Layer::Kernel);
}

/// The run's status is the interpreter's own `exit_group`, not a process's it started:
/// here the child exits 0 first, and the program closes its pipes long before it exits
/// with 3 (the supervisor reports an exit once the pipes are closed).
async fn a_childs_exit_is_not_the_runs() {
    let sandbox = Sandbox::new(common::test_policy(|p| {
        p.pool.size = 0;
        p.rules.retain(|rule| rule.id != "process-exec");
    }));
    let code = "import os, subprocess, time\n\
        subprocess.run(['true'], check=True)\n\
        print('child done', flush=True)\n\
        for fd in (1, 2, 3):\n    os.close(fd)\n\
        time.sleep(0.5)\n\
        os._exit(3)\n";
    let outcome = run_once(sandbox, code).await;
    assert_eq!(outcome.stdout, "child done\n", "{outcome:?}");
    assert_eq!(outcome.exit_code, 3, "{outcome:?}");
}
