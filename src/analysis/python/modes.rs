//! Calls that one argument turns unsafe: `numpy.load(f, allow_pickle=True)` unpickles,
//! `ruamel.yaml.YAML(typ='unsafe')` builds arbitrary objects. The function alone is
//! ordinary, so the policy names the call with its argument, as the finding shows it:
//! `numpy.load(allow_pickle=True)`.

/// A callee, the argument that changes its mode (keyword and position), and the value
/// that makes it unsafe.
struct UnsafeMode {
    callee: &'static str,
    keyword: &'static str,
    position: Option<usize>,
    value: &'static str,
}

const UNSAFE_MODES: &[UnsafeMode] = &[
    UnsafeMode {
        callee: "numpy.load",
        keyword: "allow_pickle",
        position: Some(2),
        value: "True",
    },
    UnsafeMode {
        callee: "ruamel.yaml.YAML",
        keyword: "typ",
        position: None,
        value: "unsafe",
    },
];

/// The modes of `callee` to look for: (keyword, position, unsafe value).
pub fn unsafe_modes(
    callee: &str,
) -> impl Iterator<Item = (&'static str, Option<usize>, &'static str)> + '_ {
    UNSAFE_MODES
        .iter()
        .filter(move |mode| mode.callee == callee)
        .map(|mode| (mode.keyword, mode.position, mode.value))
}

/// The name a call in an unsafe mode is reported as: `numpy.load(allow_pickle=True)`.
pub fn unsafe_call_name(callee: &str, keyword: &str, value: &str) -> String {
    let shown = if value == "True" || value == "False" {
        value.to_string()
    } else {
        format!("'{value}'")
    };
    format!("{callee}({keyword}={shown})")
}

/// Timing functions that take the code they time either as a callable or as a string:
/// the callable is ordinary code the check sees, the string is code it never does.
/// (callee, keyword, position) of each argument that may be a statement.
const STATEMENT_ARGUMENTS: &[(&str, &str, usize)] = &[
    ("timeit.timeit", "stmt", 0),
    ("timeit.timeit", "setup", 1),
    ("timeit.repeat", "stmt", 0),
    ("timeit.repeat", "setup", 1),
    ("timeit.Timer", "stmt", 0),
    ("timeit.Timer", "setup", 1),
];

/// The arguments of `callee` that run as code when given as strings: (keyword, position).
pub fn statement_arguments(callee: &str) -> impl Iterator<Item = (&'static str, usize)> + '_ {
    STATEMENT_ARGUMENTS
        .iter()
        .filter(move |(name, _, _)| *name == callee)
        .map(|(_, keyword, position)| (*keyword, *position))
}
