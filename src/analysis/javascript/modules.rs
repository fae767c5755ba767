//! Module loading in all its spellings.
//!
//! Why: the policy's strongest rules are about modules (`child_process`, `vm`, `net`),
//! so every way of loading one must become an `Import`: `require` with anything that
//! folds to a constant, ES `import`/`export … from` in every form, `import()`, and the
//! loaders behind `require`: `module.require`, `process.mainModule.require`,
//! `require.main.require`, `createRequire(…)(…)`, `module.constructor._load`,
//! `require('module')._load`, `process.getBuiltinModule`, and `require.call`/`apply`.
//! A loader whose argument does not fold is a dynamic import: the code picks its module
//! at run time and cannot be checked.

use super::super::dynamic;
use super::super::FactKind;
use super::model::{normalize, ScopeId, Val};
use super::Analyzer;
use super::{Field, NodeExt};
use tree_sitter::Node;

/// What a JSON file's name ends in: Node reads such a file with `JSON.parse`, as data.
const JSON_SUFFIX: &str = ".json";

/// The functions that join paths, whose result ends as their last argument does.
const PATH_JOINS: &[&str] = &[
    "path.join",
    "path.resolve",
    "path.posix.join",
    "path.posix.resolve",
];

/// A specifier of a JSON file (data, not code), spelled as a path or a package's
/// subpath; never a URL (`data:…,code//.json` is code).
fn is_json_file(specifier: &str) -> bool {
    let file = specifier.rsplit('/').next().unwrap_or(specifier);
    specifier.ends_with(JSON_SUFFIX) && file.len() > JSON_SUFFIX.len() && !specifier.contains(':')
}

impl<'a> Analyzer<'a> {
    /// `import … from 'm'`, `import 'm'`, `export * from 'm'`, `export {a} from 'm'`.
    pub fn emit_static_import(&mut self, statement: Node<'a>) {
        let Some(source) = statement.field(Field::Source) else {
            return;
        };
        let specifier = self.string_value(source).into_owned();
        // `import data from './a.json' with { type: 'json' }`: data, as with `require`.
        if is_json_file(&specifier) {
            return;
        }
        self.push_file_code(statement, &specifier);
        let module = normalize(&specifier).to_string();
        self.push(statement, FactKind::Import { module });
    }

    /// A module loaded from a file or URL rather than by package name: its code is
    /// not in the snippet (in a sandbox it is a file the snippet wrote, or a string).
    fn push_file_code(&mut self, node: Node<'a>, specifier: &str) {
        // Read as the WHATWG URL parser reads it: tabs and newlines anywhere are
        // dropped (`d\tata:` is `data:`). A `#name` is a package's "imports" map,
        // which a package.json the checker never sees resolves.
        let spelled: String = specifier
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        let trimmed = spelled.trim_start_matches(|c: char| c <= ' ');
        let lower = trimmed.to_ascii_lowercase();
        let from_file = trimmed.starts_with(['/', '.', '\\', '#'])
            || ["file:", "data:", "blob:", "http:", "https:"]
                .iter()
                .any(|scheme| lower.starts_with(scheme));
        if !from_file {
            return;
        }
        let shown: String = specifier.chars().take(60).collect();
        self.push(
            node,
            FactKind::DynamicAccess {
                kind: dynamic::FILE_CODE.to_string(),
                detail: format!("`{shown}` is loaded from a file or URL the checker never sees"),
            },
        );
    }

    /// A call that loads a module: an `Import` per name it may load, and a dynamic
    /// import when the name may be anything else.
    pub fn emit_load(
        &mut self,
        call: Node<'a>,
        args: Option<Node<'a>>,
        arg: u8,
        scope: ScopeId,
        what: &str,
    ) {
        let Some(name_node) = args.and_then(|a| self.loader_argument(a, arg)) else {
            if args.is_some_and(|a| a.named_child_count() > 0) {
                self.push_dynamic_import(call, what);
            }
            return;
        };
        let vals = self.eval(name_node, scope, 0);
        let (names, other) = vals.strings();
        for name in names {
            if is_json_file(&name) {
                continue;
            }
            self.push_file_code(call, &name);
            let module = normalize(&name).to_string();
            self.push(call, FactKind::Import { module });
        }
        if other && !self.ends_in_json(name_node, scope) {
            self.push_dynamic_import(call, what);
        }
    }

    /// `require(path.join(__dirname, `config.${env}.json`))`, `require(dir + '/a.json')`:
    /// whatever the computed part, the name ends in `.json`, which no built-in does.
    fn ends_in_json(&self, node: Node<'a>, scope: ScopeId) -> bool {
        let node = super::values::strip_parens(node);
        match node.kind() {
            "string" => self.string_value(node).ends_with(JSON_SUFFIX),
            "template_string" => {
                // The text after the last substitution.
                let mut cursor = node.walk();
                let last = node.named_children(&mut cursor).last();
                last.is_some_and(|part| {
                    part.kind() == "string_fragment" && self.text(part).ends_with(JSON_SUFFIX)
                })
            }
            "binary_expression" => {
                node.field(Field::Operator).is_some_and(|o| o.kind() == "+")
                    && node
                        .field(Field::Right)
                        .is_some_and(|right| self.ends_in_json(right, scope))
            }
            "call_expression" => {
                let joins = node.field(Field::Function).is_some_and(|callee| {
                    let values = self.eval(callee, scope, 0).items;
                    !values.is_empty()
                        && values.iter().all(|value| {
                            matches!(value, Val::Name(name) if PATH_JOINS.contains(&name.as_str()))
                        })
                });
                let last = node.field(Field::Arguments).and_then(|args| {
                    let mut cursor = args.walk();
                    let children: Vec<Node<'a>> = args.named_children(&mut cursor).collect();
                    children.into_iter().rfind(|c| c.kind() != "comment")
                });
                joins && last.is_some_and(|last| self.ends_in_json(last, scope))
            }
            _ => false,
        }
    }

    fn push_dynamic_import(&mut self, call: Node<'a>, what: &str) {
        let detail = format!(
            "{what} with a computed module name: `{}`",
            self.excerpt(call)
        );
        self.push(
            call,
            FactKind::DynamicAccess {
                kind: dynamic::IMPORT.to_string(),
                detail,
            },
        );
    }
}
