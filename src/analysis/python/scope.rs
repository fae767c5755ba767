//! Scopes and bindings: which names each scope binds, before any value is resolved.
//!
//! Python decides a name's scope by the whole body: a name assigned anywhere in a
//! function (parameter, assignment, `for`/`with`/`except` target, import, `def`,
//! `class`, walrus, `del`) is local to all of it, unless declared `global`/`nonlocal`.
//! Class bodies do not enclose their methods; comprehensions and lambdas are scopes of
//! their own (a walrus in a comprehension binds in the enclosing function). Getting
//! this right is what keeps a user's own `def system()` or a parameter named `eval`
//! from being mistaken for the real thing, and keeps `eval = 1` *after* a call to
//! `eval` from hiding it. This pass records only names; values come later.

use super::encoding::normalize;
use rustpython_parser::ast::{self, Expr, Pattern, Stmt};
use std::collections::{HashMap, HashSet};

pub type ScopeId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    /// `def` and `lambda`: their bodies run later, when called.
    Function,
    /// List/set/dict comprehensions and generator expressions.
    Comprehension,
}

#[derive(Debug)]
pub struct Scope {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// Every name bound somewhere in this scope.
    pub locals: HashSet<String>,
    pub globals: HashSet<String>,
    pub nonlocals: HashSet<String>,
}

/// What the module's top level does, in statement order, for deciding whether a free
/// name in a function can still mean the builtin when the function runs.
#[derive(Debug, Default)]
pub struct ModuleFacts {
    /// Index of the first top-level statement that binds a name unconditionally.
    pub first_unconditional: HashMap<String, usize>,
    /// Names deleted at module level (the builtin shows through again).
    pub deleted: HashSet<String>,
    /// Index of the first top-level statement that can run user code (a call, a
    /// decorator, a `with`, a `for`, a class body).
    pub first_call: Option<usize>,
    /// Modules star-imported at module level.
    pub star_modules: Vec<String>,
    /// Every module named by an import statement, with its parent packages.
    pub imported_modules: HashSet<String>,
}

#[derive(Debug)]
pub struct ScopeTree {
    pub scopes: Vec<Scope>,
    /// Scope of a `def`/`class` statement, lambda or comprehension, by node address.
    pub by_node: HashMap<usize, ScopeId>,
    pub module: ModuleFacts,
    /// Set when nesting passed [`super::MAX_DEPTH`] and part of the tree was skipped.
    pub too_deep: bool,
}

pub fn node_key<T>(node: &T) -> usize {
    node as *const T as usize
}

impl ScopeTree {
    pub fn build(body: &[Stmt]) -> ScopeTree {
        let mut builder = Builder {
            tree: ScopeTree {
                scopes: vec![Scope {
                    kind: ScopeKind::Module,
                    parent: None,
                    locals: HashSet::new(),
                    globals: HashSet::new(),
                    nonlocals: HashSet::new(),
                }],
                by_node: HashMap::new(),
                module: ModuleFacts::default(),
                too_deep: false,
            },
            current: 0,
            conditional: 0,
            statement: 0,
            depth: 0,
        };
        for (index, stmt) in body.iter().enumerate() {
            builder.statement = index;
            builder.stmt(stmt);
        }
        builder.tree
    }

    pub fn scope(&self, id: ScopeId) -> &Scope {
        &self.scopes[id]
    }
}

struct Builder {
    tree: ScopeTree,
    current: ScopeId,
    /// How many conditional blocks (`if`, loops, `try`, `match`) enclose the current
    /// module-level statement.
    conditional: u32,
    statement: usize,
    /// Recursion depth; past [`super::MAX_DEPTH`] the walker refuses the code anyway.
    depth: usize,
}

impl Builder {
    fn new_scope(&mut self, kind: ScopeKind, key: usize) -> ScopeId {
        let id = self.tree.scopes.len();
        self.tree.scopes.push(Scope {
            kind,
            parent: Some(self.current),
            locals: HashSet::new(),
            globals: HashSet::new(),
            nonlocals: HashSet::new(),
        });
        self.tree.by_node.insert(key, id);
        id
    }

    fn in_scope(&mut self, id: ScopeId, f: impl FnOnce(&mut Self)) {
        let (saved, saved_conditional) = (self.current, self.conditional);
        self.current = id;
        self.conditional = 0;
        f(self);
        self.current = saved;
        self.conditional = saved_conditional;
    }

    fn conditionally(&mut self, f: impl FnOnce(&mut Self)) {
        self.conditional += 1;
        f(self);
        self.conditional -= 1;
    }

    fn at_module_level(&self) -> bool {
        self.current == 0
    }

    /// True while the code being visited runs as the module executes (module level,
    /// class bodies and comprehensions in them), not later inside a function.
    fn runs_at_import(&self) -> bool {
        let mut id = Some(self.current);
        while let Some(scope) = id {
            if self.tree.scopes[scope].kind == ScopeKind::Function {
                return false;
            }
            id = self.tree.scopes[scope].parent;
        }
        true
    }

    fn note_call(&mut self) {
        if self.runs_at_import() && self.tree.module.first_call.is_none() {
            self.tree.module.first_call = Some(self.statement);
        }
    }

    fn bind(&mut self, name: &str) {
        let name = normalize(name).into_owned();
        if self.at_module_level() && self.conditional == 0 {
            self.tree
                .module
                .first_unconditional
                .entry(name.clone())
                .or_insert(self.statement);
        }
        self.tree.scopes[self.current].locals.insert(name);
    }

    fn bind_in(&mut self, scope: ScopeId, name: &str) {
        let saved = self.current;
        self.current = scope;
        self.bind(name);
        self.current = saved;
    }

    fn note_module(&mut self, module: &str) {
        let mut end = 0;
        for part in module.split('.') {
            end += part.len();
            self.tree
                .module
                .imported_modules
                .insert(module[..end].to_string());
            end += 1;
        }
    }

    fn stmts(&mut self, body: &[Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if self.depth > super::MAX_DEPTH {
            self.tree.too_deep = true;
            return;
        }
        self.depth += 1;
        self.stmt_inner(stmt);
        self.depth -= 1;
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
                if !decorator_list.is_empty() {
                    self.note_call();
                }
                self.exprs(decorator_list);
                self.arguments_outside(args);
                if let Some(returns) = returns {
                    self.expr(returns);
                }
                self.bind(name);
                let id = self.new_scope(ScopeKind::Function, node_key(stmt));
                self.in_scope(id, |b| {
                    b.bind_parameters(args);
                    b.stmts(body);
                });
            }
            Stmt::ClassDef(class) => {
                self.note_call();
                self.exprs(&class.decorator_list);
                self.exprs(&class.bases);
                for keyword in &class.keywords {
                    self.expr(&keyword.value);
                }
                let id = self.new_scope(ScopeKind::Class, node_key(stmt));
                self.in_scope(id, |b| b.stmts(&class.body));
                self.bind(&class.name);
            }
            Stmt::Return(r) => self.opt_expr(r.value.as_deref()),
            Stmt::Delete(d) => {
                for target in &d.targets {
                    if let Expr::Name(n) = target {
                        if self.at_module_level() {
                            self.tree
                                .module
                                .deleted
                                .insert(normalize(&n.id).into_owned());
                        }
                    }
                    self.target(target);
                }
            }
            Stmt::Assign(a) => {
                self.expr(&a.value);
                for target in &a.targets {
                    self.target(target);
                }
            }
            Stmt::TypeAlias(t) => {
                self.expr(&t.value);
                self.target(&t.name);
            }
            Stmt::AugAssign(a) => {
                self.expr(&a.value);
                self.target(&a.target);
            }
            Stmt::AnnAssign(a) => {
                self.expr(&a.annotation);
                self.opt_expr(a.value.as_deref());
                if a.value.is_some() || a.simple {
                    self.target(&a.target);
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
                self.note_call();
                self.expr(iter);
                self.conditionally(|b| {
                    b.target(target);
                    b.stmts(body);
                    b.stmts(orelse);
                });
            }
            Stmt::While(w) => {
                self.expr(&w.test);
                self.conditionally(|b| {
                    b.stmts(&w.body);
                    b.stmts(&w.orelse);
                });
            }
            Stmt::If(first) => {
                // An `elif` ladder is an `if` nested in `orelse`: walked as a loop.
                let mut current = first;
                loop {
                    self.expr(&current.test);
                    self.conditionally(|b| b.stmts(&current.body));
                    match current.orelse.as_slice() {
                        [Stmt::If(next)] => current = next,
                        orelse => {
                            self.conditionally(|b| b.stmts(orelse));
                            break;
                        }
                    }
                }
            }
            Stmt::With(ast::StmtWith { items, body, .. })
            | Stmt::AsyncWith(ast::StmtAsyncWith { items, body, .. }) => {
                self.note_call();
                for item in items {
                    self.expr(&item.context_expr);
                    if let Some(vars) = &item.optional_vars {
                        self.target(vars);
                    }
                }
                self.stmts(body);
            }
            Stmt::Match(m) => {
                self.expr(&m.subject);
                self.conditionally(|b| {
                    for case in &m.cases {
                        b.pattern(&case.pattern);
                        b.opt_expr(case.guard.as_deref());
                        b.stmts(&case.body);
                    }
                });
            }
            Stmt::Raise(r) => {
                self.opt_expr(r.exc.as_deref());
                self.opt_expr(r.cause.as_deref());
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
            }) => self.conditionally(|b| {
                b.stmts(body);
                for handler in handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = handler;
                    b.opt_expr(h.type_.as_deref());
                    if let Some(name) = &h.name {
                        b.bind(name);
                    }
                    b.stmts(&h.body);
                }
                b.stmts(orelse);
                b.stmts(finalbody);
            }),
            Stmt::Assert(a) => {
                self.expr(&a.test);
                self.opt_expr(a.msg.as_deref());
            }
            Stmt::Import(i) => {
                for alias in &i.names {
                    let module = dotted(&alias.name);
                    self.note_module(&module);
                    match &alias.asname {
                        Some(asname) => self.bind(asname),
                        None => {
                            let top = module.split('.').next().unwrap_or_default().to_string();
                            self.bind(&top);
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) => {
                let relative = i.level.map(|l| l.to_u32()).unwrap_or(0) > 0;
                let module = i.module.as_ref().map(|m| dotted(m));
                if let (Some(module), false) = (&module, relative) {
                    self.note_module(module);
                }
                for alias in &i.names {
                    if alias.name.as_str() == "*" {
                        if let (Some(module), false, true) =
                            (&module, relative, self.at_module_level())
                        {
                            self.tree.module.star_modules.push(module.clone());
                        }
                    } else {
                        self.bind(alias.asname.as_ref().unwrap_or(&alias.name));
                    }
                }
            }
            Stmt::Global(g) => {
                for name in &g.names {
                    let name = normalize(name).into_owned();
                    self.tree.scopes[self.current].globals.insert(name);
                }
            }
            Stmt::Nonlocal(n) => {
                for name in &n.names {
                    let name = normalize(name).into_owned();
                    self.tree.scopes[self.current].nonlocals.insert(name);
                }
            }
            Stmt::Expr(e) => self.expr(&e.value),
            Stmt::Pass(_) | Stmt::Break(_) | Stmt::Continue(_) => {}
        }
    }

    /// Defaults and annotations are evaluated where the `def`/`lambda` is.
    fn arguments_outside(&mut self, args: &ast::Arguments) {
        for arg in args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
        {
            self.opt_expr(arg.default.as_deref());
            self.opt_expr(arg.def.annotation.as_deref());
        }
        for arg in args.vararg.iter().chain(&args.kwarg) {
            self.opt_expr(arg.annotation.as_deref());
        }
    }

    fn bind_parameters(&mut self, args: &ast::Arguments) {
        for arg in args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
        {
            self.bind(&arg.def.arg);
        }
        for arg in args.vararg.iter().chain(&args.kwarg) {
            self.bind(&arg.arg);
        }
    }

    fn target(&mut self, target: &Expr) {
        match target {
            Expr::Name(n) => self.bind(&n.id),
            Expr::Tuple(t) => t.elts.iter().for_each(|e| self.target(e)),
            Expr::List(l) => l.elts.iter().for_each(|e| self.target(e)),
            Expr::Starred(s) => self.target(&s.value),
            other => self.expr(other),
        }
    }

    fn pattern(&mut self, pattern: &Pattern) {
        match pattern {
            Pattern::MatchValue(v) => self.expr(&v.value),
            Pattern::MatchSingleton(_) => {}
            Pattern::MatchSequence(s) => s.patterns.iter().for_each(|p| self.pattern(p)),
            Pattern::MatchMapping(m) => {
                self.exprs(&m.keys);
                m.patterns.iter().for_each(|p| self.pattern(p));
                if let Some(rest) = &m.rest {
                    self.bind(rest);
                }
            }
            Pattern::MatchClass(c) => {
                self.expr(&c.cls);
                c.patterns.iter().for_each(|p| self.pattern(p));
                c.kwd_patterns.iter().for_each(|p| self.pattern(p));
            }
            Pattern::MatchStar(s) => {
                if let Some(name) = &s.name {
                    self.bind(name);
                }
            }
            Pattern::MatchAs(a) => {
                if let Some(p) = &a.pattern {
                    self.pattern(p);
                }
                if let Some(name) = &a.name {
                    self.bind(name);
                }
            }
            Pattern::MatchOr(o) => o.patterns.iter().for_each(|p| self.pattern(p)),
        }
    }

    fn exprs(&mut self, exprs: &[Expr]) {
        for e in exprs {
            self.expr(e);
        }
    }

    fn opt_expr(&mut self, expr: Option<&Expr>) {
        if let Some(e) = expr {
            self.expr(e);
        }
    }

    /// The nearest scope a walrus binds in: comprehensions are skipped.
    fn walrus_scope(&self) -> ScopeId {
        let mut id = self.current;
        while self.tree.scopes[id].kind == ScopeKind::Comprehension {
            match self.tree.scopes[id].parent {
                Some(parent) => id = parent,
                None => break,
            }
        }
        id
    }

    fn comprehension(&mut self, expr: &Expr, generators: &[ast::Comprehension], elts: &[&Expr]) {
        let Some((first, rest)) = generators.split_first() else {
            return;
        };
        self.expr(&first.iter);
        let id = self.new_scope(ScopeKind::Comprehension, node_key(expr));
        self.in_scope(id, |b| {
            b.target(&first.target);
            b.exprs(&first.ifs);
            for generator in rest {
                b.expr(&generator.iter);
                b.target(&generator.target);
                b.exprs(&generator.ifs);
            }
            for elt in elts {
                b.expr(elt);
            }
        });
    }

    /// Expressions can bind too (walrus) and open scopes (lambdas, comprehensions).
    fn expr(&mut self, expr: &Expr) {
        if self.depth > super::MAX_DEPTH {
            self.tree.too_deep = true;
            return;
        }
        self.depth += 1;
        self.expr_inner(expr);
        self.depth -= 1;
    }

    fn expr_inner(&mut self, expr: &Expr) {
        match expr {
            Expr::NamedExpr(n) => {
                self.expr(&n.value);
                if let Expr::Name(name) = n.target.as_ref() {
                    let scope = self.walrus_scope();
                    self.bind_in(scope, &name.id);
                }
            }
            Expr::Lambda(l) => {
                self.arguments_outside(&l.args);
                let id = self.new_scope(ScopeKind::Function, node_key(expr));
                self.in_scope(id, |b| {
                    b.bind_parameters(&l.args);
                    b.expr(&l.body);
                });
            }
            Expr::ListComp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::SetComp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::GeneratorExp(c) => self.comprehension(expr, &c.generators, &[&c.elt]),
            Expr::DictComp(c) => self.comprehension(expr, &c.generators, &[&c.key, &c.value]),
            Expr::Call(c) => {
                self.note_call();
                self.expr(&c.func);
                self.exprs(&c.args);
                for keyword in &c.keywords {
                    self.expr(&keyword.value);
                }
            }
            Expr::BoolOp(b) => self.exprs(&b.values),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::UnaryOp(u) => self.expr(&u.operand),
            Expr::IfExp(i) => {
                self.expr(&i.test);
                self.expr(&i.body);
                self.expr(&i.orelse);
            }
            Expr::Dict(d) => {
                for key in d.keys.iter().flatten() {
                    self.expr(key);
                }
                self.exprs(&d.values);
            }
            Expr::Set(s) => self.exprs(&s.elts),
            Expr::Await(a) => self.expr(&a.value),
            Expr::Yield(y) => self.opt_expr(y.value.as_deref()),
            Expr::YieldFrom(y) => self.expr(&y.value),
            Expr::Compare(c) => {
                self.expr(&c.left);
                self.exprs(&c.comparators);
            }
            Expr::FormattedValue(f) => {
                self.expr(&f.value);
                self.opt_expr(f.format_spec.as_deref());
            }
            Expr::JoinedStr(j) => self.exprs(&j.values),
            Expr::Attribute(a) => self.expr(&a.value),
            Expr::Subscript(s) => {
                self.expr(&s.value);
                self.expr(&s.slice);
            }
            Expr::Starred(s) => self.expr(&s.value),
            Expr::List(l) => self.exprs(&l.elts),
            Expr::Tuple(t) => self.exprs(&t.elts),
            Expr::Slice(s) => {
                self.opt_expr(s.lower.as_deref());
                self.opt_expr(s.upper.as_deref());
                self.opt_expr(s.step.as_deref());
            }
            Expr::Constant(_) | Expr::Name(_) => {}
        }
    }
}

/// A dotted import name with every part NFKC-normalised.
pub fn dotted(name: &str) -> String {
    if name.is_ascii() {
        return name.to_string();
    }
    name.split('.')
        .map(|part| normalize(part.trim()).into_owned())
        .collect::<Vec<_>>()
        .join(".")
}
