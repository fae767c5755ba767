//! The names an export never writes unless the policy lists them (`outputs.export.allow`):
//! files that another program on the host reads as its configuration or runs as code
//! without anyone asking it to. A run chooses the names of the files it leaves behind,
//! so an export into a project could otherwise plant a git hook, an editor task, an
//! agent's settings or instructions, a pytest plugin or this server's own next policy.
//!
//! The list is data ([`PROTECTED`]): each entry is a pattern for one part of a path and
//! the reason, which the refusal quotes. A part matches after [`fold`], which undoes the
//! spellings a filesystem or a reader would treat as the same name: compatibility forms
//! (a full-width `．git` is `.git`), characters that macOS's filesystems ignore (a
//! zero-width joiner in `.g‌it`), case (`.GIT`, `CONFTEST.PY` on a case-insensitive
//! disk), and the trailing dots and spaces Windows drops. Refusing a lookalike that
//! would have been harmless costs little; writing the real name costs the host.

use super::glob::Glob;
use unicode_normalization::UnicodeNormalization;

/// Patterns for one part of a path (compared with its [`fold`]), and why each is
/// refused. `*` matches any run of characters.
pub const PROTECTED: &[(&str, &str)] = &[
    (
        ".*",
        "a dot-name: git hooks and settings, editor, agent and shell settings \
         (.vscode, .claude, .mcp.json, .envrc) and this server's policy are dot-names",
    ),
    (
        "conftest.py",
        "pytest imports it from every folder it collects tests in",
    ),
    (
        "sitecustomize.py",
        "Python imports it at start from any folder on its path",
    ),
    (
        "usercustomize.py",
        "Python imports it at start from any folder on its path",
    ),
    (
        "*.pth",
        "Python runs its `import` lines at start from a site-packages folder",
    ),
    (
        "__pycache__",
        "Python runs the compiled code cached there instead of the source",
    ),
    (
        "*.pyc",
        "Python runs compiled code in place of the source it was compiled from",
    ),
    (
        "node_modules",
        "Node loads the packages in it before any other",
    ),
    (
        "package.json",
        "npm runs the scripts it names (install, test, prepare …)",
    ),
    ("setup.py", "pip and other build tools run it"),
    (
        "pyproject.toml",
        "pip and other tools run the build backend and plugins it names",
    ),
    (
        "setup.cfg",
        "Python build and test tools read their settings and plugins from it",
    ),
    (
        "tox.ini",
        "tox and pytest read the commands and plugins they run from it",
    ),
    ("pytest.ini", "pytest reads the plugins it loads from it"),
    ("noxfile.py", "nox runs it"),
    ("makefile", "make runs it"),
    ("gnumakefile", "make runs it"),
    ("*.mk", "make includes it"),
    ("justfile", "just runs it"),
    ("cargo.toml", "cargo runs the build scripts it names"),
    ("build.rs", "cargo runs it when it builds the crate"),
    (
        "*.code-workspace",
        "VS Code runs the tasks and loads the settings in it",
    ),
    (
        "agents.md",
        "coding agents read it as instructions for the project",
    ),
    (
        "claude.md",
        "coding agents read it as instructions for the project",
    ),
    (
        "gemini.md",
        "coding agents read it as instructions for the project",
    ),
    (
        "*~[0-9]*",
        "a short name of this form (Windows 8.3) can be another name for a protected file",
    ),
];

/// Why `path` (a plain relative path, `/`-separated) may not be exported, when it may
/// not: the protected pattern a part of it matches, unless one of `allowed` (the
/// policy's `outputs.export.allow` globs) matches the whole folded path.
pub fn refusal(path: &str, allowed: &[String]) -> Option<String> {
    let folded: Vec<String> = path.split('/').map(fold).collect();
    let (part, (pattern, why)) = folded.iter().find_map(|part| {
        PROTECTED
            .iter()
            .find(|(pattern, _)| matches_part(pattern, part))
            .map(|entry| (part, entry))
    })?;
    let whole = folded.join("/");
    if allowed
        .iter()
        .any(|glob| Glob::new(&fold_glob(glob)).matches(&whole))
    {
        return None;
    }
    let spelled = if part.as_str() == *pattern {
        format!("`{pattern}`")
    } else {
        format!("`{part}` (matching `{pattern}`)")
    };
    Some(format!(
        "{spelled} is a protected name: {why}. List it in outputs.export.allow to export it \
         anyway"
    ))
}

/// Whether `glob` can be an entry of `outputs.export.allow`: a relative path pattern
/// inside the export folder.
pub fn check_allow(glob: &str) -> Result<(), String> {
    if glob.is_empty() {
        return Err("is empty".into());
    }
    if glob.starts_with('/') || glob.contains('\\') {
        return Err("must be a path relative to the export folder, with `/` between parts".into());
    }
    if glob.split('/').any(|part| matches!(part, "" | "." | "..")) {
        return Err("has an empty, `.` or `..` part".into());
    }
    Ok(())
}

/// `*~[0-9]*` is the one pattern with a character class; the rest are plain globs.
fn matches_part(pattern: &str, part: &str) -> bool {
    if pattern == "*~[0-9]*" {
        return part
            .as_bytes()
            .windows(2)
            .any(|pair| pair[0] == b'~' && pair[1].is_ascii_digit());
    }
    Glob::new(pattern).matches(part)
}

/// One part of a path as the name it stands for: NFKC, without the characters macOS's
/// filesystems ignore and the ones Unicode calls default-ignorable, lower case, without
/// trailing dots and spaces.
pub fn fold(part: &str) -> String {
    let mut folded: String = part
        .nfkc()
        .filter(|c| !is_ignorable(*c))
        .flat_map(char::to_lowercase)
        .collect();
    // NFKC after lower-casing can make new compatibility forms; once more settles it.
    folded = folded.nfkc().filter(|c| !is_ignorable(*c)).collect();
    let kept = folded.trim_end_matches(['.', ' ']).len();
    // A part of dots alone (`..`, `...`) stays as it is: it is a dot-name either way.
    if kept > 0 {
        folded.truncate(kept);
    }
    folded
}

/// An allow glob folded the way the names it is matched against are, `*` kept.
fn fold_glob(glob: &str) -> String {
    glob.split('/')
        .map(|part| {
            if part.contains('*') {
                part.to_lowercase()
            } else {
                fold(part)
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Default-ignorable code points (Unicode's list, the ones HFS+ drops from names among
/// them): invisible, so a name holding one reads as the name without it.
fn is_ignorable(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(path: &str) -> bool {
        refusal(path, &[]).is_some()
    }

    #[test]
    fn what_tools_read_or_run_is_refused_at_any_depth() {
        for path in [
            ".git/hooks/pre-commit",
            ".git/info/attributes",
            ".claude/settings.json",
            ".mcp.json",
            ".vscode/tasks.json",
            ".envrc",
            "conftest.py",
            "tests/conftest.py",
            "sitecustomize.py",
            "lib/python3.12/site-packages/evil.pth",
            ".code-sandbox.yaml",
            "sub/.code-sandbox.yaml",
            "Makefile",
            "pkg/package.json",
            "__pycache__/mod.cpython-312.pyc",
            "node_modules/left-pad/index.js",
            "AGENTS.md",
        ] {
            assert!(refused(path), "{path} should be refused");
        }
        for path in [
            "report.txt",
            "out/data.csv",
            "figure-1.png",
            "notes/conftest.txt",
        ] {
            assert!(!refused(path), "{path} should be exported");
        }
    }

    #[test]
    fn lookalikes_fold_to_the_name_they_stand_for() {
        for path in [
            ".GIT/hooks/pre-commit",
            "CONFTEST.PY",
            "Conftest.Py",
            "\u{ff0e}git/config",  // a full-width full stop
            "\u{200c}.git/config", // a zero-width non-joiner first (HFS+ drops it)
            "conf\u{200b}test.py", // a zero-width space inside
            "conftest.py.",        // Windows drops trailing dots
            "conftest.py  ",       // …and spaces
            "MAKEFILE",
            "\u{1d5ac}akefile",       // a mathematical sans-serif M
            "GIT~1/hooks/pre-commit", // an 8.3 short name
            "lib/evil.PTH",
            "K\u{212a}.pth", // a Kelvin sign folds to k
        ] {
            assert!(refused(path), "{path:?}");
        }
    }

    #[test]
    fn a_listed_name_is_exported_and_the_refusal_says_how_to_list_it() {
        let why = refusal(".github/workflows/ci.yml", &[]).unwrap();
        assert!(why.contains("outputs.export.allow"), "{why}");
        assert!(why.contains("dot-name"), "{why}");
        let allowed = vec![".github/*".to_string()];
        assert!(refusal(".github/workflows/ci.yml", &allowed).is_none());
        assert!(refusal(".GitHub/workflows/ci.yml", &allowed).is_none());
        assert!(refusal(".git/hooks/pre-commit", &allowed).is_some());
        let allowed = vec!["Makefile".to_string()];
        assert!(refusal("Makefile", &allowed).is_none());
        assert!(refusal("sub/Makefile", &allowed).is_some());
    }

    #[test]
    fn folding_keeps_plain_names_and_dot_runs() {
        assert_eq!(fold("Report.CSV"), "report.csv");
        assert_eq!(fold(".."), "..");
        assert_eq!(fold("a. ."), "a");
    }
}
