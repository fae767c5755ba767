//! Code loaded from files the checker never sees.
//!
//! A snippet can write a module and import it (`open('/tmp/m.py', 'w')` then
//! `sys.path.insert(0, '/tmp')`; a `.zip` for zipimport; a `.pth`), or install its own
//! finder in `sys.meta_path` / `sys.path_hooks`. What that module does is not in the
//! snippet, so changing where imports look, and writing a module file, are the findings
//! (`file-code`). The run-time guard refuses the import itself.

/// The import system's search state in `sys`.
const IMPORT_STATE: &[&str] = &[
    "sys.path",
    "sys.meta_path",
    "sys.path_hooks",
    "sys.path_importer_cache",
];

/// Methods that change a list or dict in place.
const MUTATORS: &[&str] = &[
    "insert",
    "append",
    "extend",
    "__setitem__",
    "__iadd__",
    "update",
    "setdefault",
];

/// Suffixes of files the import system loads code from.
const MODULE_FILE_SUFFIXES: &[&str] = &[
    ".py", ".pyc", ".pyw", ".pth", ".zip", ".pyz", ".egg", ".whl", ".so",
];

/// Whether a resolved name is part of the import search state (`sys.path`).
pub fn is_import_state(qualified: &str) -> bool {
    IMPORT_STATE.contains(&qualified)
}

/// The import search state a method changes: `sys.path.insert` changes `sys.path`.
pub fn changed_import_state(qualified: &str) -> Option<&str> {
    let (state, method) = qualified.rsplit_once('.')?;
    (is_import_state(state) && MUTATORS.contains(&method)).then_some(state)
}

/// Whether a path names a file the import system would load code from.
pub fn is_module_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    MODULE_FILE_SUFFIXES.iter().any(|s| lower.ends_with(s))
}

/// Whether an `open()` / `zipfile.ZipFile()` mode writes.
pub fn writes(mode: &str) -> bool {
    mode.contains(['w', 'a', 'x', '+'])
}

/// The `dynamic` detail for a module file written by the snippet.
pub fn written_detail(path: &str) -> String {
    format!("`{path}` is a module file written by the snippet; importing it runs code the checker never saw")
}

/// The `dynamic` detail for a change to the import search state.
pub fn state_detail(state: &str) -> String {
    format!("`{state}` is changed, so imports may load code the checker never saw")
}
