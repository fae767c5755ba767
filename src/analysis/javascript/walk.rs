//! The emitting walk: every node the policy may care about, evaluated and reported.
//!
//! Why a second walk: a use can only be resolved once every declaration and
//! assignment is known (hoisting, flow-insensitive values), which the [`super::scope`]
//! walk provides. That walk also lists the nodes worth a look (with their scope, and
//! identifiers only where they are read), so this pass is a loop over that list that
//! dispatches to the concern modules: no second tree walk, no recursion.

use super::super::FactKind;
use super::model::{ScopeId, Val};
use super::Analyzer;
use super::{Field, NodeExt};
use tree_sitter::Node;

/// Whether the emitting pass needs a node: the kinds [`Analyzer::visit`] handles, and
/// identifiers only where they read a name.
pub fn worth_visiting(kind: &str, parent: Option<Node>, field: Option<&str>) -> bool {
    match kind {
        "identifier" => {
            parent.is_none_or(|p| is_use(p.kind(), field) && !is_inert_operand(p, field))
        }
        "shorthand_property_identifier"
        | "member_expression"
        | "subscript_expression"
        | "call_expression"
        | "new_expression"
        | "import_statement"
        | "export_statement"
        | "arguments"
        | "array"
        | "pair"
        | "field_definition"
        | "spread_element"
        | "return_statement"
        | "yield_expression"
        | "throw_statement"
        | "arrow_function"
        | "assignment_expression"
        | "string" => true,
        _ => false,
    }
}

/// Emits the facts of every node the scope walk listed, in source order.
pub fn emit(cx: &mut Analyzer) {
    let visits = std::mem::take(&mut cx.visits);
    for visit in &visits {
        cx.visit(visit.node, visit.kind, visit.scope);
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
    let operator = || parent.field(Field::Operator).map(|o| o.kind());
    match parent.kind() {
        "unary_expression" => operator() == Some("typeof"),
        "binary_expression" => field == Some("right") && operator() == Some("instanceof"),
        _ => false,
    }
}

impl<'a> Analyzer<'a> {
    fn visit(&mut self, node: Node<'a>, kind: &str, scope: ScopeId) {
        match kind {
            "identifier" => self.emit_identifier(node, scope),
            "string" => {
                let value = self.string_value(node).into_owned();
                if let Some((host, port)) = crate::analysis::urls::host_and_port(&value) {
                    self.push(node, FactKind::UrlLiteral { host, port });
                }
            }
            "shorthand_property_identifier" => {
                self.emit_identifier(node, scope);
                self.emit_escape(node, scope);
            }
            "member_expression" | "subscript_expression" => self.emit_member(node, scope),
            "call_expression" => self.emit_call(node, scope),
            "new_expression" => {
                self.emit_worker_eval(node, scope);
                if let Some(constructor) = node.field(Field::Constructor) {
                    let vals = self.eval(constructor, scope, 0);
                    let args = node.field(Field::Arguments);
                    self.emit_function_constructor(node, &vals.items, args, scope);
                }
            }
            "import_statement" => self.emit_static_import(node),
            "export_statement" => {
                self.emit_static_import(node);
                if let Some(value) = node.field(Field::Value) {
                    self.emit_escape(value, scope);
                }
                if node.field(Field::Source).is_none() {
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
                if let Some(value) = node.field(Field::Value) {
                    self.emit_escape(value, scope);
                }
            }
            "spread_element" | "return_statement" | "yield_expression" | "throw_statement" => {
                if let Some(value) = node.named_child(0) {
                    self.emit_escape(value, scope);
                }
            }
            "arrow_function" => {
                if let Some(body) = node.field(Field::Body) {
                    if body.kind() != "statement_block" {
                        self.emit_escape(body, scope);
                    }
                }
            }
            "assignment_expression" => {
                let stores_in_object = node.field(Field::Left).is_some_and(|l| {
                    matches!(l.kind(), "member_expression" | "subscript_expression")
                });
                if stores_in_object {
                    if let Some(right) = node.field(Field::Right) {
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
                .filter_map(|s| s.field(Field::Name))
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
        let Some(callee) = node.field(Field::Function) else {
            return;
        };
        let args = node.field(Field::Arguments);
        if callee.kind() == "import" {
            self.emit_load(node, args, 0, scope, "`import()`");
            return;
        }
        let vals = self.eval(callee, scope, 0);
        self.emit_function_constructor(node, &vals.items, args, scope);
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
