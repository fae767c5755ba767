//! Scopes and bindings: where a name is looked up (module, class and function frames,
//! flow order in module and class bodies, a builtin hidden only by a binding that
//! surely ran), how a binding adds to a name's set of values, and modules seen as
//! attributes of other modules (`shutil.os` is `os`).

use super::*;

impl Walker<'_> {
    pub(super) fn is_module(&self, qualified: &str) -> bool {
        self.tree.module.imported_modules.contains(qualified) || is_known_submodule(qualified)
    }

    /// The value of `module.attribute`: a module that imported `os` has it as an
    /// attribute (`os.path.os`, `shutil.os`, `tempfile._os`), and that *is* `os`.
    pub(super) fn module_member(&self, module: &str, attribute: &str) -> Value {
        let last = module.rsplit('.').next().unwrap_or(module);
        if attribute != last {
            if let Some(reexported) = reexported_module(attribute) {
                return Value::Module(reexported.to_string());
            }
        }
        self.member(module, attribute)
    }

    /// The value of `base.attribute` when `base` is a module or qualified name.
    pub(super) fn member(&self, base: &str, attribute: &str) -> Value {
        let qualified = canonical(qualify(base, attribute));
        if self.is_module(&qualified) {
            Value::Module(qualified)
        } else {
            Value::Name(qualified)
        }
    }

    pub(super) fn current(&self) -> usize {
        self.frames.len() - 1
    }

    pub(super) fn lookup(&self, name: &str) -> Vec<Value> {
        self.lookup_at(self.current(), name, false)
    }

    /// Looks `name` up from frame `at`. `deferred`: a function body lies between the
    /// use and this frame, so module names are seen in their final state.
    pub(super) fn lookup_at(&self, at: usize, name: &str, deferred: bool) -> Vec<Value> {
        let frame = &self.frames[at];
        let scope = self.tree.scope(frame.scope);
        match frame.kind {
            ScopeKind::Function | ScopeKind::Comprehension => {
                if scope.globals.contains(name) {
                    return self.module_final(name);
                }
                if scope.locals.contains(name) && !scope.nonlocals.contains(name) {
                    return self.values[frame.scope]
                        .get(name)
                        .map(|entry| entry.read().to_vec())
                        .unwrap_or_default();
                }
                let deferred = deferred || frame.kind == ScopeKind::Function;
                let mut up = at;
                loop {
                    if up == 0 {
                        return self.module_final(name);
                    }
                    up -= 1;
                    if self.frames[up].kind != ScopeKind::Class {
                        break;
                    }
                }
                self.lookup_at(up, name, deferred)
            }
            ScopeKind::Class => {
                if scope.globals.contains(name) {
                    return self.module_final(name);
                }
                let mut out = Vec::new();
                let mut definitely = false;
                if let Some(so_far) = frame.so_far.get(name) {
                    out = so_far.values.clone();
                    definitely = so_far.definitely;
                }
                if !definitely && at > 0 {
                    for value in self.lookup_at(at - 1, name, deferred) {
                        add(&mut out, value);
                    }
                }
                out
            }
            ScopeKind::Module => {
                if deferred {
                    return self.module_final(name);
                }
                let mut out = Vec::new();
                let mut definitely = false;
                if let Some(so_far) = frame.so_far.get(name) {
                    out = so_far.values.clone();
                    definitely = so_far.definitely;
                }
                if let Some(entry) = self.global_values.get(name) {
                    for value in entry.read() {
                        add(&mut out, value.clone());
                    }
                }
                if !definitely {
                    self.add_unbound_meanings(&frame.stars, name, &mut out);
                }
                out
            }
        }
    }

    /// What a star import may have bound `name` to. Builtin names are taken to come from
    /// the builtins, except `open`, which `os`, `io` and friends do export.
    pub(super) fn star_value(&self, module: &str, name: &str) -> Option<Value> {
        (!is_builtin(name) || name == "open").then(|| self.member(module, name))
    }

    /// A module-level name as a function body sees it when it runs.
    pub(super) fn module_final(&self, name: &str) -> Vec<Value> {
        let mut out = self.values[0]
            .get(name)
            .map(|entry| entry.read().to_vec())
            .unwrap_or_default();
        let module = &self.tree.module;
        let may_be_unbound = match module.first_unconditional.get(name) {
            None => true,
            Some(&bound_at) => {
                module.deleted.contains(name) || module.first_call.is_some_and(|c| c <= bound_at)
            }
        };
        if may_be_unbound {
            self.add_unbound_meanings(&module.star_modules, name, &mut out);
        }
        out
    }

    /// What a name may mean where no binding of its own surely ran: what a star import
    /// bound it to, or the builtin of that name.
    fn add_unbound_meanings(&self, stars: &[String], name: &str, out: &mut Vec<Value>) {
        for module in stars {
            if let Some(value) = self.star_value(module, name) {
                add(out, value);
            }
        }
        if is_builtin(name) {
            add(out, Value::Name(name.to_string()));
        }
    }

    pub(super) fn bind(&mut self, name: &str, values: Vec<Value>) {
        self.bind_at(self.current(), name, values);
    }

    pub(super) fn bind_at(&mut self, at: usize, name: &str, values: Vec<Value>) {
        let frame_scope = self.frames[at].scope;
        let scope = self.tree.scope(frame_scope);
        match self.frames[at].kind {
            ScopeKind::Function | ScopeKind::Comprehension => {
                if scope.globals.contains(name) {
                    self.bind_global(name, values);
                } else if scope.nonlocals.contains(name) {
                    let owner = (0..at).rev().find(|&i| {
                        let s = self.tree.scope(self.frames[i].scope);
                        matches!(
                            self.frames[i].kind,
                            ScopeKind::Function | ScopeKind::Comprehension
                        ) && s.locals.contains(name)
                            && !s.nonlocals.contains(name)
                    });
                    if let Some(owner) = owner {
                        let owner_scope = self.frames[owner].scope;
                        self.union(owner_scope, name, values);
                    }
                } else {
                    self.union(frame_scope, name, values);
                }
            }
            ScopeKind::Class | ScopeKind::Module => {
                if self.frames[at].kind == ScopeKind::Class && scope.globals.contains(name) {
                    self.bind_global(name, values);
                    return;
                }
                let surely = self.frames[at].conditional == 0 && self.prebinding == 0;
                let entry = self.frames[at].so_far.entry(name.to_string()).or_default();
                for value in &values {
                    add(&mut entry.values, value.clone());
                }
                entry.definitely |= surely;
                if self.frames[at].kind == ScopeKind::Module {
                    self.union(0, name, values);
                }
            }
        }
    }

    pub(super) fn bind_global(&mut self, name: &str, values: Vec<Value>) {
        let (entry, created) = match self.global_values.get_mut(name) {
            Some(entry) => (entry, false),
            None => (
                self.global_values.entry(name.to_string()).or_default(),
                true,
            ),
        };
        let mut grew = false;
        for value in &values {
            grew |= add(&mut entry.values, value.clone());
        }
        if grew && (created || entry.read.get()) {
            self.changed = true;
        }
        self.union(0, name, values);
    }

    /// Adds values to a flow-insensitive binding. Every binding the scope pass found
    /// has an entry from the start, so a set growing after it was read is noticed.
    pub(super) fn union(&mut self, scope: ScopeId, name: &str, values: Vec<Value>) {
        let (entry, created) = match self.values[scope].get_mut(name) {
            Some(entry) => (entry, false),
            None => (
                self.values[scope].entry(name.to_string()).or_default(),
                true,
            ),
        };
        let mut grew = false;
        for value in values {
            grew |= add(&mut entry.values, value);
        }
        if grew && (created || entry.read.get()) {
            self.changed = true;
        }
    }

    pub(super) fn unbind(&mut self, name: &str) {
        let at = self.current();
        if let Some(entry) = self.frames[at].so_far.get_mut(name) {
            entry.definitely = false;
        }
    }

    pub(super) fn enter(&mut self, node: usize) -> bool {
        let Some(&scope) = self.tree.by_node.get(&node) else {
            // The scope pass stopped early: nothing below can be trusted.
            self.too_deep.get_or_insert(0);
            return false;
        };
        self.frames.push(Frame {
            scope,
            kind: self.tree.scope(scope).kind,
            conditional: 0,
            so_far: HashMap::new(),
            stars: Vec::new(),
        });
        true
    }

    pub(super) fn leave(&mut self) {
        self.frames.pop();
    }

    pub(super) fn conditionally(&mut self, f: impl FnOnce(&mut Self)) {
        let at = self.current();
        self.frames[at].conditional += 1;
        f(self);
        let at = self.current();
        self.frames[at].conditional -= 1;
    }

    pub(super) fn runs_in_order(&self) -> bool {
        matches!(
            self.frames[self.current()].kind,
            ScopeKind::Module | ScopeKind::Class
        )
    }
}
