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
use super::model::{normalize, ScopeId};
use super::Analyzer;
use super::{Field, NodeExt};
use tree_sitter::Node;

impl<'a> Analyzer<'a> {
    /// `import … from 'm'`, `import 'm'`, `export * from 'm'`, `export {a} from 'm'`.
    pub fn emit_static_import(&mut self, statement: Node<'a>) {
        let Some(source) = statement.field(Field::Source) else {
            return;
        };
        let specifier = self.string_value(source).into_owned();
        self.push_file_code(statement, &specifier);
        let module = normalize(&specifier).to_string();
        self.push(statement, FactKind::Import { module });
    }

    /// A module loaded from a file or URL rather than by package name: its code is
    /// not in the snippet (in a sandbox it is a file the snippet wrote, or a string).
    fn push_file_code(&mut self, node: Node<'a>, specifier: &str) {
        let trimmed = specifier.trim_start();
        let lower = trimmed.to_ascii_lowercase();
        let from_file = trimmed.starts_with(['/', '.', '\\'])
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
            self.push_file_code(call, &name);
            let module = normalize(&name).to_string();
            self.push(call, FactKind::Import { module });
        }
        if other {
            self.push_dynamic_import(call, what);
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
