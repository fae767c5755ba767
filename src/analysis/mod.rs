//! Language frontends: source text in, language-neutral [`Fact`]s out.
//!
//! A frontend never decides whether code is allowed. It only says, as precisely as it
//! can, what the code *touches*: which modules it imports, which qualified names it uses
//! (after resolving aliases, rebinding and shadowing), where it reaches for names that
//! cannot be known statically, which absolute paths it hands to filesystem calls, and
//! whether it could be parsed at all. The policy engine turns facts into findings.

pub mod display;
pub mod javascript;
mod language;
pub mod lines;
pub mod noqa;
pub mod python;
pub mod urls;

pub use language::{Language, LanguageSpec, SourceKind};
pub use lines::LineIndex;

use serde::Serialize;

/// Where a fact sits in the source: 1-based lines, 1-based columns counted in
/// characters (not bytes), end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Span {
    pub line: u32,
    pub column: u32,
    pub end_line: u32,
    pub end_column: u32,
}

/// What a piece of code touches, in terms every policy rule can match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum FactKind {
    /// A module is loaded: Python `import a.b` / `from a.b import c` (module `a.b`),
    /// JavaScript `require('fs/promises')` / `import … from 'node:fs'` (module
    /// `fs/promises`, `fs`: the `node:` prefix is dropped).
    Import { module: String },
    /// A use of a resolved, qualified name: a call *or* any other use (`x = os.system`,
    /// `@exec`, `map(os.system, …)`). `name` is the fully resolved dotted name, such as
    /// `os.system`, `subprocess.run`, `eval` (builtins and JS globals are bare).
    ///
    /// `module_value` is true when the name denotes a whole module object that escapes
    /// to where its uses cannot be followed (`f(os)`, `return subprocess`): the engine
    /// then treats it as a use of every member a rule names under that module.
    Reference { name: String, module_value: bool },
    /// Code reaching for something that cannot be known statically. `kind` is one of
    /// the [`dynamic`] kinds; `detail` says what exactly (`getattr`, `sys.modules`, …).
    DynamicAccess { kind: String, detail: String },
    /// A literal path handed to a filesystem operation (`op` is the qualified callee,
    /// such as `open`, `os.remove`, `fs.readFileSync`).
    PathLiteral { op: String, path: String },
    /// A string literal that is a web URL: the host and port it names.
    UrlLiteral { host: String, port: u16 },
    /// The code could not be parsed or decoded; nothing about it can be trusted.
    Unparseable { reason: String },
}

/// One fact with its location.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Fact {
    #[serde(flatten)]
    pub kind: FactKind,
    pub span: Span,
}

/// The vocabulary of [`FactKind::DynamicAccess`] kinds; policy rules list these under `dynamic:`.
pub mod dynamic {
    /// A module whose name is not a literal: `__import__(x)`, `importlib.import_module(x)`,
    /// `require(x)`, `import(x)`.
    pub const IMPORT: &str = "import";
    /// An attribute of a module or namespace picked by a non-literal name:
    /// `getattr(os, name)`, `setattr(os, …)`, `require('fs')[k]`, `globalThis[k]`.
    pub const ATTRIBUTE: &str = "attribute";
    /// The interpreter's name tables: `globals()`, `locals()`, `vars()`, `__dict__`,
    /// `__builtins__`, `builtins`, `sys.modules`, `globalThis`/`global` used as a value.
    pub const NAMESPACE: &str = "namespace";
    /// Object-graph walks that reach code or frames: `__subclasses__`, `__bases__`,
    /// `__mro__`, `__globals__`, `__code__`, `gi_frame`, `f_globals`, `tb_frame`,
    /// `.constructor.constructor`, `__proto__`.
    pub const INTROSPECTION: &str = "introspection";
    /// A code string handed to something that runs it without being `eval` by name:
    /// `setTimeout("code", …)`, `setInterval("…")`, `new Worker(src, {eval: true})`.
    pub const STRING_CODE: &str = "string-code";
    /// Code the checker never sees because it is loaded from a file or URL: the import
    /// path changed (`sys.path.insert`, `sys.meta_path`), a module file written by the
    /// snippet (`open('m.py', 'w')`), `require('/tmp/x.js')`, `import('data:…')`.
    pub const FILE_CODE: &str = "file-code";

    pub const ALL: &[&str] = &[
        IMPORT,
        ATTRIBUTE,
        NAMESPACE,
        INTROSPECTION,
        STRING_CODE,
        FILE_CODE,
    ];
}

/// Deepest bracket nesting accepted. CPython refuses more than 200 nested parentheses
/// itself; refusing early protects every recursive parser and walker from stack
/// exhaustion on hostile input.
pub const MAX_NESTING: usize = 200;

/// What a frontend learned about one snippet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// In source order, without duplicates.
    pub facts: Vec<Fact>,
    /// How the interpreter must load it (meaningful only when it may run).
    pub kind: SourceKind,
}

/// Turns source text into facts for the given language.
pub fn analyze(language: Language, source: &str) -> Analysis {
    let (mut facts, kind) = if let Some(offset) = too_deep(source) {
        let index = LineIndex::for_language(source, language);
        let fact = Fact {
            kind: FactKind::Unparseable {
                reason: format!("brackets nested deeper than {MAX_NESTING} levels"),
            },
            span: index.span(offset, offset + 1),
        };
        (vec![fact], SourceKind::plain(language))
    } else {
        match language {
            Language::Python => (python::analyze(source), SourceKind::Python),
            Language::JavaScript => javascript::analyze(source),
        }
    };
    facts.sort_by_key(|fact| fact.span);
    facts.dedup();
    Analysis { facts, kind }
}

/// The offset of the first bracket that opens past [`MAX_NESTING`], if any. Brackets in
/// strings and comments count too: that can only make the check stricter.
fn too_deep(source: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, byte) in source.bytes().enumerate() {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(offset);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}
