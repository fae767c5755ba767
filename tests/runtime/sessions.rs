//! Sessions through the MCP server: state that lasts within a session and nowhere else,
//! the static check across calls, and every way a session ends.

use crate::common;
use crate::common::mcp_client::{is_error, structured, InProcess, TestImage};
use serde_json::{json, Value};

crate::common::harness::tests! {
    multi_thread(2) state_lasts_within_a_session_and_nowhere_else needs common::DOCKER;
    multi_thread(2) the_check_sees_what_earlier_calls_bound needs common::DOCKER;
    multi_thread(2) javascript_sessions_keep_imports_and_awaited_values needs common::DOCKER;
    multi_thread(2) a_javascript_session_behaves_like_the_repl needs common::DOCKER;
    multi_thread(2) how_long_a_javascript_call_waits_is_the_policys needs common::DOCKER;
    multi_thread(2) a_timed_out_or_exited_session_ends_and_says_so needs common::DOCKER;
    multi_thread(2) an_out_of_memory_call_ends_its_session_and_says_so needs common::DOCKER;
    multi_thread(2) a_container_removed_from_outside_ends_its_session_and_says_so needs common::DOCKER;
    multi_thread(2) the_policy_sets_whether_sessions_exist_how_many_and_how_long needs common::DOCKER;
}

async fn python(server: &mut InProcess, session: Option<&str>, code: &str) -> Value {
    let mut arguments = json!({ "code": code });
    if let Some(name) = session {
        arguments["session"] = json!(name);
    }
    server.client.call_tool("run_python_code", arguments).await
}

async fn javascript(server: &mut InProcess, session: &str, code: &str) -> Value {
    server
        .client
        .call_tool(
            "run_javascript_code",
            json!({ "code": code, "session": session }),
        )
        .await
}

/// Code that prints whether `name` is defined (`globals()` is denied by the default
/// policy).
fn defined(name: &str) -> String {
    format!("try:\n    {name}\n    print(True)\nexcept NameError:\n    print(False)")
}

/// A server on a test image of its own, its policy the test policy plus `extra` YAML.
async fn server_with(name: &str, extra: &str) -> (TestImage, InProcess) {
    let image = TestImage::new(name, 0);
    let text = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(&image.policy_path, format!("{text}{extra}")).unwrap();
    let server = InProcess::start(&image.policy_path, Vec::new()).await;
    (image, server)
}

fn stdout(result: &Value) -> &str {
    structured(result)["stdout"].as_str().unwrap_or_default()
}

async fn state_lasts_within_a_session_and_nowhere_else() {
    let image = TestImage::new("sessions", 1);
    let mut server = InProcess::start(&image.policy_path, Vec::new()).await;

    let first = python(
        &mut server,
        Some("a"),
        "import threading, time\n\
         data = [1, 2, 3]\n\
         open('kept.txt', 'w').write('hello')\n\
         def tick():\n    while True: time.sleep(0.05)\n\
         threading.Thread(target=tick, name='ticker', daemon=True).start()\n\
         print('loaded', len(data))",
    )
    .await;
    assert!(!is_error(&first), "{first}");
    assert_eq!(stdout(&first), "loaded 3\n");
    assert_eq!(structured(&first)["session"]["call"], 1);
    assert_eq!(structured(&first)["session"]["ended"], Value::Null);

    let second = python(
        &mut server,
        Some("a"),
        "import threading\n\
         print(sum(data), open('kept.txt').read(), [t.name for t in threading.enumerate() if t.name == 'ticker'])",
    )
    .await;
    assert_eq!(stdout(&second), "6 hello ['ticker']\n", "{second}");
    assert_eq!(structured(&second)["session"]["call"], 2);

    // Another session, and a stateless run, see none of it.
    let probe = "import os, threading\n\
                 try:\n    data\nexcept NameError:\n    data = None\n\
                 print(data is not None, os.path.exists('kept.txt'), [t.name for t in threading.enumerate() if t.name == 'ticker'])";
    let other = python(&mut server, Some("b"), probe).await;
    assert_eq!(stdout(&other), "False False []\n", "{other}");
    let stateless = python(&mut server, None, probe).await;
    assert_eq!(stdout(&stateless), "False False []\n", "{stateless}");
    assert!(structured(&stateless).get("session").is_none());

    // An error keeps the session; its traceback names the call and line.
    let failing = python(&mut server, Some("a"), "x = 1\nraise KeyError('gone')").await;
    assert_eq!(structured(&failing)["exit_code"], 1);
    let stderr = structured(&failing)["stderr"].as_str().unwrap();
    assert!(stderr.contains("File \"<call 3>\", line 2"), "{stderr}");
    assert!(stderr.contains("KeyError: 'gone'"), "{stderr}");
    assert!(!stderr.contains("python_guard"), "{stderr}");
    assert_eq!(
        stdout(&python(&mut server, Some("a"), "print(x, sum(data))").await),
        "1 6\n"
    );

    // Ending it removes its container; the name then starts afresh.
    let containers = image.containers().len();
    let ended = server
        .client
        .call_tool("end_session", json!({ "session": "a" }))
        .await;
    assert_eq!(structured(&ended)["ended"], true, "{ended}");
    image
        .wait_for_containers(|now| now.len() < containers)
        .await;
    let fresh = python(&mut server, Some("a"), &defined("data")).await;
    assert_eq!(stdout(&fresh), "False\n");
    assert_eq!(structured(&fresh)["session"]["call"], 1);

    assert_eq!(
        server.close().await,
        code_sandbox_mcp::mcp::ServeEnd::InputClosed
    );
    let left = image.wait_for_containers(|now| now.is_empty()).await;
    assert!(left.is_empty(), "disconnect leaves no containers: {left:?}");
}

async fn the_check_sees_what_earlier_calls_bound() {
    let (_image, mut server) = server_with("session-check", "").await;
    let bound = python(&mut server, Some("s"), "import os as q\nprint('ok')").await;
    assert!(!is_error(&bound), "{bound}");
    let misuse = python(&mut server, Some("s"), "\nq.system('id')").await;
    assert_eq!(structured(&misuse)["status"], "denied", "{misuse}");
    let finding = &structured(&misuse)["findings"][0];
    assert_eq!(finding["rule"], "process-exec");
    assert_eq!(finding["line"], 2, "the call's own line: {finding}");
    // Without the session the same line is harmless: `q` means nothing there.
    let alone = python(&mut server, None, "q = None\nprint(q)").await;
    assert!(!is_error(&alone), "{alone}");

    // What the static check cannot see, the session's audit hook still stops.
    let armed = python(
        &mut server,
        Some("s"),
        "import logging.config\nhandler = {'command': 'id'}\nhandler['()'] = 'os.' + 'system'",
    )
    .await;
    assert!(!is_error(&armed), "{armed}");
    let fired = python(
        &mut server,
        Some("s"),
        "logging.config.dictConfig({'version': 1, 'handlers': {'h': handler}})",
    )
    .await;
    assert_eq!(structured(&fired)["status"], "blocked", "{fired}");
    assert_eq!(
        structured(&fired)["findings"][0]["layer"],
        "python-audit-hook"
    );
    assert!(
        structured(&fired)["session"]["ended"].is_string(),
        "{fired}"
    );

    // JavaScript keeps top-level bindings, and the check follows them too.
    let js = javascript(
        &mut server,
        "j",
        "const cp = require('fs');\nlet n = 2;\nfunction twice(x) { return x * n; }",
    )
    .await;
    assert!(!is_error(&js), "{js}");
    let js2 = javascript(
        &mut server,
        "j",
        "console.log(twice(21), typeof cp.readFileSync)",
    )
    .await;
    assert_eq!(stdout(&js2), "42 function\n", "{js2}");
    let alias = javascript(&mut server, "k", "const load = require;").await;
    assert!(!is_error(&alias), "{alias}");
    let js_bound = javascript(&mut server, "k", "load('child_process').execSync('id')").await;
    assert_eq!(structured(&js_bound)["status"], "denied", "{js_bound}");
    server.close().await;
}

async fn javascript_sessions_keep_imports_and_awaited_values() {
    let (_image, mut server) = server_with("session-js", "").await;
    let first = javascript(
        &mut server,
        "js",
        "import os from 'node:os';\nimport { join } from 'node:path';\nconst answer = await Promise.resolve(42);\nclass Box { constructor(v) { this.v = v } }",
    )
    .await;
    assert!(!is_error(&first), "{first}");
    assert_eq!(structured(&first)["exit_code"], 0, "{first}");
    let second = javascript(
        &mut server,
        "js",
        "console.log(typeof os.cpus, join('a', 'b'), answer, new Box(1).v)",
    )
    .await;
    assert_eq!(stdout(&second), "function a/b 42 1\n", "{second}");
    let thrown = javascript(&mut server, "js", "\nthrow new Error('boom')").await;
    assert_eq!(structured(&thrown)["exit_code"], 1);
    let stderr = structured(&thrown)["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("Error: boom") && stderr.contains("<call 3>:2"),
        "{stderr}"
    );
    assert!(!stderr.contains("node_guard"), "{stderr}");
    // The session outlives an error; the run-time layers hold throughout.
    let blocked = javascript(&mut server, "js", "process.binding('spawn_sync')").await;
    assert_eq!(structured(&blocked)["status"], "denied", "{blocked}");
    server.close().await;
}

/// As in Node's REPL: a cell runs again, an import again; what a call schedules for
/// soon comes in its own result; an error thrown by a timer is said and the session
/// goes on; work still running after the grace period is said too.
async fn a_javascript_session_behaves_like_the_repl() {
    let (_image, mut server) = server_with("session-repl", "").await;
    let cell = "import { join } from 'node:path';\nconst os = require('node:os');\nlet count = (globalThis.count || 0) + 1;\nclass Box { constructor(v) { this.v = v } }\nconsole.log(count, join('a', 'b'), typeof os.cpus, new Box(2).v)";
    let first = javascript(&mut server, "repl", cell).await;
    assert_eq!(stdout(&first), "1 a/b function 2\n", "{first}");
    let again = javascript(&mut server, "repl", cell).await;
    assert_eq!(
        stdout(&again),
        "2 a/b function 2\n",
        "the same cell again: {again}"
    );
    assert_eq!(structured(&again)["exit_code"], 0, "{again}");

    let soon = javascript(
        &mut server,
        "repl",
        "setTimeout(() => console.log('timer'), 300);\nPromise.resolve().then(() => console.log('promise'));\nconsole.log('now')",
    )
    .await;
    assert_eq!(stdout(&soon), "now\npromise\ntimer\n", "{soon}");

    let thrown = javascript(
        &mut server,
        "repl",
        "setTimeout(() => { throw new Error('from a timer') }, 20);\nPromise.reject(new Error('unhandled'));\nconsole.log('scheduled')",
    )
    .await;
    assert_eq!(stdout(&thrown), "scheduled\n", "{thrown}");
    let stderr = structured(&thrown)["stderr"].as_str().unwrap();
    assert!(stderr.contains("Uncaught Error: from a timer"), "{thrown}");
    assert!(stderr.contains("Uncaught Error: unhandled"), "{thrown}");
    assert_eq!(
        structured(&thrown)["session"]["ended"],
        Value::Null,
        "{thrown}"
    );
    let after = javascript(&mut server, "repl", "console.log(count)").await;
    assert_eq!(stdout(&after), "2\n", "the session went on: {after}");

    let background = javascript(
        &mut server,
        "repl",
        "globalThis.ticks = 0;\nglobalThis.ticker = setInterval(() => ticks++, 50);\nconsole.log('started')",
    )
    .await;
    assert_eq!(stdout(&background), "started\n", "{background}");
    let stderr = structured(&background)["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("still run in the background"),
        "{background}"
    );
    let stopped = javascript(
        &mut server,
        "repl",
        "clearInterval(ticker);\nconsole.log(ticks > 0)",
    )
    .await;
    assert_eq!(stdout(&stopped), "true\n", "{stopped}");
    assert_eq!(structured(&stopped)["stderr"], "", "{stopped}");
    server.close().await;
}

/// `sessions.settle` sets how long a call waits for the work it started; the wait
/// stops short of the call's own timeout, which would end the session.
async fn how_long_a_javascript_call_waits_is_the_policys() {
    let (_image, mut server) = server_with("session-settle", "sessions: { settle: 0s }\n").await;
    let soon = javascript(
        &mut server,
        "s",
        "setTimeout(() => console.log('late'), 300);\nconsole.log('now')",
    )
    .await;
    assert_eq!(stdout(&soon), "now\n", "no wait under settle: 0s: {soon}");
    assert!(
        structured(&soon)["stderr"]
            .as_str()
            .unwrap()
            .contains("1 timer(s) or request(s) this call started still run in the background"),
        "{soon}"
    );
    // The interpreter waits for the next call without running its event loop: the
    // timer, long due, fires once the next call's code has run, and prints with it.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let later = javascript(&mut server, "s", "console.log('next')").await;
    assert_eq!(stdout(&later), "next\nlate\n", "{later}");
    server.close().await;

    let (_image, mut server) =
        server_with("session-settle-long", "sessions: { settle: 1h }\n").await;
    let ticking = server
        .client
        .call_tool(
            "run_javascript_code",
            json!({ "code": "setInterval(() => {}, 50);\nconsole.log('started')", "session": "t", "timeout": 2 }),
        )
        .await;
    assert_eq!(structured(&ticking)["timed_out"], false, "{ticking}");
    assert_eq!(stdout(&ticking), "started\n", "{ticking}");
    assert_eq!(
        structured(&ticking)["session"]["ended"],
        Value::Null,
        "the wait stopped short of the timeout: {ticking}"
    );
    server.close().await;
}

async fn a_timed_out_or_exited_session_ends_and_says_so() {
    let (image, mut server) = server_with("session-end", "").await;
    python(&mut server, Some("t"), "x = 1").await;
    let slow = server
        .client
        .call_tool(
            "run_python_code",
            json!({ "code": "import time\nprint('started', flush=True)\ntime.sleep(60)", "session": "t", "timeout": 2 }),
        )
        .await;
    let result = structured(&slow);
    assert_eq!(result["timed_out"], true, "{slow}");
    assert_eq!(result["stdout"], "started\n");
    assert!(
        result["session"]["ended"]
            .as_str()
            .unwrap()
            .contains("time limit"),
        "{slow}"
    );
    let after = python(&mut server, Some("t"), &defined("x")).await;
    assert_eq!(stdout(&after), "False\n", "a new session: {after}");

    let exits = python(
        &mut server,
        Some("t"),
        "import sys\nprint('bye')\nsys.exit(3)",
    )
    .await;
    assert_eq!(structured(&exits)["exit_code"], 3, "{exits}");
    assert_eq!(stdout(&exits), "bye\n");
    assert!(structured(&exits)["session"]["ended"]
        .as_str()
        .unwrap()
        .contains("exit code 3"));
    server.close().await;
    let left = image.wait_for_containers(|now| now.is_empty()).await;
    assert!(left.is_empty(), "{left:?}");
}

/// Another program on the machine removes the session's container mid-call: the call
/// says so, not "exit code 137", and the session's end reason names it.
async fn a_container_removed_from_outside_ends_its_session_and_says_so() {
    let (image, mut server) = server_with("session-outside", "").await;
    python(&mut server, Some("o"), "x = 1").await;
    let containers = image.containers();
    assert_eq!(containers.len(), 1, "{containers:?}");
    let victim = containers[0].clone();
    let remover = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::process::Command::new("docker")
            .args(["rm", "-f", &victim])
            .output()
            .expect("docker rm")
    });
    let slow = server
        .client
        .call_tool(
            "run_python_code",
            json!({ "code": "import time\nprint('started', flush=True)\ntime.sleep(60)", "session": "o", "timeout": 30 }),
        )
        .await;
    assert!(remover.join().unwrap().status.success());
    let result = structured(&slow);
    assert_eq!(result["stdout"], "started\n", "{slow}");
    assert_eq!(result["timed_out"], false, "{slow}");
    assert_eq!(result["oom_killed"], false, "{slow}");
    assert_eq!(result["killed_outside"], true, "{slow}");
    assert!(
        result["stderr"]
            .as_str()
            .unwrap()
            .contains("removed or killed from outside the sandbox"),
        "{slow}"
    );
    assert!(
        result["session"]["ended"]
            .as_str()
            .unwrap()
            .contains("removed or killed from outside the sandbox"),
        "{slow}"
    );
    // The next call starts a new session.
    let after = python(&mut server, Some("o"), &defined("x")).await;
    assert_eq!(stdout(&after), "False\n", "a new session: {after}");
    server.close().await;
    let left = image.wait_for_containers(|now| now.is_empty()).await;
    assert!(left.is_empty(), "{left:?}");
}

async fn an_out_of_memory_call_ends_its_session_and_says_so() {
    let (image, mut server) = server_with("session-oom", "limits:\n  memory: 64MiB\n").await;
    python(&mut server, Some("m"), "kept = 1").await;
    let hog = python(
        &mut server,
        Some("m"),
        "print('before', flush=True)\nx = bytearray(400 * 1024 * 1024)",
    )
    .await;
    let result = structured(&hog);
    assert_eq!(result["oom_killed"], true, "{hog}");
    assert_eq!(result["stdout"], "before\n");
    assert!(
        result["session"]["ended"]
            .as_str()
            .unwrap()
            .contains("out of memory"),
        "{hog}"
    );
    let after = python(&mut server, Some("m"), &defined("kept")).await;
    assert_eq!(stdout(&after), "False\n", "a new session: {after}");
    server.close().await;
    let left = image.wait_for_containers(|now| now.is_empty()).await;
    assert!(left.is_empty(), "{left:?}");
}

async fn the_policy_sets_whether_sessions_exist_how_many_and_how_long() {
    let (image, mut server) = server_with(
        "session-policy",
        "sessions:\n  max: 1\n  idle_timeout: 1s\n",
    )
    .await;
    python(&mut server, Some("one"), "x = 1").await;
    let second = python(&mut server, Some("two"), "x = 2").await;
    assert!(is_error(&second), "{second}");
    assert!(
        structured(&second)["message"]
            .as_str()
            .unwrap()
            .contains("sessions.max"),
        "{second}"
    );
    // Idle past its limit, the first ends on its own and its container goes.
    let left = image.wait_for_containers(|now| now.is_empty()).await;
    assert!(
        left.is_empty(),
        "the idle session's container is removed: {left:?}"
    );
    let again = python(&mut server, Some("one"), &defined("x")).await;
    assert_eq!(stdout(&again), "False\n", "{again}");
    server.close().await;

    let (image, mut server) = server_with("session-off", "sessions:\n  allowed: false\n").await;
    let refused = python(&mut server, Some("one"), "print(1)").await;
    assert!(is_error(&refused));
    assert!(structured(&refused)["message"]
        .as_str()
        .unwrap()
        .contains("turned off"));
    assert!(image.containers().is_empty(), "nothing ran");
    server.close().await;
}
