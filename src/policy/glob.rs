//! Qualified-name globs: `subprocess.*`, `os.exec*`, `eval`. `*` matches any run of
//! characters, dots and slashes included, so `subprocess.*` also covers
//! `subprocess.Popen.communicate`. No other character is special.

#[derive(Debug, Clone)]
pub struct Glob {
    pattern: String,
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        Glob {
            pattern: pattern.to_string(),
        }
    }

    pub fn matches(&self, text: &str) -> bool {
        wildcard_match(self.pattern.as_bytes(), text.as_bytes())
    }

    /// A module pattern covers the module and everything below it: `os` matches `os`,
    /// `os.path` and, for JavaScript subpaths, `fs` matches `fs/promises`.
    pub fn matches_module(&self, module: &str) -> bool {
        self.matches(module)
            || module
                .match_indices(['.', '/'])
                .any(|(i, _)| self.matches(&module[..i]))
    }

    /// True when the pattern could match some member of `name` (`os.exec*` could match a
    /// member of `os`): used when a whole module object escapes the analysis.
    pub fn could_match_member_of(&self, name: &str) -> bool {
        let literal_prefix = self.pattern.split('*').next().unwrap_or_default();
        let member_prefix = format!("{name}.");
        if self.pattern.contains('*') {
            literal_prefix.starts_with(&member_prefix)
                || (!literal_prefix.is_empty() && member_prefix.starts_with(literal_prefix))
        } else {
            literal_prefix.starts_with(&member_prefix)
        }
    }
}

/// Iterative wildcard matching with single-star backtracking: linear in practice.
fn wildcard_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(Glob::new("subprocess.*").matches("subprocess.run"));
        assert!(Glob::new("subprocess.*").matches("subprocess.Popen.wait"));
        assert!(!Glob::new("subprocess.*").matches("subprocess"));
        assert!(Glob::new("os.exec*").matches("os.execvp"));
        assert!(!Glob::new("os.exec*").matches("os.environ"));
        assert!(Glob::new("eval").matches("eval"));
        assert!(!Glob::new("eval").matches("evaluate"));
        assert!(Glob::new("*").matches(""));
    }

    #[test]
    fn modules_cover_submodules() {
        assert!(Glob::new("urllib.request").matches_module("urllib.request"));
        assert!(!Glob::new("urllib.request").matches_module("urllib"));
        assert!(Glob::new("fs").matches_module("fs/promises"));
        assert!(Glob::new("ctypes").matches_module("ctypes.util"));
        assert!(!Glob::new("os").matches_module("osx"));
    }

    #[test]
    fn member_patterns() {
        assert!(Glob::new("os.system").could_match_member_of("os"));
        assert!(Glob::new("os.exec*").could_match_member_of("os"));
        assert!(Glob::new("subprocess.*").could_match_member_of("subprocess"));
        assert!(!Glob::new("os.system").could_match_member_of("json"));
        assert!(!Glob::new("eval").could_match_member_of("os"));
        assert!(!Glob::new("ossy.x").could_match_member_of("os"));
    }
}
