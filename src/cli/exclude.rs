//! `check --exclude GLOB`: files and folders to leave out. A pattern without `/`
//! matches a file or folder of that name anywhere (`tests`, `*_pb2.py`); one with `/`
//! matches a path from where `check` runs (`vendor/*.js`, `src/**/generated`), or an
//! absolute path when it is one. `*` and `?` stay within a name, `**` crosses folders.
//! A folder that matches is left out whole. Files named on the command line are
//! excluded too, so a pre-commit hook that passes every changed file honours it.

use std::path::{Component, Path};

/// The patterns of one run.
#[derive(Debug, Default)]
pub struct Excludes {
    patterns: Vec<Vec<char>>,
}

impl Excludes {
    pub fn new(globs: &[String]) -> Excludes {
        let patterns = globs
            .iter()
            .map(|glob| {
                let glob = glob.trim_end_matches('/');
                glob.strip_prefix("./").unwrap_or(glob).chars().collect()
            })
            .filter(|pattern: &Vec<char>| !pattern.is_empty())
            .collect();
        Excludes { patterns }
    }

    /// Whether `path` (as given or found, relative to the working directory or
    /// absolute), or a folder it is in, is excluded.
    pub fn excludes(&self, path: &Path) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        let written = super::display_path(path);
        let absolute = std::env::current_dir()
            .map(|cwd| super::display_path(&cwd.join(path)))
            .unwrap_or_default();
        self.patterns.iter().any(|pattern| {
            if pattern.contains(&'/') {
                let target = if pattern.first() == Some(&'/') {
                    &absolute
                } else {
                    &written
                };
                prefixes(target).any(|prefix| matches(pattern, &prefix.chars().collect::<Vec<_>>()))
            } else {
                path.components().any(|part| match part {
                    Component::Normal(name) => {
                        matches(pattern, &name.to_string_lossy().chars().collect::<Vec<_>>())
                    }
                    _ => false,
                })
            }
        })
    }
}

/// `a/b/c`, then `a/b`, then `a`: the path and the folders it is in.
fn prefixes(path: &str) -> impl Iterator<Item = &str> {
    std::iter::once(path).chain(path.rmatch_indices('/').map(|(at, _)| &path[..at]))
}

/// Whether `text` matches the glob `pattern` whole.
fn matches(pattern: &[char], text: &[char]) -> bool {
    match pattern {
        [] => text.is_empty(),
        ['*', '*', '/', rest @ ..] => {
            // `**/` is zero or more whole folders.
            matches(rest, text)
                || (0..text.len()).any(|at| text[at] == '/' && matches(rest, &text[at + 1..]))
        }
        ['*', '*', rest @ ..] => (0..=text.len()).any(|at| matches(rest, &text[at..])),
        ['*', rest @ ..] => (0..=text.len())
            .take_while(|&at| at == 0 || text[at - 1] != '/')
            .any(|at| matches(rest, &text[at..])),
        ['?', rest @ ..] => text.first().is_some_and(|&c| c != '/') && matches(rest, &text[1..]),
        [c, rest @ ..] => text.first() == Some(c) && matches(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excluded(globs: &[&str], path: &str) -> bool {
        let globs: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
        Excludes::new(&globs).excludes(Path::new(path))
    }

    #[test]
    fn names_match_anywhere_and_paths_from_the_working_directory() {
        assert!(excluded(&["tests"], "src/tests/a.py"));
        assert!(excluded(&["*_pb2.py"], "api/user_pb2.py"));
        assert!(!excluded(&["*_pb2.py"], "api/user.py"));
        assert!(excluded(&["vendor/*.js"], "vendor/x.js"));
        assert!(excluded(&["./vendor/*.js"], "./vendor/x.js"));
        assert!(
            !excluded(&["vendor/*.js"], "vendor/deep/x.js"),
            "* stays in a name"
        );
        assert!(excluded(&["vendor/**/*.js"], "vendor/deep/er/x.js"));
        assert!(
            excluded(&["vendor/**/*.js"], "vendor/x.js"),
            "**/ may be no folder"
        );
        assert!(
            excluded(&["src/gen"], "src/gen/deep/x.py"),
            "a folder whole"
        );
        assert!(!excluded(&["src/gen"], "src/generated.py"));
        assert!(excluded(&["?.py"], "a.py"));
        assert!(!excluded(&["?.py"], "ab.py"));
        assert!(!excluded(&[], "a.py"));
    }
}
