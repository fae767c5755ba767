//! Which module system a JavaScript snippet needs: Node refuses `import` in a CommonJS
//! file and `require` in an ES module, and decides by the file's extension, so the
//! runtime names the file `main.mjs` or `main.cjs` after this reads the code.
//!
//! The decision reads the frontend's own parse (no second parse) rather than the text, so the words
//! `import`, `export` and `await` inside strings, template literals, comments or
//! regular expressions never flip it, and `await` inside an `async function` (legal in
//! CommonJS) is told apart from top-level `await` (which only an ES module allows).

use crate::analysis::SourceKind;
use tree_sitter::Node;

/// The module system the parsed snippet needs.
pub fn of(root: Node<'_>) -> SourceKind {
    if needs_module(root) {
        SourceKind::EsModule
    } else {
        SourceKind::CommonJs
    }
}

/// Nodes that open a new function body: an `await` below one is not top-level.
fn is_function_boundary(kind: &str) -> bool {
    matches!(
        kind,
        "function_declaration"
            | "function_expression"
            | "function"
            | "arrow_function"
            | "method_definition"
            | "generator_function"
            | "generator_function_declaration"
            | "class_static_block"
    )
}

fn needs_module(root: Node<'_>) -> bool {
    find_at_top_level(root, |node| match node.kind() {
        "import_statement" | "export_statement" => true,
        // `import.meta`; `new.target` is also a meta_property but is legal anywhere.
        "meta_property" => is_import_meta(node),
        _ => is_top_level_await(node),
    })
}

/// True when the code awaits outside any function (which only a module, or a REPL
/// that wraps the code, allows).
pub fn has_top_level_await(root: Node<'_>) -> bool {
    find_at_top_level(root, is_top_level_await)
}

/// `await x`, or `for await (… of …)`, met outside every function body.
fn is_top_level_await(node: Node<'_>) -> bool {
    node.kind() == "await_expression"
        || (node.kind() == "for_in_statement" && has_await_keyword(node))
}

/// Whether `wanted` holds for a node outside every function body. An iterative walk
/// (a recursive one could overflow on deeply nested input).
fn find_at_top_level(root: Node<'_>, wanted: impl Fn(Node<'_>) -> bool) -> bool {
    // (node, inside a function body)
    let mut stack = vec![(root, false)];
    while let Some((node, in_function)) = stack.pop() {
        if !in_function && wanted(node) {
            return true;
        }
        let in_function = in_function || is_function_boundary(node.kind());
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            stack.push((child, in_function));
        }
    }
    false
}

fn is_import_meta(node: Node<'_>) -> bool {
    node.child(0).is_some_and(|first| first.kind() == "import")
}

fn has_await_keyword(node: Node<'_>) -> bool {
    let mut cursor = node.walk();
    let found = node.children(&mut cursor).any(|c| c.kind() == "await");
    found
}

#[cfg(test)]
mod tests {
    use crate::analysis::SourceKind;
    use crate::analysis::SourceKind::{CommonJs, EsModule};

    fn detect(code: &str) -> SourceKind {
        super::of(super::super::parse(code).expect("parsed").root_node())
    }

    #[test]
    fn import_and_export_statements_make_a_module() {
        assert_eq!(
            detect("import fs from 'node:fs';\nconsole.log(1)"),
            EsModule
        );
        assert_eq!(detect("import { a } from './a.js'"), EsModule);
        assert_eq!(detect("export const x = 1;"), EsModule);
        assert_eq!(detect("export default function f() {}"), EsModule);
        assert_eq!(detect("console.log(import.meta.url)"), EsModule);
    }

    #[test]
    fn top_level_await_makes_a_module() {
        assert_eq!(detect("await Promise.resolve(1)"), EsModule);
        assert_eq!(detect("const x = await fetchIt();"), EsModule);
        assert_eq!(detect("for await (const x of gen()) {}"), EsModule);
        assert_eq!(detect("if (true) { await 1 }"), EsModule);
    }

    #[test]
    fn await_inside_functions_is_commonjs() {
        assert_eq!(detect("async function f() { await 1 }\nf()"), CommonJs);
        assert_eq!(detect("const f = async () => { await g() }"), CommonJs);
        assert_eq!(
            detect("class A { async m() { await 1 } static { } }"),
            CommonJs
        );
        assert_eq!(
            detect("(async () => { for await (const x of y) {} })()"),
            CommonJs
        );
    }

    #[test]
    fn words_in_strings_comments_and_regexes_do_not_count() {
        let code = r#"
            // import fs from 'fs'
            /* export default 1; await x */
            const s = "import x from 'y'";
            const t = `export const a = ${"await"}`;
            const r = /import|export|await/;
            const fs = require('fs');
            console.log(s, t, r, new.target);
        "#;
        assert_eq!(detect(code), CommonJs);
    }

    #[test]
    fn dynamic_import_is_allowed_in_commonjs() {
        assert_eq!(detect("import('node:fs').then(m => m)"), CommonJs);
        assert_eq!(
            detect("const x = require('x'); module.exports = x"),
            CommonJs
        );
        assert_eq!(detect(""), CommonJs);
    }
}
