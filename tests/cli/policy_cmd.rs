//! `policy show`, `validate` and `init` as a user runs them: what show prints is a
//! policy validate accepts, errors name files as the user gave them and come all at
//! once, validate always returns, and the starter's examples are valid.

crate::common::harness::tests! {
    sync show_prints_a_policy_that_validate_accepts_and_that_shows_the_same;
    sync show_names_the_file_really_in_force;
    sync validate_names_the_file_as_given;
    sync validate_reports_every_error_of_a_file_at_once;
    sync an_error_inside_a_rule_is_reported_once;
    sync validate_returns_when_relative_paths_do_not_exist_yet;
    sync the_starter_and_each_of_its_examples_are_valid;
}

use crate::common::{binary, scratch, text};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

fn run_in(dir: &Path, args: &[&str]) -> Output {
    binary()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("binary runs")
}

/// `policy show`'s YAML without its first line (the comment naming the policy).
fn shown_body(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let (header, body) = stdout.split_once('\n').expect("a header line");
    assert!(header.starts_with("# effective policy: "), "{header}");
    body.to_string()
}

/// show -> validate -> show: what show prints is a valid file, and it is the same
/// policy, for every preset and for a project file that extends another file.
fn show_prints_a_policy_that_validate_accepts_and_that_shows_the_same() {
    let dir = scratch("show-round-trip");
    std::fs::create_dir_all(dir.join("shared")).unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(
        dir.join("shared/base.yaml"),
        "extends: strict\nlimits: { pids: 7 }\npackages:\n  python: [numpy]\n  index: { python: 'https://mirror.test/simple' }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(".code-sandbox.yaml"),
        "extends: shared/base.yaml\nruntime: runsc\nnetwork: { allow: [pypi.org] }\n\
         mounts: [{ source: data, target: /data }]\noutputs: { export: { path: out } }\n\
         audit: { path: audit.jsonl }\nrules:\n  - { id: network, action: warn }\n\
         \x20 - { id: no-http, category: network, message: m, python: { modules: [requests] } }\n",
    )
    .unwrap();
    let mut cases: Vec<(String, Vec<&str>)> = ["default", "strict", "permissive"]
        .iter()
        .map(|preset| {
            (
                preset.to_string(),
                vec!["policy", "show", "--policy", preset],
            )
        })
        .collect();
    cases.push(("project".into(), vec!["policy", "show"]));
    for (name, args) in cases {
        let first = shown_body(&run_in(&dir.join("sub"), &args));
        assert!(!first.contains("\nname:"), "{name}: {first}");
        let file = format!("shown-{name}.yaml");
        std::fs::write(dir.join(&file), &first).unwrap();
        let out = run_in(&dir, &["policy", "validate", &file]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}\n{first}",
            text(&out.stderr)
        );
        let again = shown_body(&run_in(&dir, &["policy", "show", "--policy", &file]));
        assert_eq!(again, first, "{name}");
    }
    let project = text(&run_in(&dir.join("sub"), &["policy", "show"]).stdout);
    assert!(project.contains("runtime: runsc"), "{project}");
    assert!(project.contains("  pids: 7\n"), "{project}");
    assert!(
        project.contains("  index:\n    python: https://mirror.test/simple\n"),
        "{project}"
    );
}

/// From a subfolder, the project file in force is the one above, and show says so.
fn show_names_the_file_really_in_force() {
    let dir = scratch("show-name");
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    std::fs::write(dir.join(".code-sandbox.yaml"), "limits: { pids: 9 }\n").unwrap();
    let out = run_in(&dir.join("a/b"), &["policy", "show"]);
    assert!(
        text(&out.stdout).starts_with("# effective policy: ../../.code-sandbox.yaml\n"),
        "{}",
        text(&out.stdout)
    );
    let out = run_in(&dir, &["policy", "show"]);
    assert!(
        text(&out.stdout).starts_with("# effective policy: .code-sandbox.yaml\n"),
        "{}",
        text(&out.stdout)
    );
}

fn validate_names_the_file_as_given() {
    let dir = scratch("validate-path");
    std::fs::create_dir_all(dir.join("bad")).unwrap();
    std::fs::write(
        dir.join("bad/x.yaml"),
        "version: 1\nlimits: { memory: 512MB }\n",
    )
    .unwrap();
    for given in ["bad/x.yaml", "./bad/x.yaml"] {
        let out = run_in(&dir, &["policy", "validate", given]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).starts_with("error: bad/x.yaml:2:19: limits.memory: invalid size"),
            "{}",
            text(&out.stderr)
        );
    }
}

/// Mistakes of every kind (keys, values, host paths, rules) come back in one run of
/// validate, each with its line, column and key, in line order.
fn validate_reports_every_error_of_a_file_at_once() {
    let dir = scratch("validate-all");
    std::fs::write(
        dir.join("five.yaml"),
        "version: 1\nlimts:\n  memory: 1GiB\nnetwork: host\nsessions:\n  max: 0\n\
         outputs:\n  figures: maybe\nmounts:\n  - { source: nothere, target: /data }\n\
         rules:\n  - id: netwrk\n    action: off\n  - id: network\n    action: blok\n",
    )
    .unwrap();
    let out = run_in(&dir, &["policy", "validate", "five.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    let expected = [
        "error: five.yaml:2:1: unknown field `limts`",
        "error: five.yaml:4:10: network: unknown variant `host`",
        "error: five.yaml:6:8: sessions.max: must be at least 1",
        "error: five.yaml:8:12: outputs.figures: invalid type",
        "error: five.yaml:10: mounts[].source: cannot use `nothere`",
        "error: five.yaml:12:9: rules[0].id: rule `netwrk` is new",
        "error: five.yaml:15:13: rules[1].action: unknown variant `blok`",
    ];
    assert_eq!(lines.len(), expected.len(), "{stderr}");
    for (line, start) in lines.iter().zip(expected) {
        assert!(line.starts_with(start), "expected `{start}`, got: {stderr}");
    }
}

/// An error inside a rule is reported once: not again as the rule being incomplete,
/// and a bad list item does not leave its other keys behind as an error of their own.
fn an_error_inside_a_rule_is_reported_once() {
    let dir = scratch("validate-rule-once");
    std::fs::write(
        dir.join("r.yaml"),
        "rules:\n  - id: mine\n    category: [1]\n    message: m\n    python: { modules: [x] }\n",
    )
    .unwrap();
    let out = run_in(&dir, &["policy", "validate", "r.yaml"]);
    assert_eq!(
        text(&out.stderr),
        "error: r.yaml:3:15: rules[0].category: invalid type: sequence, expected a string\n"
    );
    std::fs::write(
        dir.join("r2.yaml"),
        "rules:\n  - id: Bad\n    action: off\n  - id: network\n    acton: off\n",
    )
    .unwrap();
    let out = run_in(&dir, &["policy", "validate", "r2.yaml"]);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("error: r2.yaml:2:9: rules[0].id: rule id `Bad`"),
        "{stderr}"
    );
    assert!(lines[1].starts_with("error: r2.yaml:5:5:"), "{stderr}");
    assert!(lines[1].contains("did you mean `action`"), "{stderr}");
}

/// A relative audit, export or mount path that does not exist yet, in a policy named
/// by a bare file name, once made validate spin forever. The binary gets a deadline.
fn validate_returns_when_relative_paths_do_not_exist_yet() {
    let dir = scratch("validate-missing-paths");
    std::fs::write(
        dir.join("x.yaml"),
        "audit: { path: logs/audit.jsonl }\noutputs: { export: { path: out/plots } }\n\
         mounts: [{ source: later, target: /data }]\n",
    )
    .unwrap();
    let mut child = binary()
        .current_dir(&dir)
        .args(["policy", "validate", "x.yaml"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("policy validate did not return within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: x.yaml:3: mounts[].source: cannot use `later`"),
        "{stderr}"
    );
    std::fs::create_dir(dir.join("later")).unwrap();
    let out = run_in(&dir, &["policy", "validate", "x.yaml"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!dir.join("logs").exists(), "validate creates nothing");
}

/// The starter that `policy init` writes is valid as written, and so is each of its
/// commented examples once uncommented (one section at a time: `network` has two).
fn the_starter_and_each_of_its_examples_are_valid() {
    let dir = scratch("starter");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(
        dir.join("ca-bundle.pem"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let out = run_in(&dir, &["policy", "init"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let starter = std::fs::read_to_string(dir.join(".code-sandbox.yaml")).unwrap();
    for needle in [
        "allow: [",
        "code-sandbox-mcp-python:2",
        "# packages:",
        "# mounts:",
        "# certificates:",
        "# outputs:",
        "action: ask",
    ] {
        assert!(starter.contains(needle), "no `{needle}` in:\n{starter}");
    }
    assert!(!starter.contains("pandas is not installed"), "{starter}");

    let extends = starter.find("\nextends:").unwrap() + 1;
    let (head, examples) = starter.split_at(extends + starter[extends..].find('\n').unwrap() + 1);
    let mut sections: Vec<Vec<&str>> = Vec::new();
    for line in examples.lines() {
        let Some(uncommented) = line.strip_prefix("# ") else {
            continue;
        };
        if uncommented.starts_with(|c: char| c.is_ascii_lowercase()) {
            sections.push(vec![uncommented]);
        } else if let Some(section) = sections.last_mut() {
            section.push(uncommented);
        }
    }
    assert!(sections.len() >= 10, "{sections:?}");
    for (index, section) in sections.iter().enumerate() {
        let file = format!("example{index}.yaml");
        std::fs::write(dir.join(&file), format!("{head}{}\n", section.join("\n"))).unwrap();
        let out = run_in(&dir, &["policy", "validate", &file]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\n{}",
            section.join("\n"),
            text(&out.stderr)
        );
    }
}
