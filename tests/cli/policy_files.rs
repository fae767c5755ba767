//! Policy files as a project writes them: discovery, `extends`, rule merging, and
//! errors that name the file, line, column and key.

use crate::common::{self, scratch};
use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{Action, NetworkMode, Policy, PolicyEngine, PolicySource};
use std::path::Path;
use std::time::Duration;

crate::common::harness::tests! {
    sync presets_have_the_promised_actions;
    sync a_project_file_changes_only_what_it_names;
    sync a_mistyped_preset_name_gets_the_preset_suggested;
    sync sessions_and_preloads_have_defaults_a_project_can_change;
    sync a_switched_off_rule_reports_nothing;
    sync new_rules_are_added_and_must_be_complete;
    sync extends_follows_relative_files_and_presets;
    sync extends_cycles_and_missing_parents_are_errors;
    sync errors_name_file_line_column_and_key;
    sync a_network_allowlist_is_read_and_shown_as_written;
    sync outputs_and_mounts_resolve_against_the_policy_file;
    sync errors_point_at_the_exact_value;
    sync discovery_prefers_flag_then_env_then_nearest_project_file;
    sync the_bare_command_takes_the_serve_flags;
    sync under_an_allowlist_the_network_rule_judges_urls;
    sync secrets_are_read_at_load_and_a_missing_one_is_an_error_where_declared;
}

fn load(dir: &Path, file: &str, text: &str) -> Result<Policy, String> {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    PolicySource::File(path).load().map_err(|e| e.to_string())
}

fn rule<'a>(policy: &'a Policy, id: &str) -> &'a code_sandbox_mcp::policy::Rule {
    policy
        .rules
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no rule {id}"))
}

fn presets_have_the_promised_actions() {
    let default = Policy::preset("default").unwrap();
    for (id, action) in [
        ("process-exec", Action::Deny),
        ("dynamic-code", Action::Deny),
        ("parse-error", Action::Deny),
        ("network", Action::Warn),
        ("filesystem-outside-sandbox", Action::Warn),
    ] {
        assert_eq!(rule(&default, id).action, action, "default {id}");
    }
    let strict = Policy::preset("strict").unwrap();
    assert!(
        strict.rules.iter().all(|r| r.action == Action::Deny),
        "strict denies everything"
    );
    let permissive = Policy::preset("permissive").unwrap();
    for r in &permissive.rules {
        let expected = if r.category == "process" {
            Action::Deny
        } else {
            Action::Warn
        };
        assert_eq!(r.action, expected, "permissive {}", r.id);
    }
    assert_eq!(default.network, NetworkMode::None);
    assert_eq!(default.limits.timeout(), Duration::from_secs(30));
    assert_eq!(default.limits.memory.bytes(), 512 << 20);
    assert_eq!(default.limits.code.bytes(), 256 << 10);
}

fn a_project_file_changes_only_what_it_names() {
    let dir = scratch("override");
    let policy = load(
        &dir,
        "p.yaml",
        "version: 1\nlimits:\n  memory: 1GiB\nnetwork: bridge\nrules:\n  - id: network\n    action: off\n",
    )
    .unwrap();
    assert_eq!(policy.limits.memory.bytes(), 1 << 30);
    assert_eq!(
        policy.limits.timeout(),
        Duration::from_secs(30),
        "inherited from default"
    );
    assert_eq!(policy.network, NetworkMode::Bridge);
    assert_eq!(rule(&policy, "network").action, Action::Off);
    assert_eq!(rule(&policy, "process-exec").action, Action::Deny);
    assert!(
        !rule(&policy, "network").python.modules.is_empty(),
        "matchers are kept"
    );
}

fn a_mistyped_preset_name_gets_the_preset_suggested() {
    let dir = scratch("mistyped");
    let error = PolicySource::discover(Some("stricct"), &dir)
        .load()
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("did you mean the preset `strict`?"),
        "{error}"
    );
    let error = load(&dir, "child.yaml", "extends: permisive\n").unwrap_err();
    assert!(error.contains("did you mean `permissive`?"), "{error}");
    // A missing file whose name is nothing like a preset gets no guess.
    let error = PolicySource::discover(Some("project-policy.yaml"), &dir)
        .load()
        .unwrap_err()
        .to_string();
    assert!(!error.contains("did you mean"), "{error}");
}

fn sessions_and_preloads_have_defaults_a_project_can_change() {
    let dir = scratch("sessions");
    let defaults = load(&dir, "defaults.yaml", "version: 1\n").unwrap();
    assert!(defaults.sessions.allowed);
    assert_eq!(defaults.sessions.max, 4);
    assert_eq!(defaults.sessions.idle_timeout.0, Duration::from_secs(600));
    assert!(defaults.pool.preload.python.is_empty());
    let changed = load(
        &dir,
        "changed.yaml",
        "sessions:\n  allowed: false\n  max_lifetime: 5m\npool:\n  preload:\n    python: [numpy, pandas]\n    javascript: [\"@scope/pkg\"]\n",
    )
    .unwrap();
    assert!(!changed.sessions.allowed);
    assert_eq!(changed.sessions.max_lifetime.0, Duration::from_secs(300));
    assert_eq!(changed.sessions.max, 4, "what is not named is inherited");
    assert_eq!(changed.pool.preload.python, ["numpy", "pandas"]);
    assert_eq!(changed.pool.preload.javascript, ["@scope/pkg"]);
}

fn a_switched_off_rule_reports_nothing() {
    let dir = scratch("off");
    let policy = load(
        &dir,
        "p.yaml",
        "rules:\n  - id: process-exec\n    action: off\n",
    )
    .unwrap();
    let engine = PolicyEngine::new(policy);
    let report = engine
        .check(Language::Python, "import os\nos.system('ls')\n")
        .unwrap();
    assert!(
        report.findings.iter().all(|f| f.rule != "process-exec"),
        "{report:?}"
    );
}

fn new_rules_are_added_and_must_be_complete() {
    let dir = scratch("new-rule");
    let policy = load(
        &dir,
        "p.yaml",
        "rules:\n  - id: no-pandas\n    category: imports\n    action: warn\n    message: pandas is not installed\n    python: { modules: [pandas] }\n",
    )
    .unwrap();
    let engine = PolicyEngine::new(policy);
    let report = engine
        .check(Language::Python, "import pandas as pd\n")
        .unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.rule == "no-pandas" && f.action == Action::Warn && f.line == 1),
        "{report:?}"
    );

    let err = load(
        &dir,
        "q.yaml",
        "version: 1\nrules:\n  - id: netwrk\n    action: off\n",
    )
    .unwrap_err();
    assert!(err.contains("q.yaml:3:"), "{err}");
    assert!(err.contains("did you mean `network`"), "{err}");
    assert!(err.contains("needs `category`"), "{err}");
}

fn extends_follows_relative_files_and_presets() {
    let dir = scratch("extends");
    std::fs::create_dir_all(dir.join("shared")).unwrap();
    std::fs::write(
        dir.join("shared/base.yaml"),
        "extends: strict\nlimits:\n  pids: 7\n",
    )
    .unwrap();
    let policy = load(
        &dir,
        "p.yaml",
        "extends: shared/base.yaml\nlimits:\n  cpus: 2\n",
    )
    .unwrap();
    assert_eq!(policy.limits.pids, 7);
    assert_eq!(policy.limits.cpus, 2.0);
    assert_eq!(
        policy.limits.timeout(),
        Duration::from_secs(10),
        "from strict"
    );
    assert_eq!(rule(&policy, "network").action, Action::Deny, "from strict");
}

fn extends_cycles_and_missing_parents_are_errors() {
    let dir = scratch("cycle");
    std::fs::write(dir.join("a.yaml"), "extends: b.yaml\n").unwrap();
    std::fs::write(dir.join("b.yaml"), "extends: a.yaml\n").unwrap();
    let err = PolicySource::File(dir.join("a.yaml"))
        .load()
        .unwrap_err()
        .to_string();
    assert!(err.contains("loops back"), "{err}");

    let err = load(&dir, "c.yaml", "extends: nowhere.yaml\n").unwrap_err();
    assert!(
        err.contains("nowhere.yaml") && err.contains("cannot read"),
        "{err}"
    );
    let err = load(&dir, "d.yaml", "extends: paranoid\n").unwrap_err();
    assert!(err.contains("no preset named `paranoid`"), "{err}");
}

fn errors_name_file_line_column_and_key() {
    let dir = scratch("errors");
    let cases: &[(&str, &str, &[&str])] = &[
        ("version: 1\nlimts:\n  memory: 1GiB\n", "typo.yaml:2:1", &["unknown field `limts`", "did you mean `limits`"]),
        ("limits:\n  memory: 512MB\n", "units.yaml:2:11", &["limits.memory", "did you mean `MiB`"]),
        ("limits:\n  timeout: 30 s\n", "space.yaml:2:12", &["limits.timeout", "no space"]),
        ("limits:\n  timeout: 30\n", "bare.yaml:2:12", &["limits.timeout", "needs a unit"]),
        ("network: host\n", "net.yaml:1:10", &["network", "unknown variant `host`"]),
        ("rules:\n  - id: network\n    acton: off\n", "rulekey.yaml:3:5", &["rules[0]", "did you mean `action`"]),
        ("rules:\n  - id: network\n    action: block\n", "action.yaml:3:13", &["rules[0].action", "unknown variant `block`"]),
        ("rules:\n  - id: x\n    category: c\n    message: m\n    python: { dynamic: [magic] }\n", "dyn.yaml:5:", &["unknown dynamic kind `magic`"]),
        ("version: 2\n", "version.yaml:1", &["unsupported version 2"]),
        ("limits:\n  cpus: 0\n", "cpus.yaml:2", &["cpus", "above 0"]),
        ("limits:\n  cpus: 4096\n", "manycpus.yaml:2:9", &["limits.cpus", "4096 cores asked, and this machine has", "use at most"]),
        ("env:\n  pass_through: [\"MY KEY\"]\n", "env.yaml:2", &["not an environment variable name"]),
        ("rules:\n  - id: network\n    action: off\n  - id: network\n    action: warn\n", "dup.yaml:4", &["listed twice"]),
        ("limits: [1, 2\n", "syntax.yaml:", &[]),
        ("pool:\n  preload:\n    python: [numpy, subprocess]\n", "preload.yaml:3", &["pool.preload.python", "`subprocess` is denied by the rule `process-exec`"]),
        ("pool:\n  preload:\n    python: [\"os; x\"]\n", "modname.yaml:3", &["not a module name"]),
        ("sessions:\n  idle_timeout: 0s\n", "idle.yaml:2", &["sessions.idle_timeout", "above 0"]),
        ("sessions:\n  max: 0\n", "smax.yaml:2", &["sessions.max", "at least 1"]),
        ("outputs:\n  max_file_size: 0B\n", "ocap.yaml:2", &["outputs.max_file_size", "above 0"]),
        ("network:\n  allow:\n    - pypi.org\n    - https://files.example.com\n", "allowurl.yaml:4:7", &["network.allow[1]", "not a URL"]),
        ("network:\n  allow: [\"api.example.com:99999\"]\n", "allowport.yaml:2:11", &["not a port"]),
        ("network:\n  hosts: [pypi.org]\n", "allowkey.yaml:2", &["unknown field `hosts`, expected `allow`"]),
        ("network:\n  allow:\n    - 10.0.0.0/8\n    - 10.0.0.1/8\n", "cidr.yaml:4:7", &["network.allow[1]", "bits set past its prefix", "`10.0.0.0/8`"]),
        ("network:\n  allow: [\"0x7f.1\"]\n", "spelling.yaml:2:11", &["network.allow[0]", "another spelling"]),
        ("network:\n  allow: [\"fe80::1%eth0\"]\n", "zone.yaml:2:11", &["network.allow[0]", "not a host name"]),
        ("network:\n  allow: []\nsecrets:\n  HTTPS_PROXY: { hosts: [a.com] }\n", "sreserved.yaml:4", &["secrets", "`HTTPS_PROXY` is a variable the sandbox sets for itself"]),
        ("network:\n  allow: []\nsecrets:\n  KEY: { hosts: [] }\n", "sempty.yaml:4", &["secrets", "KEY.hosts: name at least one host"]),
        ("network:\n  allow: []\nsecrets:\n  KEY: { hosts: [\"https://a.com\"] }\n", "surl.yaml:4", &["KEY.hosts", "not a URL"]),
        ("network:\n  allow: []\nsecrets:\n  KEY: { hosts: [a.com], form: X }\n", "skey.yaml:4", &["unknown field `form`"]),
        ("network:\n  allow: []\nsecrets:\n  KEY: { from: \"A B\", hosts: [a.com] }\n", "sfrom.yaml:4", &["KEY.from", "not a variable name"]),
        ("secrets:\n  KEY: { hosts: [a.com] }\n", "snet.yaml:1", &["secrets: the egress proxy swaps secrets", "network is `none`"]),
        ("audit:\n  path: ../../elsewhere/audit.jsonl\n", "auditout.yaml:2", &["audit.path", "outside the project"]),
        ("audit:\n  file: audit.jsonl\n", "auditkey.yaml:2", &["unknown field `file`, expected `path`"]),
        ("packages:\n  python: [numpy, \"pandas --index-url http://x\"]\n", "pkgspec.yaml:2:19", &["packages.python[1]", "only a version requirement may follow"]),
        ("packages:\n  index:\n    python: ftp://mirror/simple\n", "pkgindex.yaml:3:13", &["packages.index.python", "not an http(s) URL"]),
        ("outputs:\n  figures: yes please\n", "ofig.yaml:2", &["outputs.figures"]),
        ("outputs:\n  export:\n    path: ../../elsewhere\n", "oexp.yaml:3", &["outputs.export.path", "outside the project", "absolute path"]),
        ("mounts:\n  - source: ./missing\n    target: /data\n", "mmiss.yaml:2", &["mounts[].source", "cannot use `./missing`"]),
        ("mounts:\n  - source: .\n    target: data\n", "mrel.yaml:3", &["target", "absolute path in the sandbox"]),
        ("mounts:\n  - source: .\n    target: /opt/code-sandbox/x\n", "mres.yaml:3", &["target", "the sandbox needs for itself"]),
        ("mounts:\n  - source: .\n    target: /sandbox\n", "msbx.yaml:3", &["the sandbox needs for itself"]),
        ("mounts:\n  - source: .\n    target: /data\n    mode: rw\n", "mkey.yaml:4", &["unknown field `mode`"]),
    ];
    for (text, location, needles) in cases {
        let file = location.split(':').next().unwrap();
        let err = load(&dir, file, text).expect_err(file);
        assert!(
            err.contains(location),
            "{file}: expected `{location}` in: {err}"
        );
        for needle in *needles {
            assert!(
                err.contains(needle),
                "{file}: expected `{needle}` in: {err}"
            );
        }
    }
}

fn a_network_allowlist_is_read_and_shown_as_written() {
    let dir = scratch("network-allow");
    let policy = load(
        &dir,
        "p.yaml",
        "network:\n  allow: [pypi.org, \"*.pythonhosted.org\", \"api.example.com:8443\"]\n",
    )
    .unwrap();
    assert!(policy.network.allows("pypi.org", 443));
    assert!(policy.network.allows("files.pythonhosted.org", 80));
    assert!(!policy.network.allows("api.example.com", 443));
    assert!(policy.network.allows("api.example.com", 8443));
    let shown = serde_yaml::to_string(&policy).unwrap();
    assert!(
        shown.contains("network:\n  allow:\n  - pypi.org\n  - '*.pythonhosted.org'\n  - api.example.com:8443\n"),
        "{shown}"
    );
}

fn outputs_and_mounts_resolve_against_the_policy_file() {
    let dir = scratch("outputs-mounts-policy");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let policy = load(
        &dir,
        "p.yaml",
        "outputs:\n  max_files: 3\n  figures: false\n  export:\n    path: out\n    overwrite: true\n\
         mounts:\n  - source: data\n    target: /data\n",
    )
    .unwrap();
    assert_eq!(policy.outputs.max_files, 3);
    assert!(!policy.outputs.figures && policy.outputs.files);
    let export = policy.outputs.export.as_ref().unwrap();
    assert!(export.overwrite);
    assert_eq!(export.dir, std::fs::canonicalize(&dir).unwrap().join("out"));
    let mount = &policy.mounts[0];
    assert_eq!(
        mount.host,
        std::fs::canonicalize(&dir).unwrap().join("data")
    );
    assert!(!mount.rw);
    // What a result or `policy show` prints is the path as written, not the host's.
    let shown = serde_json::to_string(&policy).unwrap();
    assert!(!shown.contains(dir.to_str().unwrap()), "{shown}");
    // The filesystem rule counts the mount as the sandbox's own.
    let engine = PolicyEngine::new(policy);
    let report = engine.check(
        Language::Python,
        "open('/data/x.csv').read()\nopen('/etc/passwd').read()\n",
    );
    let lines: Vec<u32> = report
        .unwrap()
        .findings
        .iter()
        .filter(|f| f.rule == "filesystem-outside-sandbox")
        .map(|f| f.line)
        .collect();
    assert_eq!(lines, vec![2]);
}

/// Each error points at the value at fault, exactly, even where a text search for its
/// key would land elsewhere: the key in a comment or a message above it, flow style, a
/// later list element, the second listing of a duplicate.
fn errors_point_at_the_exact_value() {
    let dir = scratch("exact");
    let cases: &[(&str, &str, &str)] = &[
        ("# keep cpus: 0 in mind\nlimits:\n  memory: 1GiB\n  cpus: 0\n", "cpus.yaml:4:9", "limits.cpus: must be a number of cores above 0"),
        ("limits: { memory: 1GiB, pids: 0 }\n", "flow.yaml:1:31", "limits.pids: must be at least 1"),
        ("limits:\n  output: 1KiB\n  memory: 1MiB\n", "mem.yaml:3:11", "limits.memory: must be at least 6MiB"),
        ("limits:\n  timeout: 0s\n", "zero.yaml:2:12", "limits.timeout: must be above 0"),
        ("# version: 1\n\nversion: 2\n", "version.yaml:3:10", "version: unsupported version 2"),
        ("env:\n  pass_through: [OK, \"MY KEY\"]\n", "env.yaml:2:22", "env.pass_through[1]: `MY KEY`"),
        ("images:\n  javascript: node\n  python: \"python 3\"\n", "image.yaml:3:11", "images.python: `python 3` is not an image reference"),
        ("pool:\n  size: 1\n  max_concurrent: 0\n", "pool.yaml:3:19", "pool.max_concurrent: must be at least 1"),
        ("runtime: \"run sc\"\n", "runtime.yaml:1:10", "runtime: `run sc` is not a container runtime name"),
        ("rules:\n  - id: network\n    message: \"id: Net\"\n  - id: Net\n", "ruleid.yaml:4:9", "rules[1].id: rule id `Net` must be lower-case"),
        ("rules:\n  - id: network\n    action: off\n  # id: network would be listed twice\n  - id: network\n    action: warn\n", "dup.yaml:5:9", "rules[1].id: rule `network` is listed twice"),
        ("rules:\n  - id: network\n    action: warn\n  - id: mine\n    message: m\n    python: { modules: [x] }\n", "newrule.yaml:4:9", "rules[1].id: rule `mine` is new"),
        ("rules:\n  - { id: a1, category: c, message: m }\n", "nomatch.yaml:2:11", "rules[0].id: rule `a1` matches nothing"),
    ];
    for (text, location, needle) in cases {
        let file = location.split(':').next().unwrap();
        let err = load(&dir, file, text).expect_err(file);
        // Named relative to the working directory: never by the absolute path.
        let cwd = std::env::current_dir().unwrap();
        let shown = dir.join(location);
        let shown = shown.strip_prefix(&cwd).unwrap();
        assert!(
            err.starts_with(&format!("{}", shown.display())),
            "{file}: expected `{location}` at the start of: {err}"
        );
        assert!(
            err.contains(needle),
            "{file}: expected `{needle}` in: {err}"
        );
    }
}

fn discovery_prefers_flag_then_env_then_nearest_project_file() {
    if std::env::var_os("CODE_SANDBOX_POLICY").is_some() {
        eprintln!(
            "CODE_SANDBOX_POLICY is set in this environment; discovery order not testable here"
        );
        return;
    }
    let dir = scratch("discover");
    let nested = dir.join("a/b");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(dir.join(".code-sandbox.yaml"), "limits:\n  pids: 9\n").unwrap();

    // The nearest parent's project file wins over the default preset.
    assert_eq!(
        PolicySource::discover(None, &nested),
        PolicySource::File(dir.join(".code-sandbox.yaml"))
    );
    // An explicit preset name or file wins over the project file.
    assert_eq!(
        PolicySource::discover(Some("strict"), &nested),
        PolicySource::Preset("strict".into())
    );
    assert_eq!(
        PolicySource::discover(Some("x.yaml"), &nested),
        PolicySource::File(nested.join("x.yaml"))
    );
    // No project file anywhere up the tree: the default preset.
    let lonely = Path::new("/");
    assert_eq!(
        PolicySource::discover(None, lonely),
        PolicySource::Preset("default".into())
    );
}

/// Client configurations start the bare command with serve's flags
/// (`code-sandbox-mcp --policy strict`): the flags reach `serve`.
fn the_bare_command_takes_the_serve_flags() {
    let output = crate::common::binary()
        .args(["--policy", "stricct"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("did you mean the preset `strict`"),
        "{stderr}"
    );
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
    assert_eq!(output.stdout, b"");
}

/// Under an allowlist the network rule judges a program by its URLs: one to a listed
/// host is no finding, one elsewhere is, where the literal stands; using the network
/// as such is not (it is allowed, to the hosts listed), and prose is not code.
fn under_an_allowlist_the_network_rule_judges_urls() {
    let dir = scratch("network-urls");
    let policy = load(
        &dir,
        "p.yaml",
        "network:\n  allow: [pypi.org, \"*.pythonhosted.org\"]\n",
    )
    .unwrap();
    let engine = PolicyEngine::new(policy);
    let lines = |language, code: &str| -> Vec<(u32, String)> {
        engine
            .check(language, code)
            .unwrap()
            .findings
            .into_iter()
            .filter(|f| f.rule == "network")
            .map(|f| (f.line, f.message))
            .collect()
    };
    let python = lines(
        Language::Python,
        "\"\"\"Fetches from https://docs.example.com/howto.\"\"\"\nimport requests\n\
         requests.get('https://pypi.org/simple/numpy/')\n\
         requests.get('https://files.pythonhosted.org/x.whl')\n\
         requests.get('https://evil.example.com/upload')\n\
         requests.get('http://pypi.org:8080/')\n",
    );
    assert_eq!(python.len(), 2, "{python:?}");
    assert_eq!(python[0].0, 5);
    assert!(
        python[0].1.contains("a URL to `evil.example.com:443`"),
        "{python:?}"
    );
    assert_eq!(python[1].0, 6);
    assert!(python[1].1.contains("`pypi.org:8080`"), "{python:?}");
    let javascript = lines(
        Language::JavaScript,
        "const https = require('https');\nfetch('https://pypi.org/simple/');\nfetch(\"wss://chat.example.com/socket\");\n",
    );
    assert_eq!(javascript.len(), 1, "{javascript:?}");
    assert_eq!(javascript[0].0, 3);
    // Without a list the rule is as before: the use of the network is the finding.
    let plain = PolicyEngine::new(Policy::preset("default").unwrap());
    let findings = plain
        .check(
            Language::Python,
            "import requests\nrequests.get('https://pypi.org/')\n",
        )
        .unwrap()
        .findings;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0].message.contains("import of `requests`"),
        "{findings:?}"
    );
}

fn secrets_are_read_at_load_and_a_missing_one_is_an_error_where_declared() {
    let dir = scratch("secrets");
    // PATH is set wherever the tests run: its value stands for a secret's.
    let value = std::env::var("PATH").unwrap();
    let text = "network:\n  allow: [pypi.org]\nsecrets:\n  FROM_PATH: { from: PATH, hosts: [\"api.example.com\"] }\n  UNSET_ONE: { from: CODE_SANDBOX_TEST_UNSET_VARIABLE, hosts: [\"*.example.org:8443\"] }\n";
    let policy = load(&dir, "secrets.yaml", text).unwrap();
    // The secrets' hosts join the list.
    let hosts: Vec<String> = policy
        .allowed_hosts()
        .unwrap()
        .iter()
        .map(|h| h.written.clone())
        .collect();
    assert_eq!(hosts, ["pypi.org", "api.example.com", "*.example.org:8443"]);
    // Shown by name and hosts, never by value.
    let shown = serde_yaml::to_string(&policy).unwrap();
    assert!(
        shown.contains(
            "secrets:\n  FROM_PATH:\n    from: PATH\n    hosts:\n    - api.example.com\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains(&value) && !format!("{policy:?}").contains(&value));
    let error = policy.check_secrets().unwrap_err().to_string();
    assert!(
        error.contains("secrets.yaml:5: secrets.UNSET_ONE: the server's environment has no `CODE_SANDBOX_TEST_UNSET_VARIABLE`"),
        "{error}"
    );
    assert!(!error.contains("FROM_PATH"), "{error}");
    // `run` refuses to start without the value (nothing is run; no engine needed).
    let code = dir.join("x.py");
    std::fs::write(&code, "print(1)\n").unwrap();
    let output = common::binary()
        .args(["run", "--policy"])
        .arg(dir.join("secrets.yaml"))
        .arg(&code)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = common::text(&output.stderr);
    assert!(
        stderr.contains("secrets.yaml:5: secrets.UNSET_ONE"),
        "{stderr}"
    );
    // `check` lints without the values.
    let output = common::binary()
        .args(["check", "--policy"])
        .arg(dir.join("secrets.yaml"))
        .arg(&code)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}
