//! The run-time layers against the real engine and the offline image: each stops what
//! it is for with the static check out of the way (the tests call the sandbox directly,
//! as if the checker had let everything through), reports like a denial, keeps the
//! output printed before the stop, and installs nothing for a rule that only warns.

use crate::common;

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{Layer, Policy};
use code_sandbox_mcp::sandbox::{assets, RunOutcome, Sandbox, SandboxError};
use sandbox_supervisor::wire::{FromBox, Status};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) python_audit_hooks_stop_a_process_the_checker_would_have_missed needs common::DOCKER;
    multi_thread(2) a_library_starting_a_process_gets_an_error_and_nothing_starts needs common::DOCKER;
    multi_thread(2) python_string_code_from_the_snippet_is_stopped_and_library_code_is_not needs common::DOCKER;
    multi_thread(2) python_keeps_its_usual_semantics_under_the_guard needs common::DOCKER;
    multi_thread(2) a_rule_at_warn_installs_nothing_at_run_time needs common::DOCKER;
    multi_thread(2) the_kernel_floor_alone_stops_fork_and_exec needs common::DOCKER;
    sync the_kernel_keeps_the_filesystem_closed needs common::DOCKER;
    multi_thread(2) node_guard_stops_a_built_module_name_and_codegen needs common::DOCKER;
    multi_thread(2) node_without_a_permission_model_is_refused_not_run_with_less needs common::DOCKER;
    multi_thread(2) gvisor_runs_the_code_when_the_policy_asks_for_it needs common::DOCKER, common::GVISOR;
    multi_thread(2) a_runtime_the_engine_lacks_is_refused_not_replaced needs common::DOCKER;
}

const CANARY: &str = "CANARY-PROC-42";

fn policy(adjust: impl FnOnce(&mut Policy)) -> Arc<Policy> {
    common::test_policy(|policy| {
        policy.pool.size = 0;
        adjust(policy);
    })
}

async fn run_with(
    policy: Arc<Policy>,
    language: Language,
    code: &str,
) -> Result<RunOutcome, SandboxError> {
    let sandbox = Sandbox::new(policy);
    let outcome = sandbox
        .run(common::request(language, code), CancellationToken::new())
        .await;
    sandbox.shutdown().await;
    outcome
}

async fn run(language: Language, code: &str) -> RunOutcome {
    run_with(policy(|_| {}), language, code)
        .await
        .expect("the run happens")
}

async fn python_audit_hooks_stop_a_process_the_checker_would_have_missed() {
    let code = "import os\nprint('before', flush=True)\nf = getattr(os, ''.join(['sys', 'tem']))\nf('echo CANARY-PROC-$((40+2))')\nprint('after')\n";
    let outcome = run(Language::Python, code).await;
    assert_eq!(outcome.stdout, "before\n", "{outcome:?}");
    // The hook's record went to the supervisor, not into the program's stderr.
    assert!(!outcome.stderr.contains("python-audit-hook"), "{outcome:?}");
    let block = outcome
        .blocked
        .first()
        .unwrap_or_else(|| panic!("not blocked: {outcome:?}"));
    assert_eq!(block.rule, "process-exec");
    assert_eq!(block.layer, Layer::PythonAuditHook);
    assert_eq!(block.line, 4, "{block:?}");
    assert!(block.message.contains("os.system"), "{block:?}");
    assert_eq!(outcome.exit_code, 126);
}

async fn a_library_starting_a_process_gets_an_error_and_nothing_starts() {
    // `platform.processor()` runs `uname -p` (pandas' import calls it): the library
    // copes with the refusal as on a system without `uname`. A library helper that
    // runs a command of the caller's choosing is refused the same way: nothing runs.
    let code = "import platform, uuid, os\n\
                print(repr(platform.processor()))\n\
                out = uuid._get_command_stdout('sh', '-c', 'touch /tmp/started; echo CANARY')\n\
                print(out, os.path.exists('/tmp/started'))\n";
    let outcome = run(Language::Python, code).await;
    assert_eq!(outcome.stdout, "''\nNone False\n", "{outcome:?}");
    assert_eq!(outcome.exit_code, 0, "{outcome:?}");
    assert!(outcome.blocked.is_empty(), "{outcome:?}");
    // The snippet's own attempt through the same plumbing still ends the run.
    let own = run(
        Language::Python,
        "import subprocess\ntry:\n    subprocess.run(['true'])\nexcept Exception:\n    print('caught')\n",
    )
    .await;
    assert_eq!(own.exit_code, 126, "{own:?}");
    assert_eq!(own.stdout, "", "{own:?}");
    assert_eq!(own.blocked.len(), 1, "{own:?}");
}

async fn python_string_code_from_the_snippet_is_stopped_and_library_code_is_not() {
    let code = "import dataclasses, collections\n@dataclasses.dataclass\nclass P:\n    x: int\nprint(dataclasses.asdict(P(1)), collections.namedtuple('T', 'a b')(1, 2))\nsrc = 'print(\"CANARY-CODE-\" + str(6*7))'\nexec(src)\n";
    let outcome = run(Language::Python, code).await;
    assert_eq!(outcome.stdout, "{'x': 1} T(a=1, b=2)\n", "{outcome:?}");
    assert!(!outcome.stdout.contains("CANARY-CODE-42"));
    let block = outcome
        .blocked
        .first()
        .unwrap_or_else(|| panic!("not blocked: {outcome:?}"));
    assert_eq!(block.rule, "dynamic-code");
    assert_eq!(block.line, 7);
}

async fn python_keeps_its_usual_semantics_under_the_guard() {
    let code = "import sys\nprint(__name__, __file__, sys.argv, sys.path[0])\nprint(sorted(k for k in globals() if not k.startswith('__')))\nraise KeyError('boom')\n";
    let outcome = run(Language::Python, code).await;
    assert_eq!(
        outcome.stdout, "__main__ /sandbox/main.py ['main.py'] /sandbox\n['sys']\n",
        "{outcome:?}"
    );
    assert_eq!(outcome.exit_code, 1);
    assert!(outcome.blocked.is_empty());
    assert!(
        outcome.stderr.contains("File \"/sandbox/main.py\", line 4"),
        "{}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains("python_guard"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.trim_end().ends_with("KeyError: 'boom'"),
        "{}",
        outcome.stderr
    );
    let exit = run(Language::Python, "import sys\nsys.exit(3)\n").await;
    assert_eq!(exit.exit_code, 3, "{exit:?}");
    // A syntax error the checker let through (its parser and CPython's may differ)
    // reads as Python prints it, without the bootstrap's frame.
    let syntax = run(Language::Python, "x = 1\n  y = 2\n").await;
    assert_eq!(syntax.exit_code, 1, "{syntax:?}");
    assert!(
        syntax
            .stderr
            .starts_with("  File \"/sandbox/main.py\", line 2"),
        "{}",
        syntax.stderr
    );
    assert!(
        syntax.stderr.contains("IndentationError"),
        "{}",
        syntax.stderr
    );
}

async fn a_rule_at_warn_installs_nothing_at_run_time() {
    let warn_only = policy(common::warn_only);
    // With every rule at warn a process starts; the hardening filter stays on.
    let code = "import os, ctypes\nos.system('echo CANARY-PROC-$((40+2))')\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('io_uring_setup', libc.syscall(425, 8, None), ctypes.get_errno())\n";
    let outcome = run_with(warn_only, Language::Python, code)
        .await
        .expect("runs");
    assert_eq!(
        outcome.stdout,
        format!("{CANARY}\nio_uring_setup -1 1\n"),
        "{outcome:?}"
    );
    assert!(outcome.blocked.is_empty());
}

/// The kernel floor alone: the interpreter started by the supervisor with no audit
/// hooks at all still cannot start a process, by any route, and every attempt is
/// reported by the supervisor (outside the program's reach) with what it named.
async fn the_kernel_floor_alone_stops_fork_and_exec() {
    let script = r#"
import os, subprocess, threading
t = threading.Thread(target=lambda: print("thread ok")); t.start(); t.join()
def attempt(name, f):
    try:
        f(); print(name, "RAN")
    except OSError as e:
        print(name, "errno", e.errno)
attempt("fork", os.fork)
attempt("popen", lambda: subprocess.run(["/bin/echo", "CANARY-PROC-" + "42"]))
attempt("posix_spawn", lambda: os.posix_spawn("/bin/echo", ["echo", "x"], {}))
fd = os.memfd_create("m"); os.write(fd, open("/bin/echo", "rb").read())
attempt("fexecve", lambda: os.execve(fd, ["echo", "x"], {}))
attempt("execv", lambda: os.execv("/bin/sh", ["sh", "-c", "echo CANARY-PROC-$((40+2))"]))
attempt("kill the supervisor", lambda: os.kill(os.getppid(), 9))
print("system", os.system("echo CANARY-PROC-$((40+2))"))
"#;
    let run = supervised(&["--floor", "--protect"], script);
    assert!(!run.stdout.contains(CANARY), "{}", run.stdout);
    for line in [
        "thread ok",
        "fork errno 1",
        "popen errno 1",
        "posix_spawn errno 1",
        "fexecve errno 1",
        "execv errno 1",
        "kill the supervisor errno 1",
    ] {
        assert!(
            run.stdout.contains(line),
            "missing `{line}` in:\n{}\n{}",
            run.stdout,
            run.stderr
        );
    }
    // Each attempt is on the supervisor's record, with what it named.
    let refused = &run.refused;
    assert!(refused.iter().any(|r| r == "execve /bin/sh"), "{refused:?}");
    assert!(
        refused.iter().any(|r| r.starts_with("execveat")),
        "{refused:?}"
    );
    assert!(
        refused.iter().any(|r| r.starts_with("clone")),
        "{refused:?}"
    );
    assert_eq!(run.end, Some((Status::Exited(0), true)), "{}", run.stdout);
}

/// Landlock alone, with no hooks: nothing outside the writable places can be written,
/// `/proc/self/mem` cannot be opened for writing, and with a read limit (a filesystem
/// rule that denies) nothing outside the readable places can be read.
fn the_kernel_keeps_the_filesystem_closed() {
    let script = r#"
import os
def attempt(name, f):
    try:
        f(); print(name, "ok")
    except OSError as e:
        print(name, "errno", e.errno)
attempt("write sandbox", lambda: open("/sandbox/a.txt", "w").write("x"))
attempt("write tmp", lambda: open("/tmp/b.txt", "w").write("x"))
attempt("write devnull", lambda: open("/dev/null", "w").write("x"))
attempt("proc mem", lambda: open("/proc/self/mem", "r+b"))
attempt("proc attr", lambda: open("/proc/self/attr/current", "w"))
attempt("read var", lambda: open("/var/lib/dpkg/status").read(1))
attempt("read usr", lambda: open("/usr/lib/os-release").read(1))
"#;
    let open = supervised(
        &[
            "--protect",
            "--write",
            "/sandbox",
            "--write",
            "/tmp",
            "--write-file",
            "/dev/null",
        ],
        script,
    );
    for line in [
        "write sandbox ok",
        "write tmp ok",
        "write devnull ok",
        "proc mem errno 13",
        "proc attr errno 13",
        "read var ok",
        "read usr ok",
    ] {
        assert!(
            open.stdout.contains(line),
            "missing `{line}` in:\n{}\n{}",
            open.stdout,
            open.stderr
        );
    }
    let mut limited = vec![
        "--protect",
        "--write",
        "/sandbox",
        "--write",
        "/tmp",
        "--write-file",
        "/dev/null",
    ];
    for dir in [
        "/usr", "/lib", "/lib64", "/bin", "/etc", "/proc", "/dev", "/sandbox", "/tmp",
    ] {
        limited.extend(["--read", dir]);
    }
    let limited = supervised(&limited, script);
    for line in [
        "write sandbox ok",
        "proc mem errno 13",
        "read var errno 13",
        "read usr ok",
    ] {
        assert!(
            limited.stdout.contains(line),
            "missing `{line}` in:\n{}\n{}",
            limited.stdout,
            limited.stderr
        );
    }
}

/// What the supervisor reported of one run.
struct Supervised {
    stdout: String,
    stderr: String,
    refused: Vec<String>,
    end: Option<(Status, bool)>,
}

/// Runs `script` with python3 as the interpreter of the embedded supervisor, in a
/// container started as the sandbox starts its boxes, with the supervisor's `options`
/// and no hooks at all; reads the supervisor's frames.
fn supervised(options: &[&str], script: &str) -> Supervised {
    let dir = common::scratch("supervised");
    let (_, bytes, _) = assets::files()
        .into_iter()
        .find(|(name, _, _)| *name == assets::SUPERVISOR_FILE)
        .unwrap();
    assert!(!bytes.is_empty(), "this platform has no supervisor");
    let helper = dir.join("supervisor");
    std::fs::write(&helper, bytes).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o555)).unwrap();
    // The supervisor talks frames on stdin and stdout: stdin stays open (a closed one
    // would end the box) until the run is over.
    let mut child = std::process::Command::new("docker")
        .args([
            "run",
            "-i",
            "--rm",
            "--init",
            "--network",
            "none",
            "--user",
            "65534:65534",
        ])
        .args(["--security-opt", "no-new-privileges", "--cap-drop", "ALL"])
        .args([
            "--read-only",
            "--tmpfs",
            "/sandbox:rw,mode=1777",
            "--tmpfs",
            "/tmp:rw,mode=1777",
        ])
        .arg("-v")
        .arg(format!("{}:/guard/supervisor:ro", helper.display()))
        .args([common::LOCAL_IMAGE, "/guard/supervisor"])
        .args(options)
        .args(["--", "/usr/bin/python3", "-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docker run");
    let _stdin = child.stdin.take();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(child.stdout.as_mut().unwrap(), &mut bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    let frames = sandbox_supervisor::wire::Decoder::default()
        .push(&bytes)
        .expect("the supervisor's frames");
    let mut run = Supervised {
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        refused: Vec::new(),
        end: None,
    };
    for frame in frames {
        match frame {
            FromBox::Stdout(chunk) => run.stdout.push_str(&String::from_utf8_lossy(&chunk)),
            FromBox::Stderr(chunk) => run.stderr.push_str(&String::from_utf8_lossy(&chunk)),
            FromBox::Refused { syscall, detail } => run.refused.push(format!("{syscall} {detail}")),
            FromBox::End { status, gone, .. } => run.end = Some((status, gone)),
            _ => {}
        }
    }
    run
}

async fn node_guard_stops_a_built_module_name_and_codegen() {
    let code = "console.log('before');\nconst m = 'child_' + ['pro', 'cess'].join('');\nrequire(m).execSync('echo CANARY-PROC-$((40+2))', {stdio: 'inherit'});\n";
    let outcome = run(Language::JavaScript, code).await;
    assert_eq!(outcome.stdout, "before\n", "{outcome:?}");
    let block = outcome
        .blocked
        .first()
        .unwrap_or_else(|| panic!("not blocked: {outcome:?}"));
    assert_eq!(block.rule, "process-exec");
    assert_eq!(block.layer, Layer::NodeGuard);
    assert_eq!(block.line, 3, "{block:?}");
    let codegen = run(
        Language::JavaScript,
        "const f = [].map.constructor;\nconsole.log(f('return 6*7')());\n",
    )
    .await;
    assert!(!codegen.stdout.contains("42"), "{codegen:?}");
    let block = codegen
        .blocked
        .first()
        .unwrap_or_else(|| panic!("not blocked: {codegen:?}"));
    assert_eq!(block.rule, "dynamic-code");
}

async fn node_without_a_permission_model_is_refused_not_run_with_less() {
    let image = common::OldNodeImage::build();
    let old = policy(|p| p.images.javascript = vec![image.tag.clone()]);
    let result = run_with(old, Language::JavaScript, "console.log(1)").await;
    match result {
        Err(SandboxError::LayerUnavailable(message)) => {
            assert!(message.contains("Node 20 or later"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn gvisor_runs_the_code_when_the_policy_asks_for_it() {
    let gvisor = policy(|p| p.runtime = Some("runsc".into()));
    let code = "import os\nprint(open('/proc/version').read().split()[2])\nos.system('echo CANARY-PROC-$((40+2))')\n";
    let outcome = run_with(gvisor, Language::Python, code)
        .await
        .expect("runs under runsc");
    // gVisor's kernel reports its own fixed version, not the host's.
    assert_eq!(outcome.stdout.lines().next(), Some("4.4.0"), "{outcome:?}");
    assert!(!outcome.stdout.contains(CANARY));
    assert_eq!(outcome.blocked.len(), 1, "{outcome:?}");
}

async fn a_runtime_the_engine_lacks_is_refused_not_replaced() {
    let missing = policy(|p| p.runtime = Some("no-such-runtime".into()));
    match run_with(missing, Language::Python, "print(1)").await {
        Err(SandboxError::LayerUnavailable(message)) => {
            assert!(message.contains("no-such-runtime"), "{message}");
            assert!(message.contains("Nothing was run"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
