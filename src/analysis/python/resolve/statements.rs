//! Statements: imports, assignments and destructuring, loops, `with … as`, `match`
//! patterns, function and class definitions, `global`/`nonlocal` and `del`. Each turns
//! what it binds into values, so that later uses resolve to qualified names.

use super::*;

impl Walker<'_> {
    pub(super) fn stmts(&mut self, body: &[Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    pub(super) fn stmt(&mut self, stmt: &Stmt) {
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
    pub(super) fn loop_body(&mut self, body: &[Stmt], orelse: &[Stmt]) {
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

    pub(super) fn stmt_inner(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::FunctionDef(ast::StmtFunctionDef {
                name,
                args,
                body,
                decorator_list,
                returns,
                type_params,
                ..
            })
            | Stmt::AsyncFunctionDef(ast::StmtAsyncFunctionDef {
                name,
                args,
                body,
                decorator_list,
                returns,
                type_params,
                ..
            }) => {
                for decorator in decorator_list {
                    self.expr(decorator, false);
                }
                self.type_params(type_params);
                let defaults = self.arguments_outside(args);
                if let Some(returns) = returns {
                    self.annotation(returns);
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
                self.type_params(&class.type_params);
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
                self.type_params(&t.type_params);
                self.annotation(&t.value);
                self.bind_target(&t.name, unknown());
            }
            Stmt::AugAssign(a) => {
                self.store(&a.target, true);
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
                self.annotation(&a.annotation);
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
                // Patterns bind parts of the subject (`case m:`, `case object(system=f):`),
                // which are not followed: a module matched on escapes.
                self.expr(&m.subject, true);
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
            // A string on its own is a docstring or a comment in all but name: what it
            // says is not something the program does.
            Stmt::Expr(e) if matches!(&*e.value, Expr::Constant(_)) => {}
            Stmt::Expr(e) => {
                self.expr(&e.value, false);
            }
            Stmt::Pass(_) | Stmt::Break(_) | Stmt::Continue(_) => {}
        }
    }

    pub(super) fn import_from(&mut self, i: &ast::StmtImportFrom) {
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
    pub(super) fn arguments_outside(
        &mut self,
        args: &ast::Arguments,
    ) -> HashMap<String, Vec<Value>> {
        let mut defaults = HashMap::new();
        for arg in args
            .posonlyargs
            .iter()
            .chain(&args.args)
            .chain(&args.kwonlyargs)
        {
            if let Some(annotation) = &arg.def.annotation {
                self.annotation(annotation);
            }
            if let Some(default) = &arg.default {
                let values = self.binding_values(default, false);
                defaults.insert(normalize(&arg.def.arg).into_owned(), values);
            }
        }
        for arg in args.vararg.iter().chain(&args.kwarg) {
            if let Some(annotation) = &arg.annotation {
                self.annotation(annotation);
            }
        }
        defaults
    }

    pub(super) fn bind_parameters(
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

    pub(super) fn pattern(&mut self, pattern: &ast::Pattern) {
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

    pub(super) fn assign(&mut self, targets: &[Expr], value: &Expr) {
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
    pub(super) fn binding_values(&mut self, value: &Expr, escapes: bool) -> Vec<Value> {
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

    pub(super) fn bind_target(&mut self, target: &Expr, values: Vec<Value>) {
        match target {
            Expr::Name(n) => {
                let name = normalize(&n.id);
                // Rebinding a module's `__builtins__` changes what every bare name means.
                if is_builtins_namespace(&name) {
                    self.reference(n.range, "__builtins__", false);
                }
                self.bind(&name, values)
            }
            Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
                for e in elts {
                    self.bind_target(e, values.clone());
                }
            }
            Expr::Starred(s) => self.bind_target(&s.value, unknown()),
            other => {
                self.store(other, false);
                self.expr(other, false);
            }
        }
    }

    /// What iterating a literal `[a, b]` / `(a, b)` / `{a, b}` yields; else unknown.
    pub(super) fn iterated(&mut self, iter: &Expr) -> Vec<Value> {
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
}
