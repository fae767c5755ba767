//! Files handed in with a run: written under the working directory before the code
//! starts, so a snippet can read the data it is about without the agent pasting it
//! into the code.
//!
//! Only plain relative paths are taken: no absolute path, no `.` or `..` part, nothing
//! that could name a place outside `/sandbox`; the program's own file names are
//! reserved. The bootstrap inside writes them (it never follows a link: there are none
//! in a fresh working directory, and it creates every parent itself).

use crate::analysis::SourceKind;
use crate::policy::ByteSize;

/// Most files one run takes.
pub const MOST_FILES: usize = 100;
/// Longest path accepted, in bytes.
const LONGEST_PATH: usize = 1024;

/// One file as given: a path relative to `/sandbox`, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Checks `files` for a run: plain relative paths, none twice, none of the program's own
/// names, and no more bytes in all than `limit` (the working directory's size).
pub fn check(files: &[InputFile], limit: ByteSize) -> Result<(), String> {
    if files.len() > MOST_FILES {
        return Err(format!(
            "{} files were given; at most {MOST_FILES} are taken",
            files.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut total: u64 = 0;
    for file in files {
        check_path(&file.path)?;
        if !seen.insert(file.path.as_str()) {
            return Err(format!("the file `{}` is given twice", file.path));
        }
        total += file.bytes.len() as u64;
    }
    if total > limit.bytes() {
        return Err(format!(
            "the files come to {total} bytes, more than the sandbox's working directory \
             holds ({limit}, the policy's `limits.tmpfs`)"
        ));
    }
    Ok(())
}

fn check_path(path: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("the file path `{}` {why}", shown(path)));
    if path.is_empty() {
        return refuse("is empty");
    }
    if path.len() > LONGEST_PATH {
        return refuse("is too long");
    }
    if path.starts_with('/') {
        return refuse("is absolute: give a path relative to the working directory, /sandbox");
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return refuse("has a backslash or a control character in it");
    }
    for part in path.split('/') {
        match part {
            "" => return refuse("has an empty part (`//`, or a trailing `/`)"),
            "." | ".." => {
                return refuse("has a `.` or `..` part: only plain relative paths are taken")
            }
            _ => {}
        }
    }
    let reserved = [
        SourceKind::Python,
        SourceKind::CommonJs,
        SourceKind::EsModule,
    ]
    .map(SourceKind::file_name);
    if reserved.contains(&path) {
        return refuse("is the name the program itself is written to");
    }
    Ok(())
}

/// A path as it can be shown in a message: at most 80 characters.
fn shown(path: &str) -> String {
    let mut shown: String = path.chars().take(80).collect();
    if shown.len() < path.len() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: usize) -> InputFile {
        InputFile {
            path: path.into(),
            bytes: vec![b'x'; size],
        }
    }

    #[test]
    fn plain_relative_paths_are_taken() {
        let files = [
            file("data.csv", 10),
            file("in/nested/deep.json", 5),
            file(".hidden", 1),
        ];
        assert_eq!(check(&files, ByteSize(1024)), Ok(()));
    }

    #[test]
    fn every_path_that_could_leave_the_sandbox_is_refused() {
        for (path, why) in [
            ("/etc/passwd", "absolute"),
            ("../x", "`..`"),
            ("a/../../x", "`..`"),
            ("./x", "`.`"),
            ("a//b", "empty part"),
            ("dir/", "empty part"),
            ("", "empty"),
            ("a\\..\\b", "backslash"),
            ("a\nb", "control"),
            ("main.py", "program itself"),
            ("main.mjs", "program itself"),
        ] {
            let error = check(&[file(path, 1)], ByteSize(1024)).unwrap_err();
            assert!(error.contains(why), "{path:?}: {error}");
        }
        let long = "a/".repeat(600) + "b";
        assert!(check(&[file(&long, 1)], ByteSize(1024))
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn duplicates_counts_and_sizes_are_capped() {
        let twice = [file("a", 1), file("a", 1)];
        assert!(check(&twice, ByteSize(1024)).unwrap_err().contains("twice"));
        let big = [file("a", 600), file("b", 600)];
        assert!(check(&big, ByteSize(1024))
            .unwrap_err()
            .contains("limits.tmpfs"));
        let many: Vec<InputFile> = (0..=MOST_FILES)
            .map(|i| file(&format!("f{i}"), 0))
            .collect();
        assert!(check(&many, ByteSize(1024))
            .unwrap_err()
            .contains("at most 100"));
    }
}
