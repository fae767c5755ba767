//! A JavaScript session call as a script Node runs in the session's one context, as
//! its REPL runs a line: top-level `let`, `const`, `class` and functions of one call are
//! there in the next because scripts share the global scope; they are declared as
//! `var`s (classes as `var C = class C {}`), so that a call run again, or importing a
//! name again, declares them anew instead of failing as "already declared".
//!
//! Two things a script cannot say are rewritten, on the lines where they stand (so
//! errors still point at the call's own lines):
//! - `import` declarations become `require` calls binding the same names (`import x
//!   from 'm'` and `import * as x` bind the module's exports, as Node's CommonJS
//!   interop does; `import {a as b}` binds `b` to its `a`);
//! - a call with top-level `await` runs inside an async function the session waits
//!   for; its top-level declarations then become assignments, so that their names
//!   still outlive the call (as globals, where an earlier call did not declare them).
//!
//! The static check reads the call as written; this only changes how Node is told it.

use tree_sitter::Node;

/// The script to run for `source`, and whether its value is a promise to wait for.
/// Code the parser cannot read is passed on unchanged (Node reports its syntax error).
pub fn session_script(source: &str) -> (String, bool) {
    let Some(tree) = super::parse(source) else {
        return (source.to_string(), false);
    };
    let root = tree.root_node();
    if root.has_error() {
        return (source.to_string(), false);
    }
    let awaits = super::module_system::has_top_level_await(root);
    let mut edits = Edits::default();
    let mut cursor = root.walk();
    for statement in root.named_children(&mut cursor) {
        rewrite_statement(source, statement, awaits, &mut edits);
    }
    let mut script = edits.apply(source);
    if awaits {
        script.insert_str(0, "(async () => {");
        script.push_str("\n})()");
    }
    (script, awaits)
}

/// Replacements of byte ranges, applied back to front.
#[derive(Default)]
struct Edits(Vec<(usize, usize, String)>);

impl Edits {
    fn replace(&mut self, node: Node, text: String) {
        // Keep the line count: a rewritten multi-line statement ends on its last line.
        let lines = node.end_position().row - node.start_position().row;
        self.0.push((
            node.start_byte(),
            node.end_byte(),
            text + &"\n".repeat(lines),
        ));
    }

    fn insert(&mut self, at: usize, text: &str) {
        self.0.push((at, at, text.to_string()));
    }

    fn apply(mut self, source: &str) -> String {
        self.0.sort_by_key(|(start, end, _)| (*start, *end));
        let mut out = String::with_capacity(source.len() + 64);
        let mut at = 0;
        for (start, end, text) in self.0 {
            if start < at {
                continue; // overlapping edits do not happen; never apply one twice
            }
            out.push_str(&source[at..start]);
            out.push_str(&text);
            at = end;
        }
        out.push_str(&source[at..]);
        out
    }
}

fn rewrite_statement(source: &str, statement: Node, awaits: bool, edits: &mut Edits) {
    let text = |node: Node| &source[node.byte_range()];
    match statement.kind() {
        "import_statement" => {
            if let Some(replacement) = import_as_require(source, statement, awaits) {
                edits.replace(statement, replacement);
            }
        }
        // `export` means nothing in a session: the declaration stays, as written.
        "export_statement" => {
            if let Some(declaration) = statement.child_by_field_name("declaration") {
                edits.0.push((
                    statement.start_byte(),
                    declaration.start_byte(),
                    String::new(),
                ));
                rewrite_statement(source, declaration, awaits, edits);
            }
        }
        "lexical_declaration" | "variable_declaration" if awaits => {
            let Some(keyword) = statement.child(0) else {
                return;
            };
            edits
                .0
                .push((keyword.start_byte(), keyword.end_byte(), ";".into()));
            let mut cursor = statement.walk();
            for declarator in statement.named_children(&mut cursor) {
                let Some(name) = declarator.child_by_field_name("name") else {
                    continue;
                };
                if declarator.child_by_field_name("value").is_none() {
                    edits.insert(name.end_byte(), " = void 0");
                } else if name.kind() == "object_pattern" {
                    edits.insert(declarator.start_byte(), "(");
                    edits.insert(declarator.end_byte(), ")");
                }
            }
        }
        "function_declaration" | "generator_function_declaration" | "class_declaration"
            if awaits =>
        {
            if let Some(name) = statement.child_by_field_name("name") {
                edits.insert(statement.start_byte(), &format!(";{} = ", text(name)));
            }
        }
        // A cell run again declares its names again: as Node's REPL lets a line do,
        // the names of a call are `var`s of the one global scope, which a later call
        // may declare anew (`const x` twice in two scripts is a SyntaxError).
        "lexical_declaration" => {
            if let Some(keyword) = statement.child(0) {
                edits
                    .0
                    .push((keyword.start_byte(), keyword.end_byte(), "var".into()));
            }
        }
        "class_declaration" => {
            if let Some(name) = statement.child_by_field_name("name") {
                edits.insert(statement.start_byte(), &format!("var {} = ", text(name)));
                edits.insert(statement.end_byte(), ";");
            }
        }
        _ => {}
    }
}

/// `import … from 'm'` as the `require` that binds the same names (declared with
/// `var`, so that a later call may import them again, or assigned when the call runs inside its async wrapper).
fn import_as_require(source: &str, statement: Node, assign: bool) -> Option<String> {
    let text = |node: Node| source[node.byte_range()].to_string();
    let module = text(statement.child_by_field_name("source")?);
    let load = format!("require({module})");
    let mut cursor = statement.walk();
    let Some(clause) = statement
        .named_children(&mut cursor)
        .find(|child| child.kind() == "import_clause")
    else {
        return Some(format!("{load};"));
    };
    let mut bindings: Vec<(String, String)> = Vec::new(); // (pattern, value)
    let mut cursor = clause.walk();
    let mut whole = None;
    for part in clause.named_children(&mut cursor) {
        match part.kind() {
            "identifier" => whole = Some(text(part)),
            "namespace_import" => {
                let mut inner = part.walk();
                let name = part
                    .named_children(&mut inner)
                    .find(|n| n.kind() == "identifier")?;
                whole = Some(text(name));
            }
            "named_imports" => {
                let mut inner = part.walk();
                let names: Vec<String> = part
                    .named_children(&mut inner)
                    .filter(|n| n.kind() == "import_specifier")
                    .filter_map(|specifier| {
                        let name = text(specifier.child_by_field_name("name")?);
                        Some(match specifier.child_by_field_name("alias") {
                            Some(alias) => format!("{name}: {}", text(alias)),
                            None => name,
                        })
                    })
                    .collect();
                bindings.push((format!("{{ {} }}", names.join(", ")), String::new()));
            }
            _ => {}
        }
    }
    let bind = |pattern: &str, value: &str| {
        if assign {
            format!("({pattern} = {value});")
        } else {
            format!("var {pattern} = {value};")
        }
    };
    let mut out = String::new();
    match &whole {
        Some(name) => {
            out.push_str(&bind(name, &load));
            for (pattern, _) in &bindings {
                out.push(' ');
                out.push_str(&bind(pattern, name));
            }
        }
        None => {
            for (pattern, _) in &bindings {
                out.push_str(&bind(pattern, &load));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::session_script;

    #[test]
    fn imports_become_requires_on_their_own_lines() {
        let (script, awaits) = session_script(
            "import fs from 'node:fs';\nimport * as path from 'path'\nimport { join as j, sep } from 'path';\nimport 'os';\nconsole.log(1)",
        );
        assert!(!awaits);
        assert_eq!(
            script,
            "var fs = require('node:fs');\nvar path = require('path');\nvar { join: j, sep } = require('path');\nrequire('os');\nconsole.log(1)"
        );
        let (script, _) = session_script("import d, { a } from 'm';");
        assert_eq!(script, "var d = require('m'); var { a } = d;");
        let (script, _) = session_script("import {\n  a,\n  b,\n} from 'm';\nx");
        assert_eq!(script, "var { a, b } = require('m');\n\n\n\nx");
    }

    #[test]
    fn a_call_that_awaits_is_wrapped_and_its_names_outlive_it() {
        let (script, awaits) = session_script(
            "const x = await f(), y = 2;\nlet { a } = o;\nlet z;\nfunction g() {}\nclass C {}\nimport m from 'm';",
        );
        assert!(awaits);
        assert_eq!(
            script,
            "(async () => {; x = await f(), y = 2;\n; ({ a } = o);\n; z = void 0;\n;g = function g() {}\n;C = class C {}\n(m = require('m'));\n})()"
        );
    }

    #[test]
    fn exports_keep_their_declarations_and_other_code_is_untouched() {
        let (script, _) = session_script("export const a = 1;\nexport function f() {}");
        assert_eq!(script, "var a = 1;\nfunction f() {}");
        let (script, _) = session_script("let a = 1;\nclass C {}\nif (a) { const b = 2; }");
        assert_eq!(
            script,
            "var a = 1;\nvar C = class C {};\nif (a) { const b = 2; }"
        );
        let plain = "a = 1;\nasync function f() { await a }\n";
        assert_eq!(session_script(plain), (plain.to_string(), false));
        assert_eq!(session_script("let ("), ("let (".to_string(), false));
    }
}
