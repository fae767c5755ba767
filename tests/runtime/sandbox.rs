//! The container runtime against the real engine and the offline image
//! (tests/policies/local-image.yaml). Every test makes its own `Sandbox`, shuts it
//! down, and checks that no container labelled with that instance's id is left, so the
//! tests can run in parallel without seeing each other's containers.
//!
//! Here: what one run does and what holds it (streams, exit codes, limits, lock-down).
//! The pool, cancellation, images and the engine's absence are `sandbox_lifecycle`.

use crate::common::{self, request, warn_only};

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{ByteSize, HumanDuration, Policy};
use code_sandbox_mcp::sandbox::{RunOutcome, Sandbox};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) hello_in_python_and_javascript needs common::DOCKER;
    multi_thread(2) javascript_runs_as_es_module_or_commonjs_by_its_syntax needs common::DOCKER;
    multi_thread(2) a_failing_run_keeps_stderr_partial_stdout_and_its_exit_code needs common::DOCKER;
    multi_thread(2) the_wall_clock_limit_kills_the_run_and_keeps_its_output needs common::DOCKER;
    multi_thread(2) a_background_child_does_not_hold_the_run_open needs common::DOCKER;
    multi_thread(2) the_policy_timeout_caps_a_longer_request needs common::DOCKER;
    multi_thread(2) a_memory_bomb_is_oom_killed needs common::DOCKER;
    multi_thread(2) a_fork_bomb_is_stopped_by_the_pids_limit needs common::DOCKER;
    multi_thread(2) an_output_flood_is_truncated_and_the_exit_code_kept needs common::DOCKER;
    multi_thread(2) output_that_is_not_utf8_is_kept_with_replacement_characters needs common::DOCKER;
    multi_thread(2) the_container_is_locked_down needs common::DOCKER;
    multi_thread(2) the_engine_applies_every_limit_the_policy_sets needs common::DOCKER;
}

/// The local-image policy with a small pool (tests make many instances) and `adjust`
/// applied, for limits a test wants to hit quickly.
pub(crate) fn policy(adjust: impl FnOnce(&mut Policy)) -> Arc<Policy> {
    common::test_policy(|policy| {
        policy.pool.size = 1;
        adjust(policy);
    })
}

pub(crate) async fn run(sandbox: &Sandbox, language: Language, code: &str) -> RunOutcome {
    sandbox
        .run(request(language, code), CancellationToken::new())
        .await
        .expect("the run happens")
}

/// Containers of one instance, running or not.
pub(crate) fn containers_of(sandbox: &Sandbox) -> Vec<String> {
    common::containers_labelled(&format!(
        "{}={}",
        code_sandbox_mcp::sandbox::LABEL,
        sandbox.instance_id()
    ))
}

/// Shuts the sandbox down and checks that nothing of it is left: no container, and no
/// volume (the guard files').
pub(crate) async fn finish(sandbox: Sandbox) {
    sandbox.shutdown().await;
    assert_eq!(
        containers_of(&sandbox),
        Vec::<String>::new(),
        "containers left after shutdown"
    );
    let volumes = Command::new("docker")
        .args(["volume", "ls", "-q", "--filter"])
        .arg(format!(
            "label={}={}",
            code_sandbox_mcp::sandbox::LABEL,
            sandbox.instance_id()
        ))
        .output()
        .expect("docker volume ls");
    assert_eq!(
        common::text(&volumes.stdout),
        "",
        "volumes left after shutdown"
    );
}

async fn hello_in_python_and_javascript() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let python = run(&sandbox, Language::Python, "print('hello from', 'python')").await;
    assert_eq!(python.stdout, "hello from python\n");
    assert_eq!(python.stderr, "");
    assert_eq!(python.exit_code, 0);
    assert!(!python.timed_out && !python.oom_killed && !python.truncated);

    let javascript = run(
        &sandbox,
        Language::JavaScript,
        "console.log('hello from', 'javascript')",
    )
    .await;
    assert_eq!(javascript.stdout, "hello from javascript\n");
    assert_eq!(javascript.stderr, "");
    assert_eq!(javascript.exit_code, 0);
    finish(sandbox).await;
}

async fn javascript_runs_as_es_module_or_commonjs_by_its_syntax() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let esm = run(
        &sandbox,
        Language::JavaScript,
        "import { sep } from 'node:path';\n\
         const value = await Promise.resolve(42);\n\
         console.log(sep, value, typeof require, import.meta.url.endsWith('/main.mjs'));",
    )
    .await;
    assert_eq!(esm.stderr, "");
    assert_eq!(esm.stdout, "/ 42 undefined true\n");

    // `import`/`export`/`await` only in strings and comments: still CommonJS.
    let cjs = run(
        &sandbox,
        Language::JavaScript,
        "// import x from 'y'\n\
         const path = require('path');\n\
         const text = \"export default await thing\";\n\
         console.log(typeof require, typeof module.exports, path.basename(__filename), text.length);",
    )
    .await;
    assert_eq!(cjs.stderr, "");
    assert_eq!(cjs.stdout, "function object main.cjs 26\n");
    finish(sandbox).await;
}

async fn a_failing_run_keeps_stderr_partial_stdout_and_its_exit_code() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let failed = run(
        &sandbox,
        Language::Python,
        "import sys\nprint('before the error')\nprint('to stderr', file=sys.stderr)\nraise ValueError('boom')\n",
    )
    .await;
    assert_eq!(failed.exit_code, 1);
    assert_eq!(failed.stdout, "before the error\n");
    assert!(
        failed.stderr.starts_with("to stderr\n"),
        "{}",
        failed.stderr
    );
    assert!(failed.stderr.contains("Traceback"), "{}", failed.stderr);
    assert!(
        failed.stderr.contains("ValueError: boom"),
        "{}",
        failed.stderr
    );

    let exit_3 = run(&sandbox, Language::Python, "import sys\nsys.exit(3)").await;
    assert_eq!(exit_3.exit_code, 3);
    let exit_7 = run(
        &sandbox,
        Language::JavaScript,
        "console.error('leaving'); process.exitCode = 7;",
    )
    .await;
    assert_eq!((exit_7.exit_code, exit_7.stderr.as_str()), (7, "leaving\n"));
    let thrown = run(&sandbox, Language::JavaScript, "throw new Error('js boom')").await;
    assert_eq!(thrown.exit_code, 1);
    assert!(
        thrown.stderr.contains("Error: js boom"),
        "{}",
        thrown.stderr
    );
    finish(sandbox).await;
}

async fn the_wall_clock_limit_kills_the_run_and_keeps_its_output() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let mut slow = request(
        Language::Python,
        "import time\nprint('started', flush=True)\ntime.sleep(600)\nprint('never')",
    );
    // The request asks for less than the policy's limit: the smaller one applies.
    slow.timeout = Some(Duration::from_secs(1));
    let outcome = sandbox
        .run(slow, CancellationToken::new())
        .await
        .expect("the run happens");
    assert!(outcome.timed_out);
    assert_eq!(outcome.exit_code, 137);
    assert_eq!(outcome.stdout, "started\n");
    assert!(!outcome.oom_killed);
    finish(sandbox).await;
}

async fn a_background_child_does_not_hold_the_run_open() {
    // Starting processes allowed (every rule at warn): this is about the runtime, not
    // the policy.
    let sandbox = Sandbox::new(policy(|p| {
        p.limits.timeout = HumanDuration(Duration::from_secs(20));
        warn_only(p);
    }));
    // The child inherits stdout and stderr and outlives the program.
    let outcome = run(
        &sandbox,
        Language::Python,
        "import subprocess\nsubprocess.Popen(['sleep', '600'])\nprint('main done')\nraise SystemExit(6)",
    )
    .await;
    assert!(!outcome.timed_out, "{outcome:?}");
    assert_eq!(outcome.exit_code, 6);
    assert_eq!(outcome.stdout, "main done\n");
    finish(sandbox).await;
}

async fn the_policy_timeout_caps_a_longer_request() {
    let sandbox = Sandbox::new(policy(|p| {
        p.limits.timeout = HumanDuration(Duration::from_millis(1500))
    }));
    let mut slow = request(Language::JavaScript, "setTimeout(() => {}, 600000)");
    slow.timeout = Some(Duration::from_secs(3600));
    let outcome = sandbox
        .run(slow, CancellationToken::new())
        .await
        .expect("the run happens");
    assert!(outcome.timed_out);
    finish(sandbox).await;
}

async fn a_memory_bomb_is_oom_killed() {
    let sandbox = Sandbox::new(policy(|p| p.limits.memory = ByteSize(64 << 20)));
    let outcome = run(
        &sandbox,
        Language::Python,
        "print('allocating', flush=True)\nchunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n",
    )
    .await;
    assert!(outcome.oom_killed, "{outcome:?}");
    assert_eq!(outcome.exit_code, 137);
    assert!(!outcome.timed_out);
    assert_eq!(outcome.stdout, "allocating\n");

    // A process killed by SIGKILL for another reason is not reported as OOM.
    let killed = run(
        &sandbox,
        Language::Python,
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
    )
    .await;
    assert_eq!(killed.exit_code, 137);
    assert!(!killed.oom_killed);
    finish(sandbox).await;
}

async fn a_fork_bomb_is_stopped_by_the_pids_limit() {
    // Forking allowed (every rule at warn, so no kernel floor): the pids limit alone.
    let sandbox = Sandbox::new(policy(|p| {
        p.limits.pids = 24;
        p.limits.timeout = HumanDuration(Duration::from_secs(2));
        warn_only(p);
    }));
    // Children close their ends of the output pipes, so the parent's exit ends the run.
    let counted = run(
        &sandbox,
        Language::Python,
        "import os, time\n\
         children = 0\n\
         try:\n\
         \x20   while True:\n\
         \x20       if os.fork() == 0:\n\
         \x20           os.close(1); os.close(2)\n\
         \x20           time.sleep(60)\n\
         \x20           os._exit(0)\n\
         \x20       children += 1\n\
         except OSError as error:\n\
         \x20   print(children, error.errno)\n",
    )
    .await;
    let fields: Vec<u32> = counted
        .stdout
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(fields.len(), 2, "{counted:?}");
    assert!(fields[0] < 24, "{} processes started", fields[0]);
    assert_eq!(fields[1], 11, "fork fails with EAGAIN");

    // The classic bomb: contained until the wall-clock limit kills the container.
    let bomb = run(
        &sandbox,
        Language::Python,
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    )
    .await;
    assert!(bomb.timed_out, "{bomb:?}");
    // The engine is fine afterwards.
    let after = run(&sandbox, Language::Python, "print('still here')").await;
    assert_eq!(after.stdout, "still here\n");
    finish(sandbox).await;
}

async fn an_output_flood_is_truncated_and_the_exit_code_kept() {
    let sandbox = Sandbox::new(policy(|p| p.limits.output = ByteSize(64 << 10)));
    let flood = run(
        &sandbox,
        Language::Python,
        "import sys\nline = 'x' * 99 + '\\n'\nfor _ in range(100_000):\n    sys.stdout.write(line)\nsys.exit(4)\n",
    )
    .await;
    assert!(flood.truncated);
    assert_eq!(flood.exit_code, 4, "the program ran to its end");
    assert!(!flood.timed_out);
    // The head and the tail are kept around a marker that says how much was cut.
    let marker = flood
        .stdout
        .lines()
        .find(|line| line.contains("bytes cut here"))
        .unwrap_or_else(|| panic!("no marker in {}", &flood.stdout[..200]))
        .to_string();
    assert!(
        marker.contains("capped at 64KiB (limits.output)"),
        "{marker}"
    );
    assert!(
        flood.stdout.starts_with(&"x".repeat(99)),
        "the head is kept"
    );
    assert!(
        flood.stdout.ends_with(&format!("{}\n", "x".repeat(99))),
        "the tail is kept"
    );
    let kept = flood.stdout.len() - marker.len() - 2;
    assert!(kept <= 64 << 10, "{kept} bytes kept");
    assert!(kept > 60 << 10, "{kept} bytes kept");

    // The cap counts both streams.
    let both = run(
        &sandbox,
        Language::JavaScript,
        "const chunk = 'y'.repeat(1000);\n\
         for (let i = 0; i < 40; i++) { console.log(chunk); console.error(chunk); }",
    )
    .await;
    assert!(both.truncated);
    // Each stream is cut to its half, with a marker line of its own.
    assert!(both.stdout.len() + both.stderr.len() < (64 << 10) + 200);
    assert!(both.stdout.len() > 30 << 10 && both.stderr.len() > 30 << 10);
    finish(sandbox).await;
}

async fn output_that_is_not_utf8_is_kept_with_replacement_characters() {
    let sandbox = Sandbox::new(policy(|_| {}));
    let outcome = run(
        &sandbox,
        Language::Python,
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')\nsys.stderr.buffer.write(b'\\xc3')\n",
    )
    .await;
    assert_eq!(outcome.stdout, "ok \u{FFFD}\u{FFFD} end\n");
    assert_eq!(outcome.stderr, "\u{FFFD}");
    finish(sandbox).await;
}

async fn the_container_is_locked_down() {
    let sandbox = Sandbox::new(policy(|p| p.limits.tmpfs = ByteSize(4 << 20)));
    let outcome = run(
        &sandbox,
        Language::Python,
        r#"import os, socket
print("uid", os.getuid(), os.getgid())
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("caps", status["CapEff"].strip(), status["CapBnd"].strip(), "nnp", status["NoNewPrivs"].strip())
for path in ["/etc/written", "/usr/written", "/written"]:
    try:
        open(path, "w")
        print("wrote", path)
    except OSError as e:
        print("refused", path, e.errno)
for path in ["/sandbox/ok", "/tmp/ok"]:
    open(path, "w").write("fine")
    print("wrote", path)
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"x" * (8 << 20))
    print("wrote 8MiB")
except OSError as e:
    print("tmpfs full", e.errno)
print("interfaces", sorted(name for _, name in socket.if_nameindex()))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("connected")
except OSError as e:
    print("no network", e.errno)
"#,
    )
    .await;
    assert_eq!(outcome.stderr, "");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "uid 65534 65534",
            "caps 0000000000000000 0000000000000000 nnp 1",
            "refused /etc/written 30",
            "refused /usr/written 30",
            "refused /written 30",
            "wrote /sandbox/ok",
            "wrote /tmp/ok",
            "tmpfs full 28",
            "interfaces ['lo']",
            "no network 101",
        ]
    );
    finish(sandbox).await;
}

async fn the_engine_applies_every_limit_the_policy_sets() {
    let sandbox = Sandbox::new(policy(|p| {
        p.limits.memory = ByteSize(96 << 20);
        p.limits.pids = 40;
        p.limits.cpus = 0.5;
        p.limits.tmpfs = ByteSize(8 << 20);
    }));
    sandbox.warm_up().await;
    let ids = containers_of(&sandbox);
    assert_eq!(ids.len(), 2, "one warm container per language");
    let output = Command::new("docker")
        .args(["inspect", &ids[0]])
        .output()
        .unwrap();
    let inspect: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let host = &inspect[0]["HostConfig"];
    assert_eq!(host["NetworkMode"], "none");
    assert_eq!(host["ReadonlyRootfs"], true);
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(
        host["SecurityOpt"],
        serde_json::json!(["no-new-privileges"])
    );
    assert_eq!(host["PidsLimit"], 40);
    assert_eq!(host["Memory"], 96 << 20);
    assert_eq!(host["MemorySwap"], 96 << 20);
    assert_eq!(host["NanoCpus"], 500_000_000);
    assert!(host["Tmpfs"]["/sandbox"]
        .as_str()
        .unwrap()
        .contains("size=8388608"));
    assert!(host["Tmpfs"]["/tmp"]
        .as_str()
        .unwrap()
        .contains("size=8388608"));
    let config = &inspect[0]["Config"];
    assert_eq!(config["User"], "65534:65534");
    assert_eq!(config["Labels"]["code-sandbox-mcp"], sandbox.instance_id());
    assert_eq!(
        config["Labels"]["code-sandbox-mcp.pid"],
        std::process::id().to_string()
    );
    assert_eq!(inspect[0]["State"]["Running"], true);
    finish(sandbox).await;
}
