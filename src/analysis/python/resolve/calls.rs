//! Calls: the callee's resolved names, dynamic imports (`__import__`, `importlib`),
//! attribute access by name (`getattr`, `operator.attrgetter`, format-string walks),
//! filesystem calls with literal paths, and what a call returns.

use super::*;

impl Walker<'_> {
    pub(super) fn call(&mut self, call: &ast::ExprCall, escapes: bool) -> Vec<Value> {
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
        self.evaluated_later(call, &names);
        self.module_file_written(call, &names);
        self.unsafe_mode(call, &names);
        self.statement_strings(call, &names);
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
    pub(super) fn attribute_walks_in_strings(&mut self, call: &ast::ExprCall, names: &[String]) {
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

    /// `numpy.load(f, allow_pickle=True)`: a call made unsafe by one argument.
    pub(super) fn unsafe_mode(&mut self, call: &ast::ExprCall, names: &[String]) {
        for name in names {
            for (keyword_name, position, unsafe_value) in modes::unsafe_modes(name) {
                let argument =
                    keyword(call, keyword_name).or_else(|| position.and_then(|p| call.args.get(p)));
                let Some(argument) = argument else {
                    continue;
                };
                let value = match argument {
                    Expr::Constant(ast::ExprConstant {
                        value: ast::Constant::Bool(b),
                        ..
                    }) => Some(if *b { "True" } else { "False" }.to_string()),
                    other => fold_str(&*self, other),
                };
                // A mode that cannot be known is taken as the unsafe one.
                if value.as_deref().is_none_or(|v| v == unsafe_value) {
                    let reported = modes::unsafe_call_name(name, keyword_name, unsafe_value);
                    self.reference(call.range, &reported, false);
                }
            }
        }
    }

    /// `timeit.timeit("code")`: a statement given as a string runs as code; timing a
    /// callable (`timeit.timeit(lambda: f(x))`) or `default_timer` is ordinary.
    pub(super) fn statement_strings(&mut self, call: &ast::ExprCall, names: &[String]) {
        for name in names {
            for (keyword_name, position) in modes::statement_arguments(name) {
                let argument = keyword(call, keyword_name).or_else(|| call.args.get(position));
                let Some(argument) = argument else {
                    continue;
                };
                let literal = matches!(
                    argument,
                    Expr::Constant(ast::ExprConstant {
                        value: ast::Constant::Str(_) | ast::Constant::Bytes(_),
                        ..
                    }) | Expr::JoinedStr(_)
                        | Expr::BinOp(_)
                );
                if literal || fold_str(&*self, argument).is_some() {
                    let detail = format!(
                        "`{name}` runs its `{keyword_name}` given as a string as code (time a callable instead: `lambda: ...`)"
                    );
                    self.dynamic(argument.range(), dynamic::STRING_CODE, detail);
                }
            }
        }
    }

    /// `open('/tmp/m.py', 'w')`, `zipfile.ZipFile('/tmp/m.zip', 'w')`: a module file the
    /// snippet could import next.
    pub(super) fn module_file_written(&mut self, call: &ast::ExprCall, names: &[String]) {
        let opens = names.iter().any(|n| {
            matches!(
                n.as_str(),
                "open" | "io.open" | "zipfile.ZipFile" | "zipfile.PyZipFile"
            )
        });
        if !opens {
            return;
        }
        let path = call
            .args
            .first()
            .or_else(|| keyword(call, "file"))
            .and_then(|a| fold_str(&*self, a));
        let mode = call
            .args
            .get(1)
            .or_else(|| keyword(call, "mode"))
            .and_then(|a| fold_str(&*self, a));
        if let (Some(path), Some(mode)) = (path, mode) {
            if loading::writes(&mode) && loading::is_module_file(&path) {
                self.written_module(&path);
            }
        }
    }

    /// `__import__('o' + 's')` is an import of `os`; with a name that cannot be folded it
    /// is a dynamic import.
    pub(super) fn import_call(
        &mut self,
        call: &ast::ExprCall,
        function: &str,
        out: &mut Vec<Value>,
    ) {
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
    pub(super) fn attribute_call(
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
        // One name, or each of a few known names (`for n in ['sqrt', 'floor']`).
        let attributes = match call.args.get(1).and_then(|a| fold_str(&*self, a)) {
            Some(attribute) => Some(vec![attribute]),
            None => arguments.get(1).and_then(|values| {
                values
                    .iter()
                    .map(|value| match value {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect::<Option<Vec<String>>>()
                    .filter(|names| !names.is_empty())
            }),
        };
        match attributes {
            Some(attributes) => {
                for attribute in attributes {
                    self.named_attribute(call, function, target, &bases, &attribute, out);
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

    /// `getattr(base, attribute)` with a known attribute name.
    fn named_attribute(
        &mut self,
        call: &ast::ExprCall,
        function: &str,
        target: &[Value],
        bases: &[String],
        attribute: &str,
        out: &mut Vec<Value>,
    ) {
        if is_introspection(attribute) {
            self.dynamic(
                call.range,
                dynamic::INTROSPECTION,
                format!("`{function}` of `{attribute}` reaches the interpreter's internals"),
            );
        }
        for base in bases {
            let module = target.contains(&Value::Module(base.clone()));
            if !module && is_dunder(attribute) && !is_builtins_namespace(base) {
                continue;
            }
            let member = if module {
                self.module_member(base, attribute)
            } else {
                self.member(base, attribute)
            };
            if let Value::Name(name) | Value::Module(name) = &member {
                let name = name.clone();
                self.reference(call.range, &name, false);
                // `setattr(sys, 'path', …)` is the store `sys.path = …`.
                if function != "getattr" && loading::is_import_state(&name) {
                    self.dynamic(call.range, dynamic::FILE_CODE, loading::state_detail(&name));
                }
            }
            add(out, member);
        }
    }

    pub(super) fn path_call(&mut self, call: &ast::ExprCall, op: &str, spec: &PathArguments) {
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
        // `open(p, 'w')` writes where `open(p)` reads: the mode goes with the op, so
        // that a finding can say which.
        let mode = matches!(op, "open" | "io.open" | "codecs.open")
            .then(|| {
                call.args.get(1).or_else(|| {
                    call.keywords
                        .iter()
                        .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "mode"))
                        .map(|k| &k.value)
                })
            })
            .flatten()
            .and_then(|mode| fold_str(&*self, mode));
        let op = match mode {
            Some(mode) => format!("{op}(mode='{mode}')"),
            None => op.to_string(),
        };
        for arg in found {
            if let Some(path) = fold_str(&*self, arg) {
                self.fact(
                    arg.range(),
                    FactKind::PathLiteral {
                        op: op.clone(),
                        path,
                    },
                );
            }
        }
    }

    pub(super) fn path_constructor(
        &mut self,
        call: &ast::ExprCall,
        op: &str,
        out: &mut Vec<Value>,
    ) {
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
