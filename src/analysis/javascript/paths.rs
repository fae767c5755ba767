//! Path literals handed to `fs` calls.
//!
//! Why: the sandbox only has `/sandbox` and `/tmp` writable, and reading `/etc/passwd`
//! or removing `/home` is worth a warning before it runs. Every constant path (after
//! folding) given to an fs operation becomes a `PathLiteral`; the engine decides
//! whether it is outside the allowed directories (relative paths are reported too).

use super::super::FactKind;
use super::model::ScopeId;
use super::Analyzer;
use tree_sitter::Node;

/// How many leading path arguments an fs operation takes, by member name.
fn path_arguments(member: &str) -> usize {
    let base = member.strip_suffix("Sync").unwrap_or(member);
    match base {
        "copyFile" | "cp" | "rename" | "symlink" | "link" => 2,
        "readFile" | "writeFile" | "appendFile" | "unlink" | "rm" | "rmdir" | "mkdir"
        | "mkdtemp" | "readdir" | "opendir" | "open" | "stat" | "lstat" | "statfs" | "access"
        | "exists" | "createReadStream" | "createWriteStream" | "chmod" | "chown" | "lchown"
        | "lchmod" | "truncate" | "utimes" | "lutimes" | "readlink" | "realpath" | "watch"
        | "watchFile" | "unwatchFile" => 1,
        _ => 0,
    }
}

/// The fs member an operation name calls (`fs.readFileSync`, `fs.promises.readFile`,
/// `fs/promises.readFile`), if it is one.
fn fs_member(name: &str) -> Option<&str> {
    let member = name
        .strip_prefix("fs.promises.")
        .or_else(|| name.strip_prefix("fs/promises."))
        .or_else(|| name.strip_prefix("fs."))?;
    (!member.contains('.')).then_some(member)
}

impl<'a> Analyzer<'a> {
    /// A `PathLiteral` for every constant path argument of an fs call.
    pub fn emit_paths(&mut self, op: &str, args: Option<Node<'a>>, scope: ScopeId) {
        let Some(member) = fs_member(op) else {
            return;
        };
        let Some(args) = args else {
            return;
        };
        for n in 0..path_arguments(member) {
            let Some(arg) = self.argument(args, n) else {
                break;
            };
            let (paths, _) = self.eval(arg, scope, 0).strings();
            for path in paths {
                self.push(
                    arg,
                    FactKind::PathLiteral {
                        op: op.to_string(),
                        path,
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_operations() {
        assert_eq!(fs_member("fs.readFileSync"), Some("readFileSync"));
        assert_eq!(fs_member("fs.promises.readFile"), Some("readFile"));
        assert_eq!(fs_member("fs/promises.rm"), Some("rm"));
        assert_eq!(fs_member("fs.readFileSync.call"), None);
        assert_eq!(fs_member("path.join"), None);
        assert_eq!(path_arguments("renameSync"), 2);
        assert_eq!(path_arguments("readFile"), 1);
        assert_eq!(path_arguments("constants"), 0);
    }
}
