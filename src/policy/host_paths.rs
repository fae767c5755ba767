//! Host paths a policy names (`mounts:` sources, `outputs.export.path`, `audit.path`,
//! `certificates`): resolved
//! against the policy file's folder, the project. A relative path must stay inside the
//! project, through links too, so a committed policy cannot hand the sandbox a folder
//! elsewhere on the machine by a path that looks local; reaching outside takes an
//! absolute path, which a reader of the policy sees for what it is. The same holds for
//! the container engine's socket (whoever holds it holds the machine): it is mounted
//! only when named by an absolute path.

use super::error::{error, PolicyError};
use super::schema::{Audit, AuditFile, Certificates, Export, ExportFile, Mount, MountFile};
use std::path::{Component, Path, PathBuf};

/// The export folder of `outputs.export`. It need not exist yet (it is made on the
/// first export), but what exists of it must be a folder inside the project.
pub fn export(
    label: &str,
    text: &str,
    dir: Option<&Path>,
    export: ExportFile,
) -> Result<Export, PolicyError> {
    let at = line_of(text, "path:", &export.path);
    let resolved = resolve(label, at, dir, &export.path, "outputs.export.path")?;
    if resolved.exists() && !resolved.is_dir() {
        return Err(error(
            label,
            at,
            format!(
                "outputs.export.path: `{}` exists and is not a folder",
                export.path
            ),
        ));
    }
    let allow = export.allow.unwrap_or_default();
    for glob in &allow {
        if let Err(why) = super::protected_names::check_allow(glob) {
            return Err(error(
                label,
                line_of(text, "allow", glob),
                format!("outputs.export.allow: `{glob}` {why}"),
            ));
        }
    }
    Ok(Export {
        path: export.path,
        // Pinned now: the exporter walks this path without following a link, so a link
        // that appears on it later is refused rather than followed.
        dir: real_path(&resolved),
        overwrite: export.overwrite.unwrap_or(false),
        allow,
    })
}

/// The audit log's file. It is opened (and made) when a server starts, not here: a
/// `check` must not create it.
pub fn audit(
    label: &str,
    text: &str,
    dir: Option<&Path>,
    audit: AuditFile,
) -> Result<Audit, PolicyError> {
    let at = line_of(text, "path:", &audit.path);
    let file = resolve(label, at, dir, &audit.path, "audit.path")?;
    Ok(Audit {
        path: audit.path,
        file,
    })
}

/// The largest CA bundle read (the system bundle of a Debian host is about 200 KiB).
const MAX_CERTIFICATES: u64 = 4 * 1024 * 1024;

/// `certificates:`: a readable file of PEM certificates. It is handed to every box, so
/// a file with a private key in it is refused: a bundle never needs one, and a wrong
/// path must not give the sandbox a secret.
pub fn certificates(
    label: &str,
    text: &str,
    dir: Option<&Path>,
    path: String,
) -> Result<Certificates, PolicyError> {
    let at = line_of(text, "certificates:", &path);
    if path.trim().is_empty() || path.contains('\0') {
        return Err(error(
            label,
            at,
            format!("certificates: `{path}` is not a host path"),
        ));
    }
    let host = resolve(label, at, dir, &path, "certificates")?;
    let pem =
        bundle(&host).map_err(|why| error(label, at, format!("certificates: `{path}` {why}")))?;
    Ok(Certificates {
        source: path,
        host,
        pem,
    })
}

/// Reads a CA bundle, or says what is wrong with it (after its path, in a sentence).
pub fn bundle(file: &Path) -> Result<String, String> {
    let metadata = std::fs::metadata(file).map_err(|e| format!("cannot be read: {e}"))?;
    if !metadata.is_file() {
        return Err("is not a file".to_string());
    }
    if metadata.len() > MAX_CERTIFICATES {
        return Err(format!(
            "is {} bytes: more than a bundle of certificates ({MAX_CERTIFICATES} at most)",
            metadata.len()
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot be read: {e}"))?;
    if text.contains("PRIVATE KEY-----") {
        return Err("holds a private key: name a file of certificates alone".to_string());
    }
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err("holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".to_string());
    }
    Ok(text)
}

/// One entry of `mounts:`; its source must exist.
pub fn mount(
    label: &str,
    text: &str,
    dir: Option<&Path>,
    mount: MountFile,
) -> Result<Mount, PolicyError> {
    let at = line_of(text, "source:", &mount.source);
    let host = resolve(label, at, dir, &mount.source, "mounts[].source")?;
    let metadata = std::fs::metadata(&host).map_err(|e| {
        error(
            label,
            at,
            format!("mounts[].source: cannot use `{}`: {e}", mount.source),
        )
    })?;
    if !Path::new(&mount.source).is_absolute() && is_socket(&metadata) {
        return Err(error(
            label,
            at,
            format!(
                "mounts[].source: `{}` is a socket (a container engine's, perhaps, which \
                 would hand the sandbox the whole machine); name it by its absolute path \
                 if that is really meant",
                mount.source
            ),
        ));
    }
    Ok(Mount {
        source: mount.source,
        host,
        target: mount.target,
        rw: mount.rw.unwrap_or(false),
    })
}

/// `path` as the host sees it: absolute as written, or under the policy's folder and
/// staying there (after `..` and after links).
fn resolve(
    label: &str,
    at: Option<usize>,
    dir: Option<&Path>,
    path: &str,
    key: &str,
) -> Result<PathBuf, PolicyError> {
    let written = Path::new(path);
    if written.is_absolute() {
        return Ok(written.to_path_buf());
    }
    let Some(dir) = dir else {
        return Err(error(
            label,
            at,
            format!("{key}: a preset cannot name the relative host path `{path}`"),
        ));
    };
    // `x.yaml`'s folder is the empty path, which names the working directory.
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let project = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let joined = project.join(written);
    let outside = || {
        error(
            label,
            at,
            format!(
                "{key}: `{path}` leads outside the project ({}); a host path outside it \
                 must be written as an absolute path",
                project.display()
            ),
        )
    };
    let folded = fold(&joined).ok_or_else(outside)?;
    if !folded.starts_with(&project) {
        return Err(outside());
    }
    // What exists of the path is followed through its links. `folded` starts with the
    // project, so this stops there at the latest; a path with no existing ancestor at
    // all (a project folder that is gone) stops at its root.
    let mut existing = folded.as_path();
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    let real = std::fs::canonicalize(existing).unwrap_or_else(|_| existing.to_path_buf());
    if !real.starts_with(&project) {
        return Err(outside());
    }
    Ok(folded)
}

/// `path` with `.` and `..` folded away; `None` when `..` climbs past the root.
fn fold(path: &Path) -> Option<PathBuf> {
    let mut folded = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !folded.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => folded.push(other),
        }
    }
    Some(folded)
}

#[cfg(unix)]
fn is_socket(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    metadata.file_type().is_socket()
}

#[cfg(not(unix))]
fn is_socket(_: &std::fs::Metadata) -> bool {
    false
}

/// The line of the first `key` line that names `value`, for the error's location.
pub(super) fn line_of(text: &str, key: &str, value: &str) -> Option<usize> {
    text.lines()
        .position(|line| line.contains(key) && line.contains(value))
        .map(|index| index + 1)
}

/// `path` as the filesystem resolves it: what exists of it through its links, the rest
/// appended with `.` and `..` folded.
pub fn real_path(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::CurDir => {}
                    other => out.push(other),
                }
            }
            return out;
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            // Nothing of it exists, not even its root: as written.
            _ => return absolute,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount_file(source: &str) -> MountFile {
        MountFile {
            source: source.into(),
            target: "/data".into(),
            rw: None,
        }
    }

    #[test]
    fn a_relative_mount_stays_inside_the_project() {
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir(project.path().join("data")).unwrap();
        let text = "mounts:\n  - source: ./data\n    target: /data\n";
        let ok = mount("p.yaml", text, Some(project.path()), mount_file("./data")).unwrap();
        assert!(ok.host.ends_with("data") && !ok.rw);

        let text = "mounts:\n  - source: ../elsewhere\n    target: /data\n";
        let err = mount(
            "p.yaml",
            text,
            Some(project.path()),
            mount_file("../elsewhere"),
        )
        .unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("outside the project"), "{err}");
    }

    #[test]
    fn a_ca_bundle_must_be_certificates_and_nothing_secret() {
        let project = tempfile::tempdir().unwrap();
        let write =
            |name: &str, text: &str| std::fs::write(project.path().join(name), text).unwrap();
        let load = |name: &str| {
            let text = format!("version: 1\ncertificates: {name}\n");
            certificates("p.yaml", &text, Some(project.path()), name.to_string())
        };
        write(
            "ca.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        write(
            "key.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n\
             -----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\n",
        );
        write("notes.txt", "not a certificate\n");
        let ok = load("ca.pem").unwrap();
        assert_eq!(ok.source, "ca.pem");
        assert!(ok.host.ends_with("ca.pem"));
        for (name, why) in [
            ("key.pem", "holds a private key"),
            ("notes.txt", "holds no PEM certificate"),
            ("absent.pem", "cannot be read"),
            ("../ca.pem", "outside the project"),
        ] {
            let err = load(name).unwrap_err();
            assert_eq!(err.line, Some(2), "{name}: {err}");
            assert!(err.message.starts_with("certificates: "), "{name}: {err}");
            assert!(err.message.contains(why), "{name}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_out_of_the_project_and_a_relative_socket_are_refused() {
        let project = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), project.path().join("out")).unwrap();
        let err = mount("p.yaml", "", Some(project.path()), mount_file("out")).unwrap_err();
        assert!(err.message.contains("outside the project"), "{err}");

        let socket = project.path().join("engine.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let err = mount(
            "p.yaml",
            "",
            Some(project.path()),
            mount_file("engine.sock"),
        )
        .unwrap_err();
        assert!(err.message.contains("socket"), "{err}");
        let absolute = socket.to_string_lossy().into_owned();
        assert!(mount("p.yaml", "", Some(project.path()), mount_file(&absolute)).is_ok());
    }

    /// A policy named by a bare file name (`validate x.yaml`) has the empty path as its
    /// folder: a relative path there that does not exist yet once made this loop
    /// forever. Each call runs on a thread, so a regression fails instead of hanging.
    #[test]
    fn a_missing_relative_path_beside_a_bare_file_name_is_resolved_not_looped_on() {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let cwd = std::env::current_dir().unwrap();
            let bare = Path::new("");
            let audit_file = AuditFile {
                path: "not-yet/audit.jsonl".into(),
            };
            let audited = audit("x.yaml", "", Some(bare), audit_file).map(|a| a.file);
            let export_file = ExportFile {
                path: "not-yet-out".into(),
                overwrite: None,
                allow: None,
            };
            let exported = export("x.yaml", "", Some(bare), export_file).map(|e| e.dir);
            let mounted = mount("x.yaml", "", Some(bare), mount_file("not-yet-data"));
            let _ = sender.send((cwd, audited, exported, mounted));
        });
        let (cwd, audited, exported, mounted) = receiver
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("resolving a missing relative path returns");
        let cwd = std::fs::canonicalize(cwd).unwrap();
        assert_eq!(audited.unwrap(), cwd.join("not-yet/audit.jsonl"));
        assert_eq!(exported.unwrap(), cwd.join("not-yet-out"));
        let error = mounted.unwrap_err();
        assert!(
            error.message.contains("cannot use `not-yet-data`"),
            "{error}"
        );
    }

    #[test]
    fn an_export_folder_may_not_exist_yet_but_may_not_be_a_file() {
        let project = tempfile::tempdir().unwrap();
        let export_file = |path: &str| ExportFile {
            path: path.into(),
            overwrite: None,
            allow: None,
        };
        let ok = export("p.yaml", "", Some(project.path()), export_file("out/plots")).unwrap();
        assert!(ok.dir.ends_with("out/plots") && !ok.overwrite);
        std::fs::write(project.path().join("file"), "x").unwrap();
        assert!(export("p.yaml", "", Some(project.path()), export_file("file")).is_err());
        assert!(export("p.yaml", "", None, export_file("out")).is_err());
    }
}
