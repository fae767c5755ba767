//! Reaching for names that cannot be known statically, and walks through the object
//! graph to the interpreter's internals.
//!
//! Bandit-style checkers look for `os.system` by name; sandbox escapes avoid the name:
//! `getattr(os, 'sys' + 'tem')`, `__import__(name)`, `().__class__.__bases__[0]
//! .__subclasses__()`, `f.__globals__['__builtins__']`, `gen.gi_frame.f_back`. These
//! tables say which attributes lead there and which callables fetch by computed name.

/// Attributes that lead from any object to classes, code, frames or namespaces. Plain
/// `__class__` and `__name__` are ordinary and not listed.
pub const INTROSPECTION_ATTRIBUTES: &[&str] = &[
    "__subclasses__",
    "__bases__",
    "__base__",
    "__mro__",
    "mro",
    "__globals__",
    "__code__",
    "__closure__",
    "__defaults__",
    "__kwdefaults__",
    "__dict__",
    "__getattribute__",
    "__builtins__",
    "__import__",
    "__loader__",
    "__reduce__",
    "__reduce_ex__",
    "__self__",
    "gi_frame",
    "gi_code",
    "cr_frame",
    "cr_code",
    "ag_frame",
    "ag_code",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "f_code",
    "tb_frame",
    "func_globals",
    "func_code",
];

/// Whether an attribute (or a constant subscript key) is an object-graph walk.
pub fn is_introspection(attribute: &str) -> bool {
    INTROSPECTION_ATTRIBUTES.contains(&attribute)
}

/// `__name__`-style names.
pub fn is_dunder(name: &str) -> bool {
    name.len() > 4 && name.starts_with("__") && name.ends_with("__")
}

/// Callables that load a module by a name given as a string.
pub fn is_import_function(qualified: &str) -> bool {
    matches!(
        qualified,
        "__import__" | "importlib.import_module" | "importlib.__import__"
    )
}

/// Callables that fetch, set or delete an attribute by a name given as a string.
pub fn is_attribute_function(qualified: &str) -> bool {
    matches!(qualified, "getattr" | "setattr" | "delattr")
}

/// Methods only one standard-library class defines, named as that class's, so that a
/// receiver the resolver cannot follow (an event loop from `asyncio.get_running_loop()`)
/// still names them.
pub fn method_of_unknown_receiver(attribute: &str) -> Option<&'static str> {
    Some(match attribute {
        "subprocess_exec" => "asyncio.AbstractEventLoop.subprocess_exec",
        "subprocess_shell" => "asyncio.AbstractEventLoop.subprocess_shell",
        _ => return None,
    })
}

/// The callable a `logging.config` dictionary names by string: `{'()': 'os.system'}`,
/// `{'class': 'a.B'}`, or any `'ext://a.b'` value. `dictConfig` imports and calls it,
/// wherever the dictionary was built, so every dictionary literal is read this way.
pub fn configured_factory(key: Option<&str>, value: &str) -> Option<String> {
    if let Some(name) = value.strip_prefix("ext://") {
        return Some(name.to_string());
    }
    let named = matches!(key, Some("()" | "class"));
    (named && value.contains('.') && !value.contains(char::is_whitespace))
        .then(|| value.to_string())
}

/// Names that stand for the builtins namespace itself: `builtins.eval` and
/// `__builtins__.eval` are both plain `eval`.
pub fn is_builtins_namespace(qualified: &str) -> bool {
    matches!(qualified, "builtins" | "__builtins__")
}

/// Builtins that only inspect an argument, so a module passed to them does not escape.
pub fn keeps_arguments(qualified: &str) -> bool {
    matches!(
        qualified,
        "print"
            | "repr"
            | "str"
            | "type"
            | "id"
            | "hash"
            | "isinstance"
            | "issubclass"
            | "callable"
            | "hasattr"
            | "len"
            | "bool"
            | "getattr"
            | "dir"
            | "help"
            | "__import__"
            | "importlib.import_module"
            | "importlib.__import__"
    )
}

/// The builtin names of CPython 3.12 that a bare name can fall back to (exceptions
/// and warnings are left out: nothing in a policy names them).
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.binary_search(&name).is_ok()
}

/// Sorted for binary search.
const BUILTINS: &[&str] = &[
    "Ellipsis",
    "False",
    "None",
    "NotImplemented",
    "True",
    "__build_class__",
    "__builtins__",
    "__debug__",
    "__import__",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// Submodules reachable as attributes of their package without their own import
/// (`os.path`), so `os.path.join` is one name rather than a use of an `os.path` object.
pub fn is_known_submodule(qualified: &str) -> bool {
    matches!(
        qualified,
        "os.path"
            | "os.sys"
            | "importlib.util"
            | "importlib.machinery"
            | "importlib.abc"
            | "importlib.resources"
            | "importlib.metadata"
            | "urllib.request"
            | "urllib.parse"
            | "urllib.error"
            | "http.client"
            | "http.server"
            | "xml.etree"
            | "xml.etree.ElementTree"
            | "xml.dom"
            | "email.mime"
            | "concurrent.futures"
            | "multiprocessing.pool"
            | "logging.handlers"
            | "collections.abc"
            | "asyncio.subprocess"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_sorted() {
        assert!(BUILTINS.windows(2).all(|w| w[0] < w[1]));
        assert!(is_builtin("eval"));
        assert!(is_builtin("__import__"));
        assert!(!is_builtin("system"));
    }
}
