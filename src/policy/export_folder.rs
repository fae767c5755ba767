//! Where an export folder may be, judged when a policy loads: never where what the
//! sandbox writes would be read back as the server's own configuration or record.
//!
//! Refused, with the file, line and key: an export folder that is the project root (the
//! policy file's folder), that holds a policy file of the `extends` chain or the audit
//! log, or that overlaps an `rw` mount (either inside the other: the sandbox could then
//! plant links in the folder the exporter writes, or read back what it exports). For the
//! same reason an `rw` mount may not hold a policy file or the audit log: the sandbox
//! would rewrite the policy the next server runs, or the record of what it did.
//!
//! Paths are compared as the filesystem resolves them ([`real_path`]): through links,
//! `..`, and, on the systems whose disks ignore case by default, case.

use super::error::{error, PolicyError};
use super::schema::Policy;
use std::path::{Path, PathBuf};

/// Checks the export folder and the `rw` mounts of `policy`, loaded from `text` (the
/// file `label`, in the folder `project`), against the files they must never reach.
pub fn check(
    label: &str,
    text: &str,
    project: Option<&Path>,
    policy: &Policy,
) -> Result<(), PolicyError> {
    let audit = policy
        .audit
        .as_ref()
        .map(|audit| crate::policy::host_paths::real_path(&audit.file));
    let rw_mounts: Vec<(&str, PathBuf)> = policy
        .mounts
        .iter()
        .filter(|mount| mount.rw)
        .map(|mount| {
            (
                mount.source.as_str(),
                crate::policy::host_paths::real_path(&mount.host),
            )
        })
        .collect();
    for (source, host) in &rw_mounts {
        let at = super::host_paths::line_of(text, "source:", source);
        let fail = |what: String| {
            Err(error(
                label,
                at,
                format!(
                    "mounts[].source: the rw mount `{source}` holds {what}: code in the sandbox \
                     could rewrite it. Mount a folder without it, or mount it read-only"
                ),
            ))
        };
        if let Some(file) = policy.files.iter().find(|file| inside(file, host)) {
            return fail(format!("the policy file `{}`", shown(file, project)));
        }
        if audit.as_ref().is_some_and(|audit| inside(audit, host)) {
            return fail("the audit log".to_string());
        }
    }

    let Some(export) = &policy.outputs.export else {
        return Ok(());
    };
    let folder = crate::policy::host_paths::real_path(&export.dir);
    let at = export_path_line(text, &export.path);
    let fail = |why: String| {
        Err(error(
            label,
            at,
            format!("outputs.export.path: `{}` {why}", export.path),
        ))
    };
    if let Some(project) = project {
        if same(&folder, &crate::policy::host_paths::real_path(project)) {
            return fail(
                "is the project's own folder, where the policy and the files other tools \
                 read are: export into a folder of its own (`sandbox-output`, say)"
                    .into(),
            );
        }
    }
    if let Some(file) = policy.files.iter().find(|file| inside(file, &folder)) {
        return fail(format!(
            "holds the policy file `{}`: an export could replace it. Export into a folder \
             of its own",
            shown(file, project)
        ));
    }
    if audit.as_ref().is_some_and(|audit| inside(audit, &folder)) {
        return fail(
            "holds the audit log: an export could replace it. Export into a folder of its own"
                .into(),
        );
    }
    if let Some((source, _)) = rw_mounts
        .iter()
        .find(|(_, host)| inside(host, &folder) || inside(&folder, host))
    {
        return fail(format!(
            "overlaps the rw mount `{source}`: code in the sandbox could plant links where the \
             exporter writes. Export into a folder no rw mount reaches"
        ));
    }
    Ok(())
}

/// The line of `outputs.export.path`: the first `path:` line naming `value` at or
/// after the `export` key (an `audit.path` may name the same folder earlier).
fn export_path_line(text: &str, value: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let export = lines.iter().position(|line| line.contains("export"))?;
    lines[export..]
        .iter()
        .position(|line| line.contains("path:") && line.contains(value))
        .map(|offset| export + offset + 1)
}

/// Whether `path` is `folder` or under it (both real).
fn inside(path: &Path, folder: &Path) -> bool {
    let (path, folder) = (comparable(path), comparable(folder));
    Path::new(&path).starts_with(Path::new(&folder))
}

fn same(a: &Path, b: &Path) -> bool {
    comparable(a) == comparable(b)
}

/// Case is folded where the usual disks ignore it (macOS, Windows).
fn comparable(path: &Path) -> String {
    let text = path.to_string_lossy().into_owned();
    if cfg!(any(target_os = "macos", target_os = "windows")) {
        text.to_lowercase()
    } else {
        text
    }
}

/// A file named as the user knows it: relative to the project when inside it.
fn shown(file: &Path, project: Option<&Path>) -> String {
    project
        .map(crate::policy::host_paths::real_path)
        .and_then(|project| file.strip_prefix(project).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| {
            file.file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| file.to_path_buf())
        })
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_path_follows_links_and_keeps_what_does_not_exist_yet() {
        let root = tempfile::tempdir().unwrap();
        let real_root = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.path().join("a"), root.path().join("link")).unwrap();
        #[cfg(unix)]
        assert_eq!(
            crate::policy::host_paths::real_path(&root.path().join("link/new/deeper")),
            real_root.join("a/new/deeper")
        );
        assert_eq!(
            crate::policy::host_paths::real_path(&root.path().join("a/../b/./c")),
            real_root.join("b/c")
        );
        assert_eq!(
            crate::policy::host_paths::real_path(Path::new("/no-such-root-here/x")),
            PathBuf::from("/no-such-root-here/x")
        );
    }

    fn load(project: &Path, text: &str) -> Result<Policy, PolicyError> {
        let file = project.join(".code-sandbox.yaml");
        std::fs::write(&file, text).unwrap();
        super::super::PolicySource::File(file).load()
    }

    fn refused(project: &Path, text: &str) -> PolicyError {
        load(project, text).expect_err(text)
    }

    #[test]
    fn an_export_folder_that_reaches_the_policy_or_the_log_is_refused_at_load() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        let err = refused(project, "version: 1\noutputs:\n  export:\n    path: .\n");
        assert_eq!(err.line, Some(4), "{err}");
        assert!(
            err.message
                .starts_with("outputs.export.path: `.` is the project's own folder"),
            "{err}"
        );

        let above = project.parent().unwrap().to_string_lossy().into_owned();
        let err = refused(
            project,
            &format!("outputs:\n  export: {{ path: '{above}' }}\n"),
        );
        assert_eq!(err.line, Some(2), "{err}");
        assert!(
            err.message
                .contains("holds the policy file `.code-sandbox.yaml`"),
            "{err}"
        );

        let err = refused(
            project,
            "audit:\n  path: logs/audit.jsonl\noutputs:\n  export:\n    path: logs\n",
        );
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("holds the audit log"), "{err}");

        let fine = load(project, "outputs:\n  export:\n    path: sandbox-output\n").unwrap();
        let export = fine.outputs.export.unwrap();
        assert!(export.dir.is_absolute() && export.dir.ends_with("sandbox-output"));
        assert_eq!(fine.files.len(), 1);
    }

    #[test]
    fn an_export_folder_and_an_rw_mount_may_not_overlap() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        std::fs::create_dir_all(project.join("work/out")).unwrap();
        let inside = "mounts:\n  - source: ./work\n    target: /sandbox/work\n    rw: true\n\
                      outputs:\n  export:\n    path: work/out\n";
        let err = refused(project, inside);
        assert_eq!(err.line, Some(7), "{err}");
        assert!(
            err.message.contains("overlaps the rw mount `./work`"),
            "{err}"
        );

        let around = "mounts:\n  - source: work/out\n    target: /data\n    rw: true\n\
                      outputs:\n  export:\n    path: work\n";
        assert!(refused(project, around)
            .message
            .contains("overlaps the rw mount"));

        // Through a link: the mount names the same folder by another name.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(project.join("work"), project.join("alias")).unwrap();
            let linked = "mounts:\n  - source: alias\n    target: /data\n    rw: true\n\
                          outputs:\n  export:\n    path: work/out\n";
            assert!(refused(project, linked)
                .message
                .contains("overlaps the rw mount `alias`"));
        }

        let read_only = "mounts:\n  - source: ./work\n    target: /data\n\
                         outputs:\n  export:\n    path: work/out\n";
        assert!(load(project, read_only).is_ok());
    }

    #[test]
    fn an_rw_mount_may_not_hold_a_policy_file_or_the_audit_log() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        std::fs::create_dir_all(project.join("shared")).unwrap();
        let err = refused(
            project,
            "mounts:\n  - source: .\n    target: /sandbox/project\n    rw: true\n",
        );
        assert_eq!(err.line, Some(2), "{err}");
        assert!(
            err.message
                .contains("holds the policy file `.code-sandbox.yaml`"),
            "{err}"
        );

        std::fs::write(project.join("shared/base.yaml"), "version: 1\n").unwrap();
        let text = "extends: shared/base.yaml\nmounts:\n  - source: shared\n    target: /s\n    rw: true\n";
        let err = refused(project, text);
        assert!(
            err.message
                .contains("holds the policy file `shared/base.yaml`"),
            "{err}"
        );
        let text = "extends: shared/base.yaml\noutputs:\n  export:\n    path: shared\n";
        assert!(refused(project, text)
            .message
            .contains("`shared/base.yaml`"));

        let text = "audit:\n  path: shared/audit.jsonl\nmounts:\n  - source: shared\n    target: /s\n    rw: true\n";
        assert!(refused(project, text)
            .message
            .contains("holds the audit log"));
    }

    #[test]
    fn allow_globs_are_paths_inside_the_export_folder() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        let text = "outputs:\n  export:\n    path: out\n    allow: [.github/*, /etc/*]\n";
        let err = refused(project, text);
        assert_eq!(err.line, Some(4), "{err}");
        assert!(
            err.message.contains("outputs.export.allow: `/etc/*`"),
            "{err}"
        );
        let text = "outputs:\n  export:\n    path: out\n    allow: [.github/*]\n";
        assert_eq!(
            load(project, text).unwrap().outputs.export.unwrap().allow,
            [".github/*"]
        );
    }
}
