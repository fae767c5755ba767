//! Unit tests for the tricky resolution cases; the fixtures cover the rest.

use super::analyze;
use crate::analysis::FactKind;

/// The facts of a snippet in a compact, comparable form.
fn facts(source: &str) -> Vec<String> {
    analyze(source)
        .0
        .into_iter()
        .map(|f| match f.kind {
            FactKind::Import { module } => format!("{}:import {module}", f.span.line),
            FactKind::Reference { name, module_value } => {
                format!(
                    "{}:ref {name}{}",
                    f.span.line,
                    if module_value { " (module)" } else { "" }
                )
            }
            FactKind::DynamicAccess { kind, .. } => format!("{}:dynamic {kind}", f.span.line),
            FactKind::PathLiteral { op, path } => format!("{}:path {op} {path}", f.span.line),
            FactKind::Unparseable { reason } => format!("{}:unparseable {reason}", f.span.line),
            FactKind::UrlLiteral { host, port } => format!("{}:url {host}:{port}", f.span.line),
        })
        .collect()
}

fn has(source: &str, fact: &str) -> bool {
    let all = facts(source);
    all.iter().any(|f| f == fact) || {
        eprintln!("{fact} not in {all:#?}");
        false
    }
}

fn lacks(source: &str, needle: &str) -> bool {
    let all = facts(source);
    !all.iter().any(|f| f.contains(needle)) || {
        eprintln!("{needle} unexpectedly in {all:#?}");
        false
    }
}

#[test]
fn require_forms() {
    assert!(has("require('child_'+'process')", "1:import child_process"));
    assert!(has("require(`child_process`)", "1:import child_process"));
    assert!(has(
        "require('\\x63hild_process')",
        "1:import child_process"
    ));
    assert!(has(
        "require('\\u{63}hild_process')",
        "1:import child_process"
    ));
    assert!(has(
        "require(['child','process'].join('_'))",
        "1:import child_process"
    ));
    assert!(has("require('node:fs/promises')", "1:import fs/promises"));
    assert!(has(
        "const m = 'child_' + 'process';\nrequire(m)",
        "2:import child_process"
    ));
    assert!(has("require(x)", "1:dynamic import"));
    assert!(has("require.call(null, 'vm')", "1:import vm"));
    assert!(has("require`vm`", "1:import vm"));
}

#[test]
fn aliases_resolve() {
    let src = "const {exec: run} = require('child_process');\nrun('ls');";
    assert!(has(src, "2:ref child_process.exec"));
    let src = "const r = require;\nr('fs');\nr(x);";
    assert!(has(src, "2:import fs"));
    assert!(has(src, "3:dynamic import"));
    let src = "let e = eval;\ne('1');";
    assert!(has(src, "2:ref eval"));
    let src = "import * as c from 'child_process';\nc.spawn('x');";
    assert!(has(src, "2:ref child_process.spawn"));
}

#[test]
fn shadowing_is_respected() {
    assert!(lacks("function f(require) { require('x') }", "import"));
    assert!(lacks("function exec() {}\nexec();", "exec"));
    assert!(lacks("function f(eval) { eval('x') }", "ref eval"));
    assert!(lacks(
        "db.exec(sql); /re/.exec(s); ops.eval(x); obj.require('x');",
        "import"
    ));
    assert!(lacks("const o = {eval: 1};", "eval"));
}

#[test]
fn globals_and_constructors() {
    assert!(has("globalThis['ev'+'al']('1')", "1:ref eval"));
    assert!(has("(0, eval)('1')", "1:ref eval"));
    assert!(has("\\u0065val('x')", "1:ref eval"));
    assert!(has("(async()=>{}).constructor('x')", "1:ref AsyncFunction"));
    assert!(has(
        "(function*(){}).constructor",
        "1:ref GeneratorFunction"
    ));
    assert!(has(
        "Object.getPrototypeOf(async function(){}).constructor",
        "1:ref AsyncFunction"
    ));
    assert!(has(
        "[].constructor.constructor('x')()",
        "1:dynamic introspection"
    ));
    assert!(has("[].constructor.constructor('x')()", "1:ref Function"));
    assert!(has("Function.prototype.constructor('x')", "1:ref Function"));
    assert!(has(
        "process.mainModule.require('child_process')",
        "1:import child_process"
    ));
    assert!(has(
        "module.constructor._load('child_process')",
        "1:import child_process"
    ));
    assert!(has(
        "const {createRequire} = require('module');\nconst r = createRequire(x);\nr('vm');",
        "3:import vm"
    ));
}

#[test]
fn escapes() {
    assert!(has(
        "f(require('child_process'))",
        "1:ref child_process (module)"
    ));
    assert!(has("f(require)", "1:dynamic import"));
    assert!(has("f(globalThis)", "1:dynamic namespace"));
    assert!(lacks("if (typeof window !== 'undefined') {}", "dynamic"));
    assert!(has(
        "const cp = require('child_process'); cp[x]()",
        "1:dynamic attribute"
    ));
    assert!(lacks("const o = {}; o[x]()", "dynamic"));
}

#[test]
fn parse_errors_and_depth() {
    assert!(facts("foo(").iter().all(|f| f.contains("unparseable")));
    assert!(has(
        &format!("x = {}1;", "1+".repeat(5000)),
        "1:unparseable nesting too deep to analyse"
    ));
    let _ = analyze(&"'a'+".repeat(900));
}

#[test]
fn paths() {
    assert!(has(
        "require('fs').readFileSync('/etc/passwd')",
        "1:path fs.readFileSync /etc/passwd"
    ));
    assert!(has(
        "import {readFile} from 'node:fs/promises';\nreadFile('/x')",
        "2:path fs/promises.readFile /x"
    ));
}

#[test]
fn promises_and_exports() {
    let src = "import('child_process').then(({ exec }) => exec('id'));";
    assert!(has(src, "1:ref child_process.exec"));
    assert!(lacks(src, "child_process.then"));
    assert!(has(
        "import * as cp from 'child_process';\nexport { cp };",
        "2:ref child_process (module)"
    ));
    assert!(has(
        "import vm from 'vm';\nexport default vm;",
        "2:ref vm (module)"
    ));
}

#[test]
fn feature_tests_are_inert() {
    let src = "typeof eval; x instanceof Function; typeof fetch";
    assert!(lacks(src, "ref eval"));
    assert!(lacks(src, "ref Function"));
    assert!(lacks(src, "ref fetch"));
    assert!(has("const F = Function;", "1:ref Function"));
}

#[test]
fn a_prototype_is_no_use_of_its_constructor() {
    let src =
        "Object.getPrototypeOf(f) === Function.prototype; const call = Function.prototype.call;";
    assert!(!facts(src).iter().any(|f| f.ends_with("ref Function")));
    assert!(has("Function.prototype.constructor('x')", "1:ref Function"));
    assert!(has("Function.call(null, 'x')", "1:ref Function"));
    assert!(has(
        "new Function.prototype.constructor('x')",
        "1:ref Function"
    ));
    assert!(has(
        "Object.getOwnPropertyDescriptor(Function.prototype, 'constructor')",
        "1:ref Function"
    ));
}

#[test]
fn implicit_globals_keep_their_meaning() {
    assert!(has("eval = wrap(eval);\neval('x');", "2:ref eval"));
    assert!(has(
        "cp = require('child_process');\ncp.fork('x');",
        "2:ref child_process.fork"
    ));
}

#[test]
fn long_method_chains_are_linear() {
    // Exponential evaluation would not finish; 120 links must be instant.
    let src = format!("p{};", ".then(f)".repeat(120));
    let start = std::time::Instant::now();
    let _ = analyze(&src);
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn a_json_file_is_data_however_its_name_is_computed() {
    let prelude = "const path = require('path');\nconst env = process.env.E;\n";
    for load in [
        "require('./config.json')",
        "require(path.join(__dirname, `config.${env}.json`))",
        "require(__dirname + '/data/' + env + '.json')",
        "require(`./${env}.json`)",
    ] {
        let source = format!("{prelude}{load};");
        assert!(lacks(&source, "dynamic"), "{load}");
        assert!(lacks(&source, "import ./"), "{load}");
    }
    // ES imports of JSON, with the attribute Node needs for it.
    for source in [
        "import config from './config.json' with { type: 'json' };",
        "import data from '/tmp/data.json' with { type: 'json' };",
    ] {
        assert!(lacks(source, "dynamic"), "{source}");
        assert!(lacks(source, "import "), "{source}");
    }
    // A URL or a bare `.json` is not a JSON file's path.
    for source in [
        "import 'data:text/javascript,x//.json';",
        "import './.json';",
    ] {
        let all = facts(source);
        assert!(
            all.iter()
                .any(|f| f.contains("dynamic") || f.contains("import ")),
            "{source}: {all:?}"
        );
    }
    for load in [
        "require(env)",
        "require(path.join(__dirname, env))",
        "require(`${env}.js`)",
        "require(env + '.json' + x)",
        "import('data:text/javascript,x//.json')",
        "require('./.json')",
    ] {
        let source = format!("{prelude}{load};");
        let all = facts(&source);
        assert!(
            all.iter()
                .any(|f| f.contains("dynamic") || f.contains("import ")),
            "{load}: {all:?}"
        );
    }
}
