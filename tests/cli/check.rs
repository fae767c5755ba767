//! `code-sandbox-mcp check` and `policy` as a user runs them: the real binary, its
//! stdout, stderr and exit codes.

use crate::common::{binary as bin, scratch, spawn_with_input, text};
use std::path::Path;
use std::process::{Output, Stdio};

crate::common::harness::tests! {
    sync noqa_exclude_and_the_summary_exactly;
    sync a_python_312_fstring_says_what_to_write_instead;
    sync noqa_does_not_reach_run_or_the_engine;
    sync the_pre_commit_hook_runs_check_on_the_files_it_is_given;
    sync text_output_and_exit_codes;
    sync directories_are_walked_for_sources_only;
    sync stdin_needs_a_language;
    sync json_output_is_documented_shape;
    sync sarif_output_has_what_code_scanning_needs;
    sync github_annotations;
    sync unreadable_oversize_and_non_utf8_inputs_are_refused_with_a_reason;
    sync bad_policy_is_exit_2_with_location;
    sync project_policy_is_found_from_a_subdirectory_and_flag_overrides_it;
    sync policy_commands;
    sync an_ask_rule_blocks_the_command_line;
}

fn run_in(dir: &Path, args: &[&str]) -> Output {
    bin()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("binary runs")
}

const EVIL_PY: &str = "import os\nos.system('id')\n";
const CLEAN_PY: &str = "import json\nprint(json.dumps({'a': 1}))\n";
const NET_JS: &str = "fetch('http://example.com');\n";

fn text_output_and_exit_codes() {
    let dir = scratch("text");
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();
    std::fs::write(dir.join("clean.py"), CLEAN_PY).unwrap();
    std::fs::write(dir.join("net.js"), NET_JS).unwrap();

    let out = run_in(&dir, &["check", "clean.py"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");

    let out = run_in(&dir, &["check", "evil.py"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("evil.py:2:1: process-exec [deny] "),
        "{stdout}"
    );
    assert!(stdout.contains("`os.system`"), "{stdout}");

    // A warning alone does not fail the check.
    let out = run_in(&dir, &["check", "net.js"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("net.js:1:1: network [warn] "),
        "{}",
        text(&out.stdout)
    );
}

fn directories_are_walked_for_sources_only() {
    let dir = scratch("walk");
    std::fs::create_dir_all(dir.join("src/node_modules/x")).unwrap();
    std::fs::create_dir_all(dir.join(".hidden")).unwrap();
    std::fs::write(dir.join("src/a.py"), EVIL_PY).unwrap();
    std::fs::write(
        dir.join("src/b.mjs"),
        "import { exec } from 'node:child_process';\nexec('id');\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/notes.txt"), "os.system('id')").unwrap();
    std::fs::write(
        dir.join("src/node_modules/x/evil.js"),
        "require('child_process')",
    )
    .unwrap();
    std::fs::write(dir.join(".hidden/evil.py"), EVIL_PY).unwrap();

    let out = run_in(&dir, &["check", "src"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let files: Vec<&str> = stdout
        .lines()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert!(
        files.contains(&"src/a.py") && files.contains(&"src/b.mjs"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("node_modules")
            && !stdout.contains(".hidden")
            && !stdout.contains("notes"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("2 files checked"),
        "{}",
        text(&out.stderr)
    );
}

fn stdin_needs_a_language() {
    let dir = scratch("stdin");
    let mut command = bin();
    command
        .current_dir(&dir)
        .args(["check", "-", "--language", "python"]);
    let out = spawn_with_input(command, EVIL_PY.as_bytes())
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).starts_with("-:2:1: process-exec [deny]"),
        "{}",
        text(&out.stdout)
    );

    let out = bin()
        .current_dir(&dir)
        .args(["check", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("needs --language"),
        "{}",
        text(&out.stderr)
    );
}

fn json_output_is_documented_shape() {
    let dir = scratch("json");
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();
    let out = run_in(&dir, &["check", "--format", "json", "evil.py"]);
    assert_eq!(out.status.code(), Some(1));
    let findings: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let first = &findings.as_array().expect("array")[0];
    for key in [
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "rule",
        "category",
        "action",
        "message",
    ] {
        assert!(first.get(key).is_some(), "missing {key} in {first}");
    }
    assert_eq!(first["file"], "evil.py");
    assert_eq!(first["rule"], "process-exec");
    assert_eq!(first["action"], "deny");
    assert_eq!(first["line"], 2);

    // No findings: an empty array, still valid JSON.
    std::fs::write(dir.join("clean.py"), CLEAN_PY).unwrap();
    let out = run_in(&dir, &["check", "--format", "json", "clean.py"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        serde_json::json!([])
    );
}

fn sarif_output_has_what_code_scanning_needs() {
    let dir = scratch("sarif");
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();
    std::fs::write(dir.join("net.js"), NET_JS).unwrap();
    let out = run_in(&dir, &["check", "--format", "sarif", "evil.py", "net.js"]);
    assert_eq!(out.status.code(), Some(1));
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "code-sandbox-mcp");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for result in run["results"].as_array().unwrap() {
        let index = result["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(
            rules[index],
            result["ruleId"].as_str().unwrap(),
            "ruleIndex points at its rule"
        );
        let region = &result["locations"][0]["physicalLocation"]["region"];
        assert!(region["startLine"].as_u64().unwrap() >= 1);
        assert!(["error", "warning"].contains(&result["level"].as_str().unwrap()));
    }
    let levels: Vec<&str> = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert!(
        levels.contains(&"error") && levels.contains(&"warning"),
        "{levels:?}"
    );
}

fn github_annotations() {
    let dir = scratch("github");
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();
    let out = run_in(&dir, &["check", "--format", "github", "evil.py"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("::error file=evil.py,line=2,col=1,"),
        "{stdout}"
    );
    assert!(
        stdout.contains("title=code-sandbox-mcp process-exec::"),
        "{stdout}"
    );
}

fn unreadable_oversize_and_non_utf8_inputs_are_refused_with_a_reason() {
    let dir = scratch("bad-input");
    std::fs::write(dir.join("latin1.py"), b"print('caf\xe9')\n").unwrap();
    std::fs::write(dir.join("big.py"), "x = 1\n".repeat(50_000)).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();

    let out = run_in(
        &dir,
        &[
            "check",
            "latin1.py",
            "big.py",
            "missing.py",
            "notes.txt",
            "evil.py",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "unreadable inputs outrank denials"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("latin1.py: code is not valid UTF-8 (invalid byte at offset 10)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("big.py: 300000 bytes, over the policy's limit of 262144 bytes"),
        "{stderr}"
    );
    assert!(stderr.contains("missing.py: cannot read"), "{stderr}");
    assert!(stderr.contains("notes.txt: unknown language"), "{stderr}");
    // The good file is still checked and reported.
    assert!(
        text(&out.stdout).contains("evil.py:2:1: process-exec"),
        "{}",
        text(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn bad_policy_is_exit_2_with_location() {
    let dir = scratch("bad-policy");
    std::fs::write(
        dir.join(".code-sandbox.yaml"),
        "version: 1\nlimits:\n  memory: 512MB\n",
    )
    .unwrap();
    std::fs::write(dir.join("clean.py"), CLEAN_PY).unwrap();
    let out = run_in(&dir, &["check", "clean.py"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(".code-sandbox.yaml:3:11: limits.memory: invalid size `512MB`"),
        "{stderr}"
    );
}

fn project_policy_is_found_from_a_subdirectory_and_flag_overrides_it() {
    let dir = scratch("project");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join(".code-sandbox.yaml"),
        "rules:\n  - id: network\n    action: deny\n",
    )
    .unwrap();
    std::fs::write(dir.join("sub/net.js"), NET_JS).unwrap();
    let out = run_in(&dir.join("sub"), &["check", "net.js"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the project file makes network deny"
    );
    let out = run_in(
        &dir.join("sub"),
        &["check", "--policy", "permissive", "net.js"],
    );
    assert_eq!(out.status.code(), Some(0), "the flag wins");
    let out = bin()
        .current_dir(dir.join("sub"))
        .env("CODE_SANDBOX_POLICY", "permissive")
        .args(["check", "net.js"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the environment variable wins over the project file"
    );
}

fn policy_commands() {
    let dir = scratch("policy-cmds");
    let out = run_in(&dir, &["policy", "init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(dir.join(".code-sandbox.yaml")).unwrap();
    assert!(written.contains("extends: default"));
    let out = run_in(&dir, &["policy", "init"]);
    assert_eq!(out.status.code(), Some(2), "no silent overwrite");

    let out = run_in(&dir, &["policy", "validate", ".code-sandbox.yaml"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the starter file is valid: {}",
        text(&out.stderr)
    );

    let out = run_in(&dir, &["policy", "show", "--policy", "strict"]);
    assert_eq!(out.status.code(), Some(0));
    let shown: serde_yaml::Value = serde_yaml::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["limits"]["timeout"], "10s");
    assert_eq!(shown["rules"][3]["action"], "deny");
}

/// `ask` needs a person, whom only an MCP client can ask: the linter and `run` treat it
/// as a denial, and say why.
fn an_ask_rule_blocks_the_command_line() {
    let dir = crate::common::scratch("ask-cli");
    let policy = dir.join("ask.yaml");
    std::fs::write(&policy, "rules:\n  - { id: process-exec, action: ask }\n").unwrap();
    let file = dir.join("spawn.py");
    std::fs::write(&file, "import subprocess\nsubprocess.run(['ls'])\n").unwrap();
    let check = crate::common::binary()
        .args(["check", "--policy"])
        .arg(&policy)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("process-exec [ask]"), "{stdout}");
    let run = crate::common::binary()
        .args(["run", "--policy"])
        .arg(&policy)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("asks a person to approve this code (process-exec)"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was run"), "{stderr}");
}

/// The exact output of `check` over a tree: `noqa` comments that name a rule suppress
/// it on their line (in Python and JavaScript), a bare one and a mistyped id suppress
/// nothing and say so, `--exclude` leaves out a folder by name and files by path, and
/// the summary counts findings, the files they are in and the files checked apart.
fn noqa_exclude_and_the_summary_exactly() {
    let dir = scratch("noqa-exclude");
    std::fs::create_dir_all(dir.join("src/gen")).unwrap();
    std::fs::create_dir_all(dir.join("vendor/deep")).unwrap();
    std::fs::write(
        dir.join("src/a.py"),
        "import os\nos.system('a')  # noqa: process-exec\nos.system('b')  # noqa\n\
         os.system('c')  # noqa: proces-exec\nos.system('# noqa: process-exec')\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/gen/g.py"), EVIL_PY).unwrap();
    std::fs::write(dir.join("src/ok.py"), CLEAN_PY).unwrap();
    std::fs::write(
        dir.join("src/net.js"),
        "fetch('http://x'); // noqa: network\nfetch('http://y');\n",
    )
    .unwrap();
    std::fs::write(dir.join("vendor/v.js"), "require('child_process');\n").unwrap();
    std::fs::write(dir.join("vendor/deep/w.js"), "require('child_process');\n").unwrap();
    let out = run_in(
        &dir,
        &[
            "check",
            "--exclude",
            "gen",
            "--exclude",
            "vendor/*.js",
            "src",
            "vendor",
        ],
    );
    insta::assert_snapshot!(format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap(),
        text(&out.stdout),
        text(&out.stderr)
    ));
    let out = run_in(&dir, &["check", "src/ok.py"]);
    assert_eq!(text(&out.stderr), "no findings (1 file checked)\n");
}

/// Python 3.12 f-strings that reuse their quote are refused (the checker cannot read
/// them), with a message that says what to write instead.
fn a_python_312_fstring_says_what_to_write_instead() {
    let dir = scratch("fstring");
    std::fs::write(
        dir.join("f.py"),
        "name = 'x'\nprint(f\"{\"hello\"} {name}\")\nprint(f'{d['k']}')\n",
    )
    .unwrap();
    let out = run_in(&dir, &["check", "f.py"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(text(&out.stdout));
}

/// `noqa` is the linter's: `run` (like the server, which uses the same engine) judges
/// by the policy alone, so code cannot comment its way past a rule.
fn noqa_does_not_reach_run_or_the_engine() {
    use code_sandbox_mcp::analysis::Language;
    use code_sandbox_mcp::policy::{Policy, PolicyEngine};
    let code = "import os  # noqa: process-exec\nos.system('id')  # noqa: process-exec\n";
    let engine = PolicyEngine::new(Policy::preset("default").unwrap());
    let report = engine.check(Language::Python, code).unwrap();
    assert!(report.denied(), "{report:?}");
    assert_eq!(report.findings[0].rule, "process-exec");

    let dir = scratch("noqa-run");
    std::fs::write(dir.join("evil.py"), code).unwrap();
    let out = run_in(&dir, &["check", "evil.py"]);
    assert_eq!(out.status.code(), Some(0), "check honours it");
    let out = run_in(&dir, &["run", "evil.py"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("process-exec"), "{stderr}");
    assert!(stderr.contains("nothing was run"), "{stderr}");
}

/// The pre-commit hook the repository declares runs `check` on the files pre-commit
/// passes, and fails the commit on a denial.
fn the_pre_commit_hook_runs_check_on_the_files_it_is_given() {
    let hooks: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(crate::common::root().join(".pre-commit-hooks.yaml")).unwrap(),
    )
    .unwrap();
    let hook = &hooks[0];
    assert_eq!(hook["id"], "code-sandbox-mcp-check");
    assert_eq!(hook["language"], "rust", "pre-commit builds it with cargo");
    let types: Vec<&str> = hook["types_or"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types, ["python", "javascript"]);
    let entry: Vec<&str> = hook["entry"].as_str().unwrap().split_whitespace().collect();
    assert_eq!(
        entry[0], "code-sandbox-mcp",
        "the command the crate installs"
    );

    let dir = scratch("pre-commit");
    std::fs::write(dir.join("evil.py"), EVIL_PY).unwrap();
    std::fs::write(dir.join("clean.py"), CLEAN_PY).unwrap();
    let out = run_in(&dir, &[&entry[1..], &["clean.py"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run_in(&dir, &[&entry[1..], &["clean.py", "evil.py"]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}
