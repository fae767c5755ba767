//! The emitting walk: every node the policy may care about, evaluated and reported.
//!
//! Why a second walk: a use can only be resolved once every declaration and
//! assignment is known (hoisting, flow-insensitive values), which the [`super::scope`]
//! walk provides. This walk re-derives scope ids in the same pre-order, keeps the parent
//! and field of each node (tree-sitter's `parent()` is not constant time) and dispatches
//! to the concern modules. It is iterative, so deep trees cannot exhaust the stack.

use super::super::FactKind;
use super::scope::{scope_kind, ScopeId};
use super::values::Val;
use super::Analyzer;
use tree_sitter::Node;

pub fn emit<'a>(cx: &mut Analyzer<'a>, root: Node<'a>) {
    let mut cursor = root.walk();
    let mut parents: Vec<Node<'a>> = Vec::new();
    let mut scopes: Vec<ScopeId> = Vec::new();
    let mut next_scope: ScopeId = 0;
    loop {
        let node = cursor.node();
        if node.is_named() {
            if scope_kind(node.kind()).is_some() {
                scopes.push(next_scope);
                next_scope += 1;
            }
            let scope = scopes.last().copied().unwrap_or(0);
            cx.visit(node, parents.last().copied(), cursor.field_name(), scope);
        }
        if cursor.goto_first_child() {
            parents.push(node);
            continue;
        }
        loop {
            let node = cursor.node();
            if node.is_named() && scope_kind(node.kind()).is_some() {
                scopes.pop();
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            parents.pop();
        }
    }
}

/// True when an identifier under `parent` (in `field`) reads a name, rather than
/// declaring or assigning one.
fn is_use(parent: &str, field: Option<&str>) -> bool {
    match parent {
        "variable_declarator" => field == Some("value"),
        "assignment_pattern" | "object_assignment_pattern" => field == Some("right"),
        "assignment_expression" | "augmented_assignment_expression" | "for_in_statement" => {
            field != Some("left")
        }
        "formal_parameters" | "array_pattern" | "rest_pattern" | "pair_pattern"
        | "catch_clause" | "import_specifier" | "import_clause" | "namespace_import"
        | "namespace_export" | "export_specifier" => false,
        "function_declaration"
        | "function_expression"
        | "generator_function"
        | "generator_function_declaration"
        | "class_declaration"
        | "class" => field != Some("name"),
        "arrow_function" => field != Some("parameter"),
        _ => true,
    }
}

/// `typeof eval`, `x instanceof Function`: reading a name only to test it does not
/// run anything, and feature tests like these are everywhere in ordinary code.
fn is_inert_operand(parent: Node, field: Option<&str>) -> bool {
    let operator = || parent.child_by_field_name("operator").map(|o| o.kind());
    match parent.kind() {
        "unary_expression" => operator() == Some("typeof"),
        "binary_expression" => field == Some("right") && operator() == Some("instanceof"),
        _ => false,
    }
}

impl<'a> Analyzer<'a> {
    fn visit(
        &mut self,
        node: Node<'a>,
        parent: Option<Node<'a>>,
        field: Option<&str>,
        scope: ScopeId,
    ) {
        match node.kind() {
            "identifier" => {
                if parent.is_none_or(|p| is_use(p.kind(), field) && !is_inert_operand(p, field)) {
                    self.emit_identifier(node, scope);
                }
            }
            "shorthand_property_identifier" => {
                self.emit_identifier(node, scope);
                self.emit_escape(node, scope);
            }
            "member_expression" | "subscript_expression" => self.emit_member(node, scope),
            "call_expression" => self.emit_call(node, scope),
            "new_expression" => self.emit_worker_eval(node, scope),
            "import_statement" => self.emit_static_import(node),
            "export_statement" => {
                self.emit_static_import(node);
                if let Some(value) = node.child_by_field_name("value") {
                    self.emit_escape(value, scope);
                }
                if node.child_by_field_name("source").is_none() {
                    self.emit_exported_names(node, scope);
                }
            }
            "arguments" | "array" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'a>> = node
                    .named_children(&mut cursor)
                    .filter(|c| !matches!(c.kind(), "comment" | "spread_element"))
                    .collect();
                for child in children {
                    self.emit_escape(child, scope);
                }
            }
            "pair" | "field_definition" => {
                if let Some(value) = node.child_by_field_name("value") {
                    self.emit_escape(value, scope);
                }
            }
            "spread_element" | "return_statement" | "yield_expression" | "throw_statement" => {
                if let Some(value) = node.named_child(0) {
                    self.emit_escape(value, scope);
                }
            }
            "arrow_function" => {
                if let Some(body) = node.child_by_field_name("body") {
                    if body.kind() != "statement_block" {
                        self.emit_escape(body, scope);
                    }
                }
            }
            "assignment_expression" => {
                let stores_in_object = node.child_by_field_name("left").is_some_and(|l| {
                    matches!(l.kind(), "member_expression" | "subscript_expression")
                });
                if stores_in_object {
                    if let Some(right) = node.child_by_field_name("right") {
                        self.emit_escape(right, scope);
                    }
                }
            }
            _ => {}
        }
    }

    /// `export { cp }`: a local value handed to whoever imports this module.
    fn emit_exported_names(&mut self, statement: Node<'a>, scope: ScopeId) {
        let mut cursor = statement.walk();
        let clauses: Vec<Node<'a>> = statement
            .named_children(&mut cursor)
            .filter(|c| c.kind() == "export_clause")
            .collect();
        for clause in clauses {
            let mut cursor = clause.walk();
            let names: Vec<Node<'a>> = clause
                .named_children(&mut cursor)
                .filter_map(|s| s.child_by_field_name("name"))
                .filter(|n| n.kind() == "identifier")
                .collect();
            for name in names {
                self.emit_escape(name, scope);
            }
        }
    }

    fn push_reference(&mut self, node: Node<'a>, name: String) {
        self.push(
            node,
            FactKind::Reference {
                name,
                module_value: false,
            },
        );
    }

    /// A name read: a reference when it resolves to a module member or a global.
    fn emit_identifier(&mut self, node: Node<'a>, scope: ScopeId) {
        let name = self.identifier(node);
        let vals = self.name_value(scope, &name);
        for val in vals.items {
            if let Val::Name(qualified) = val {
                self.push_reference(node, qualified);
            }
        }
    }

    /// `a.b` / `a[k]`: the qualified name it reads, dynamic keys, constructor walks.
    fn emit_member(&mut self, node: Node<'a>, scope: ScopeId) {
        let mut refs = Vec::new();
        let vals = self.member_value(node, scope, 0, &mut refs);
        for name in refs {
            self.push_reference(node, name);
        }
        for val in vals.items {
            if let Val::Name(qualified) = val {
                self.push_reference(node, qualified);
            }
        }
        if node.kind() == "subscript_expression" {
            self.emit_dynamic_attribute(node, scope);
        }
        self.emit_introspection(node, scope);
    }

    /// Calls: module loaders, string timers, fs paths.
    fn emit_call(&mut self, node: Node<'a>, scope: ScopeId) {
        let Some(callee) = node.child_by_field_name("function") else {
            return;
        };
        let args = node.child_by_field_name("arguments");
        if callee.kind() == "import" {
            self.emit_load(node, args, 0, scope, "`import()`");
            return;
        }
        let vals = self.eval(callee, scope, 0);
        for val in vals.items {
            match val {
                Val::Require(arg) => self.emit_load(node, args, arg, scope, "a module loader"),
                Val::Name(name) => {
                    self.emit_string_timer(node, &name, args, scope);
                    self.emit_paths(&name, args, scope);
                }
                _ => {}
            }
        }
    }
}
