//! Abstract values: what an expression may evaluate to, as far as the policy cares.
//!
//! Evaluation is pure (it emits nothing) and bounded: unions are capped, recursion
//! is cut at [`MAX_EVAL_DEPTH`], and binding cycles resolve to "unknown". Unknown is
//! the conservative answer everywhere: a `require` of an unknown value is a dynamic
//! import, a computed member with an unknown key on a module is a dynamic attribute.

use super::model::{FnKind, Origin, ScopeId, Step, Val, Vals};
use super::{Analyzer, Cache};
use super::{Field, NodeExt};
use tree_sitter::Node;

/// Deepest expression nesting evaluated before giving up with "unknown".
pub const MAX_EVAL_DEPTH: u32 = 120;
/// `Require` argument index meaning "`apply`: the first element of the array at 1".
pub const APPLY: u8 = u8::MAX;

/// Strips parentheses (and the comma operator, whose value is its last operand).
pub fn strip_parens(mut node: Node) -> Node {
    for _ in 0..64 {
        match node.kind() {
            "parenthesized_expression" | "sequence_expression" => {
                match node.named_child(node.named_child_count().saturating_sub(1)) {
                    Some(inner) if inner.kind() != "comment" => node = inner,
                    _ => return node,
                }
            }
            _ => return node,
        }
    }
    node
}

/// What a bare global name denotes.
pub fn global_value(name: &str) -> Vals {
    match name {
        "require" => Vals::one(Val::Require(0)),
        "module" => Vals::one(Val::CjsModule),
        "globalThis" | "global" | "window" | "self" | "frames" => Vals::one(Val::Global),
        "undefined" => Vals::one(Val::Undefined),
        "exports" | "arguments" | "NaN" | "Infinity" => Vals::unknown(),
        other => Vals::one(Val::Name(other.to_string())),
    }
}

/// The value of `module_object.member` for a loaded module, and the name to report.
pub fn module_member(module: &str, member: &str, out: &mut Vals, refs: &mut Vec<String>) {
    let qualified = format!("{module}.{member}");
    match (module, member) {
        (_, "default") => out.push(Val::Module(module.to_string())),
        // `import('m').then(…)`: the promise, not a member of the module.
        (_, "then" | "catch" | "finally") => out.unknown = true,
        ("module", "_load") => {
            refs.push(qualified);
            out.push(Val::Require(0));
        }
        _ => out.push(Val::Name(qualified)),
    }
}

impl<'a> Analyzer<'a> {
    /// The possible values of an expression.
    pub fn eval(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Vals {
        if depth > MAX_EVAL_DEPTH {
            return Vals::unknown();
        }
        let depth = depth + 1;
        match node.kind() {
            "identifier" | "shorthand_property_identifier" => {
                let name = self.identifier(node);
                self.name_value(scope, &name)
            }
            "parenthesized_expression" | "sequence_expression" => {
                let inner = strip_parens(node);
                if inner.id() == node.id() {
                    Vals::unknown()
                } else {
                    self.eval(inner, scope, depth)
                }
            }
            "string" => Vals::one(Val::Str(self.string_value(node).into_owned())),
            "template_string" => self.template_value(node, scope, depth),
            "number" => match parse_number(self.text(node)) {
                Some(n) => Vals::one(Val::Num(n)),
                None => Vals::unknown(),
            },
            "undefined" => Vals::one(Val::Undefined),
            "binary_expression" => self.binary_value(node, scope, depth),
            "ternary_expression" => {
                let mut out = Vals::default();
                for field in [Field::Consequence, Field::Alternative] {
                    match node.field(field) {
                        Some(branch) => out.extend(self.eval(branch, scope, depth)),
                        None => out.unknown = true,
                    }
                }
                out
            }
            "assignment_expression" | "augmented_assignment_expression" => {
                match node.field(Field::Right) {
                    Some(right) => self.eval(right, scope, depth),
                    None => Vals::unknown(),
                }
            }
            "await_expression" => match node.named_child(0) {
                Some(inner) => self.eval(inner, scope, depth),
                None => Vals::unknown(),
            },
            "member_expression" | "subscript_expression" => {
                self.member_value(node, scope, depth, &mut Vec::new())
            }
            "call_expression" => self.call_value(node, scope, depth),
            "array" => self.array_value(node, scope, depth),
            "function_expression" | "arrow_function" | "generator_function" | "class" => {
                match FnKind::of(node) {
                    Some(kind) => Vals::one(Val::Func(kind)),
                    None => Vals::unknown(),
                }
            }
            _ => Vals::unknown(),
        }
    }

    /// The value of a name read in a scope: its binding's, or the global's, and the
    /// same-named property of every `with` object in between.
    pub fn name_value(&self, scope: ScopeId, name: &str) -> Vals {
        let found = self.resolve_in(scope, name);
        let mut out = match found {
            Some((_, binding)) => self.binding_value(binding),
            None if name == "arguments" && self.is_top_level_arguments(scope) => {
                Vals::one(Val::WrapperArguments)
            }
            None => global_value(name),
        };
        if self.with_objects.is_empty() {
            return out;
        }
        let binding_scope = found.map(|(declared_in, _)| declared_in);
        let mut current = Some(scope);
        while let Some(id) = current {
            if Some(id) == binding_scope {
                break;
            }
            if let Some(&(object, outer)) = self.with_objects.get(&id) {
                for val in self.eval(object, outer, 1).items {
                    self.member_of(&val, None, name, &mut out, &mut Vec::new());
                }
            }
            current = self.scopes.get(id as usize).and_then(|s| s.parent);
        }
        out
    }

    /// Whether `arguments` read in `scope` is the CommonJS wrapper's: no enclosing
    /// function has its own.
    fn is_top_level_arguments(&self, scope: ScopeId) -> bool {
        let mut current = Some(scope);
        while let Some(id) = current {
            let Some(s) = self.scopes.get(id as usize) else {
                return false;
            };
            if s.own_arguments {
                return false;
            }
            current = s.parent;
        }
        true
    }

    /// The union of everything a binding is ever given, memoised; cycles are unknown.
    pub fn binding_value(&self, binding: super::BindingId) -> Vals {
        let index = binding as usize;
        {
            let mut cache = self.cache.borrow_mut();
            if cache.len() < self.bindings.len() {
                cache.resize(self.bindings.len(), Cache::Todo);
            }
            match &cache[index] {
                Cache::Done(vals) => return vals.clone(),
                Cache::Busy => return Vals::unknown(),
                Cache::Todo => cache[index] = Cache::Busy,
            }
        }
        let mut out = Vals::default();
        if let Some(b) = self.bindings.get(index) {
            for source in &b.sources {
                let mut vals = match &source.origin {
                    Origin::Expr(node, scope) => self.eval(*node, *scope, 0),
                    Origin::Value(val) => Vals::one(val.clone()),
                    Origin::Unknown => Vals::unknown(),
                    Origin::Global(name) => global_value(name),
                };
                for step in &source.path {
                    vals = self.step_value(vals, step);
                }
                out.extend(vals);
            }
        }
        self.cache.borrow_mut()[index] = Cache::Done(out.clone());
        out
    }

    /// One destructuring step applied to a value.
    fn step_value(&self, vals: Vals, step: &Step) -> Vals {
        let mut out = Vals {
            items: Vec::new(),
            unknown: vals.unknown,
        };
        match step {
            Step::Prop(name) => {
                let mut refs = Vec::new();
                for val in &vals.items {
                    self.member_of(val, None, name, &mut out, &mut refs);
                }
                if name == "constructor" && vals.unknown {
                    out.push(Val::AnyConstructor);
                }
            }
            Step::Index(i) => {
                for val in &vals.items {
                    match val {
                        Val::WrapperArguments => {
                            self.member_of(val, None, &i.to_string(), &mut out, &mut Vec::new())
                        }
                        Val::StrList(list) => match list.get(*i) {
                            Some(s) => out.push(Val::Str(s.clone())),
                            None => out.push(Val::Undefined),
                        },
                        _ => out.unknown = true,
                    }
                }
            }
            Step::Each => {
                for val in &vals.items {
                    match val {
                        Val::StrList(list) => {
                            for s in list {
                                out.push(Val::Str(s.clone()));
                            }
                        }
                        _ => out.unknown = true,
                    }
                }
            }
            Step::Computed(key, scope) => {
                let (keys, other) = self.eval(*key, *scope, 1).strings();
                out.unknown |= other;
                let mut refs = Vec::new();
                for key in &keys {
                    for val in &vals.items {
                        self.member_of(val, None, key, &mut out, &mut refs);
                    }
                    if key == "constructor" && vals.unknown {
                        out.push(Val::AnyConstructor);
                    }
                }
            }
            Step::Rest => return vals,
            Step::Unknown => return Vals::unknown(),
        }
        out
    }

    /// The value of `obj.prop` / `obj[key]`; names worth reporting go to `refs`.
    pub fn member_value(
        &self,
        node: Node<'a>,
        scope: ScopeId,
        depth: u32,
        refs: &mut Vec<String>,
    ) -> Vals {
        let Some(object) = node.field(Field::Object) else {
            return Vals::unknown();
        };
        let object_vals = self.eval(object, scope, depth + 1);
        self.member_value_of(node, object, &object_vals, scope, depth, refs)
    }

    /// [`Self::member_value`] with the object already evaluated.
    pub fn member_value_of(
        &self,
        node: Node<'a>,
        object: Node<'a>,
        object_vals: &Vals,
        scope: ScopeId,
        depth: u32,
        refs: &mut Vec<String>,
    ) -> Vals {
        let keys = match self.member_keys(node, scope, depth) {
            Some(keys) => keys,
            None => return Vals::unknown(),
        };
        let mut out = Vals::default();
        let (keys, other) = keys.strings();
        out.unknown = other || object_vals.unknown;
        for key in &keys {
            if node.kind() == "subscript_expression" {
                // `[eval][0]`: an element of an array literal.
                let array = strip_parens(object);
                if array.kind() == "array" {
                    if let Ok(i) = key.parse::<usize>() {
                        match array.named_child(i) {
                            Some(element) if element.kind() != "spread_element" => {
                                out.extend(self.eval(element, scope, depth + 1))
                            }
                            _ => out.unknown = true,
                        }
                        continue;
                    }
                }
            }
            for val in &object_vals.items {
                self.member_of(val, Some(object), key, &mut out, refs);
            }
            if key == "constructor"
                && (self.is_constructor_walk(object, scope, depth) || is_literal_method(object))
            {
                out.push(Val::Name("Function".to_string()));
            } else if key == "constructor"
                && object_vals.unknown
                && strip_parens(object).kind() != "this"
            {
                // `new this.constructor(…)` is a class's own clone idiom; any other
                // object we cannot see may be a function.
                out.push(Val::AnyConstructor);
            }
        }
        out
    }

    /// The property names a member or subscript expression may read.
    pub fn member_keys(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Option<Vals> {
        if node.kind() == "member_expression" {
            let property = node.field(Field::Property)?;
            if property.kind() == "private_property_identifier" {
                return None;
            }
            Some(Vals::one(Val::Str(self.identifier(property).into_owned())))
        } else {
            let index = node.field(Field::Index)?;
            Some(self.eval(index, scope, depth + 1))
        }
    }

    /// The value of one member of one value.
    pub fn member_of(
        &self,
        val: &Val,
        _object: Option<Node<'a>>,
        prop: &str,
        out: &mut Vals,
        refs: &mut Vec<String>,
    ) {
        match val {
            Val::Module(module) => module_member(module, prop, out, refs),
            Val::Name(name) => match (name.as_str(), prop) {
                ("process", "mainModule") => {
                    refs.push("process.mainModule".to_string());
                    out.push(Val::CjsModule);
                }
                ("process", "getBuiltinModule") => {
                    refs.push("process.getBuiltinModule".to_string());
                    out.push(Val::Require(0));
                }
                (_, "constructor") => match name.strip_suffix(".prototype") {
                    Some(owner) => out.push(Val::Name(owner.to_string())),
                    None => out.push(Val::Name("Function".to_string())),
                },
                _ => out.push(Val::Name(format!("{name}.{prop}"))),
            },
            Val::Global => out.extend(global_value(prop)),
            Val::Require(arg) => match prop {
                "main" => {
                    refs.push("require.main".to_string());
                    out.push(Val::CjsModule);
                }
                "call" if *arg == 0 => out.push(Val::Require(1)),
                "apply" if *arg == 0 => out.push(Val::Require(APPLY)),
                "bind" => out.push(Val::Require(0)),
                "constructor" => out.push(Val::Name("Function".to_string())),
                _ => out.push(Val::Name(format!("require.{prop}"))),
            },
            Val::CjsModule => match prop {
                "require" => {
                    refs.push("module.require".to_string());
                    out.push(Val::Require(0));
                }
                "constructor" => {
                    refs.push("module.constructor".to_string());
                    out.push(Val::Module("module".to_string()));
                }
                "parent" => out.push(Val::CjsModule),
                "_compile" => out.push(Val::Name("module._compile".to_string())),
                _ => out.unknown = true,
            },
            Val::Func(kind) | Val::FuncProto(kind) if prop == "constructor" => {
                out.push(Val::Name(kind.constructor_name().to_string()))
            }
            // A descriptor's `.value`, and the constructor bound or called indirectly.
            Val::AnyConstructor => match prop {
                "value" | "bind" | "call" | "apply" => out.push(Val::AnyConstructor),
                _ => out.unknown = true,
            },
            Val::WrapperArguments => match prop {
                "1" => out.push(Val::Require(0)),
                "2" => out.push(Val::CjsModule),
                "callee" => out.push(Val::Func(FnKind::Plain)),
                _ => out.unknown = true,
            },
            Val::Str(s) => match prop.parse::<usize>() {
                Ok(i) => match s.chars().nth(i) {
                    Some(c) => out.push(Val::Str(c.to_string())),
                    None => out.push(Val::Undefined),
                },
                Err(_) => out.unknown = true,
            },
            Val::StrList(list) => match prop.parse::<usize>() {
                Ok(i) => match list.get(i) {
                    Some(s) => out.push(Val::Str(s.clone())),
                    None => out.push(Val::Undefined),
                },
                Err(_) => out.unknown = true,
            },
            _ => out.unknown = true,
        }
    }

    /// True when `object` is itself a `.constructor` read, so that reading
    /// `.constructor` on it walks to `Function` (`[].constructor.constructor`).
    pub fn is_constructor_walk(&self, object: Node<'a>, scope: ScopeId, depth: u32) -> bool {
        let object = strip_parens(object);
        if !matches!(object.kind(), "member_expression" | "subscript_expression") {
            return false;
        }
        self.member_keys(object, scope, depth + 1)
            .is_some_and(|keys| keys.strings().0.iter().any(|k| k == "constructor"))
    }

    /// The value of a call: modules from loaders, strings from string methods.
    fn call_value(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Vals {
        let Some(callee) = node.field(Field::Function) else {
            return Vals::unknown();
        };
        let args = node.field(Field::Arguments);
        if callee.kind() == "import" {
            return self.loaded_modules(args, 0, scope, depth);
        }
        let callee = strip_parens(callee);
        // The receiver is evaluated once: evaluating it again for the callee's value
        // would make method chains (`a.b().c().d()`) exponential.
        let callee_vals = match callee.field(Field::Object) {
            Some(object) if callee.kind() == "member_expression" => {
                let receiver = self.eval(object, scope, depth + 1);
                if let Some(folded) = self.string_method(callee, &receiver, args, scope, depth) {
                    return folded;
                }
                self.member_value_of(callee, object, &receiver, scope, depth + 1, &mut Vec::new())
            }
            _ => self.eval(callee, scope, depth + 1),
        };
        let mut out = Vals {
            items: Vec::new(),
            unknown: callee_vals.unknown,
        };
        for val in &callee_vals.items {
            match val {
                Val::Require(arg) => out.extend(self.loaded_modules(args, *arg, scope, depth)),
                Val::Name(name) => match name.as_str() {
                    "module.createRequire" => out.push(Val::Require(0)),
                    "Object.getPrototypeOf" | "Reflect.getPrototypeOf" => {
                        let first = args.and_then(|a| self.argument(a, 0));
                        let mut found = false;
                        if let Some(first) = first {
                            for v in self.eval(first, scope, depth + 1).items {
                                if let Val::Func(kind) = v {
                                    out.push(Val::FuncProto(kind));
                                    found = true;
                                }
                            }
                        }
                        if !found {
                            out.unknown = true;
                        }
                    }
                    // A descriptor of, or the value of, a `constructor` property.
                    "Object.getOwnPropertyDescriptor"
                    | "Reflect.getOwnPropertyDescriptor"
                    | "Reflect.get" => {
                        let key = args.and_then(|a| self.argument(a, 1));
                        let (keys, other) = match key {
                            Some(key) => self.eval(key, scope, depth + 1).strings(),
                            None => (Vec::new(), true),
                        };
                        if other || keys.iter().any(|k| k == "constructor") {
                            out.push(Val::AnyConstructor);
                        }
                        out.unknown = true;
                    }
                    "String.fromCharCode" | "String.fromCodePoint" => {
                        match args.and_then(|a| self.char_codes(a, scope, depth)) {
                            Some(s) => out.push(Val::Str(s)),
                            None => out.unknown = true,
                        }
                    }
                    _ => out.unknown = true,
                },
                _ => out.unknown = true,
            }
        }
        out
    }

    /// The modules a loader call may load, as module values.
    pub fn loaded_modules(
        &self,
        args: Option<Node<'a>>,
        arg: u8,
        scope: ScopeId,
        depth: u32,
    ) -> Vals {
        let Some(name_node) = args.and_then(|a| self.loader_argument(a, arg)) else {
            return Vals::unknown();
        };
        let (names, other) = self.eval(name_node, scope, depth + 1).strings();
        let mut out = Vals {
            items: Vec::new(),
            unknown: other,
        };
        for name in names {
            out.push(Val::Module(super::model::normalize(&name).to_string()));
        }
        out
    }

    /// The node holding the module name of a loader call: a plain argument, the
    /// template of a tagged call (``require`fs` ``), or `apply`'s array's first element.
    pub fn loader_argument(&self, args: Node<'a>, arg: u8) -> Option<Node<'a>> {
        if args.kind() == "template_string" {
            return (arg == 0).then_some(args);
        }
        if arg == APPLY {
            let array = strip_parens(self.argument(args, 1)?);
            return if array.kind() == "array" {
                array.named_child(0)
            } else {
                Some(array)
            };
        }
        self.argument(args, arg as usize)
    }

    /// The n-th argument of an `arguments` node (comments skipped).
    pub fn argument(&self, args: Node<'a>, n: usize) -> Option<Node<'a>> {
        if args.kind() != "arguments" {
            return None;
        }
        let mut cursor = args.walk();
        let found = args
            .named_children(&mut cursor)
            .filter(|c| c.kind() != "comment")
            .nth(n);
        found
    }

    fn array_value(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> Vals {
        let mut list = Vec::new();
        let mut cursor = node.walk();
        for element in node.named_children(&mut cursor) {
            if element.kind() == "comment" {
                continue;
            }
            let vals = self.eval(element, scope, depth + 1);
            let (strings, other) = vals.strings();
            if other || strings.len() != 1 || list.len() > 64 {
                return Vals::unknown();
            }
            list.extend(strings);
        }
        Vals::one(Val::StrList(list))
    }
}

/// A JavaScript numeric literal (decimal, hex, octal, binary; `_` separators).
pub fn parse_number(text: &str) -> Option<f64> {
    let text: String = text.chars().filter(|&c| c != '_').collect();
    let lower = text.to_ascii_lowercase();
    let radix =
        |digits: &str, radix: u32| i64::from_str_radix(digits, radix).ok().map(|n| n as f64);
    if let Some(d) = lower.strip_prefix("0x") {
        radix(d, 16)
    } else if let Some(d) = lower.strip_prefix("0o") {
        radix(d, 8)
    } else if let Some(d) = lower.strip_prefix("0b") {
        radix(d, 2)
    } else if lower.ends_with('n') {
        None
    } else {
        lower.parse::<f64>().ok()
    }
}

/// A method read off an array, string, number or regex literal (`[].map`, `''['sub']`,
/// `/x/.test`, `(0).toFixed`): a built-in function, whose `.constructor` is `Function`.
/// (An object literal's members are not: `({}).__proto__` is `Object.prototype`.)
fn is_literal_method(node: Node<'_>) -> bool {
    let node = strip_parens(node);
    if !matches!(node.kind(), "member_expression" | "subscript_expression") {
        return false;
    }
    node.child_by_field_name("object")
        .map(strip_parens)
        .is_some_and(|object| {
            matches!(
                object.kind(),
                "array" | "string" | "template_string" | "number" | "regex"
            )
        })
}
