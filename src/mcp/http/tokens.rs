//! `--token-file`: the bearer tokens a team server accepts, one `NAME TOKEN [POLICY]`
//! per line (`#` comments and blank lines are skipped; CRLF line ends are fine).
//!
//! NAME is the principal the token proves (in the audit log, and what its limits are
//! kept by); TOKEN is what the client sends as `Authorization: Bearer TOKEN`; POLICY,
//! when given, is a policy file (relative to the token file) or a preset that this
//! principal's calls run under instead of the server's. A name may have several lines
//! (a new token next to the old one while clients move over); one token may not stand
//! for two lines.
//!
//! Only the SHA-256 of each token is kept. A presented token is hashed and compared with
//! every entry in constant time, all of them every time: how long a check takes says
//! nothing of how close a guess came. An error names the file and line and never
//! quotes a token.

use sha2::Digest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use subtle::ConstantTimeEq;

/// The shortest token accepted, in characters.
pub const MIN_TOKEN_LEN: usize = 16;
/// The longest principal name accepted, in characters.
const MAX_NAME_LEN: usize = 64;

/// One accepted token.
#[derive(Debug, Clone)]
pub struct TokenEntry {
    pub name: Arc<str>,
    /// The policy file or preset of this principal's calls, as written (a file is
    /// resolved against `dir`).
    pub policy: Option<String>,
    /// The line it was read from.
    pub line: usize,
    digest: [u8; 32],
}

/// The tokens of one reading of the file.
#[derive(Debug, Default)]
pub struct TokenTable {
    entries: Vec<TokenEntry>,
    /// The token file's directory, which relative policy paths start from.
    pub dir: PathBuf,
}

impl TokenTable {
    /// Parses the text of the token file `path`; every error found, each as
    /// `FILE:LINE: reason`.
    pub fn parse(text: &str, path: &Path) -> Result<TokenTable, Vec<String>> {
        let shown = path.display();
        let mut entries: Vec<TokenEntry> = Vec::new();
        let mut errors = Vec::new();
        let mut by_digest: HashMap<[u8; 32], usize> = HashMap::new();
        let mut policy_of: HashMap<Arc<str>, (Option<String>, usize)> = HashMap::new();
        for (index, raw) in text.split('\n').enumerate() {
            let number = index + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            let content = line.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = content.split_ascii_whitespace().collect();
            let at = |reason: String| format!("{shown}:{number}: {reason}");
            let (name, token, policy) = match fields.as_slice() {
                [name, token] => (*name, *token, None),
                [name, token, policy] => (*name, *token, Some(policy.to_string())),
                [_] => {
                    errors.push(at(
                        "one field where `NAME TOKEN` (and optionally a policy) belongs: a token \
                         without a name, or a name without a token"
                            .into(),
                    ));
                    continue;
                }
                _ => {
                    errors.push(at(format!(
                        "{} fields; a line is `NAME TOKEN` or `NAME TOKEN POLICY`",
                        fields.len()
                    )));
                    continue;
                }
            };
            if let Err(reason) = check_name(name) {
                errors.push(at(reason));
                continue;
            }
            if let Err(reason) = check_token(token) {
                errors.push(at(reason));
                continue;
            }
            let digest = digest(token);
            if let Some(first) = by_digest.get(&digest) {
                errors.push(at(format!(
                    "the same token as line {first}: each token proves one line's name"
                )));
                continue;
            }
            let name: Arc<str> = name.into();
            match policy_of.get(&name) {
                Some((earlier, first)) if *earlier != policy => errors.push(at(format!(
                    "`{name}` runs under {} here and under {} on line {first}: give every \
                     line of one name the same policy",
                    describe(&policy),
                    describe(earlier)
                ))),
                Some(_) => {}
                None => {
                    policy_of.insert(name.clone(), (policy.clone(), number));
                }
            }
            by_digest.insert(digest, number);
            entries.push(TokenEntry {
                name,
                policy,
                line: number,
                digest,
            });
        }
        if entries.is_empty() && errors.is_empty() {
            errors.push(format!(
                "{shown}: no tokens: write one `NAME TOKEN` per line (make a token with \
                 `openssl rand -hex 32`)"
            ));
        }
        if errors.is_empty() {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf();
            Ok(TokenTable { entries, dir })
        } else {
            Err(errors)
        }
    }

    /// The entry `presented` is the token of, if any. Every entry is compared, in
    /// constant time, whatever matches.
    pub fn find(&self, presented: &str) -> Option<&TokenEntry> {
        let presented = digest(presented);
        let mut found = None;
        for entry in &self.entries {
            let same: bool = entry.digest.ct_eq(&presented).into();
            if same {
                found = Some(entry);
            }
        }
        found
    }

    pub fn entries(&self) -> &[TokenEntry] {
        &self.entries
    }
}

/// The token file, re-read on demand (SIGHUP); a reading with errors leaves the
/// tokens of the last good one in force.
pub struct TokenFile {
    path: PathBuf,
    current: RwLock<Arc<TokenTable>>,
}

impl TokenFile {
    /// Reads `path`; its errors, when it has some.
    pub fn open(path: &Path) -> Result<TokenFile, Vec<String>> {
        let table = read(path)?;
        Ok(TokenFile {
            path: path.to_path_buf(),
            current: RwLock::new(Arc::new(table)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tokens in force.
    pub fn table(&self) -> Arc<TokenTable> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the file again and puts it in force once `accept` (which checks what the
    /// lines name, e.g. their policies) agrees; otherwise the errors, and the tokens
    /// of the last good reading stay.
    pub fn reload(
        &self,
        accept: impl FnOnce(&TokenTable) -> Result<(), Vec<String>>,
    ) -> Result<Arc<TokenTable>, Vec<String>> {
        let table = read(&self.path)?;
        accept(&table)?;
        let table = Arc::new(table);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = table.clone();
        Ok(table)
    }
}

fn read(path: &Path) -> Result<TokenTable, Vec<String>> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| vec![format!("{shown}: cannot read: {e}")])?;
    let text = String::from_utf8(bytes).map_err(|_| vec![format!("{shown}: not UTF-8 text")])?;
    warn_if_others_can_read(path);
    TokenTable::parse(&text, path)
}

#[cfg(unix)]
fn warn_if_others_can_read(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                "the token file can be read by other users: `chmod 600` it"
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_others_can_read(_path: &Path) {}

fn digest(token: &str) -> [u8; 32] {
    sha2::Sha256::digest(token.as_bytes()).into()
}

fn describe(policy: &Option<String>) -> String {
    match policy {
        Some(policy) => format!("`{policy}`"),
        None => "the server's policy".into(),
    }
}

/// A name is what the audit log, the logs and the limits know a principal by.
fn check_name(name: &str) -> Result<(), String> {
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!("the name is longer than {MAX_NAME_LEN} characters"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._@+-".contains(c))
    {
        return Err(format!(
            "the name `{}` has characters other than letters, digits and `._@+-`",
            name.escape_default()
        ));
    }
    Ok(())
}

/// A token is sent in an HTTP header as RFC 6750's `b64token`; anything else could
/// never be presented, so it is a mistake in the file.
fn check_token(token: &str) -> Result<(), String> {
    let body = token.trim_end_matches('=');
    if body.is_empty()
        || !body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~+/".contains(c))
    {
        return Err(
            "the token has characters a bearer token cannot have (letters, digits and \
             `-._~+/`, then `=` padding)"
                .into(),
        );
    }
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(format!(
            "the token is {} characters; use at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 32`)",
            token.chars().count()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbb";

    fn parse(text: &str) -> Result<TokenTable, Vec<String>> {
        TokenTable::parse(text, Path::new("team/tokens"))
    }

    #[test]
    fn names_tokens_and_policies_are_read_with_crlf_comments_and_spaces() {
        let table = parse(&format!(
            "# the team\r\n\r\nalice {A}\r\n  bob\t{B}   strict  \r\n"
        ))
        .unwrap();
        assert_eq!(table.find(A).unwrap().name.as_ref(), "alice");
        let bob = table.find(B).unwrap();
        assert_eq!(bob.name.as_ref(), "bob");
        assert_eq!(bob.policy.as_deref(), Some("strict"));
        assert_eq!(bob.line, 4);
        assert_eq!(table.dir, Path::new("team"));
        // Not a prefix, not with the trailing spaces of the line, not another case.
        assert!(table.find(&A[..20]).is_none());
        assert!(table.find(&format!("{A} ")).is_none());
        assert!(table.find(&A.to_uppercase()).is_none());
        assert!(table.find("").is_none());
    }

    #[test]
    fn odd_lines_are_errors_with_their_line_and_never_their_token() {
        let errors = parse(&format!(
            "{A}\nalice {A}\ncarol {A}\nbob short\nbob {B} strict\nbob cccccccccccccccccccc permissive\nx y z w\nnäme {B}x\n"
        ))
        .unwrap_err();
        let text = errors.join("\n");
        assert!(text.contains("team/tokens:1: one field"), "{text}");
        assert!(
            text.contains("team/tokens:3: the same token as line 2"),
            "{text}"
        );
        assert!(
            text.contains("team/tokens:4: the token is 5 characters"),
            "{text}"
        );
        assert!(
            text.contains(
                "team/tokens:6: `bob` runs under `permissive` here and under `strict` on line 5"
            ),
            "{text}"
        );
        assert!(text.contains("team/tokens:7: 4 fields"), "{text}");
        assert!(text.contains("team/tokens:8: the name"), "{text}");
        assert!(
            !text.contains(A) && !text.contains(B) && !text.contains("short"),
            "{text}"
        );
    }

    #[test]
    fn a_name_may_have_two_tokens_and_an_empty_file_is_an_error() {
        let table = parse(&format!("alice {A}\nalice {B}\n")).unwrap();
        assert_eq!(table.find(A).unwrap().line, 1);
        assert_eq!(table.find(B).unwrap().line, 2);
        let errors = parse("# nobody yet\n").unwrap_err();
        assert!(errors[0].contains("no tokens"), "{errors:?}");
    }

    #[test]
    fn tokens_must_be_sendable_as_bearer_tokens() {
        assert!(check_token("abc def").is_err());
        assert!(check_token("ééééééééééééééééééé").is_err());
        assert!(check_token("abcdefghijklmnop\"").is_err());
        assert!(check_token("abcdefghijklmnopq==").is_ok());
        assert!(check_token("================").is_err());
        assert!(check_name("ci-bot@team.example").is_ok());
        assert!(check_name("a\u{1b}[31m").is_err());
    }

    /// Token timing, attacked: how long a lookup takes must not say which line a token
    /// is on, or whether it is on any. An early exit at the first match would make the
    /// first line's token answer ~2 000 times faster than the last one's in this
    /// table; the lookup compares every line, so the three take about as long. The
    /// bound is loose on purpose (medians of interleaved batches; a busy machine).
    #[test]
    fn how_long_a_lookup_takes_does_not_depend_on_which_token_matches() {
        let lines: String = (0..2_000).map(|i| format!("user{i} {i:032x}\n")).collect();
        let table = parse(&lines).unwrap();
        let (first, last, none) = (
            format!("{:032x}", 0),
            format!("{:032x}", 1_999),
            "f".repeat(32),
        );
        let time = |token: &str| {
            let started = std::time::Instant::now();
            for _ in 0..20 {
                std::hint::black_box(table.find(std::hint::black_box(token)));
            }
            started.elapsed()
        };
        let mut samples = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..15 {
            for (n, token) in [&first, &last, &none].into_iter().enumerate() {
                samples[n].push(time(token));
            }
        }
        let medians: Vec<f64> = samples
            .iter_mut()
            .map(|s| {
                s.sort();
                s[s.len() / 2].as_secs_f64()
            })
            .collect();
        assert_eq!(table.find(&first).unwrap().line, 1);
        assert_eq!(table.find(&last).unwrap().line, 2_000);
        for m in &medians[1..] {
            let ratio = medians[0] / m;
            assert!((0.33..3.0).contains(&ratio), "{medians:?}");
        }
    }

    #[test]
    fn a_reload_with_errors_keeps_the_tokens_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("alice {A}\n")).unwrap();
        let file = TokenFile::open(&path).unwrap();
        std::fs::write(&path, "alice\n").unwrap();
        assert!(file.reload(|_| Ok(())).is_err());
        assert!(file.table().find(A).is_some());
        std::fs::write(&path, format!("bob {B} nosuchpolicy\n")).unwrap();
        assert!(file.reload(|_| Err(vec!["no such policy".into()])).is_err());
        assert!(file.table().find(A).is_some());
        file.reload(|_| Ok(())).unwrap();
        assert!(file.table().find(A).is_none());
        assert_eq!(file.table().find(B).unwrap().name.as_ref(), "bob");
    }
}
