//! Scopes, declarations and the values bindings are given.
//!
//! Why: a name means nothing until it is resolved. `exec()` is `child_process.exec`
//! only if `exec` came from `child_process`; `eval(x)` is the global `eval` only if no
//! enclosing scope declares `eval`; `function f(require) { require(x) }` calls a
//! parameter. This walk records the scope tree (program, functions, blocks for
//! `let`/`const`/`class`, catch clauses, loops), every declaration in the scope it
//! belongs to (`var` and functions hoisted to their function, imports to the program),
//! and, per binding, every source of its value: initialisers, assignments anywhere
//! (flow-insensitive), destructuring paths (`{exec: run} = require('child_process')`),
//! `for…of` elements and imports. Assignments to undeclared names create implicit
//! globals that keep the global's own meaning too.
//!
//! The same walk also lists the nodes the emitting pass must look at, with their
//! scope, so that pass does not walk the whole tree a second time.

use super::super::{Fact, FactKind};
use super::model::{Binding, BindingId, FnKind, Origin, Scope, ScopeId, Source, Step, Val, Vals};
use super::values::global_value;
use super::Analyzer;
use super::{Field, NodeExt};
use std::borrow::Cow;
use tree_sitter::Node;

/// Deepest syntax tree walked; deeper input is refused as unparseable.
pub const MAX_TREE_DEPTH: usize = 1000;

/// The scope a pattern's expressions (defaults, computed keys) are evaluated in.
fn scope_of(target: Target) -> ScopeId {
    match target {
        Target::Declare(s) | Target::Assign(s) => s,
    }
}

/// Whether a node opens a scope, and if so whether it is function-like.
pub fn scope_kind(kind: &str) -> Option<bool> {
    match kind {
        "program"
        | "function_declaration"
        | "generator_function_declaration"
        | "function_expression"
        | "generator_function"
        | "arrow_function"
        | "method_definition"
        | "class_static_block" => Some(true),
        "statement_block" | "for_statement" | "for_in_statement" | "catch_clause"
        | "switch_body" | "class" => Some(false),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Target {
    Declare(ScopeId),
    Assign(ScopeId),
}

struct Collector<'c, 'a> {
    cx: &'c mut Analyzer<'a>,
    stack: Vec<ScopeId>,
    pending: Vec<(ScopeId, Cow<'a, str>, Source<'a>)>,
    /// Callbacks of `promise.then(cb)`: their first parameter is what the promise
    /// resolves to (`import('m').then((m) => …)` gets the module).
    then_callbacks: Vec<(usize, Origin<'a>)>,
    /// Bodies of `with` statements not yet entered (node id), with their object.
    with_bodies: Vec<(usize, Node<'a>)>,
}

/// Walks the whole tree once, filling the analyzer's scopes and bindings. Fails (with
/// the fact to report) when the tree is deeper than [`MAX_TREE_DEPTH`].
pub fn collect<'a>(cx: &mut Analyzer<'a>, root: Node<'a>) -> Result<(), Fact> {
    let mut collector = Collector {
        cx,
        stack: Vec::new(),
        pending: Vec::new(),
        then_callbacks: Vec::new(),
        with_bodies: Vec::new(),
    };
    let mut cursor = root.walk();
    let mut depth = 0usize;
    // Scope nodes currently open, by node id: cheaper than re-reading kinds on leave.
    let mut open: Vec<usize> = Vec::new();
    let mut parents: Vec<Node<'a>> = Vec::new();
    loop {
        let node = cursor.node();
        if depth > MAX_TREE_DEPTH {
            let span = collector
                .cx
                .index
                .span(node.start_byte(), node.start_byte() + 1);
            return Err(Fact {
                kind: FactKind::Unparseable {
                    reason: "nesting too deep to analyse".to_string(),
                },
                span,
            });
        }
        if node.is_named() {
            let kind = node.kind();
            if collector.enter(node, kind) {
                open.push(node.id());
            }
            let parent = parents.last().copied();
            // Only identifiers need their field (declared or read?); it is not free.
            let field = if kind == "identifier" {
                cursor.field_name()
            } else {
                None
            };
            if super::walk::worth_visiting(kind, parent, field) {
                let scope = collector.top();
                collector
                    .cx
                    .visits
                    .push(super::model::Visit { node, kind, scope });
            }
        }
        if cursor.goto_first_child() {
            depth += 1;
            parents.push(node);
            continue;
        }
        loop {
            if open.last() == Some(&cursor.node().id()) {
                open.pop();
                collector.stack.pop();
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                collector.finish();
                return Ok(());
            }
            depth -= 1;
            parents.pop();
        }
    }
}

impl<'a> Collector<'_, 'a> {
    fn top(&self) -> ScopeId {
        self.stack.last().copied().unwrap_or(0)
    }

    fn function_scope(&self) -> ScopeId {
        self.stack
            .iter()
            .rev()
            .copied()
            .find(|&s| self.cx.scopes[s as usize].function_like)
            .unwrap_or(0)
    }

    /// Records what a node declares; true when it opens a scope.
    fn enter(&mut self, node: Node<'a>, kind: &str) -> bool {
        match kind {
            "function_declaration" | "generator_function_declaration" | "class_declaration" => {
                if let (Some(name), Some(fn_kind)) = (node.field(Field::Name), FnKind::of(node)) {
                    let scope = self.top();
                    self.declare(scope, name, Origin::Value(Val::Func(fn_kind)));
                }
            }
            _ => {}
        }
        // `with (obj) body`: the body gets a scope of its own, in which names may be
        // `obj`'s properties (the object itself is read where the statement stands).
        if kind == "with_statement" {
            if let (Some(body), Some(object)) = (node.field(Field::Body), node.field(Field::Object))
            {
                self.with_bodies.push((body.id(), object));
            }
        }
        let with_object = match self.with_bodies.last() {
            Some(&(body, object)) if body == node.id() => {
                self.with_bodies.pop();
                Some(object)
            }
            _ => None,
        };
        let opens = if with_object.is_some() {
            Some(false)
        } else {
            scope_kind(kind)
        };
        if let Some(function_like) = opens {
            let id = self.cx.scopes.len() as ScopeId;
            let parent = self.stack.last().copied();
            self.cx.scopes.push(super::scope::Scope {
                parent,
                function_like,
                own_arguments: matches!(
                    kind,
                    "function_declaration"
                        | "generator_function_declaration"
                        | "function_expression"
                        | "generator_function"
                        | "method_definition"
                ),
            });
            self.stack.push(id);
            if let (Some(object), Some(outer)) = (with_object, parent) {
                self.cx.with_objects.insert(id, (object, outer));
            }
        }
        let top = self.top();
        if !self.then_callbacks.is_empty() {
            self.bind_then_parameter(node, top);
        }
        match kind {
            "call_expression" => self.note_then_callback(node, top),
            "function_expression" | "generator_function" | "class" => {
                if let (Some(name), Some(fn_kind)) = (node.field(Field::Name), FnKind::of(node)) {
                    self.declare(top, name, Origin::Value(Val::Func(fn_kind)));
                }
            }
            "arrow_function" => {
                if let Some(param) = node.field(Field::Parameter) {
                    self.declare(top, param, Origin::Unknown);
                }
            }
            "formal_parameters" => {
                let mut cursor = node.walk();
                let params: Vec<Node<'a>> = node.named_children(&mut cursor).collect();
                for param in params {
                    self.bind(
                        param,
                        &Origin::Unknown,
                        &mut Vec::new(),
                        Target::Declare(top),
                        0,
                    );
                }
            }
            "catch_clause" => {
                if let Some(param) = node.field(Field::Parameter) {
                    self.bind(
                        param,
                        &Origin::Unknown,
                        &mut Vec::new(),
                        Target::Declare(top),
                        0,
                    );
                }
            }
            "variable_declaration" | "lexical_declaration" | "using_declaration" => {
                let scope = if kind == "variable_declaration" {
                    self.function_scope()
                } else {
                    top
                };
                let mut cursor = node.walk();
                let declarators: Vec<Node<'a>> = node
                    .named_children(&mut cursor)
                    .filter(|c| c.kind() == "variable_declarator")
                    .collect();
                for declarator in declarators {
                    let Some(name) = declarator.field(Field::Name) else {
                        continue;
                    };
                    let origin = match declarator.field(Field::Value) {
                        Some(value) => Origin::Expr(value, top),
                        None => Origin::Value(Val::Undefined),
                    };
                    self.bind(name, &origin, &mut Vec::new(), Target::Declare(scope), 0);
                }
            }
            "for_in_statement" => self.for_in(node, top),
            "assignment_expression" => {
                if let (Some(left), Some(right)) =
                    (node.field(Field::Left), node.field(Field::Right))
                {
                    let origin = Origin::Expr(right, top);
                    self.bind(left, &origin, &mut Vec::new(), Target::Assign(top), 0);
                }
            }
            "augmented_assignment_expression" => {
                if let (Some(left), Some(right), Some(op)) = (
                    node.field(Field::Left),
                    node.field(Field::Right),
                    node.field(Field::Operator),
                ) {
                    let origin = match op.kind() {
                        "||=" | "&&=" | "??=" => Origin::Expr(right, top),
                        _ => Origin::Unknown,
                    };
                    self.bind(left, &origin, &mut Vec::new(), Target::Assign(top), 0);
                }
            }
            "import_statement" => self.import(node),
            _ => {}
        }
        opens.is_some()
    }

    /// Records `p.then(cb)` so that `cb`'s first parameter is bound to `p`'s value.
    fn note_then_callback(&mut self, call: Node<'a>, top: ScopeId) {
        let Some(callee) = call.field(Field::Function) else {
            return;
        };
        if callee.kind() != "member_expression"
            || callee
                .field(Field::Property)
                .is_none_or(|p| self.cx.text(p) != "then")
        {
            return;
        }
        let (Some(promise), Some(callback)) = (
            callee.field(Field::Object),
            call.field(Field::Arguments).and_then(|a| a.named_child(0)),
        ) else {
            return;
        };
        if matches!(callback.kind(), "arrow_function" | "function_expression") {
            self.then_callbacks
                .push((callback.id(), Origin::Expr(promise, top)));
        }
    }

    fn bind_then_parameter(&mut self, node: Node<'a>, top: ScopeId) {
        let Some(at) = self
            .then_callbacks
            .iter()
            .position(|(id, _)| *id == node.id())
        else {
            return;
        };
        let (_, origin) = self.then_callbacks.swap_remove(at);
        let first = node
            .field(Field::Parameter)
            .or_else(|| node.field(Field::Parameters).and_then(|p| p.named_child(0)));
        if let Some(first) = first {
            self.bind(first, &origin, &mut Vec::new(), Target::Declare(top), 0);
        }
    }

    /// `for (const x of xs)`: `x` is every element of `xs`; `for…in` gives keys.
    fn for_in(&mut self, node: Node<'a>, top: ScopeId) {
        let (Some(left), Some(right)) = (node.field(Field::Left), node.field(Field::Right)) else {
            return;
        };
        let is_of = node
            .field(Field::Operator)
            .is_some_and(|op| op.kind() == "of");
        let (origin, mut path) = if is_of {
            (Origin::Expr(right, top), vec![Step::Each])
        } else {
            (Origin::Unknown, Vec::new())
        };
        let target = match node.field(Field::Kind).map(|k| k.kind()) {
            Some("var") => Target::Declare(self.function_scope()),
            Some(_) => Target::Declare(top),
            None => Target::Assign(top),
        };
        self.bind(left, &origin, &mut path, target, 0);
    }

    /// Import bindings: default and namespace imports are the module, named imports its
    /// members (`import {exec as run}` is `child_process.exec`).
    fn import(&mut self, node: Node<'a>) {
        let Some(source) = node.field(Field::Source) else {
            return;
        };
        let module = super::model::normalize(&self.cx.string_value(source)).to_string();
        let mut cursor = node.walk();
        let clauses: Vec<Node<'a>> = node
            .named_children(&mut cursor)
            .filter(|c| c.kind() == "import_clause")
            .collect();
        for clause in clauses {
            let mut cursor = clause.walk();
            let parts: Vec<Node<'a>> = clause.named_children(&mut cursor).collect();
            for part in parts {
                match part.kind() {
                    "identifier" => {
                        self.declare(0, part, Origin::Value(Val::Module(module.clone())))
                    }
                    "namespace_import" => {
                        if let Some(name) = part.named_child(0) {
                            self.declare(0, name, Origin::Value(Val::Module(module.clone())));
                        }
                    }
                    "named_imports" => {
                        let mut cursor = part.walk();
                        let specifiers: Vec<Node<'a>> = part
                            .named_children(&mut cursor)
                            .filter(|c| c.kind() == "import_specifier")
                            .collect();
                        for specifier in specifiers {
                            self.import_specifier(specifier, &module);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn import_specifier(&mut self, specifier: Node<'a>, module: &str) {
        let Some(name) = specifier.field(Field::Name) else {
            return;
        };
        let local = specifier.field(Field::Alias).unwrap_or(name);
        let imported = if name.kind() == "string" {
            self.cx.string_value(name).into_owned()
        } else {
            self.cx.identifier(name).into_owned()
        };
        let mut vals = Vals::default();
        super::values::module_member(module, &imported, &mut vals, &mut Vec::new());
        for val in vals.items {
            self.declare(0, local, Origin::Value(val));
        }
    }

    /// Binds every name a pattern declares (or assigns) to `origin` along `path`.
    fn bind(
        &mut self,
        node: Node<'a>,
        origin: &Origin<'a>,
        path: &mut Vec<Step<'a>>,
        target: Target,
        depth: u32,
    ) {
        if depth > 64 {
            return;
        }
        match node.kind() {
            "identifier" | "shorthand_property_identifier_pattern" => {
                let source = Source {
                    origin: origin.clone(),
                    path: path.clone(),
                };
                self.bind_name(node, source, target);
            }
            "parenthesized_expression" => {
                if let Some(inner) = node.named_child(0) {
                    self.bind(inner, origin, path, target, depth + 1);
                }
            }
            "assignment_pattern" | "object_assignment_pattern" => {
                let (Some(left), right) = (node.field(Field::Left), node.field(Field::Right))
                else {
                    return;
                };
                if left.kind() == "shorthand_property_identifier_pattern" {
                    let name = self.cx.identifier(left).into_owned();
                    path.push(Step::Prop(name));
                    self.bind(left, origin, path, target, depth + 1);
                    path.pop();
                } else {
                    self.bind(left, origin, path, target, depth + 1);
                }
                if let Some(right) = right {
                    let scope = match target {
                        Target::Declare(s) | Target::Assign(s) => s,
                    };
                    let default = Origin::Expr(right, scope);
                    self.bind(left, &default, &mut Vec::new(), target, depth + 1);
                }
            }
            "rest_pattern" => {
                if let Some(inner) = node.named_child(0) {
                    path.push(Step::Rest);
                    self.bind(inner, origin, path, target, depth + 1);
                    path.pop();
                }
            }
            "object_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'a>> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "pair_pattern" => {
                            let (Some(key), Some(value)) =
                                (child.field(Field::Key), child.field(Field::Value))
                            else {
                                continue;
                            };
                            let step = match key.kind() {
                                "property_identifier" => {
                                    Step::Prop(self.cx.identifier(key).into_owned())
                                }
                                "string" => Step::Prop(self.cx.string_value(key).into_owned()),
                                // Folded when the binding is evaluated: values are not
                                // complete yet (`{[k]: v} = globalThis`).
                                "computed_property_name" => match key.named_child(0) {
                                    Some(k) => Step::Computed(k, scope_of(target)),
                                    None => Step::Unknown,
                                },
                                _ => Step::Unknown,
                            };
                            path.push(step);
                            self.bind(value, origin, path, target, depth + 1);
                            path.pop();
                        }
                        "shorthand_property_identifier_pattern" => {
                            let name = self.cx.identifier(child).into_owned();
                            path.push(Step::Prop(name));
                            self.bind(child, origin, path, target, depth + 1);
                            path.pop();
                        }
                        _ => self.bind(child, origin, path, target, depth + 1),
                    }
                }
            }
            "array_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'a>> = node.children(&mut cursor).collect();
                let mut index = 0usize;
                for child in children {
                    match child.kind() {
                        "," => index += 1,
                        "[" | "]" | "comment" => {}
                        "rest_pattern" => {
                            path.push(Step::Unknown);
                            self.bind(child, origin, path, target, depth + 1);
                            path.pop();
                        }
                        _ => {
                            path.push(Step::Index(index));
                            self.bind(child, origin, path, target, depth + 1);
                            path.pop();
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn bind_name(&mut self, node: Node<'a>, source: Source<'a>, target: Target) {
        match target {
            Target::Declare(scope) => self.declare_source(scope, node, source),
            Target::Assign(scope) => {
                let name = self.cx.identifier(node);
                self.pending.push((scope, name, source));
            }
        }
    }

    fn declare(&mut self, scope: ScopeId, name: Node<'a>, origin: Origin<'a>) {
        self.declare_source(
            scope,
            name,
            Source {
                origin,
                path: Vec::new(),
            },
        );
    }

    fn declare_source(&mut self, scope: ScopeId, name: Node<'a>, source: Source<'a>) {
        let name = self.cx.identifier(name);
        add_source(self.cx, scope, name, source);
    }

    /// Resolves the assignments now that every declaration is known.
    fn finish(&mut self) {
        for (scope, name, source) in std::mem::take(&mut self.pending) {
            match self.cx.resolve(scope, &name) {
                Some(binding) => self.cx.bindings[binding as usize].sources.push(source),
                None => {
                    // An implicit global: it keeps the global's meaning as well.
                    let global = global_value(&name);
                    let origin = if global.items.is_empty() {
                        Origin::Unknown
                    } else {
                        Origin::Global(name.to_string())
                    };
                    add_source(
                        self.cx,
                        0,
                        name.clone(),
                        Source {
                            origin,
                            path: Vec::new(),
                        },
                    );
                    add_source(self.cx, 0, name, source);
                }
            }
        }
    }
}

fn add_source<'a>(cx: &mut Analyzer<'a>, scope: ScopeId, name: Cow<'a, str>, source: Source<'a>) {
    let list = cx.declared.entry(name).or_default();
    if let Some(&(_, binding)) = list.iter().find(|(s, _)| *s == scope) {
        cx.bindings[binding as usize].sources.push(source);
        return;
    }
    let id = cx.bindings.len() as BindingId;
    list.push((scope, id));
    cx.bindings.push(Binding {
        sources: vec![source],
    });
}
