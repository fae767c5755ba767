//! JavaScript frontend: source text in, `Fact`s out, by way of tree-sitter.
//!
//! The work happens in three steps, each in its own module:
//!
//! 1. `syntax`: parse with tree-sitter and fail closed on any `ERROR`/`MISSING` node or
//!    on a syntax tree too deep to walk safely (a snippet we cannot read is a snippet we
//!    cannot vouch for).
//! 2. `scope`: the one tree walk, which records every scope, every declaration (with
//!    hoisting: all of a scope's names are known before anything is resolved), every
//!    value a binding may take (initialisers, assignments, destructuring paths,
//!    imports), and the list of nodes worth a second look.
//! 3. `walk`: a pass over that list that evaluates the expressions the policy cares
//!    about to abstract `values` and emits facts. The concerns it delegates to are split by
//!    theme: `modules` (`require`/`import` forms and loaders), `dynamic` (code built
//!    at run time, constructor walks, computed members, escaping namespaces),
//!    `strings` (unescaping and constant folding) and `paths` (fs path literals).
//!
//! Resolution is flow-insensitive: a binding's value is the union of everything ever
//! assigned to it. That is conservative for evasions (`let m = 'fs'; m = x; require(m)`
//! still reports the non-literal require) and still precise enough for a user's own
//! `function exec() {}` not to be mistaken for `child_process.exec`.

mod dynamic;
mod model;
mod module_system;
mod modules;
mod paths;
mod scope;
mod session_script;
mod strings;
mod syntax;
mod values;
mod walk;

#[cfg(test)]
mod tests;

use super::{Fact, FactKind, LineIndex, SourceKind};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use tree_sitter::{Node, Parser, Tree};

pub use model::{BindingId, ScopeId};

thread_local! {
    /// One parser per thread: building a parser and loading the grammar is far more
    /// expensive than parsing a snippet, and the server checks many snippets.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse(source: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_javascript::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(source, None)
    })
}

pub use session_script::session_script;

/// The comments of JavaScript source (byte offset, text with its `//` or `/*`), for
/// [`crate::analysis::noqa`].
pub fn comments(source: &str) -> Vec<(usize, String)> {
    let Some(tree) = parse(source) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut cursor = tree.walk();
    'walk: loop {
        let node = cursor.node();
        if node.kind() == "comment" {
            if let Some(text) = source.get(node.byte_range()) {
                found.push((node.start_byte(), text.to_string()));
            }
        }
        if cursor.goto_first_child() || cursor.goto_next_sibling() {
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                break 'walk;
            }
            if cursor.goto_next_sibling() {
                break;
            }
        }
    }
    found
}

/// Analyses one JavaScript snippet (script, CommonJS or ES module) and tells which
/// module system it needs. Code that cannot be read never runs; it is called CommonJS.
pub fn analyze(source: &str) -> (Vec<Fact>, SourceKind) {
    let index = LineIndex::for_language(source, super::Language::JavaScript);
    let Some(tree) = parse(source) else {
        let fact = Fact {
            kind: FactKind::Unparseable {
                reason: "the JavaScript parser gave up on this input".to_string(),
            },
            span: index.span(0, 0),
        };
        return (vec![fact], SourceKind::CommonJs);
    };
    let root = tree.root_node();
    if let Some(fact) = syntax::first_error(root, source, &index) {
        return (vec![fact], SourceKind::CommonJs);
    }
    let kind = module_system::of(root);
    let mut cx = Analyzer::new(source, &index);
    if let Err(fact) = scope::collect(&mut cx, root) {
        return (vec![fact], kind);
    }
    walk::emit(&mut cx);
    (cx.facts, kind)
}

/// The memo of a binding's value, with a marker that cuts cycles (`a = b; b = a`).
#[derive(Clone)]
pub(crate) enum Cache {
    Todo,
    Busy,
    Done(model::Vals),
}

/// Everything the two walks share: the source, the scope tree, the bindings, the facts.
pub(crate) struct Analyzer<'a> {
    pub source: &'a str,
    pub index: &'a LineIndex<'a>,
    pub scopes: Vec<model::Scope>,
    /// For each name, the scopes that declare it and the binding each declaration is.
    pub declared: HashMap<Cow<'a, str>, Vec<(ScopeId, BindingId)>>,
    pub bindings: Vec<model::Binding<'a>>,
    pub cache: RefCell<Vec<Cache>>,
    pub facts: Vec<Fact>,
    /// Nodes for the emitting pass, listed by the scope walk.
    pub visits: Vec<model::Visit<'a>>,
    /// The scopes `with (object)` statements open: the object and the scope it is in.
    pub with_objects: HashMap<ScopeId, (Node<'a>, ScopeId)>,
}

impl<'a> Analyzer<'a> {
    fn new(source: &'a str, index: &'a LineIndex<'a>) -> Self {
        Analyzer {
            source,
            index,
            scopes: Vec::new(),
            declared: HashMap::new(),
            bindings: Vec::new(),
            cache: RefCell::new(Vec::new()),
            facts: Vec::new(),
            visits: Vec::new(),
            with_objects: HashMap::new(),
        }
    }

    /// The source text of a node; empty rather than a panic if the range is odd.
    pub fn text(&self, node: Node) -> &'a str {
        self.source.get(node.byte_range()).unwrap_or("")
    }

    /// A short, single-line excerpt of a node for fact details.
    pub fn excerpt(&self, node: Node) -> String {
        let text = self.text(node);
        let mut out = String::new();
        for (count, ch) in text.chars().enumerate() {
            if count >= 60 {
                out.push('…');
                break;
            }
            out.push(if ch.is_whitespace() { ' ' } else { ch });
        }
        out
    }

    pub fn push(&mut self, node: Node, kind: FactKind) {
        let span = self.index.span(node.start_byte(), node.end_byte());
        self.facts.push(Fact { kind, span });
    }

    /// The binding a name refers to from a scope, or `None` for a global.
    pub fn resolve(&self, scope: ScopeId, name: &str) -> Option<BindingId> {
        self.resolve_in(scope, name).map(|(_, binding)| binding)
    }

    /// [`Self::resolve`], with the scope that declares the binding.
    pub fn resolve_in(&self, scope: ScopeId, name: &str) -> Option<(ScopeId, BindingId)> {
        let list = self.declared.get(name)?;
        let mut current = Some(scope);
        while let Some(id) = current {
            if let Some(&found) = list.iter().find(|(s, _)| *s == id) {
                return Some(found);
            }
            current = self.scopes.get(id as usize).and_then(|s| s.parent);
        }
        None
    }
}

/// Grammar fields the frontend reads, resolved to ids once per process:
/// `Node::child_by_field_name` compares the name against every field name of the
/// grammar on each call, which showed up at the top of the walk's profile.
macro_rules! fields {
    ($($variant:ident = $name:literal),* $(,)?) => {
        #[derive(Clone, Copy)]
        pub(crate) enum Field { $($variant),* }
        const FIELD_NAMES: &[&str] = &[$($name),*];
    };
}

fields! {
    Alias = "alias", Arguments = "arguments", Body = "body", Constructor = "constructor",
    Function = "function", Index = "index", Key = "key", Kind = "kind", Left = "left",
    Name = "name", Object = "object", Operator = "operator", Parameter = "parameter",
    Parameters = "parameters", Property = "property", Right = "right", Source = "source",
    Value = "value", Consequence = "consequence", Alternative = "alternative",
}

fn field_ids() -> &'static [Option<std::num::NonZeroU16>] {
    static IDS: std::sync::OnceLock<Vec<Option<std::num::NonZeroU16>>> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_javascript::LANGUAGE.into();
        FIELD_NAMES
            .iter()
            .map(|name| language.field_id_for_name(name))
            .collect()
    })
}

/// Field access by [`Field`] instead of by name.
pub(crate) trait NodeExt<'t> {
    fn field(&self, field: Field) -> Option<Node<'t>>;
}

impl<'t> NodeExt<'t> for Node<'t> {
    fn field(&self, field: Field) -> Option<Node<'t>> {
        let id = field_ids().get(field as usize).copied().flatten()?;
        self.child_by_field_id(id.get())
    }
}
