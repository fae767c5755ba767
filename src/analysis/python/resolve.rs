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

use super::dynamic::{
    is_attribute_function, is_builtin, is_builtins_namespace, is_dunder, is_import_function,
    is_introspection, is_known_submodule, keeps_arguments,
};
use super::encoding::normalize;
use super::fold::{fold_str, FoldEnv};
use super::paths::{self, is_path_constructor, path_arguments, PathArguments};
use super::scope::{dotted, node_key, ScopeId, ScopeKind, ScopeTree};
use super::MAX_DEPTH;
use crate::analysis::{dynamic, Fact, FactKind, LineIndex};
use rustpython_parser::ast::{self, Expr, Operator, Ranged, Stmt};
use rustpython_parser::text_size::TextRange;
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
        depth: 0,
        too_deep: None,
        overflow: None,
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

    fn fact(&mut self, range: TextRange, kind: FactKind) {
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

    // ---- scopes -----------------------------------------------------------------

    fn is_module(&self, qualified: &str) -> bool {
        self.tree.module.imported_modules.contains(qualified) || is_known_submodule(qualified)
    }

    /// The value of `module.attribute`: a module that imported `os` has it as an
    /// attribute (`os.path.os`, `shutil.os`, `tempfile._os`), and that *is* `os`.
    fn module_member(&self, module: &str, attribute: &str) -> Value {
        let last = module.rsplit('.').next().unwrap_or(module);
        if attribute != last {
            if let Some(reexported) = reexported_module(attribute) {
                return Value::Module(reexported.to_string());
            }
        }
        self.member(module, attribute)
    }

    /// The value of `base.attribute` when `base` is a module or qualified name.
    fn member(&self, base: &str, attribute: &str) -> Value {
        let qualified = canonical(qualify(base, attribute));
        if self.is_module(&qualified) {
            Value::Module(qualified)
        } else {
            Value::Name(qualified)
        }
    }

    fn current(&self) -> usize {
        self.frames.len() - 1
    }

    fn lookup(&self, name: &str) -> Vec<Value> {
        self.lookup_at(self.current(), name, false)
    }

    /// Looks `name` up from frame `at`. `deferred`: a function body lies between the
    /// use and this frame, so module names are seen in their final state.
    fn lookup_at(&self, at: usize, name: &str, deferred: bool) -> Vec<Value> {
        let frame = &self.frames[at];
        let scope = self.tree.scope(frame.scope);
        match frame.kind {
            ScopeKind::Function | ScopeKind::Comprehension => {
                if scope.globals.contains(name) {
                    return self.module_final(name);
                }
                if scope.locals.contains(name) && !scope.nonlocals.contains(name) {
                    return self.values[frame.scope]
                        .get(name)
                        .map(|entry| entry.read().to_vec())
                        .unwrap_or_default();
                }
                let deferred = deferred || frame.kind == ScopeKind::Function;
                let mut up = at;
                loop {
                    if up == 0 {
                        return self.module_final(name);
                    }
                    up -= 1;
                    if self.frames[up].kind != ScopeKind::Class {
                        break;
                    }
                }
                self.lookup_at(up, name, deferred)
            }
            ScopeKind::Class => {
                if scope.globals.contains(name) {
                    return self.module_final(name);
                }
                let mut out = Vec::new();
                let mut definitely = false;
                if let Some(so_far) = frame.so_far.get(name) {
                    out = so_far.values.clone();
                    definitely = so_far.definitely;
                }
                if !definitely && at > 0 {
                    for value in self.lookup_at(at - 1, name, deferred) {
                        add(&mut out, value);
                    }
                }
                out
            }
            ScopeKind::Module => {
                if deferred {
                    return self.module_final(name);
                }
                let mut out = Vec::new();
                let mut definitely = false;
                if let Some(so_far) = frame.so_far.get(name) {
                    out = so_far.values.clone();
                    definitely = so_far.definitely;
                }
                if let Some(entry) = self.global_values.get(name) {
                    for value in entry.read() {
                        add(&mut out, value.clone());
                    }
                }
                if !definitely {
                    for module in &frame.stars {
                        if let Some(value) = self.star_value(module, name) {
                            add(&mut out, value);
                        }
                    }
                    if is_builtin(name) {
                        add(&mut out, Value::Name(name.to_string()));
                    }
                }
                out
            }
        }
    }

    /// What a star import may have bound `name` to. Builtin names are taken to come from
    /// the builtins, except `open`, which `os`, `io` and friends do export.
    fn star_value(&self, module: &str, name: &str) -> Option<Value> {
        (!is_builtin(name) || name == "open").then(|| self.member(module, name))
    }

    /// A module-level name as a function body sees it when it runs.
    fn module_final(&self, name: &str) -> Vec<Value> {
        let mut out = self.values[0]
            .get(name)
            .map(|entry| entry.read().to_vec())
            .unwrap_or_default();
        let module = &self.tree.module;
        let may_be_unbound = match module.first_unconditional.get(name) {
            None => true,
            Some(&bound_at) => {
                module.deleted.contains(name) || module.first_call.is_some_and(|c| c <= bound_at)
            }
        };
        if may_be_unbound {
            for star in &module.star_modules {
                if let Some(value) = self.star_value(star, name) {
                    add(&mut out, value);
                }
            }
            if is_builtin(name) {
                add(&mut out, Value::Name(name.to_string()));
            }
        }
        out
    }

    fn bind(&mut self, name: &str, values: Vec<Value>) {
        self.bind_at(self.current(), name, values);
    }

    fn bind_at(&mut self, at: usize, name: &str, values: Vec<Value>) {
        let frame_scope = self.frames[at].scope;
        let scope = self.tree.scope(frame_scope);
        match self.frames[at].kind {
            ScopeKind::Function | ScopeKind::Comprehension => {
                if scope.globals.contains(name) {
                    self.bind_global(name, values);
                } else if scope.nonlocals.contains(name) {
                    let owner = (0..at).rev().find(|&i| {
                        let s = self.tree.scope(self.frames[i].scope);
                        matches!(
                            self.frames[i].kind,
                            ScopeKind::Function | ScopeKind::Comprehension
                        ) && s.locals.contains(name)
                            && !s.nonlocals.contains(name)
                    });
                    if let Some(owner) = owner {
                        let owner_scope = self.frames[owner].scope;
                        self.union(owner_scope, name, values);
                    }
                } else {
                    self.union(frame_scope, name, values);
                }
            }
            ScopeKind::Class | ScopeKind::Module => {
                if self.frames[at].kind == ScopeKind::Class && scope.globals.contains(name) {
                    self.bind_global(name, values);
                    return;
                }
                let surely = self.frames[at].conditional == 0 && self.prebinding == 0;
                let entry = self.frames[at].so_far.entry(name.to_string()).or_default();
                for value in &values {
                    add(&mut entry.values, value.clone());
                }
                entry.definitely |= surely;
                if self.frames[at].kind == ScopeKind::Module {
                    self.union(0, name, values);
                }
            }
        }
    }

    fn bind_global(&mut self, name: &str, values: Vec<Value>) {
        let (entry, created) = match self.global_values.get_mut(name) {
            Some(entry) => (entry, false),
            None => (
                self.global_values.entry(name.to_string()).or_default(),
                true,
            ),
        };
        let mut grew = false;
        for value in &values {
            grew |= add(&mut entry.values, value.clone());
        }
        if grew && (created || entry.read.get()) {
            self.changed = true;
        }
        self.union(0, name, values);
    }

    /// Adds values to a flow-insensitive binding. Every binding the scope pass found
    /// has an entry from the start, so a set growing after it was read is noticed.
    fn union(&mut self, scope: ScopeId, name: &str, values: Vec<Value>) {
        let (entry, created) = match self.values[scope].get_mut(name) {
            Some(entry) => (entry, false),
            None => (
                self.values[scope].entry(name.to_string()).or_default(),
                true,
            ),
        };
        let mut grew = false;
        for value in values {
            grew |= add(&mut entry.values, value);
        }
        if grew && (created || entry.read.get()) {
            self.changed = true;
        }
    }

    fn unbind(&mut self, name: &str) {
        let at = self.current();
        if let Some(entry) = self.frames[at].so_far.get_mut(name) {
            entry.definitely = false;
        }
    }

    fn enter(&mut self, node: usize) -> bool {
        let Some(&scope) = self.tree.by_node.get(&node) else {
            // The scope pass stopped early: nothing below can be trusted.
            self.too_deep.get_or_insert(0);
            return false;
        };
        self.frames.push(Frame {
            scope,
            kind: self.tree.scope(scope).kind,
            conditional: 0,
            so_far: HashMap::new(),
            stars: Vec::new(),
        });
        true
    }

    fn leave(&mut self) {
        self.frames.pop();
    }

    fn conditionally(&mut self, f: impl FnOnce(&mut Self)) {
        let at = self.current();
        self.frames[at].conditional += 1;
        f(self);
        let at = self.current();
        self.frames[at].conditional -= 1;
    }

    fn runs_in_order(&self) -> bool {
        matches!(
            self.frames[self.current()].kind,
            ScopeKind::Module | ScopeKind::Class
        )
    }

    // ---- statements -------------------------------------------------------------

    fn stmts(&mut self, body: &[Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if self.depth >= MAX_DEPTH {
            self.too_deep.get_or_insert(stmt.start().to_usize());
            return;
        }
        self.depth += 1;
        self.stmt_inner(stmt);
        self.depth -= 1;
    }

    /// A loop body: at module/class level it is pre-bound first, so that a use early in
    /// the body also sees what later iterations bound.
    fn loop_body(&mut self, body: &[Stmt], orelse: &[Stmt]) {
        self.conditionally(|w| {
            if w.runs_in_order() && w.prebinding == 0 {
                w.prebinding += 1;
                w.stmts(body);
                w.prebinding -= 1;
            }
            w.stmts(body);
            w.stmts(orelse);
        });
    }

    fn stmt_inner(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::FunctionDef(ast::StmtFunctionDef {
                name,
                args,
                body,
                decorator_list,
                returns,
                ..
            })
            | Stmt::AsyncFunctionDef(ast::StmtAsyncFunctionDef {
                name,
                args,
                body,
                decorator_list,
                returns,
                ..
            }) => {
                for decorator in decorator_list {
                    self.expr(decorator, false);
                }
                let defaults = self.arguments_outside(args);
                if let Some(returns) = returns {
                    self.expr(returns, false);
                }
                self.bind(&normalize(name), unknown());
                if self.prebinding > 0 || !self.enter(node_key(stmt)) {
                    return;
                }
                self.bind_parameters(args, defaults);
                self.stmts(body);
                self.leave();
            }
            Stmt::ClassDef(class) => {
                for e in class.decorator_list.iter().chain(&class.bases) {
                    self.expr(e, false);
                }
                for keyword in &class.keywords {
                    self.expr(&keyword.value, false);
                }
                if self.prebinding == 0 && self.enter(node_key(stmt)) {
                    self.stmts(&class.body);
                    self.leave();
                }
                self.bind(&normalize(&class.name), unknown());
            }
            Stmt::Return(r) => {
                if let Some(value) = &r.value {
                    self.expr(value, true);
                }
            }
            Stmt::Delete(d) => {
                for target in &d.targets {
                    match target {
                        Expr::Name(n) => self.unbind(&normalize(&n.id)),
                        other => {
                            self.expr(other, false);
                        }
                    }
                }
            }
            Stmt::Assign(a) => self.assign(&a.targets, &a.value),
            Stmt::TypeAlias(t) => {
                self.expr(&t.value, false);
                self.bind_target(&t.name, unknown());
            }
            Stmt::AugAssign(a) => {
                let plain = matches!(a.target.as_ref(), Expr::Name(_));
                self.expr(&a.value, !plain);
                match a.target.as_ref() {
                    Expr::Name(n) => {
                        self.expr(&a.target, false);
                        self.bind(&normalize(&n.id), unknown());
                    }
                    other => {
                        self.expr(other, false);
                    }
                }
            }
            Stmt::AnnAssign(a) => {
                self.expr(&a.annotation, false);
                match &a.value {
                    Some(value) => self.assign(std::slice::from_ref(&a.target), value),
                    None => {
                        if !matches!(a.target.as_ref(), Expr::Name(_)) {
                            self.expr(&a.target, false);
                        }
                    }
                }
            }
            Stmt::For(ast::StmtFor {
                target,
                iter,
                body,
                orelse,
                ..
            })
            | Stmt::AsyncFor(ast::StmtAsyncFor {
                target,
                iter,
                body,
                orelse,
                ..
            }) => {
                let values = self.iterated(iter);
                self.conditionally(|w| w.bind_target(target, values));
                self.loop_body(body, orelse);
            }
            Stmt::While(w) => {
                self.expr(&w.test, false);
                self.loop_body(&w.body, &w.orelse);
            }
            Stmt::If(first) => {
                let mut current = first;
                loop {
                    self.expr(&current.test, false);
                    self.conditionally(|w| w.stmts(&current.body));
                    match current.orelse.as_slice() {
                        [Stmt::If(next)] => current = next,
                        orelse => {
                            self.conditionally(|w| w.stmts(orelse));
                            break;
                        }
                    }
                }
            }
            Stmt::With(ast::StmtWith { items, body, .. })
            | Stmt::AsyncWith(ast::StmtAsyncWith { items, body, .. }) => {
                for item in items {
                    self.expr(&item.context_expr, false);
                    if let Some(vars) = &item.optional_vars {
                        self.bind_target(vars, unknown());
                    }
                }
                self.stmts(body);
            }
            Stmt::Match(m) => {
                self.expr(&m.subject, false);
                self.conditionally(|w| {
                    for case in &m.cases {
                        w.pattern(&case.pattern);
                        if let Some(guard) = &case.guard {
                            w.expr(guard, false);
                        }
                        w.stmts(&case.body);
                    }
                });
            }
            Stmt::Raise(r) => {
                for e in r.exc.iter().chain(&r.cause) {
                    self.expr(e, false);
                }
            }
            Stmt::Try(ast::StmtTry {
                body,
                handlers,
                orelse,
                finalbody,
                ..
            })
            | Stmt::TryStar(ast::StmtTryStar {
                body,
                handlers,
                orelse,
                finalbody,
                ..
            }) => self.conditionally(|w| {
                w.stmts(body);
                for handler in handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = handler;
                    if let Some(kind) = &h.type_ {
                        w.expr(kind, false);
                    }
                    if let Some(name) = &h.name {
                        w.bind(&normalize(name), unknown());
                    }
                    w.stmts(&h.body);
                }
                w.stmts(orelse);
                w.stmts(finalbody);
            }),
            Stmt::Assert(a) => {
                self.expr(&a.test, false);
                if let Some(msg) = &a.msg {
                    self.expr(msg, false);
                }
            }
            Stmt::Import(i) => {
                for alias in &i.names {
                    let module = dotted(&alias.name);
                    self.fact(
                        alias.range,
                        FactKind::Import {
                            module: module.clone(),
                        },
                    );
                    if self.frames[self.current()].kind == ScopeKind::Class {
                        // A class attribute is reached through the class or its
                        // instances (`self.os.system`), which is not followed.
                        let top = module.split('.').next().unwrap_or_default().to_string();
                        let bound = if alias.asname.is_some() {
                            &module
                        } else {
                            &top
                        };
                        self.reference(alias.range, bound, true);
                    }
                    match &alias.asname {
                        Some(asname) => self.bind(&normalize(asname), vec![Value::Module(module)]),
                        None => {
                            let top = module.split('.').next().unwrap_or_default().to_string();
                            self.bind(&top, vec![Value::Module(top.clone())]);
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) => self.import_from(i),
            Stmt::Global(_) | Stmt::Nonlocal(_) => {}
            Stmt::Expr(e) => {
                self.expr(&e.value, false);
            }
            Stmt::Pass(_) | Stmt::Break(_) | Stmt::Continue(_) => {}
        }
    }

    fn import_from(&mut self, i: &ast::StmtImportFrom) {
        let relative = i.level.map(|l| l.to_u32()).unwrap_or(0) > 0;
        let module = match (&i.module, relative) {
            (Some(module), false) => dotted(module),
            _ => {
                for alias in &i.names {
                    if alias.name.as_str() != "*" {
                        let name = alias.asname.as_ref().unwrap_or(&alias.name);
                        self.bind(&normalize(name), unknown());
                    }
                }
                return;
            }
        };
        self.fact(
            i.range,
            FactKind::Import {
                module: module.clone(),
            },
        );
        for alias in &i.names {
            if alias.name.as_str() == "*" {
                let at = self.current();
                if self.frames[at].kind == ScopeKind::Module {
                    self.frames[at].stars.push(module.clone());
                }
                continue;
            }
            let value = self.module_member(&module, &normalize(&alias.name));
            // In a class body the name is also a class attribute (`A.import_module`),
            // which is not followed: the value escapes there.
            let in_class = self.frames[self.current()].kind == ScopeKind::Class;
            self.emit_values(alias.range, std::slice::from_ref(&value), in_class);
            let bound = alias.asname.as_ref().unwrap_or(&alias.name);
            self.bind(&normalize(bound), vec![value]);
        }
    }

    /// Evaluates defaults and annotations where the `def`/`lambda` stands; returns the
    /// default values per parameter, which flow into the parameters.
    fn arguments_outside(&mut self, args: &ast::Arguments) -> HashMap<String, Vec<Value>> {
        let mut defaults = HashMap::new();
        for arg in args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
        {
            if let Some(annotation) = &arg.def.annotation {
                self.expr(annotation, false);
            }
            if let Some(default) = &arg.default {
                let values = self.binding_values(default, false);
                defaults.insert(normalize(&arg.def.arg).into_owned(), values);
            }
        }
        for arg in args.vararg.iter().chain(&args.kwarg) {
            if let Some(annotation) = &arg.annotation {
                self.expr(annotation, false);
            }
        }
        defaults
    }

    fn bind_parameters(
        &mut self,
        args: &ast::Arguments,
        mut defaults: HashMap<String, Vec<Value>>,
    ) {
        for arg in args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
        {
            let name = normalize(&arg.def.arg).into_owned();
            let mut values = defaults.remove(&name).unwrap_or_default();
            add(&mut values, Value::Unknown);
            self.bind(&name, values);
        }
        for arg in args.vararg.iter().chain(&args.kwarg) {
            self.bind(&normalize(&arg.arg), unknown());
        }
    }

    fn pattern(&mut self, pattern: &ast::Pattern) {
        use ast::Pattern;
        match pattern {
            Pattern::MatchValue(v) => {
                self.expr(&v.value, false);
            }
            Pattern::MatchSingleton(_) => {}
            Pattern::MatchSequence(s) => s.patterns.iter().for_each(|p| self.pattern(p)),
            Pattern::MatchMapping(m) => {
                for key in &m.keys {
                    self.expr(key, false);
                }
                m.patterns.iter().for_each(|p| self.pattern(p));
                if let Some(rest) = &m.rest {
                    self.bind(&normalize(rest), unknown());
                }
            }
            Pattern::MatchClass(c) => {
                self.expr(&c.cls, false);
                c.patterns.iter().for_each(|p| self.pattern(p));
                c.kwd_patterns.iter().for_each(|p| self.pattern(p));
            }
            Pattern::MatchStar(s) => {
                if let Some(name) = &s.name {
                    self.bind(&normalize(name), unknown());
                }
            }
            Pattern::MatchAs(a) => {
                if let Some(p) = &a.pattern {
                    self.pattern(p);
                }
                if let Some(name) = &a.name {
                    self.bind(&normalize(name), unknown());
                }
            }
            Pattern::MatchOr(o) => o.patterns.iter().for_each(|p| self.pattern(p)),
        }
    }

    // ---- bindings ---------------------------------------------------------------

    fn assign(&mut self, targets: &[Expr], value: &Expr) {
        // `a, b = os.system, os.popen`: element by element.
        if let ([target], Some(target_elts), Some(value_elts)) =
            (targets, elements(targets.first()), elements(Some(value)))
        {
            let _ = target;
            if target_elts.len() == value_elts.len()
                && !target_elts
                    .iter()
                    .chain(value_elts)
                    .any(|e| matches!(e, Expr::Starred(_)))
            {
                for (t, v) in target_elts.iter().zip(value_elts) {
                    let values = self.binding_values(v, !is_followed_target(t));
                    self.bind_target(t, values);
                }
                return;
            }
        }
        // In a class body a name is also a class attribute, reached through the class
        // or its instances, which is not followed: module objects escape there.
        let in_class = self.frames[self.current()].kind == ScopeKind::Class;
        let followed = !in_class && targets.iter().all(is_followed_target);
        let values = self.binding_values(value, !followed);
        for target in targets {
            self.bind_target(target, values.clone());
        }
    }

    /// The values an expression gives a binding: its meanings, or the string it folds to.
    fn binding_values(&mut self, value: &Expr, escapes: bool) -> Vec<Value> {
        let mut values = self.expr(value, escapes);
        if values == [Value::Unknown]
            && matches!(
                value,
                Expr::BinOp(_) | Expr::JoinedStr(_) | Expr::Call(_) | Expr::Subscript(_)
            )
        {
            if let Some(folded) = fold_str(&*self, value) {
                values = vec![Value::Str(folded)];
            }
        }
        values
    }

    fn bind_target(&mut self, target: &Expr, values: Vec<Value>) {
        match target {
            Expr::Name(n) => self.bind(&normalize(&n.id), values),
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                for e in elts {
                    self.bind_target(e, values.clone());
                }
            }
            Expr::Starred(s) => self.bind_target(&s.value, unknown()),
            other => {
                self.expr(other, false);
            }
        }
    }

    /// What iterating a literal `[a, b]` / `(a, b)` / `{a, b}` yields; else unknown.
    fn iterated(&mut self, iter: &Expr) -> Vec<Value> {
        match iter {
            Expr::List(ast::ExprList { elts, .. })
            | Expr::Tuple(ast::ExprTuple { elts, .. })
            | Expr::Set(ast::ExprSet { elts, .. })
                if !elts.iter().any(|e| matches!(e, Expr::Starred(_))) =>
            {
                let mut out = Vec::new();
                for e in elts {
                    for value in self.binding_values(e, false) {
                        add(&mut out, value);
                    }
                }
                if out.is_empty() {
                    out.push(Value::Unknown);
                }
                out
            }
            other => {
                self.expr(other, false);
                unknown()
            }
        }
    }

    // ---- expressions ------------------------------------------------------------

    /// Visits an expression, emitting its facts, and returns what it may denote.
    /// `escapes`: the value goes where its uses cannot be followed (an argument, a
    /// return value, a container, an attribute of some object).
    fn expr(&mut self, expr: &Expr, escapes: bool) -> Vec<Value> {
        if self.depth >= MAX_DEPTH {
            self.too_deep.get_or_insert(expr.start().to_usize());
            return unknown();
        }
        self.depth += 1;
        let values = self.expr_inner(expr, escapes);
        self.depth -= 1;
        if values.contains(&Value::Overflow) {
            self.overflow.get_or_insert(expr.start().to_usize());
        }
        values
    }

    fn expr_inner(&mut self, expr: &Expr, escapes: bool) -> Vec<Value> {
        match expr {
            Expr::Name(_) | Expr::Attribute(_) => {
                let values = self.chain(expr);
                self.emit_values(expr.range(), &values, escapes);
                values
            }
            Expr::Call(call) => self.call(call, escapes),
            Expr::Subscript(s) => self.subscript(s, escapes),
            Expr::Constant(c) => match &c.value {
                // Names and paths are short; long texts are never folded into one.
                ast::Constant::Str(s) if s.len() <= 256 => vec![Value::Str(s.clone())],
                _ => unknown(),
            },
            Expr::BoolOp(b) => {
                let mut out = Vec::new();
                for e in &b.values {
                    for value in self.expr(e, escapes) {
                        add(&mut out, value);
                    }
                }
                out
            }
            Expr::IfExp(i) => {
                self.expr(&i.test, false);
                let mut out = self.expr(&i.body, escapes);
                for value in self.expr(&i.orelse, escapes) {
                    add(&mut out, value);
                }
                out
            }
            Expr::NamedExpr(n) => {
                let values = self.binding_values(&n.value, escapes);
                if let Expr::Name(name) = n.target.as_ref() {
                    let at = (0..self.frames.len())
                        .rev()
                        .find(|&i| self.frames[i].kind != ScopeKind::Comprehension)
                        .unwrap_or(0);
                    self.bind_at(at, &normalize(&name.id), values.clone());
                }
                values
            }
            Expr::BinOp(b) => self.binop(b),
            Expr::UnaryOp(u) => {
                self.expr(&u.operand, false);
                unknown()
            }
            Expr::Lambda(l) => {
                let defaults = self.arguments_outside(&l.args);
                if self.prebinding == 0 && self.enter(node_key(expr)) {
                    self.bind_parameters(&l.args, defaults);
                    self.expr(&l.body, true);
                    self.leave();
                }
                unknown()
            }
            Expr::Dict(d) => {
                for key in d.keys.iter().flatten() {
                    self.expr(key, true);
                }
                for value in &d.values {
                    self.expr(value, true);
                }
                unknown()
            }
            Expr::Set(ast::ExprSet { elts, .. })
            | Expr::List(ast::ExprList { elts, .. })
            | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
                for e in elts {
                    self.expr(e, true);
                }
                unknown()
            }
            Expr::ListComp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::SetComp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::GeneratorExp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::DictComp(c) => self.comprehension(expr, &c.generators, &[&c.key, &c.value]),
            Expr::Await(a) => {
                self.expr(&a.value, escapes);
                unknown()
            }
            Expr::Yield(y) => {
                if let Some(value) = &y.value {
                    self.expr(value, true);
                }
                unknown()
            }
            Expr::YieldFrom(y) => {
                self.expr(&y.value, true);
                unknown()
            }
            Expr::Compare(c) => {
                self.expr(&c.left, false);
                for e in &c.comparators {
                    self.expr(e, false);
                }
                unknown()
            }
            Expr::FormattedValue(f) => {
                self.expr(&f.value, false);
                if let Some(spec) = &f.format_spec {
                    self.expr(spec, false);
                }
                unknown()
            }
            Expr::JoinedStr(j) => {
                for e in &j.values {
                    self.expr(e, false);
                }
                unknown()
            }
            Expr::Starred(s) => self.expr(&s.value, escapes),
            Expr::Slice(s) => {
                for e in s.lower.iter().chain(&s.upper).chain(&s.step) {
                    self.expr(e, false);
                }
                unknown()
            }
        }
    }

    /// A name or attribute chain, resolved without emitting its own reference (the
    /// caller emits the longest chain only). Extending a chain through a non-module
    /// object (`sys.modules.get`, `os.system.__call__`) also reports the object, since
    /// the longer name alone would hide it from the rules.
    fn chain(&mut self, expr: &Expr) -> Vec<Value> {
        match expr {
            Expr::Name(n) => {
                let name = normalize(&n.id);
                // A global every module has: `__loader__.load_module('os')`.
                if name == "__loader__" {
                    self.dynamic(
                        n.range,
                        dynamic::INTROSPECTION,
                        "`__loader__` loads modules by name".to_string(),
                    );
                }
                self.lookup(&name)
            }
            Expr::Attribute(a) => {
                if self.depth >= MAX_DEPTH {
                    self.too_deep.get_or_insert(expr.start().to_usize());
                    return unknown();
                }
                self.depth += 1;
                let base = match a.value.as_ref() {
                    inner @ (Expr::Name(_) | Expr::Attribute(_)) => self.chain(inner),
                    other => self.expr(other, false),
                };
                self.depth -= 1;
                let attribute = normalize(&a.attr).into_owned();
                // `self.__dict__` is an instance's own attributes: ordinary in classes.
                // A module only gets there as an argument, which is reported already.
                let own_dict = attribute == "__dict__"
                    && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self");
                if is_introspection(&attribute) && !own_dict {
                    self.dynamic(
                        a.range,
                        dynamic::INTROSPECTION,
                        format!("`.{attribute}` reaches the interpreter's internals"),
                    );
                }
                let mut out = Vec::new();
                for value in base {
                    match value {
                        Value::Module(module) => {
                            let member = self.module_member(&module, &attribute);
                            add(&mut out, member);
                        }
                        Value::Name(name) => {
                            self.reference(a.value.range(), &name, false);
                            if is_dunder(&attribute) && !is_builtins_namespace(&name) {
                                add(&mut out, Value::Unknown);
                            } else {
                                let member = self.member(&name, &attribute);
                                add(&mut out, member);
                            }
                        }
                        _ => {
                            add(&mut out, Value::Unknown);
                        }
                    }
                }
                if out.is_empty() {
                    out.push(Value::Unknown);
                }
                out
            }
            other => self.expr(other, false),
        }
    }

    /// Resolves a name or attribute chain without emitting anything (for folding).
    fn quiet(&self, expr: &Expr, depth: usize) -> Vec<Value> {
        match expr {
            Expr::Name(n) => self.lookup(&normalize(&n.id)),
            Expr::Attribute(a) if depth < 64 => {
                let attribute = normalize(&a.attr);
                self.quiet(&a.value, depth + 1)
                    .into_iter()
                    .map(|value| match value {
                        Value::Module(base) => self.module_member(&base, &attribute),
                        Value::Name(base) => self.member(&base, &attribute),
                        _ => Value::Unknown,
                    })
                    .collect()
            }
            _ => unknown(),
        }
    }

    fn binop(&mut self, b: &ast::ExprBinOp) -> Vec<Value> {
        let left = self.expr(&b.left, false);
        self.expr(&b.right, false);
        let mut out = Vec::new();
        // `Path('/etc') / 'passwd'`
        if matches!(b.op, Operator::Div) && left.iter().any(|v| matches!(v, Value::Path { .. })) {
            if let Some(part) = fold_str(&*self, &b.right) {
                for value in left {
                    if let Value::Path { op, path } = value {
                        let path = paths::join(&path, &part);
                        self.fact(
                            b.range,
                            FactKind::PathLiteral {
                                op: op.clone(),
                                path: path.clone(),
                            },
                        );
                        add(&mut out, Value::Path { op, path });
                    }
                }
            }
        }
        if out.is_empty() {
            out.push(Value::Unknown);
        }
        out
    }

    fn comprehension(
        &mut self,
        expr: &Expr,
        generators: &[ast::Comprehension],
        elts: &[&Expr],
    ) -> Vec<Value> {
        let Some((first, rest)) = generators.split_first() else {
            return unknown();
        };
        let first_values = self.iterated(&first.iter);
        if self.prebinding > 0 || !self.enter(node_key(expr)) {
            return unknown();
        }
        self.bind_target(&first.target, first_values);
        for condition in &first.ifs {
            self.expr(condition, false);
        }
        for generator in rest {
            let values = self.iterated(&generator.iter);
            self.bind_target(&generator.target, values);
            for condition in &generator.ifs {
                self.expr(condition, false);
            }
        }
        for elt in elts {
            self.expr(elt, true);
        }
        self.leave();
        unknown()
    }

    fn subscript(&mut self, s: &ast::ExprSubscript, escapes: bool) -> Vec<Value> {
        let base = self.expr(&s.value, false);
        self.expr(&s.slice, false);
        let mut out = Vec::new();
        if let Some(key) = fold_str(&*self, &s.slice) {
            if is_introspection(&key) {
                self.dynamic(
                    s.range,
                    dynamic::INTROSPECTION,
                    format!("`[{key:?}]` reaches the interpreter's internals"),
                );
            }
            for value in &base {
                match value {
                    Value::Name(name) if name == "sys.modules" || name == "os.sys.modules" => {
                        add(&mut out, Value::Module(key.clone()));
                    }
                    Value::Name(name) | Value::Module(name) if is_builtins_namespace(name) => {
                        self.reference(s.range, &key, false);
                        add(&mut out, Value::Name(key.clone()));
                    }
                    _ => {}
                }
            }
        }
        if out.is_empty() {
            out.push(Value::Unknown);
        }
        self.emit_escaping_modules(s.range, &out, escapes);
        out
    }

    fn call(&mut self, call: &ast::ExprCall, escapes: bool) -> Vec<Value> {
        let callee = self.expr(&call.func, false);
        let names: Vec<String> = callee
            .iter()
            .filter_map(|v| match v {
                Value::Name(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        let keeps = !names.is_empty() && names.iter().all(|n| keeps_arguments(n));
        // `setattr(os, …)` writes to the module; the module itself goes nowhere.
        let keeps_first =
            keeps || (!names.is_empty() && names.iter().all(|n| is_attribute_function(n)));
        let mut arguments = Vec::with_capacity(call.args.len());
        for (position, arg) in call.args.iter().enumerate() {
            let kept = keeps || (position == 0 && keeps_first);
            arguments.push(self.expr(arg, !kept));
        }
        for keyword in &call.keywords {
            self.expr(&keyword.value, !keeps);
        }
        self.attribute_walks_in_strings(call, &names);
        let mut out = Vec::new();
        for name in &names {
            if is_import_function(name) {
                self.import_call(call, name, &mut out);
            } else if is_attribute_function(name) {
                self.attribute_call(call, name, &arguments, &mut out);
            } else if let Some(spec) = path_arguments(name) {
                self.path_call(call, name, spec);
            } else if is_path_constructor(name) {
                self.path_constructor(call, name, &mut out);
            } else if name == "sys.modules.get" || name == "sys.modules.pop" {
                if let Some(module) = call.args.first().and_then(|a| fold_str(&*self, a)) {
                    add(&mut out, Value::Module(module));
                }
            }
        }
        if out.is_empty() {
            out.push(Value::Unknown);
        }
        self.emit_escaping_modules(call.range, &out, escapes);
        out
    }

    /// Attribute walks spelled inside strings: `'{0.__globals__}'.format(f)` and
    /// `operator.attrgetter('__globals__')` reach the same internals as `f.__globals__`.
    fn attribute_walks_in_strings(&mut self, call: &ast::ExprCall, names: &[String]) {
        let mut templates = Vec::new();
        if let Expr::Attribute(a) = call.func.as_ref() {
            if matches!(a.attr.as_str(), "format" | "format_map") {
                templates.extend(fold_str(&*self, &a.value));
            }
        }
        if names
            .iter()
            .any(|n| matches!(n.as_str(), "operator.attrgetter" | "operator.methodcaller"))
        {
            for arg in call.args.iter().take(1) {
                if let Some(path) = fold_str(&*self, arg) {
                    templates.push(format!(".{path}"));
                }
            }
        }
        for template in templates {
            let walked = template
                .split(['.', '[', ']', '{', '}', '!', ':'])
                .skip(1)
                .find(|part| is_introspection(part));
            if let Some(attribute) = walked {
                let detail =
                    format!("`{attribute}` named in a string reaches the interpreter's internals");
                self.dynamic(call.range, dynamic::INTROSPECTION, detail);
            }
        }
    }

    /// `__import__('o' + 's')` is an import of `os`; with a name that cannot be folded it
    /// is a dynamic import.
    fn import_call(&mut self, call: &ast::ExprCall, function: &str, out: &mut Vec<Value>) {
        let argument = call.args.first().or_else(|| keyword(call, "name"));
        let Some(module) = argument.and_then(|a| fold_str(&*self, a)) else {
            self.dynamic(
                call.range,
                dynamic::IMPORT,
                format!("`{function}` with a module name computed at run time"),
            );
            return;
        };
        let module = if let Some(relative) = module.strip_prefix('.') {
            let package = call
                .args
                .get(1)
                .or_else(|| keyword(call, "package"))
                .and_then(|a| fold_str(&*self, a));
            match package {
                Some(package) if function == "importlib.import_module" => {
                    format!("{package}.{}", relative.trim_start_matches('.'))
                }
                _ => return,
            }
        } else {
            module
        };
        if module.is_empty() {
            return;
        }
        self.fact(
            call.range,
            FactKind::Import {
                module: module.clone(),
            },
        );
        if function == "importlib.import_module" {
            add(out, Value::Module(module));
        } else {
            let top = module.split('.').next().unwrap_or_default().to_string();
            let fromlist = call.args.len() >= 4 || keyword(call, "fromlist").is_some();
            if fromlist {
                add(out, Value::Module(module));
            }
            add(out, Value::Module(top));
        }
    }

    /// `getattr(os, 'sys' + 'tem')` is `os.system`; `getattr(os, name)` is a dynamic
    /// attribute. On objects that are not modules or known names only the
    /// introspection attributes matter.
    fn attribute_call(
        &mut self,
        call: &ast::ExprCall,
        function: &str,
        arguments: &[Vec<Value>],
        out: &mut Vec<Value>,
    ) {
        let Some(target) = arguments.first() else {
            return;
        };
        let bases: Vec<String> = target
            .iter()
            .filter_map(|v| match v {
                Value::Module(name) | Value::Name(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        match call.args.get(1).and_then(|a| fold_str(&*self, a)) {
            Some(attribute) => {
                if is_introspection(&attribute) {
                    self.dynamic(
                        call.range,
                        dynamic::INTROSPECTION,
                        format!(
                            "`{function}` of `{attribute}` reaches the interpreter's internals"
                        ),
                    );
                }
                for base in bases {
                    let module = target.contains(&Value::Module(base.clone()));
                    if !module && is_dunder(&attribute) && !is_builtins_namespace(&base) {
                        continue;
                    }
                    let member = if module {
                        self.module_member(&base, &attribute)
                    } else {
                        self.member(&base, &attribute)
                    };
                    if let Value::Name(name) | Value::Module(name) = &member {
                        let name = name.clone();
                        self.reference(call.range, &name, false);
                    }
                    add(out, member);
                }
            }
            None => {
                if let Some(base) = bases.first() {
                    self.dynamic(
                        call.range,
                        dynamic::ATTRIBUTE,
                        format!(
                            "`{function}` on `{base}` with an attribute name computed at run time"
                        ),
                    );
                }
            }
        }
    }

    fn path_call(&mut self, call: &ast::ExprCall, op: &str, spec: &PathArguments) {
        let mut found = Vec::new();
        for &position in spec.positions {
            if let Some(arg) = call.args.get(position) {
                found.push(arg);
            }
        }
        for k in &call.keywords {
            if let Some(name) = &k.arg {
                if spec.keywords.contains(&name.as_str()) {
                    found.push(&k.value);
                }
            }
        }
        for arg in found {
            if let Some(path) = fold_str(&*self, arg) {
                self.fact(
                    arg.range(),
                    FactKind::PathLiteral {
                        op: op.to_string(),
                        path,
                    },
                );
            }
        }
    }

    fn path_constructor(&mut self, call: &ast::ExprCall, op: &str, out: &mut Vec<Value>) {
        if call.args.is_empty() || !call.keywords.is_empty() {
            return;
        }
        let mut path = String::new();
        for arg in &call.args {
            let Some(part) = fold_str(&*self, arg) else {
                return;
            };
            path = paths::join(&path, &part);
        }
        self.fact(
            call.range,
            FactKind::PathLiteral {
                op: op.to_string(),
                path: path.clone(),
            },
        );
        add(
            out,
            Value::Path {
                op: op.to_string(),
                path,
            },
        );
    }
}

impl FoldEnv for Walker<'_> {
    fn string_of(&self, name: &str) -> Option<String> {
        match self.lookup(name).as_slice() {
            [Value::Str(s)] => Some(s.clone()),
            _ => None,
        }
    }

    fn callee(&self, func: &Expr) -> Option<String> {
        match self.quiet(func, 0).as_slice() {
            [Value::Name(name)] => Some(name.clone()),
            _ => None,
        }
    }
}

fn keyword<'e>(call: &'e ast::ExprCall, name: &str) -> Option<&'e Expr> {
    call.keywords
        .iter()
        .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == name))
        .map(|k| &k.value)
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
