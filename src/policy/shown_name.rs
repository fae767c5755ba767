//! How a policy file is named in results, errors, tool descriptions and logs: as the
//! user would write it from where they stand, never by the absolute host path (which a
//! server would hand to the model's provider with every result).
//!
//! - a path given relative (`bad/x.yaml`) is shown as given, `.` and `..` folded;
//! - a file inside the working directory by its path from there (`policies/p.yaml`);
//! - a file in a folder above it (the project file found from a subfolder) by the
//!   climb to it (`../.code-sandbox.yaml`), and one beside such a folder likewise
//!   (`../team/p.yaml`), as long as the two share more than the filesystem's root;
//! - anything else by its file name alone.

use std::path::{Component, Path, PathBuf};

/// The name of `path` for a process working in `cwd` (see the module docs).
pub fn shown_name(path: &Path, cwd: &Path) -> String {
    let path = fold_dots(path);
    if path.is_relative() {
        return slashes(&path);
    }
    if let Ok(relative) = path.strip_prefix(cwd) {
        if !relative.as_os_str().is_empty() {
            return slashes(relative);
        }
    }
    let cwd = fold_dots(cwd);
    let shared = path
        .components()
        .zip(cwd.components())
        .take_while(|(a, b)| a == b)
        .count();
    let past_root = path
        .components()
        .take(shared)
        .filter(|part| matches!(part, Component::Normal(_)))
        .count();
    if past_root > 0 {
        let mut climb = PathBuf::new();
        for _ in cwd.components().skip(shared) {
            climb.push("..");
        }
        climb.extend(path.components().skip(shared));
        return slashes(&climb);
    }
    path.file_name().map_or_else(
        || slashes(&path),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// `a/./b/../c` as `a/c`, without touching the filesystem (links are not followed, so
/// the name stays the one the user gave); a leading `..` of a relative path stays.
fn fold_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

fn slashes(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_file_is_named_without_the_host_path() {
        let project = Path::new("/home/someone/project");
        let inside = project.join("sub/../.code-sandbox.yaml");
        assert_eq!(shown_name(&inside, project), ".code-sandbox.yaml");
        assert_eq!(
            shown_name(&project.join("policies/p.yaml"), project),
            "policies/p.yaml"
        );
        assert_eq!(shown_name(Path::new("/etc/team/p.yaml"), project), "p.yaml");
    }

    #[test]
    fn a_file_above_or_beside_the_working_directory_is_named_by_the_climb() {
        let sub = Path::new("/home/someone/project/sub");
        assert_eq!(
            shown_name(Path::new("/home/someone/project/.code-sandbox.yaml"), sub),
            "../.code-sandbox.yaml"
        );
        assert_eq!(
            shown_name(Path::new("/home/someone/team/p.yaml"), sub),
            "../../team/p.yaml"
        );
    }

    #[test]
    fn a_relative_path_is_shown_as_given() {
        let cwd = Path::new("/home/someone/project");
        assert_eq!(shown_name(Path::new("bad/x.yaml"), cwd), "bad/x.yaml");
        assert_eq!(shown_name(Path::new("./bad/./x.yaml"), cwd), "bad/x.yaml");
        assert_eq!(shown_name(Path::new("../x.yaml"), cwd), "../x.yaml");
        assert_eq!(shown_name(Path::new("a/../../x.yaml"), cwd), "../x.yaml");
    }
}
