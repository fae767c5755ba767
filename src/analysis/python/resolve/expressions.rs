//! Expressions: names, attribute chains, operators, comprehensions and lambdas,
//! subscripts (`sys.modules[…]`, `d['m']` of a dict of modules) and string folding, each
//! evaluated to the set of values it may have; values that escape are emitted as facts.

use super::*;

impl Walker<'_> {
    /// Visits an expression, emitting its facts, and returns what it may denote.
    /// `escapes`: the value goes where its uses cannot be followed (an argument, a
    /// return value, a container, an attribute of some object).
    pub(super) fn expr(&mut self, expr: &Expr, escapes: bool) -> Vec<Value> {
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

    pub(super) fn expr_inner(&mut self, expr: &Expr, escapes: bool) -> Vec<Value> {
        match expr {
            Expr::Name(_) | Expr::Attribute(_) => {
                let values = self.chain(expr);
                self.emit_values(expr.range(), &values, escapes);
                values
            }
            Expr::Call(call) => self.call(call, escapes),
            Expr::Subscript(s) => self.subscript(s, escapes),
            Expr::Constant(c) => {
                if let ast::Constant::Str(s) = &c.value {
                    if let Some((host, port)) = crate::analysis::urls::host_and_port(s) {
                        self.fact(c.range, FactKind::UrlLiteral { host, port });
                    }
                }
                match &c.value {
                    // Names and paths are short; long texts are never folded into one.
                    ast::Constant::Str(s) if s.len() <= 256 => vec![Value::Str(s.clone())],
                    _ => unknown(),
                }
            }
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
                for (key, value) in d.keys.iter().zip(&d.values) {
                    self.expr(value, true);
                    let key = key.as_ref().and_then(|k| fold_str(&*self, k));
                    let factory = fold_str(&*self, value)
                        .and_then(|v| configured_factory(key.as_deref(), &v));
                    if let Some(factory) = factory {
                        let name = match factory.rsplit_once('.') {
                            Some((base, attribute)) => canonical(qualify(base, attribute)),
                            None => factory,
                        };
                        self.reference(value.range(), &name, false);
                    }
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
    pub(super) fn chain(&mut self, expr: &Expr) -> Vec<Value> {
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
                        other => {
                            if let Value::Path { path, .. } = &other {
                                if matches!(attribute.as_str(), "write_text" | "write_bytes")
                                    && loading::is_module_file(path)
                                {
                                    self.written_module(path);
                                }
                            }
                            let method = method_of_unknown_receiver(&attribute)
                                .map_or(Value::Unknown, |name| Value::Name(name.to_string()));
                            add(&mut out, method);
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

    /// A store into `target` (`sys.path = …`, `sys.path[0:0] = …`, `p += […]` with `p`
    /// being `sys.path`) that changes the import search state.
    pub(super) fn store(&mut self, target: &Expr, augmented: bool) {
        let changed = match target {
            Expr::Subscript(s) => &s.value,
            Expr::Attribute(_) => target,
            Expr::Name(_) if augmented => target,
            _ => return,
        };
        let state = self
            .quiet(changed, 0)
            .into_iter()
            .find_map(|value| match value {
                Value::Name(name) if loading::is_import_state(&name) => Some(name),
                _ => None,
            });
        if let Some(state) = state {
            self.dynamic(
                target.range(),
                dynamic::FILE_CODE,
                loading::state_detail(&state),
            );
        }
    }

    /// Resolves a name or attribute chain without emitting anything (for folding).
    pub(super) fn quiet(&self, expr: &Expr, depth: usize) -> Vec<Value> {
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

    pub(super) fn binop(&mut self, b: &ast::ExprBinOp) -> Vec<Value> {
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

    pub(super) fn comprehension(
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

    pub(super) fn subscript(&mut self, s: &ast::ExprSubscript, escapes: bool) -> Vec<Value> {
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
}
