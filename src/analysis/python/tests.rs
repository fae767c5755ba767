//! Resolution cases too fine-grained for fixtures: exact facts, not just findings.

use super::analyze;
use crate::analysis::FactKind;

/// Every fact as a short string: `ref os.system`, `mod os` (module value), `import x`,
/// `dyn kind`, `path op path`, `unparseable`, prefixed by its line.
fn facts(source: &str) -> Vec<String> {
    let mut out: Vec<String> = analyze(source)
        .into_iter()
        .map(|f| {
            let what = match f.kind {
                FactKind::Import { module } => format!("import {module}"),
                FactKind::Reference {
                    name,
                    module_value: false,
                } => format!("ref {name}"),
                FactKind::Reference {
                    name,
                    module_value: true,
                } => format!("mod {name}"),
                FactKind::DynamicAccess { kind, .. } => format!("dyn {kind}"),
                FactKind::PathLiteral { op, path } => format!("path {op} {path}"),
                FactKind::Unparseable { .. } => "unparseable".to_string(),
                FactKind::UrlLiteral { host, port } => format!("url {host}:{port}"),
            };
            format!("{}: {what}", f.span.line)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn has(source: &str, fact: &str) -> bool {
    facts(source).iter().any(|f| f == fact)
}

#[test]
fn longest_chain_only() {
    assert_eq!(
        facts("import os\nos.path.join('a', 'b')\n"),
        ["1: import os", "2: ref os.path.join"]
    );
}

#[test]
fn from_import_binds_the_qualified_name() {
    let f = facts("from os import system as s\ns('x')\n");
    assert!(f.contains(&"2: ref os.system".to_string()), "{f:?}");
    assert!(f.contains(&"1: import os".to_string()), "{f:?}");
}

#[test]
fn relative_imports_are_not_imports() {
    assert!(facts("from . import x\nfrom .a import b\n").is_empty());
}

#[test]
fn builtins_only_when_not_shadowed() {
    assert!(has("eval('1')\n", "1: ref eval"));
    assert!(!has("def f(eval):\n    eval(x)\n", "2: ref eval"));
    assert!(!has("class A:\n    exec = 1\n    exec()\n", "3: ref exec"));
    assert!(!has(
        "def compile(x): pass\ncompile('a')\n",
        "2: ref compile"
    ));
}

#[test]
fn module_level_builtin_stays_until_bound() {
    assert!(has("eval('1')\neval = 1\n", "1: ref eval"));
    assert!(!has("eval = print\neval('1')\n", "2: ref eval"));
}

#[test]
fn functions_see_builtins_if_a_call_precedes_the_binding() {
    let called_first = "def g():\n    return eval('1')\ng()\neval = print\n";
    assert!(has(called_first, "2: ref eval"));
    let bound_first = "eval = print\ndef g():\n    return eval('1')\ng()\n";
    assert!(!has(bound_first, "3: ref eval"));
}

#[test]
fn locals_never_fall_back_to_builtins() {
    let source = "def f():\n    x = open\n    open = 1\n";
    assert!(!has(source, "2: ref open"));
}

#[test]
fn class_bodies_do_not_enclose_methods() {
    let source =
        "import os\nclass A:\n    run = os.system\n    def go(self):\n        return run('x')\n";
    let f = facts(source);
    assert!(f.contains(&"3: ref os.system".to_string()), "{f:?}");
    assert!(!f.contains(&"5: ref os.system".to_string()), "{f:?}");
}

#[test]
fn comprehension_targets_are_their_own_scope() {
    let source = "import os\nx = os.system\n[x for x in range(3)]\n";
    assert!(!has(source, "3: ref os.system"));
    let walrus = "import os\n[(y := os.popen) for _ in range(1)]\ny('ls')\n";
    assert!(has(walrus, "3: ref os.popen"));
}

#[test]
fn star_imports_resolve_unbound_names() {
    assert!(has("from os import *\nsystem('x')\n", "2: ref os.system"));
    let open = facts("from os import *\nopen('f')\n");
    assert!(open.contains(&"2: ref os.open".to_string()), "{open:?}");
    assert!(open.contains(&"2: ref open".to_string()), "{open:?}");
    assert!(!has(
        "from subprocess import *\nprint(1)\n",
        "2: ref subprocess.print"
    ));
}

#[test]
fn module_values_escape_only_where_unfollowed() {
    assert!(has("import os\nf(os)\n", "2: mod os"));
    assert!(has("import os\ndef g():\n    return os\n", "3: mod os"));
    assert!(!has("import os\no = os\n", "2: mod os"));
    assert!(has(
        "import os\no = os\no.system('x')\n",
        "3: ref os.system"
    ));
}

#[test]
fn dunder_import_returns_the_top_package() {
    let f = facts("m = __import__('os.path')\nm.system('x')\n");
    assert!(f.contains(&"1: import os.path".to_string()), "{f:?}");
    assert!(f.contains(&"2: ref os.system".to_string()), "{f:?}");
}

#[test]
fn getattr_rules() {
    assert!(has(
        "import os\ngetattr(os, 'sys' + 'tem')\n",
        "2: ref os.system"
    ));
    assert!(has("import os\ngetattr(os, n)\n", "2: dyn attribute"));
    assert!(!has("getattr(obj, n)\n", "1: dyn attribute"));
    assert!(has("getattr(obj, '__globals__')\n", "1: dyn introspection"));
    assert!(has(
        "import builtins\ngetattr(builtins, 'eval')\n",
        "2: ref eval"
    ));
}

#[test]
fn user_chr_does_not_steer_folding() {
    let source = "import os\ndef chr(n):\n    return 'x'\ngetattr(os, chr(1))\n";
    assert!(has(source, "4: dyn attribute"));
}

#[test]
fn introspection_attributes() {
    assert!(has("x = ().__class__.__mro__\n", "1: dyn introspection"));
    assert!(!has(
        "print(self.__class__.__name__)\n",
        "1: dyn introspection"
    ));
    assert!(has("d = x['__builtins__']\n", "1: dyn introspection"));
}

#[test]
fn paths_are_folded() {
    assert!(has(
        "open('/etc/' + 'passwd')\n",
        "1: path open /etc/passwd"
    ));
    assert!(has(
        "import pathlib\npathlib.Path('/etc', 'shadow')\n",
        "2: path pathlib.Path /etc/shadow"
    ));
    assert!(has("open('data.csv')\n", "1: path open data.csv"));
    assert!(!facts("open(name)\n").iter().any(|f| f.contains("path")));
}

#[test]
fn nfkc_identifiers() {
    assert!(has("ｅｖａｌ('1')\n", "1: ref eval"));
    assert!(has(
        "import ｏｓ\nｏｓ.ｓｙｓｔｅｍ('x')\n",
        "2: ref os.system"
    ));
}

#[test]
fn refusals() {
    assert_eq!(facts("def f(:\n"), ["1: unparseable"]);
    assert_eq!(facts("# coding: utf-7\nimport os\n"), ["1: unparseable"]);
    assert_eq!(facts("# coding: utf_8\n"), Vec::<String>::new());
    let deep = format!("x = {}1\n", "-".repeat(40_000));
    assert_eq!(facts(&deep), ["1: unparseable"]);
    let medium = format!("x = {}1\n", "-".repeat(1_000));
    assert_eq!(facts(&medium), ["1: unparseable"]);
}

#[test]
fn values_flow_backwards_through_later_bindings() {
    let source = "def f():\n    for _ in range(2):\n        run('ls')\n        run = alias\n\nimport os\nalias = os.system\n";
    assert!(has(source, "3: ref os.system"), "{:?}", facts(source));
    let globals = "def use():\n    return runner('x')\n\ndef setup():\n    global runner\n    import os\n    runner = os.popen\n";
    assert!(has(globals, "2: ref os.popen"), "{:?}", facts(globals));
}

#[test]
fn too_many_meanings_are_refused() {
    let assignments: String = (0..100).map(|i| format!("a = os.f{i}\n")).collect();
    let source = format!("import os\n{assignments}a()\n");
    assert_eq!(
        facts(&source).last().map(String::as_str),
        Some("102: unparseable")
    );
}

#[test]
fn moderately_deep_code_is_fine() {
    let chain = format!("x = {}1\n", "1 + ".repeat(100));
    assert!(!facts(&chain).iter().any(|f| f.contains("unparseable")));
    let elifs: String = (0..500)
        .map(|i| format!("elif x == {i}:\n    eval('1')\n"))
        .collect();
    let ladder = format!("x = 1\nif x:\n    pass\n{elifs}");
    let f = facts(&ladder);
    assert!(
        !f.iter().any(|f| f.contains("unparseable")),
        "{:?}",
        &f[..3]
    );
}

#[test]
#[ignore = "timing: run with --release --ignored --nocapture"]
fn timing() {
    let block = r#"
import json, math, os
from collections import defaultdict as dd
from pathlib import Path


class Account:
    """A bank account with a running balance."""

    def __init__(self, owner, balance=0.0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError(f"invalid amount {amount}")
        self.balance += amount
        self.history.append(("deposit", amount))
        return self.balance

    def report(self):
        totals = dd(float)
        for kind, amount in self.history:
            totals[kind] += amount
        return json.dumps({"owner": self.owner, "totals": totals})


def stats(values):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return {"mean": mean, "sd": math.sqrt(var), "max": max(values)}


def files(root="data"):
    out = [p.name for p in Path(root).glob("*.csv") if p.stat().st_size > 0]
    size = os.path.getsize(os.path.join(root, "index.json")) if out else 0
    return sorted(out), size


result = stats([x * 1.5 for x in range(100)])
print(Account("ann").deposit(10), result["mean"], files())
"#;
    let source = block.repeat(22);
    let body =
        <rustpython_parser::ast::Suite as rustpython_parser::Parse>::parse(&source, "<t>").unwrap();
    let index = crate::analysis::LineIndex::new(&source);
    let (mut parse, mut scopes, mut resolve) = (u128::MAX, u128::MAX, u128::MAX);
    for _ in 0..30 {
        let start = std::time::Instant::now();
        let parsed =
            <rustpython_parser::ast::Suite as rustpython_parser::Parse>::parse(&source, "<t>");
        parse = parse.min(start.elapsed().as_micros());
        drop(parsed);
        let start = std::time::Instant::now();
        let tree = super::scope::ScopeTree::build(&body);
        scopes = scopes.min(start.elapsed().as_micros());
        drop(tree);
        let start = std::time::Instant::now();
        let facts = super::resolve::resolve(&body, &index).unwrap();
        resolve = resolve.min(start.elapsed().as_micros());
        assert!(!facts.is_empty());
    }
    println!("min µs: parse {parse} scopes {scopes} resolve (incl. scopes) {resolve}");
}

#[test]
fn timeit_statements_given_as_strings_are_string_code() {
    let code = "import timeit\ns = 'x = 1'\ntimeit.timeit('import os', number=1)\ntimeit.repeat(stmt=s)\nt = timeit.Timer('pass', setup=f'{s}')\n";
    let found = facts(code);
    for line in [3, 4, 5] {
        assert!(
            found.contains(&format!("{line}: dyn string-code")),
            "{line}: {found:?}"
        );
    }
    let callable = "from timeit import default_timer, timeit\nstart = default_timer()\ntimeit(lambda: sum(range(9)), number=3)\ntimeit(stmt=print)\n";
    let found = facts(callable);
    assert!(
        !found.iter().any(|f| f.contains("string-code")),
        "{found:?}"
    );
}
