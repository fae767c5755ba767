//! Name resolution and fact emission: the walk that turns uses into qualified names.
//!
//! Every binding holds the set of values it may have: a module (`import os`), a
//! qualified name (`from os import system`, `x = os.system`, builtins like `eval`), a
//! folded string (for `getattr(os, name)`), a literal path object, or "something of
//! the user's". Sets are unions, so rebinding can only add meanings (conservative):
//! `x = os.system; x = print; x()` may still report `os.system`.
//!
//! Function bodies are flow-insensitive (a local never falls back to a builtin: Python
//! raises `UnboundLocalError` instead). Module and class bodies run top to bottom, so
//! there a use sees the bindings made so far, and a builtin stays visible until a
//! binding that surely ran hides it (`eval(…)` followed by `eval = 1` still reports);
//! loop bodies are pre-bound so a use sees the loop's later bindings too. Functions see
//! the module's final bindings, and the builtin as well unless the module binds the
//! name before any statement that could call them. A pass is repeated (its facts
//! discarded) only when a flow-insensitive set grew after the pass had read it, so
//! values reach a fixpoint and most code needs one pass.

mod annotations;
mod calls;
mod expressions;
mod scopes;
mod statements;

use super::dynamic::{
    configured_factory, is_attribute_function, is_builtin, is_builtins_namespace, is_dunder,
    is_import_function, is_introspection, is_known_submodule, keeps_arguments,
    method_of_unknown_receiver,
};
use super::encoding::normalize;
use super::fold::{fold_str, FoldEnv};
use super::loading;
use super::modes;
use super::paths::{self, is_path_constructor, path_arguments, PathArguments};
use super::scope::{dotted, node_key, ScopeId, ScopeKind, ScopeTree};
use super::MAX_DEPTH;
use crate::analysis::{dynamic, Fact, FactKind, LineIndex};
use rustpython_parser::ast::{self, Expr, Operator, Ranged, Stmt};
use rustpython_parser::text_size::{TextRange, TextSize};
use std::cell::Cell;
use std::collections::HashMap;

/// Passes at most; most code needs one, a binding used before it is made needs two.
const MAX_PASSES: usize = 6;
/// Largest value set kept per binding; past it, constants degrade to "unknown".
const MAX_VALUES: usize = 32;

/// What a name or expression may denote.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    /// A module object: `import os` binds `os` to `Module("os")`.
    Module(String),
    /// A qualified name or builtin: `os.system`, `eval`.
    Name(String),
    /// A string constant.
    Str(String),
    /// A `pathlib` path object built from literals.
    Path { op: String, path: String },
    /// Anything else: the user's own functions, objects, call results.
    Unknown,
    /// More meanings than [`MAX_VALUES`]: the code is refused rather than followed
    /// partially (no ordinary program gets here; hostile ones could blow up otherwise).
    Overflow,
}

/// An entry for every name the scope pass saw bound, per scope (and for the module,
/// every name some function declares `global`).
fn initial_entries(tree: &ScopeTree) -> Vec<HashMap<String, Entry>> {
    let mut tables: Vec<HashMap<String, Entry>> = tree
        .scopes
        .iter()
        .map(|scope| {
            scope
                .locals
                .iter()
                .map(|name| (name.clone(), Entry::default()))
                .collect()
        })
        .collect();
    for scope in &tree.scopes {
        for name in &scope.globals {
            tables[0].entry(name.clone()).or_default();
        }
    }
    tables
}

/// Adds a value to a set; true if it was new.
fn add(set: &mut Vec<Value>, value: Value) -> bool {
    if set.contains(&value) {
        return false;
    }
    if set.len() >= MAX_VALUES {
        // Constants degrade to "unknown" (folding then fails closed); names cannot be
        // dropped without hiding them, so the set is marked as overflowing instead.
        let marker = match value {
            Value::Str(_) | Value::Path { .. } | Value::Unknown => Value::Unknown,
            Value::Module(_) | Value::Name(_) | Value::Overflow => Value::Overflow,
        };
        if set.contains(&marker) {
            return false;
        }
        set.push(marker);
        return true;
    }
    set.push(value);
    true
}

fn unknown() -> Vec<Value> {
    vec![Value::Unknown]
}

/// `builtins.eval` and `__builtins__.eval` are `eval`.
fn qualify(base: &str, attribute: &str) -> String {
    if is_builtins_namespace(base) {
        attribute.to_string()
    } else {
        format!("{base}.{attribute}")
    }
}

/// Modules that other modules commonly hold as attributes because they imported them.
fn reexported_module(attribute: &str) -> Option<&'static str> {
    Some(match attribute {
        "os" | "_os" => "os",
        "sys" | "_sys" => "sys",
        "subprocess" | "_subprocess" => "subprocess",
        "builtins" | "_builtins" => "builtins",
        "importlib" => "importlib",
        "ctypes" => "ctypes",
        "pty" => "pty",
        "posix" | "nt" => "os",
        _ => return None,
    })
}

/// Names under the public module that re-exports them, so that `posix.system` is
/// `os.system` and `asyncio.subprocess.create_subprocess_shell` is
/// `asyncio.create_subprocess_shell`: rules name the public spelling only.
fn canonical(qualified: String) -> String {
    const ALIASES: &[(&str, &str)] = &[
        ("posix.", "os."),
        ("nt.", "os."),
        ("posixpath.", "os.path."),
        ("ntpath.", "os.path."),
        (
            "asyncio.subprocess.create_subprocess_",
            "asyncio.create_subprocess_",
        ),
        ("_io.", "io."),
        ("_socket.", "socket."),
        ("_ctypes.", "ctypes."),
        ("_pickle.", "pickle."),
        ("_thread.", "threading."),
        ("yaml.loader.", "yaml."),
        ("yaml.cyaml.", "yaml."),
        ("ruamel.yaml.main.", "ruamel.yaml."),
    ];
    for (private, public) in ALIASES {
        if let Some(rest) = qualified.strip_prefix(private) {
            return format!("{public}{rest}");
        }
    }
    qualified
}

/// A flow-insensitive binding: its values, and whether this pass has read them yet
/// (growing a set that was already read means the pass saw it incomplete).
#[derive(Debug, Default, Clone)]
struct Entry {
    values: Vec<Value>,
    read: Cell<bool>,
}

impl Entry {
    fn read(&self) -> &[Value] {
        self.read.set(true);
        &self.values
    }
}

#[derive(Debug, Default)]
struct SoFar {
    values: Vec<Value>,
    /// A binding that surely ran: the builtin (or star import) is hidden.
    definitely: bool,
}

struct Frame {
    scope: ScopeId,
    kind: ScopeKind,
    /// Conditional blocks around the current statement in this scope.
    conditional: u32,
    /// Module and class bodies: bindings made so far, in statement order.
    so_far: HashMap<String, SoFar>,
    /// Module body: modules star-imported so far.
    stars: Vec<String>,
}

pub struct Walker<'a> {
    tree: &'a ScopeTree,
    index: &'a LineIndex<'a>,
    facts: Vec<Fact>,
    emit: bool,
    /// Non-zero while pre-binding a module/class-level loop body: nothing is emitted
    /// and nested scopes are not entered.
    prebinding: u32,
    frames: Vec<Frame>,
    /// Flow-insensitive values per scope (for the module: every module-level binding
    /// plus those made through `global`).
    values: Vec<HashMap<String, Entry>>,
    /// Module names assigned through `global` in functions, with their values.
    global_values: HashMap<String, Entry>,
    changed: bool,
    depth: usize,
    too_deep: Option<usize>,
    /// Where a value set first overflowed, if one did.
    overflow: Option<usize>,
    /// While walking code parsed out of a string literal: the literal.
    within: Option<Within>,
    /// Module files the snippet writes (module name, detail): writing one is no
    /// finding, importing it afterwards is.
    written_modules: Vec<(String, String)>,
}

/// A string literal whose text is being walked as code (a string annotation).
#[derive(Debug, Clone, Copy)]
struct Within {
    literal: TextRange,
    /// The literal spells its text as is, so ranges inside it are exact; otherwise
    /// every fact inside points at the whole literal.
    exact: bool,
}

/// Resolves a parsed module into facts, or the offset where nesting went too deep.
pub fn resolve(body: &[Stmt], index: &LineIndex) -> Result<Vec<Fact>, Refusal> {
    let tree = ScopeTree::build(body);
    if tree.too_deep {
        return Err(Refusal::TooDeep(0));
    }
    let mut walker = Walker {
        tree: &tree,
        index,
        facts: Vec::new(),
        emit: true,
        prebinding: 0,
        frames: Vec::new(),
        values: initial_entries(&tree),
        global_values: HashMap::new(),
        changed: false,
        written_modules: Vec::new(),
        depth: 0,
        too_deep: None,
        overflow: None,
        within: None,
    };
    // Passes repeat only while a set that was already read still grows (a binding that
    // depends on one made later in the source); most code needs a single pass.
    for _ in 0..MAX_PASSES {
        walker.changed = false;
        walker.facts.clear();
        for entry in walker
            .values
            .iter()
            .flat_map(|scope| scope.values())
            .chain(walker.global_values.values())
        {
            entry.read.set(false);
        }
        walker.pass(body, true);
        if !walker.changed || walker.too_deep.is_some() {
            break;
        }
    }
    match (walker.too_deep, walker.overflow) {
        (Some(offset), _) => Err(Refusal::TooDeep(offset)),
        (None, Some(offset)) => Err(Refusal::TooManyMeanings(offset)),
        (None, None) => Ok(walker.facts),
    }
}

/// Why resolution gave up (the caller reports it as unparseable: fail closed).
#[derive(Debug)]
pub enum Refusal {
    /// Nesting passed [`MAX_DEPTH`] at this byte offset.
    TooDeep(usize),
    /// A name took more than [`MAX_VALUES`] meanings at this byte offset.
    TooManyMeanings(usize),
}

impl<'a> Walker<'a> {
    fn pass(&mut self, body: &[Stmt], emit: bool) {
        self.emit = emit;
        self.frames = vec![Frame {
            scope: 0,
            kind: ScopeKind::Module,
            conditional: 0,
            so_far: HashMap::new(),
            stars: Vec::new(),
        }];
        self.stmts(body);
    }

    // ---- facts ------------------------------------------------------------------

    /// A module file the snippet writes: no finding, but an import of its module
    /// later on is code the checker never saw.
    fn written_module(&mut self, path: &str) {
        let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
        let stem = file.split('.').next().unwrap_or(file).to_string();
        if !stem.is_empty() {
            self.written_modules
                .push((stem, loading::written_detail(path)));
        }
    }

    fn fact(&mut self, range: TextRange, kind: FactKind) {
        if let FactKind::Import { module } = &kind {
            let top = module.split('.').next().unwrap_or(module);
            let written = self
                .written_modules
                .iter()
                .find(|(stem, _)| stem == top)
                .map(|(_, detail)| detail.clone());
            if let Some(detail) = written {
                self.dynamic(range, dynamic::FILE_CODE, detail);
            }
        }
        let range = match self.within {
            Some(within) if !within.exact || !within.literal.contains_range(range) => {
                within.literal
            }
            _ => range,
        };
        if self.emit && self.prebinding == 0 {
            let span = self
                .index
                .span(range.start().to_usize(), range.end().to_usize());
            self.facts.push(Fact { kind, span });
        }
    }

    fn reference(&mut self, range: TextRange, name: &str, module_value: bool) {
        if self.emit && self.prebinding == 0 {
            self.fact(
                range,
                FactKind::Reference {
                    name: name.to_string(),
                    module_value,
                },
            );
        }
    }

    fn dynamic(&mut self, range: TextRange, kind: &str, detail: String) {
        if self.emit && self.prebinding == 0 {
            self.fact(
                range,
                FactKind::DynamicAccess {
                    kind: kind.to_string(),
                    detail,
                },
            );
        }
    }

    /// References for every resolved meaning of a name or attribute chain.
    fn emit_values(&mut self, range: TextRange, values: &[Value], escapes: bool) {
        if !self.emit || self.prebinding > 0 {
            return;
        }
        for value in values {
            match value {
                Value::Module(module) => self.reference(range, module, escapes),
                Value::Name(name) => {
                    self.reference(range, name, false);
                    if let Some(state) = loading::changed_import_state(name) {
                        self.dynamic(range, dynamic::FILE_CODE, loading::state_detail(state));
                    }
                    if escapes && is_attribute_function(name) {
                        self.dynamic(
                            range,
                            dynamic::ATTRIBUTE,
                            format!(
                                "`{name}` is passed on, so the attributes it reaches cannot be known"
                            ),
                        );
                    }
                    if escapes && is_import_function(name) {
                        self.dynamic(
                            range,
                            dynamic::IMPORT,
                            format!(
                                "`{name}` is passed on, so the modules it loads cannot be known"
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
    }

    /// Module objects produced by a call or subscript that escape where they go.
    fn emit_escaping_modules(&mut self, range: TextRange, values: &[Value], escapes: bool) {
        if escapes {
            for value in values {
                if let Value::Module(module) = value {
                    self.reference(range, module, true);
                }
            }
        }
    }
}

fn elements(expr: Option<&Expr>) -> Option<&[Expr]> {
    match expr? {
        Expr::Tuple(t) => Some(&t.elts),
        Expr::List(l) => Some(&l.elts),
        _ => None,
    }
}

/// Targets whose values are followed: names and tuples/lists of them.
fn is_followed_target(target: &Expr) -> bool {
    match target {
        Expr::Name(_) => true,
        Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
            elts.iter().all(is_followed_target)
        }
        Expr::Starred(s) => is_followed_target(&s.value),
        _ => false,
    }
}
