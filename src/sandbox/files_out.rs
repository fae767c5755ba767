//! What a run hands back besides its output: the files it created or changed under
//! `/sandbox` and the matplotlib figures it drew, so that an agent gets its plot or its
//! CSV without writing code to print it. The box's supervisor collects them when the
//! program ends (within the policy's `outputs:` caps, which it is given on its command
//! line) and sends them in one frame; this module turns those entries into
//! [`OutputFile`]s and writes them to the policy's export folder. Nothing over a cap is
//! dropped silently: it is listed with its size and the cap that held it back.

use crate::policy::{Mount, Outputs, Policy};
use sandbox_supervisor::wire::FileEntry;
use serde::Serialize;

/// What the supervisor is told to return (the policy's `outputs:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collect {
    files: bool,
    figures: bool,
    max_files: usize,
    max_file_size: u64,
    max_total_size: u64,
    /// Mounted folders under `/sandbox`: not walked (they are the project's files,
    /// not the run's output).
    skip: Vec<String>,
}

impl Collect {
    pub fn new(outputs: &Outputs, mounts: &[Mount]) -> Collect {
        Collect {
            files: outputs.files,
            figures: outputs.figures,
            max_files: outputs.max_files,
            max_file_size: outputs.max_file_size.bytes(),
            max_total_size: outputs.max_total_size.bytes(),
            skip: mounts
                .iter()
                .filter(|mount| mount.target.starts_with("/sandbox/"))
                .map(|mount| mount.target.trim_end_matches('/').to_string())
                .collect(),
        }
    }

    /// Whether the files the run created or changed come back.
    pub fn files(&self) -> bool {
        self.files
    }

    /// Whether matplotlib figures come back.
    pub fn figures(&self) -> bool {
        self.figures
    }

    /// The caps: files, bytes per file, bytes in all.
    pub fn caps(&self) -> (u64, u64, u64) {
        (
            self.max_files as u64,
            self.max_file_size,
            self.max_total_size,
        )
    }

    /// Folders not walked.
    pub fn skipped(&self) -> &[String] {
        &self.skip
    }
}

/// One file (or figure) a run left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OutputFile {
    /// Its path under /sandbox; for a figure, `figure-N.png`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its media type, guessed from its name and its first bytes.
    pub mime_type: String,
    /// A matplotlib figure (rendered as PNG), not a file the program wrote.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub figure: bool,
    /// Why its content is not in the result (a cap of the policy's `outputs:`, named),
    /// when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted: Option<String>,
    /// Where it was exported, as the policy names the folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported_to: Option<String>,
    /// Why it was not exported, when the policy exports and it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export_error: Option<String>,
    /// The content, when it is returned (it travels as image, text or resource
    /// content, not in the structured result).
    #[serde(skip)]
    #[schemars(skip)]
    pub bytes: Option<Vec<u8>>,
}

/// A run's files: those listed, and how many more there were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Returned {
    pub files: Vec<OutputFile>,
    pub unlisted: u64,
}

/// The supervisor's entries as the result's files.
pub fn from_entries(entries: Vec<FileEntry>, unlisted: u64, policy: &Policy) -> Returned {
    let files = entries
        .into_iter()
        .map(|entry| {
            let omitted =
                (!entry.omitted.is_empty()).then(|| explain(&entry.omitted, &policy.outputs));
            let bytes = omitted.is_none().then_some(entry.data);
            OutputFile {
                mime_type: mime_type(&entry.path, bytes.as_deref()),
                path: entry.path,
                size: entry.size,
                figure: entry.figure,
                omitted,
                exported_to: None,
                export_error: None,
                bytes,
            }
        })
        .collect();
    Returned { files, unlisted }
}

/// The sentence for a cap's name, with its value.
fn explain(cap: &str, outputs: &Outputs) -> String {
    match cap {
        "max_files" => format!(
            "more files than outputs.max_files ({}) were written",
            outputs.max_files
        ),
        "max_file_size" => format!(
            "larger than outputs.max_file_size ({})",
            outputs.max_file_size
        ),
        "max_total_size" => format!(
            "the files before it used up outputs.max_total_size ({})",
            outputs.max_total_size
        ),
        other => other.to_string(),
    }
}

/// The media type of a returned file: by its first bytes for the image formats a
/// client can show, else by its extension.
pub fn mime_type(path: &str, bytes: Option<&[u8]>) -> String {
    let magic: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
    ];
    if let Some(bytes) = bytes {
        if let Some((_, mime)) = magic.iter().find(|(head, _)| bytes.starts_with(head)) {
            return mime.to_string();
        }
        if bytes.len() > 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            return "image/webp".into();
        }
    }
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("txt" | "log" | "md" | "py" | "js" | "mjs" | "cjs" | "ts" | "sql" | "ini") => {
            "text/plain"
        }
        Some("csv") => "text/csv",
        Some("tsv") => "text/tab-separated-values",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        Some("yaml" | "yml") => "application/yaml",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        _ if bytes.is_some_and(|b| std::str::from_utf8(b).is_ok()) => "text/plain",
        _ => "application/octet-stream",
    }
    .to_string()
}

/// The kinds of content an MCP client can show as an image.
pub fn is_image(mime_type: &str) -> bool {
    matches!(
        mime_type,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    )
}

/// Writes the returned files into the policy's export folder, each at its own path,
/// and notes on each where it went or why not. An existing file is kept unless the
/// policy allows overwriting; a name that would leave the folder, a link on the way, a
/// protected name (a dot-name, a file tools run) the policy does not list, and the
/// policy's own files and the audit log are refused (see `export_writer`).
pub fn export(files: &mut [OutputFile], policy: &Policy) {
    let Some(export) = &policy.outputs.export else {
        return;
    };
    let mut keep = policy.files.clone();
    keep.extend(policy.audit.iter().map(|audit| audit.file.clone()));
    for file in files.iter_mut() {
        let Some(bytes) = &file.bytes else {
            continue;
        };
        let shown = format!(
            "{}/{}",
            export.path.trim_end_matches('/'),
            crate::analysis::display::escaped(&file.path)
        );
        match super::export_writer::write(
            &export.dir,
            &file.path,
            bytes,
            export.overwrite,
            &keep,
            &export.allow,
        ) {
            Ok(()) => file.exported_to = Some(shown),
            Err(reason) => file.export_error = Some(format!("not exported to {shown}: {reason}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::preset("default").unwrap()
    }

    #[test]
    fn the_supervisors_entries_become_files_with_their_caps_named() {
        let entry = |path: &str, figure: bool, data: &[u8], omitted: &str| FileEntry {
            path: path.into(),
            size: if omitted.is_empty() {
                data.len() as u64
            } else {
                99_999_999
            },
            figure,
            omitted: omitted.into(),
            data: data.to_vec(),
        };
        let entries = vec![
            entry("figure-1.png", true, b"\x89PNG\r\n\x1a\n", ""),
            entry("out/data.csv", false, b"a,b\n", ""),
            entry("big.bin", false, b"", "max_file_size"),
        ];
        let returned = from_entries(entries, 3, &policy());
        assert_eq!(returned.unlisted, 3);
        let [figure, csv, big] = returned.files.as_slice() else {
            panic!("{returned:?}")
        };
        assert!(figure.figure);
        assert_eq!(figure.mime_type, "image/png");
        assert_eq!(csv.bytes.as_deref(), Some(&b"a,b\n"[..]));
        assert_eq!(csv.mime_type, "text/csv");
        assert!(big.bytes.is_none());
        assert_eq!(
            big.omitted.as_deref(),
            Some("larger than outputs.max_file_size (1MiB)")
        );
    }

    #[test]
    fn images_are_known_by_their_first_bytes() {
        assert_eq!(
            mime_type("x.dat", Some(b"\x89PNG\r\n\x1a\nrest")),
            "image/png"
        );
        assert_eq!(mime_type("photo", Some(b"\xff\xd8\xff\xe0")), "image/jpeg");
        assert_eq!(mime_type("notes", Some(b"plain words")), "text/plain");
        assert_eq!(
            mime_type("blob", Some(&[0, 159, 146, 150])),
            "application/octet-stream"
        );
        assert!(is_image("image/png") && !is_image("image/svg+xml"));
    }

    #[test]
    fn export_keeps_existing_files_unless_told_and_stays_in_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = policy();
        policy.outputs.export = Some(crate::policy::Export {
            path: "out".into(),
            dir: std::fs::canonicalize(dir.path()).unwrap(),
            overwrite: false,
            allow: Vec::new(),
        });
        let file = |path: &str, bytes: &[u8]| OutputFile {
            path: path.into(),
            size: bytes.len() as u64,
            mime_type: "text/plain".into(),
            figure: false,
            omitted: None,
            exported_to: None,
            export_error: None,
            bytes: Some(bytes.to_vec()),
        };
        let mut files = vec![file("a/b.txt", b"one")];
        export(&mut files, &policy);
        assert_eq!(files[0].exported_to.as_deref(), Some("out/a/b.txt"));
        assert_eq!(std::fs::read(dir.path().join("a/b.txt")).unwrap(), b"one");

        let mut again = vec![file("a/b.txt", b"two")];
        export(&mut again, &policy);
        assert!(again[0]
            .export_error
            .as_deref()
            .unwrap()
            .contains("already there"));
        assert_eq!(std::fs::read(dir.path().join("a/b.txt")).unwrap(), b"one");

        policy.outputs.export.as_mut().unwrap().overwrite = true;
        export(&mut again, &policy);
        assert_eq!(std::fs::read(dir.path().join("a/b.txt")).unwrap(), b"two");

        #[cfg(unix)]
        {
            let elsewhere = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("link")).unwrap();
            let mut out = vec![file("link/x.txt", b"x")];
            export(&mut out, &policy);
            assert!(out[0]
                .export_error
                .as_deref()
                .unwrap()
                .contains("a link or a file is there"));
            assert!(!elsewhere.path().join("x.txt").exists());
        }
    }
}
