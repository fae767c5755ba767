//! What a language is, in one place: its names, file extensions, how it is shown to a
//! model, which tool runs it and how its interpreter must be told to load a snippet.
//!
//! Adding a language (TypeScript, shell) means a row here, a frontend beside the
//! others, its matcher key in the policy schema and its image; nothing else in the
//! crate matches on [`Language`] to learn these facts.

use serde::Serialize;

/// The languages a snippet can be written in.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    #[serde(alias = "js", alias = "node")]
    JavaScript,
}

/// The facts about one language that the rest of the crate reads.
#[derive(Debug)]
pub struct LanguageSpec {
    /// The canonical lower-case name (`python`), used in policies and results.
    pub name: &'static str,
    /// Other spellings accepted on the command line and in tool arguments.
    pub aliases: &'static [&'static str],
    /// File extensions (without the dot) that imply the language.
    pub extensions: &'static [&'static str],
    /// How a tool description names it to a model.
    pub display: &'static str,
    /// How a program shows a result, as a tool description tells a model.
    pub print_hint: &'static str,
    /// The MCP tool that runs it.
    pub run_tool: &'static str,
    /// That tool's human-readable title.
    pub run_tool_title: &'static str,
}

const PYTHON: LanguageSpec = LanguageSpec {
    name: "python",
    aliases: &["py", "python3"],
    extensions: &["py", "pyw"],
    display: "Python 3",
    print_hint: "print()",
    run_tool: "run_python_code",
    run_tool_title: "Run Python in the sandbox",
};

const JAVASCRIPT: LanguageSpec = LanguageSpec {
    name: "javascript",
    aliases: &["js", "node", "nodejs"],
    extensions: &["js", "mjs", "cjs"],
    display:
        "JavaScript (Node.js: require() and ES module import both work, as does top-level await)",
    print_hint: "console.log()",
    run_tool: "run_javascript_code",
    run_tool_title: "Run JavaScript in the sandbox",
};

impl Language {
    pub const ALL: [Language; 2] = [Language::Python, Language::JavaScript];

    pub fn spec(self) -> &'static LanguageSpec {
        match self {
            Language::Python => &PYTHON,
            Language::JavaScript => &JAVASCRIPT,
        }
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The language a file name implies, by its extension.
    pub fn from_path(path: &std::path::Path) -> Option<Language> {
        let extension = path.extension()?.to_str()?;
        Language::ALL
            .into_iter()
            .find(|l| l.spec().extensions.contains(&extension))
    }

    /// The language whose run tool is called `tool`.
    pub fn from_run_tool(tool: &str) -> Option<Language> {
        Language::ALL
            .into_iter()
            .find(|l| l.spec().run_tool == tool)
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Language {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.to_ascii_lowercase();
        Language::ALL
            .into_iter()
            .find(|l| l.name() == wanted || l.spec().aliases.contains(&wanted.as_str()))
            .ok_or_else(|| {
                let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
                format!("unknown language `{s}` (expected {})", names.join(" or "))
            })
    }
}

/// How the interpreter must load a snippet, decided by its frontend from the syntax.
/// Node picks CommonJS or ES modules by the file's extension, so a JavaScript snippet
/// with `import`/`export`, `import.meta` or top-level `await` must be `main.mjs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    Python,
    CommonJs,
    EsModule,
}

impl SourceKind {
    /// How a program of `language` is loaded when nothing in it says otherwise (for
    /// JavaScript: CommonJS).
    pub fn plain(language: Language) -> SourceKind {
        match language {
            Language::Python => SourceKind::Python,
            Language::JavaScript => SourceKind::CommonJs,
        }
    }

    pub fn language(self) -> Language {
        match self {
            SourceKind::Python => Language::Python,
            SourceKind::CommonJs | SourceKind::EsModule => Language::JavaScript,
        }
    }

    /// The file name that makes the interpreter load the snippet this way.
    pub fn file_name(self) -> &'static str {
        match self {
            SourceKind::Python => "main.py",
            SourceKind::CommonJs => "main.cjs",
            SourceKind::EsModule => "main.mjs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_extensions_round_trip() {
        for language in Language::ALL {
            assert_eq!(language.name().parse::<Language>(), Ok(language));
            for alias in language.spec().aliases {
                assert_eq!(alias.parse::<Language>(), Ok(language));
            }
            for extension in language.spec().extensions {
                let path = format!("x.{extension}");
                assert_eq!(Language::from_path(path.as_ref()), Some(language));
            }
            assert_eq!(
                Language::from_run_tool(language.spec().run_tool),
                Some(language)
            );
        }
        assert!("ruby".parse::<Language>().is_err());
        assert_eq!(Language::from_path("x.rb".as_ref()), None);
        assert_eq!(Language::from_run_tool("check_code"), None);
    }

    #[test]
    fn file_names_follow_the_kind() {
        assert_eq!(SourceKind::Python.file_name(), "main.py");
        assert_eq!(SourceKind::EsModule.file_name(), "main.mjs");
        assert_eq!(SourceKind::CommonJs.file_name(), "main.cjs");
        assert_eq!(SourceKind::EsModule.language(), Language::JavaScript);
    }
}
