//! Code built or reached at run time: the forms a name-based rule alone would miss.
//!
//! Why each check exists:
//! - escapes: a module object, `require`, `process` or the global object handed to
//!   code we cannot follow (`f(require('child_process'))`, `[require][0]`,
//!   `run(globalThis)`) can be used for anything, so it is reported as a whole-module
//!   reference (`module_value`), a dynamic import or a namespace access;
//! - computed members with a key that does not fold, on a module, `process`,
//!   `require`, `module` or the global object (`cp[name]`, `globalThis[k]`), pick a
//!   member at run time: a dynamic attribute;
//! - constructor walks (`[].constructor.constructor`, `__proto__`,
//!   `Object.getPrototypeOf(fn).constructor`) reach `Function` without naming it:
//!   introspection;
//! - strings run as code without `eval` by name (`setTimeout('code')`,
//!   `new Worker(src, {eval: true})`, the `AsyncFunction` constructor, or the
//!   `.constructor` of a function the analysis cannot see, given a string): string code.

use super::super::dynamic;
use super::super::FactKind;
use super::model::ScopeId;
use super::model::Val;
use super::values::strip_parens;
use super::Analyzer;
use super::{Field, NodeExt};
use tree_sitter::Node;

/// The constructors that compile their last argument into a function.
const FUNCTION_CONSTRUCTORS: &[&str] = &[
    "AsyncFunction",
    "GeneratorFunction",
    "AsyncGeneratorFunction",
];

/// Timer functions that compile a string first argument.
const STRING_TIMERS: &[&str] = &[
    "setTimeout",
    "setInterval",
    "setImmediate",
    "execScript",
    "timers.setTimeout",
    "timers.setInterval",
    "timers.setImmediate",
];

impl<'a> Analyzer<'a> {
    /// A value put where the analysis cannot follow it (argument, return value, array
    /// element, object property, stored into another object).
    pub fn emit_escape(&mut self, node: Node<'a>, scope: ScopeId) {
        let vals = self.eval(node, scope, 0);
        for val in vals.items {
            let kind = match val {
                Val::Module(name) => FactKind::Reference {
                    name,
                    module_value: true,
                },
                Val::Name(name) if name == "process" => FactKind::Reference {
                    name,
                    module_value: true,
                },
                Val::CjsModule => FactKind::Reference {
                    name: "module".to_string(),
                    module_value: true,
                },
                Val::Require(_) => FactKind::DynamicAccess {
                    kind: dynamic::IMPORT.to_string(),
                    detail: format!(
                        "a module loader is passed as a value: `{}`",
                        self.excerpt(node)
                    ),
                },
                Val::Global => FactKind::DynamicAccess {
                    kind: dynamic::NAMESPACE.to_string(),
                    detail: format!(
                        "the global object is passed as a value: `{}`",
                        self.excerpt(node)
                    ),
                },
                Val::WrapperArguments => FactKind::DynamicAccess {
                    kind: dynamic::IMPORT.to_string(),
                    detail: format!(
                        "the module wrapper's `arguments` (which hold `require`) are passed as a value: `{}`",
                        self.excerpt(node)
                    ),
                },
                _ => continue,
            };
            self.push(node, kind);
        }
    }

    /// Computed member whose key does not fold, on something whose members matter.
    pub fn emit_dynamic_attribute(&mut self, node: Node<'a>, scope: ScopeId) {
        let (Some(object), Some(index)) = (node.field(Field::Object), node.field(Field::Index))
        else {
            return;
        };
        let (_, other) = self.eval(index, scope, 0).strings();
        if !other {
            return;
        }
        if self.eval(object, scope, 0).is_namespace_like() {
            let detail = format!("computed member: `{}`", self.excerpt(node));
            self.push(
                node,
                FactKind::DynamicAccess {
                    kind: dynamic::ATTRIBUTE.to_string(),
                    detail,
                },
            );
        }
    }

    /// Constructor walks and prototype reads on a member or subscript node.
    pub fn emit_introspection(&mut self, node: Node<'a>, scope: ScopeId) {
        let Some(object) = node.field(Field::Object) else {
            return;
        };
        let Some(keys) = self.member_keys(node, scope, 0) else {
            return;
        };
        let (keys, _) = keys.strings();
        let mut detail = None;
        for key in &keys {
            if key == "__proto__" {
                detail = Some("`__proto__`");
            } else if key == "constructor" {
                if self.is_constructor_walk(object, scope, 0) {
                    detail = Some("`.constructor.constructor`");
                } else if self.is_prototype_of_call(object, scope) {
                    detail = Some("`Object.getPrototypeOf(…).constructor`");
                }
            }
        }
        if let Some(detail) = detail {
            self.push(
                node,
                FactKind::DynamicAccess {
                    kind: dynamic::INTROSPECTION.to_string(),
                    detail: detail.to_string(),
                },
            );
        }
    }

    fn is_prototype_of_call(&self, object: Node<'a>, scope: ScopeId) -> bool {
        let object = strip_parens(object);
        if object.kind() != "call_expression" {
            return false;
        }
        let Some(callee) = object.field(Field::Function) else {
            return false;
        };
        self.eval(callee, scope, 0).items.iter().any(|v| {
            matches!(v, Val::Name(n) if n == "Object.getPrototypeOf" || n == "Reflect.getPrototypeOf")
        })
    }

    /// `setTimeout('code', …)` and friends: the first argument is compiled.
    pub fn emit_string_timer(
        &mut self,
        call: Node<'a>,
        callee: &str,
        args: Option<Node<'a>>,
        scope: ScopeId,
    ) {
        if !STRING_TIMERS.contains(&callee) {
            return;
        }
        // A tagged call (``setTimeout`code` ``) passes the template's strings.
        let tagged = args.is_some_and(|a| a.kind() == "template_string");
        let first = args.and_then(|a| self.argument(a, 0));
        if tagged || first.is_some_and(|f| self.looks_like_string(f, scope, 0)) {
            let detail = format!("`{callee}` given a code string");
            self.push(
                call,
                FactKind::DynamicAccess {
                    kind: dynamic::STRING_CODE.to_string(),
                    detail,
                },
            );
        }
    }

    /// A function constructor called (or `new`ed) with a code string: `Function`'s
    /// siblings reached from a function literal (`(async () => {}).constructor("…")`),
    /// and the `.constructor` of any function the analysis cannot see
    /// (`fn.constructor("…")` with `fn` a parameter, a method, a bound function).
    pub fn emit_function_constructor(
        &mut self,
        call: Node<'a>,
        callee: &[Val],
        args: Option<Node<'a>>,
        scope: ScopeId,
    ) {
        let suspect = callee.iter().any(|val| match val {
            Val::Name(name) => FUNCTION_CONSTRUCTORS.contains(&name.as_str()),
            Val::AnyConstructor => true,
            _ => false,
        });
        let (true, Some(args)) = (suspect, args) else {
            return;
        };
        // A tagged call (``F`code` ``) passes the template's strings.
        let tagged = args.kind() == "template_string";
        let mut cursor = args.walk();
        let arguments: Vec<Node<'a>> = args
            .named_children(&mut cursor)
            .filter(|a| a.kind() != "comment")
            .map(|a| match a.kind() {
                "spread_element" => a.named_child(0).unwrap_or(a),
                _ => a,
            })
            .collect();
        let any_string = arguments
            .iter()
            .any(|&a| self.looks_like_string(a, scope, 0));
        for val in callee {
            // A constructor named for what it is compiles whatever it is given; one we
            // only suspect (`x.constructor`) counts when it is given a string, so that
            // `new value.constructor(length)` clone idioms stay quiet.
            let (named, given_code) = match val {
                Val::Name(name) if FUNCTION_CONSTRUCTORS.contains(&name.as_str()) => {
                    (format!("`{name}`"), tagged || !arguments.is_empty())
                }
                Val::AnyConstructor => (
                    "the `.constructor` of a function".to_string(),
                    tagged || any_string,
                ),
                _ => continue,
            };
            if given_code {
                let detail = format!("{named} given a code string: `{}`", self.excerpt(call));
                self.push(
                    call,
                    FactKind::DynamicAccess {
                        kind: dynamic::STRING_CODE.to_string(),
                        detail,
                    },
                );
                return;
            }
        }
    }

    /// True when an expression is (or may be) a string rather than a function.
    fn looks_like_string(&self, node: Node<'a>, scope: ScopeId, depth: u32) -> bool {
        let node = strip_parens(node);
        if depth > 32 {
            return false;
        }
        match node.kind() {
            "string" | "template_string" => true,
            "binary_expression" => {
                node.field(Field::Left)
                    .is_some_and(|l| self.looks_like_string(l, scope, depth + 1))
                    || node
                        .field(Field::Right)
                        .is_some_and(|r| self.looks_like_string(r, scope, depth + 1))
            }
            "call_expression" if self.returns_string(node, scope) => true,
            _ => self
                .eval(node, scope, 0)
                .items
                .iter()
                .any(|v| matches!(v, Val::Str(_))),
        }
    }

    /// `String(x)`, `x.toString()`, `parts.join('')` and other calls that build strings.
    fn returns_string(&self, call: Node<'a>, scope: ScopeId) -> bool {
        let Some(callee) = call.field(Field::Function).map(strip_parens) else {
            return false;
        };
        if callee.kind() == "member_expression" {
            let method = callee
                .field(Field::Property)
                .map(|p| self.identifier(p))
                .unwrap_or_default();
            return matches!(
                method.as_ref(),
                "toString"
                    | "join"
                    | "concat"
                    | "replace"
                    | "replaceAll"
                    | "slice"
                    | "substring"
                    | "trim"
                    | "toUpperCase"
                    | "toLowerCase"
                    | "padStart"
                    | "padEnd"
                    | "repeat"
                    | "fromCharCode"
                    | "fromCodePoint"
                    | "raw"
            );
        }
        self.eval(callee, scope, 0)
            .items
            .iter()
            .any(|v| matches!(v, Val::Name(n) if n == "String"))
    }

    /// `new Worker(src, {eval: true})`: the first argument is code, not a file.
    pub fn emit_worker_eval(&mut self, new: Node<'a>, scope: ScopeId) {
        let Some(constructor) = new.field(Field::Constructor) else {
            return;
        };
        let is_worker = self
            .eval(constructor, scope, 0)
            .items
            .iter()
            .any(|v| matches!(v, Val::Name(n) if n == "Worker" || n.ends_with(".Worker")));
        if !is_worker {
            return;
        }
        let Some(options) = new
            .field(Field::Arguments)
            .and_then(|a| self.argument(a, 1))
            .map(strip_parens)
        else {
            return;
        };
        if options.kind() != "object" {
            return;
        }
        let mut cursor = options.walk();
        let eval_on = options.named_children(&mut cursor).any(|pair| {
            if pair.kind() != "pair" {
                return pair.kind() == "shorthand_property_identifier"
                    && self.identifier(pair) == "eval";
            }
            let key = pair.field(Field::Key);
            let is_eval = key.is_some_and(|k| match k.kind() {
                "property_identifier" => self.identifier(k) == "eval",
                "string" => self.string_value(k) == "eval",
                _ => false,
            });
            let is_false = pair
                .field(Field::Value)
                .is_some_and(|v| matches!(v.kind(), "false" | "null" | "undefined"));
            is_eval && !is_false
        });
        if eval_on {
            self.push(
                new,
                FactKind::DynamicAccess {
                    kind: dynamic::STRING_CODE.to_string(),
                    detail: "`new Worker(…, {eval: true})` runs a code string".to_string(),
                },
            );
        }
    }
}
