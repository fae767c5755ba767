//! The adversarial corpus (fixtures/attacks) and the harmless-but-tricky set
//! (fixtures/harmless), end to end through the real engine and the offline image.
//!
//! Every attack was verified on a host to really start a process (its child prints
//! CANARY-PROC-42, which the snippet never spells) or to run code built from a string
//! (which prints CANARY-CODE-42). Through the sandbox, with the default policy:
//! - no attack starts a process, whether the static check is on or off (the run-time
//!   layers alone must hold);
//! - none runs string-built code;
//! - no harmless snippet is refused (by the check or at run time).
//!
//! Runs are spread over a few sandboxes at once; each run gets a fresh container.

use crate::common;

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{HumanDuration, Policy, PolicyEngine};
use code_sandbox_mcp::sandbox::{RunOutcome, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

crate::common::harness::tests! {
    multi_thread(2) no_attack_gets_through_the_three_layers needs common::DOCKER;
    multi_thread(2) the_run_time_layers_alone_stop_every_attack needs common::DOCKER;
    multi_thread(2) harmless_code_runs needs common::DOCKER;
    sync the_static_check_alone_denies_what_it_knows;
}

const PROCESS_CANARY: &str = "CANARY-PROC-42";
const CODE_CANARY: &str = "CANARY-CODE-42";

fn files(dir: &str) -> Vec<(PathBuf, Language)> {
    let mut found = Vec::new();
    for language_dir in ["python", "javascript"] {
        let path = common::root().join(dir).join(language_dir);
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if let Some(language) = Language::from_path(&path) {
                found.push((path, language));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The interpreter versions of the offline image: a fixture may say `requires:
/// python>=3.12` on its second line.
fn runnable_here(source: &str) -> bool {
    let Some(line) = source.lines().nth(1) else {
        return true;
    };
    let Some(requirement) = line.split("requires:").nth(1) else {
        return true;
    };
    let requirement = requirement.trim();
    if let Some(version) = requirement.strip_prefix("python>=3.") {
        return version.trim().parse::<u32>().is_ok_and(|minor| minor <= 13);
    }
    if let Some(version) = requirement.strip_prefix("node>=") {
        return version.trim().parse::<u32>().is_ok_and(|major| major <= 20);
    }
    true
}

/// The default policy on the library images (numpy, pandas, sympy…; lodash, d3…),
/// which some attacks need: the offline image is their base.
fn policy() -> Arc<Policy> {
    let python = common::library_image(Language::Python).to_string();
    let javascript = common::library_image(Language::JavaScript).to_string();
    common::test_policy(|policy| {
        policy.pool.size = 2;
        policy.pool.max_concurrent = 2;
        policy.limits.timeout = HumanDuration(Duration::from_secs(45));
        policy.images.python = vec![python];
        policy.images.javascript = vec![javascript];
    })
}

/// What became of one snippet.
#[derive(Debug)]
struct Verdict {
    file: PathBuf,
    denied_statically: bool,
    outcome: Option<RunOutcome>,
}

impl Verdict {
    fn output_contains(&self, needle: &str) -> bool {
        self.outcome
            .as_ref()
            .is_some_and(|o| o.stdout.contains(needle) || o.stderr.contains(needle))
    }
}

/// Checks each file with the policy (unless `skip_check`) and runs what is allowed.
async fn judge(all: &[(PathBuf, Language)], skip_check: bool) -> Vec<Verdict> {
    let policy = policy();
    let engine = PolicyEngine::new(policy.as_ref().clone());
    let sandbox = Sandbox::new(policy);
    let mut tasks = Vec::new();
    for (path, language) in all.iter().cloned() {
        let source = std::fs::read_to_string(&path).unwrap();
        if !runnable_here(&source) {
            continue;
        }
        let report = engine.check(language, &source).expect("checkable");
        let denied = !skip_check && report.denied();
        let sandbox = sandbox.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = if denied {
                None
            } else {
                let request = common::request(language, &source);
                Some(
                    sandbox
                        .run(request, CancellationToken::new())
                        .await
                        .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
                )
            };
            Verdict {
                file: path,
                denied_statically: denied,
                outcome,
            }
        }));
    }
    let mut verdicts = Vec::new();
    for task in tasks {
        verdicts.push(task.await.expect("a run task"));
    }
    sandbox.shutdown().await;
    verdicts
}

fn name(path: &Path) -> String {
    path.strip_prefix(common::root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn payload(path: &Path) -> &'static str {
    let first = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    if first.contains("attack: process") {
        "process"
    } else {
        "code"
    }
}

fn assert_attacks_held(verdicts: &[Verdict], label: &str) {
    let started: Vec<String> = verdicts
        .iter()
        .filter(|v| v.output_contains(PROCESS_CANARY))
        .map(|v| name(&v.file))
        .collect();
    let string_code: Vec<String> = verdicts
        .iter()
        .filter(|v| v.output_contains(CODE_CANARY))
        .map(|v| name(&v.file))
        .collect();
    let static_denials = verdicts.iter().filter(|v| v.denied_statically).count();
    let blocked = verdicts
        .iter()
        .filter(|v| v.outcome.as_ref().is_some_and(|o| !o.blocked.is_empty()))
        .count();
    eprintln!(
        "{label}: {} attacks, {static_denials} denied by the check, {blocked} stopped at run time, \
         {} started a process, {} ran string-built code {string_code:?}",
        verdicts.len(),
        started.len(),
        string_code.len()
    );
    assert!(
        started.is_empty(),
        "{label}: these started a process: {started:#?}"
    );
    // None at all: a 2% allowance once hid a regression (an exit handler's `exec`).
    assert!(
        string_code.is_empty(),
        "{label}: {} of {} ran string-built code: {string_code:#?}",
        string_code.len(),
        verdicts.len()
    );
}

async fn no_attack_gets_through_the_three_layers() {
    let attacks = files("fixtures/attacks");
    assert!(
        attacks.len() >= 150,
        "the corpus has {} attacks",
        attacks.len()
    );
    let verdicts = judge(&attacks, false).await;
    assert_attacks_held(&verdicts, "static check + run time");
    let processes = attacks
        .iter()
        .filter(|(p, _)| payload(p) == "process")
        .count();
    assert!(processes >= 50, "only {processes} process attacks");
}

/// The static check switched off: the run-time layers and the kernel floor alone.
async fn the_run_time_layers_alone_stop_every_attack() {
    let verdicts = judge(&files("fixtures/attacks"), true).await;
    assert_attacks_held(&verdicts, "run time alone");
}

async fn harmless_code_runs() {
    let harmless = files("fixtures/harmless");
    assert!(
        harmless.len() >= 40,
        "only {} harmless snippets",
        harmless.len()
    );
    let verdicts = judge(&harmless, false).await;
    let refused: Vec<String> = verdicts
        .iter()
        .filter(|v| {
            v.outcome.as_ref().is_none_or(|o| {
                !o.blocked.is_empty() || o.exit_code != 0 || !o.stdout.contains("HARMLESS-OK")
            })
        })
        .map(|v| match &v.outcome {
            None => format!("{}: denied by the check", name(&v.file)),
            Some(o) => format!(
                "{}: exit {}{}, blocked {:?}, stderr {}",
                name(&v.file),
                o.exit_code,
                if o.timed_out { " (timed out)" } else { "" },
                o.blocked.iter().map(|f| &f.message).collect::<Vec<_>>(),
                o.stderr.chars().take(300).collect::<String>()
            ),
        })
        .collect();
    eprintln!(
        "harmless: {} snippets, {} refused: {refused:#?}",
        verdicts.len(),
        refused.len()
    );
    assert!(
        refused.is_empty(),
        "{} harmless snippets refused: {refused:#?}",
        refused.len()
    );
}

/// The run-time layers switched off leave the static check alone: how much of the
/// corpus it refuses before anything runs. `strict` denies everything the check
/// knows; `default` only reports what merely kept the check complete (introspection,
/// computed attributes, deserialization: the kernel, the container and the run-time
/// guard stop what those lead to, as the tests above show).
fn the_static_check_alone_denies_what_it_knows() {
    let attacks = files("fixtures/attacks");
    let passed_with = |preset: &str| {
        let engine = PolicyEngine::new(Policy::preset(preset).expect("a preset"));
        let mut passed: Vec<String> = attacks
            .iter()
            .filter(|(path, language)| {
                let source = std::fs::read_to_string(path).unwrap();
                !engine.check(*language, &source).unwrap().denied()
            })
            .map(|(path, _)| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        passed.sort();
        eprintln!(
            "static check alone, {preset}: {} of {} attacks denied",
            attacks.len() - passed.len(),
            attacks.len()
        );
        passed
    };
    // 130 of 162 at first; 143 after the name resolvers joined the default policy; all
    // of those 162 once string annotations, type-parameter bounds, module files,
    // `with`, the wrapper's `arguments` and function constructors were known. The
    // attacks below are beyond what a static check can see (data built at run time,
    // a `this` chosen by the caller); the run-time tests above show them stopped.
    // A new attack the check misses must be taught to it or listed here.
    assert_eq!(
        passed_with("strict"),
        BEYOND_THE_STATIC_CHECK,
        "attacks the static check lets through under strict, against those known to be beyond it"
    );
    // Under default, the attacks it lets through more are those that need one of the
    // rules `default` only warns about.
    let warned: Vec<String> = passed_with("default")
        .into_iter()
        .filter(|name| !BEYOND_THE_STATIC_CHECK.contains(&name.as_str()))
        .collect();
    assert_eq!(
        warned, WARNED_BY_DEFAULT,
        "attacks only strict denies statically"
    );
}

/// Attacks no static check can refuse without refusing ordinary code too: data built
/// at run time, a `this` chosen by the caller, strings a library the policy lets
/// evaluate strings is handed (sympy, string annotations, lodash's template, d3's
/// converter fed a replaced `JSON.stringify`), a library's function
/// replaced by assignment (`fs.readFileSync`, which the loader uses), and paths spelled to be
/// `/proc/self/mem` only once resolved (the kernel refuses the write: nothing under
/// /proc is writable), a computed `require` name ending in `.json` that is a file
/// named `.json` (JavaScript to Node) only once the run picks its folder.
const BEYOND_THE_STATIC_CHECK: &[&str] = &[
    "063_this_constructor_called_on_function.js",
    "064_reflect_construct_constructor.js",
    "077_replaced_read_file.js",
    "085_template_code_process.js",
    "086_d3_converter_injected_function.js",
    "088_json_dotfile_is_javascript.js",
    "101_logging_config_subscript_store.py",
    "102_logging_config_json.py",
    "103_annotations_dict_store.py",
    "117_string_annotation_arithmetic.py",
    "118_inspect_signature_eval_str.py",
    "123_proc_mem_pathlike.py",
    "124_proc_mem_task.py",
    "126_sympify_process.py",
    "127_sympify_exec_inside.py",
];

/// Attacks the static check finds only through rules `default` reports and `strict`
/// denies (an object-graph walk, an attribute picked by a computed name, a pickle, a
/// path outside the sandbox's folders).
/// Each one is stopped at run time or by the kernel all the same.
const WARNED_BY_DEFAULT: &[&str] = &[
    "024_reduce_getattr.py",
    "062_pickle_raw_bytes.py",
    "066_subclasses_wrap_close.py",
    "067_function_globals.py",
    "069_generator_frame.py",
    "070_traceback_frame.py",
    "080_module_dict.py",
    "083_lodash_attempt_launders_function.js",
    "084_forged_prepare_stack_trace.js",
    "087_callsite_prototype_patched.js",
    "091_code_replace.py",
    "099_globals_builtins_exec.py",
    "119_proc_mem_double_slash.py",
    "120_proc_mem_dotdot.py",
    "121_proc_mem_dir_fd.py",
    "122_proc_mem_symlink.py",
    "137_pickle_loads_exec.py",
];
