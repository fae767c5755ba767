//! The data the passes over a JavaScript program share: scopes and bindings (what the
//! scope pass records), abstract values (what the evaluator computes), and the nodes
//! the emitting pass visits. Types only, imported by every pass and importing none, so
//! that the passes depend on it and not on each other.

use tree_sitter::Node;

pub type ScopeId = u32;
pub type BindingId = u32;

pub struct Scope {
    pub parent: Option<ScopeId>,
    /// Functions and the program: where `var` and function declarations land.
    pub function_like: bool,
    /// Non-arrow functions and methods: they have their own `arguments`. Anywhere
    /// else `arguments` is the enclosing function's, and at the top level of a
    /// CommonJS module the wrapper's (`exports, require, module, …`).
    pub own_arguments: bool,
}

/// Where a binding's value comes from.
#[derive(Clone)]
pub enum Origin<'a> {
    /// An expression, evaluated in the scope it appears in.
    Expr(Node<'a>, ScopeId),
    Value(Val),
    /// A parameter, catch variable or anything else not known statically.
    Unknown,
    /// The global of that name (for implicit globals created by assignment).
    Global(String),
}

/// One step of a destructuring path.
#[derive(Clone, Debug)]
pub enum Step<'a> {
    Prop(String),
    Index(usize),
    /// Every element (`for (const x of xs)`).
    Each,
    /// `...rest` of an object: the same members.
    Rest,
    /// A computed key (`{[k]: v}`), evaluated in that scope when the value is needed.
    Computed(Node<'a>, ScopeId),
    Unknown,
}

#[derive(Clone)]
pub struct Source<'a> {
    pub origin: Origin<'a>,
    pub path: Vec<Step<'a>>,
}

pub struct Binding<'a> {
    pub sources: Vec<Source<'a>>,
}

/// A node the emitting pass looks at, with the scope it is in.
pub struct Visit<'a> {
    pub node: Node<'a>,
    pub kind: &'static str,
    pub scope: ScopeId,
}

/// Most alternatives a value keeps before it is widened to "unknown".
const MAX_ALTERNATIVES: usize = 16;

/// The flavours of function whose `.constructor` compiles code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    Plain,
    Async,
    Generator,
    AsyncGenerator,
}

impl FnKind {
    pub fn constructor_name(self) -> &'static str {
        match self {
            FnKind::Plain => "Function",
            FnKind::Async => "AsyncFunction",
            FnKind::Generator => "GeneratorFunction",
            FnKind::AsyncGenerator => "AsyncGeneratorFunction",
        }
    }

    /// The kind of a function-like node (`async`/generator), if it is one.
    pub fn of(node: Node) -> Option<FnKind> {
        let generator = match node.kind() {
            "function_expression"
            | "function_declaration"
            | "arrow_function"
            | "class"
            | "class_declaration" => false,
            "generator_function" | "generator_function_declaration" => true,
            _ => return None,
        };
        let is_async = node.child(0).is_some_and(|c| c.kind() == "async");
        Some(match (is_async, generator) {
            (false, false) => FnKind::Plain,
            (true, false) => FnKind::Async,
            (false, true) => FnKind::Generator,
            (true, true) => FnKind::AsyncGenerator,
        })
    }
}

/// One possible value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// A module object (`require('fs')`, `import * as fs`): members are `fs.x`.
    Module(String),
    /// A qualified name: a module member or a global (`child_process.exec`, `eval`,
    /// `process`, `process.env`).
    Name(String),
    /// The global object (`globalThis`, `global`, `window`, `self`).
    Global,
    /// A function that loads a module by name: `require`, `module.require`,
    /// `createRequire(...)`'s result, `module._load`, `process.getBuiltinModule`. The
    /// number is the index of the argument holding the name ([`APPLY`] for `.apply`).
    Require(u8),
    /// A CommonJS `Module` instance: `module`, `require.main`, `process.mainModule`.
    CjsModule,
    Str(String),
    Num(f64),
    /// An array of constant strings (for `[...].join()`).
    StrList(Vec<String>),
    /// A function or class literal (its `.constructor` builds code).
    Func(FnKind),
    /// `Object.getPrototypeOf(<function literal>)`.
    FuncProto(FnKind),
    /// The `.constructor` of a value the analysis cannot see (a parameter, a method, a
    /// bound function): it may be `Function`, which compiles its last argument.
    AnyConstructor,
    /// `arguments` at the top level of a CommonJS module: the wrapper's
    /// `(exports, require, module, __filename, __dirname)`.
    WrapperArguments,
    Undefined,
}

/// A union of possible values, plus whether anything else is possible too.
#[derive(Debug, Clone, Default)]
pub struct Vals {
    pub items: Vec<Val>,
    pub unknown: bool,
}

impl Vals {
    pub fn unknown() -> Self {
        Vals {
            items: Vec::new(),
            unknown: true,
        }
    }

    pub fn one(val: Val) -> Self {
        Vals {
            items: vec![val],
            unknown: false,
        }
    }

    pub fn push(&mut self, val: Val) {
        if self.items.contains(&val) {
            return;
        }
        if self.items.len() >= MAX_ALTERNATIVES {
            self.unknown = true;
        } else {
            self.items.push(val);
        }
    }

    pub fn extend(&mut self, other: Vals) {
        self.unknown |= other.unknown;
        for val in other.items {
            self.push(val);
        }
    }

    /// The constant strings this may be (numbers in their string form), and whether
    /// it may also be something that is not a constant string.
    pub fn strings(&self) -> (Vec<String>, bool) {
        let mut out = Vec::new();
        let mut other = self.unknown;
        for val in &self.items {
            match val {
                Val::Str(s) => out.push(s.clone()),
                Val::Num(n) => out.push(number_to_string(*n)),
                Val::Undefined => {}
                _ => other = true,
            }
        }
        (out, other)
    }

    /// True when this may be something whose members are modules, process or globals,
    /// so that a computed member on it is a dynamic attribute.
    pub fn is_namespace_like(&self) -> bool {
        self.items.iter().any(|v| match v {
            Val::Module(_)
            | Val::Global
            | Val::Require(_)
            | Val::CjsModule
            | Val::WrapperArguments => true,
            Val::Name(n) => n == "process",
            _ => false,
        })
    }
}

/// A module specifier as the policy names it: `node:fs` is `fs`.
pub fn normalize(specifier: &str) -> &str {
    specifier.strip_prefix("node:").unwrap_or(specifier)
}

/// JavaScript's `String(number)` for the integers and simple decimals folding meets.
pub fn number_to_string(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}
