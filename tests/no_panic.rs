//! The analyzers face hostile input by design: whatever bytes arrive, they must return
//! facts (a parse error at worst), never panic, never hang.

use code_sandbox_mcp::analysis::{analyze, Language};
use code_sandbox_mcp::policy::{Policy, PolicyEngine};
use proptest::prelude::*;

/// Fragments that steer random input towards the frontends' trickier paths.
const PYTHON_PIECES: &[&str] = &[
    "import os",
    "from os import *",
    "__import__(",
    "getattr(",
    "'sys'+'tem'",
    "lambda x:",
    "def f(",
    "class A:",
    "\n    ",
    ":=",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "'",
    "\"\"\"",
    "#",
    "\\",
    "ｅｖａｌ",
    "# -*- coding: utf-7 -*-\n",
    "os.system",
    ".__class__",
    ".__subclasses__()",
    "global x",
    "nonlocal y",
    "*",
    ",",
    "=",
    "\n",
    "f'{x}'",
    "async ",
];
const JS_PIECES: &[&str] = &[
    "require(",
    "'child_'+'process'",
    "import(",
    "import x from 'fs'",
    "export * from 'x'",
    "`",
    "${",
    "}",
    "=>",
    "function",
    "(0, eval)",
    "new Function(",
    ".constructor",
    "[",
    "]",
    "(",
    ")",
    "{",
    "/re/",
    "\\u0065val",
    "//",
    "/*",
    "*/",
    "const {a: b} = ",
    "class A {",
    "\n",
    ";",
    "'",
    "\"",
    "async",
    "await",
    "globalThis[",
];

fn soup(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(pieces).prop_map(str::to_string),
            any::<String>()
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn python_never_panics(source in soup(PYTHON_PIECES)) {
        let _ = analyze(Language::Python, &source);
    }

    #[test]
    fn javascript_never_panics(source in soup(JS_PIECES)) {
        let _ = analyze(Language::JavaScript, &source);
    }

    #[test]
    fn engine_never_panics_on_raw_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        for language in [Language::Python, Language::JavaScript] {
            let _ = engine.check_bytes(language, &bytes);
        }
    }
}

/// Deep nesting is the classic way to overflow a recursive walker's stack.
#[test]
fn deep_nesting_is_survived() {
    for depth in [100, 1_000, 20_000] {
        let python = format!("x = {}1{}\n", "(".repeat(depth), ")".repeat(depth));
        let _ = analyze(Language::Python, &python);
        let python_calls = format!("{}0{}\n", "f(".repeat(depth), ")".repeat(depth));
        let _ = analyze(Language::Python, &python_calls);
        let js = format!("x = {}1{};\n", "[".repeat(depth), "]".repeat(depth));
        let _ = analyze(Language::JavaScript, &js);
        let js_fns = format!("{}{}\n", "(()=>".repeat(depth), ")".repeat(depth));
        let _ = analyze(Language::JavaScript, &js_fns);
    }
    // Long chains without brackets nest just as deeply in the syntax tree.
    for chain in ["1+", "not ", "-", "a.", "lambda: "] {
        let python = format!("x = {}1\n", chain.repeat(40_000));
        let _ = analyze(Language::Python, &python);
    }
    for chain in ["1+", "!", "-", "a.", "() => ", "typeof "] {
        let js = format!("x = {}1;\n", chain.repeat(40_000));
        let _ = analyze(Language::JavaScript, &js);
    }
}
