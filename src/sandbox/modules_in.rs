//! Files handed in with a run that are modules of the program (`helpers.py` beside a
//! Python snippet, `lib.js` beside a JavaScript one): the static check reads them as
//! it reads the program, its findings naming the file and line, and the run-time
//! layers then let the program import them, as long as what is imported is what was
//! checked (its SHA-256, handed to the box's guard with the program).
//!
//! Why a digest and not the name: a file in the working directory can be rewritten by
//! the program before it imports it; the guard judges the source it is about to
//! compile, never the path it came from.

use super::files_in::InputFile;
use crate::analysis::Language;
use crate::policy::{Finding, InputError, PolicyEngine};
use sha2::{Digest, Sha256};

/// The environment variable that carries the digests to the guard, which takes it out
/// of the environment before the program's first line.
pub const DIGESTS_VARIABLE: &str = "CODE_SANDBOX_MODULES_IN";

/// Whether `path` is a module file of `language`.
fn is_module(path: &str, language: Language) -> bool {
    let suffixes: &[&str] = match language {
        Language::Python => &[".py"],
        Language::JavaScript => &[".js", ".cjs", ".mjs"],
    };
    suffixes.iter().any(|suffix| path.ends_with(suffix))
}

/// The findings of each module file of `language` among `files`, each naming its file.
pub fn check(
    engine: &PolicyEngine,
    language: Language,
    files: &[InputFile],
) -> Result<Vec<Finding>, InputError> {
    let mut findings = Vec::new();
    for file in files.iter().filter(|f| is_module(&f.path, language)) {
        let report = engine.check_bytes(language, &file.bytes)?;
        findings.extend(report.findings.into_iter().map(|finding| Finding {
            file: Some(file.path.clone()),
            ..finding
        }));
    }
    Ok(findings)
}

/// `{"/sandbox/helpers.py": "<sha256 hex>", …}` for the module files of `language`
/// among `files` under `workdir`, or `None` when there are none.
pub fn digests(workdir: &str, language: Language, files: &[InputFile]) -> Option<String> {
    let map: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .filter(|f| is_module(&f.path, language))
        .map(|f| {
            let digest = Sha256::digest(&f.bytes);
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            (
                format!("{}/{}", workdir.trim_end_matches('/'), f.path),
                hex.into(),
            )
        })
        .collect();
    (!map.is_empty()).then(|| serde_json::Value::Object(map).to_string())
}

/// How the program may name the JavaScript modules among `files` when it loads them
/// (`./lib/a.js`, `./lib/a`, `/sandbox/lib/a.js`); none for Python, which imports by
/// module name.
pub fn specifiers(language: Language, files: &[InputFile]) -> Vec<String> {
    if language != Language::JavaScript {
        return Vec::new();
    }
    let workdir = super::layout::WORKDIR;
    let mut names = Vec::new();
    for file in files.iter().filter(|f| is_module(&f.path, language)) {
        names.push(format!("./{}", file.path));
        names.push(format!("{workdir}/{}", file.path));
        if let Some(stem) = file.path.strip_suffix(".js") {
            names.push(format!("./{stem}"));
        }
    }
    names
}

/// The program's environment with the digests of the module files among `files`
/// (none: unchanged). A variable of that name the host passed is replaced.
pub fn with_digests(
    env: &[(String, String)],
    language: Language,
    files: &[InputFile],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(name, _)| name != DIGESTS_VARIABLE)
        .cloned()
        .collect();
    if let Some(json) = digests(super::layout::WORKDIR, language, files) {
        env.push((DIGESTS_VARIABLE.to_string(), json));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn file(path: &str, text: &str) -> InputFile {
        InputFile {
            path: path.into(),
            bytes: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn module_files_are_checked_and_their_findings_name_them() {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        let files = [
            file("data.csv", "import os\nos.system('x')"),
            file(
                "lib/helpers.py",
                "def double(x):\n    return 2 * x\n\nimport os\nos.system('id')\n",
            ),
        ];
        let findings = check(&engine, Language::Python, &files).unwrap();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].file.as_deref(), Some("lib/helpers.py"));
        assert_eq!(findings[0].line, 5);
        assert_eq!(findings[0].rule, "process-exec");
        assert!(check(&engine, Language::JavaScript, &files)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn digests_name_each_module_under_the_working_directory() {
        let files = [file("a.py", "x = 1\n"), file("b.txt", "x")];
        let json = digests("/sandbox", Language::Python, &files).unwrap();
        let map: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            map["/sandbox/a.py"],
            "9e26bf369911c45c243c684147b23fc9e1dcfcf257d299a1c632016a6fcd33f4"
        );
        assert_eq!(map.as_object().unwrap().len(), 1);
        assert!(digests("/sandbox", Language::JavaScript, &files).is_none());
    }
}
