//! Building the project's images (`sandbox::images`) through the engine's API, with the
//! client the backend already uses: no `docker` CLI is needed, and Podman's
//! Docker-compatible socket serves as well. The build context is the Dockerfile alone,
//! sent as an in-memory tar.

use crate::analysis::Language;
use crate::sandbox::backend::LocalImage;
use crate::sandbox::images::{
    built_image, definition_digest, dockerfile, is_current, BASE_LABEL, DEFAULT_BASE,
    DEFINITION_LABEL, OFFLINE_BASE,
};
use crate::sandbox::SandboxError;
use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::{HashMap, VecDeque};

/// How many lines of build output an error carries: enough to show the failing
/// command's complaint, not the whole apt log.
const ERROR_CONTEXT_LINES: usize = 25;

/// The local image called `name`, or `None` when the engine has none by that name.
pub async fn local_image(docker: &Docker, name: &str) -> Result<Option<LocalImage>, SandboxError> {
    match docker.inspect_image(name).await {
        Ok(image) => Ok(Some(LocalImage {
            id: image.id.unwrap_or_default(),
            size: image
                .size
                .and_then(|size| u64::try_from(size).ok())
                .unwrap_or(0),
            created: image.created.unwrap_or_default(),
            labels: image.config.and_then(|c| c.labels).unwrap_or_default(),
        })),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(error) => Err(SandboxError::Engine(format!(
            "inspecting image `{name}`: {error}"
        ))),
    }
}

/// The build context: a tar holding just `Dockerfile` with `text` in it. Fixed mode and
/// time, so the same text always gives the same bytes.
pub fn build_context(text: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    let mut archive = tar::Builder::new(Vec::new());
    archive
        .append_data(&mut header, "Dockerfile", text.as_bytes())
        .expect("writing a tar into memory cannot fail");
    archive
        .into_inner()
        .expect("writing a tar into memory cannot fail")
}

/// Builds the image for `language` from its embedded Dockerfile, starting from `base`
/// (or the Dockerfile's default, [`DEFAULT_BASE`]), and tags it [`built_image`].
/// With `from_scratch`, no step is taken from the engine's build cache, so every
/// package is fetched again (newer Debian updates, say); otherwise unchanged steps are.
/// Output lines go to stderr (tracing, info) as the engine sends them; a failing step
/// is an error carrying its last lines. Returns the new image's id.
pub async fn build(
    docker: &Docker,
    language: Language,
    base: Option<&str>,
    from_scratch: bool,
) -> Result<String, SandboxError> {
    let tag = built_image(language);
    let base_name = base.unwrap_or(DEFAULT_BASE);
    // A missing base is still handed to the engine, which pulls it where a registry is
    // reachable; this only says so before the engine goes quiet trying.
    if local_image(docker, base_name).await?.is_none() {
        tracing::info!(
            image = tag,
            base = base_name,
            "base image not found locally: the engine will try to pull it"
        );
    }
    let labels = HashMap::from([
        (DEFINITION_LABEL, definition_digest(language)),
        (BASE_LABEL, base_name.to_string()),
    ]);
    let mut options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(tag)
        .rm(true)
        .forcerm(true)
        .nocache(from_scratch)
        .labels(&labels);
    if let Some(base) = base {
        options = options.buildargs(&HashMap::from([("BASE", base)]));
    }
    let context = build_context(dockerfile(language));
    tracing::info!(image = tag, base = base_name, "building");
    let mut output = docker.build_image(
        options.build(),
        None,
        Some(bollard::body_full(context.into())),
    );
    let mut lines = OutputLines::default();
    while let Some(item) = output.next().await {
        match item {
            Ok(info) => {
                if let Some(text) = info.stream.as_deref() {
                    for line in lines.push(text) {
                        tracing::info!(image = tag, "{line}");
                    }
                }
                // Status lines come from pulling the base: byte counts tick many times
                // a second, so those go to debug, as in `pull`.
                if let Some(status) = info.status.as_deref() {
                    let line = [info.id.as_deref(), Some(status)]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(": ");
                    if info.progress_detail.is_some_and(|p| p.current.is_some()) {
                        tracing::debug!(image = tag, "{line}");
                    } else {
                        tracing::info!(image = tag, "{line}");
                    }
                }
            }
            Err(error) => {
                if let Some(line) = lines.finish() {
                    tracing::info!(image = tag, "{line}");
                }
                let reason = error_text(error);
                // The base may have been pulled before a later step failed: only a
                // base that is still missing is the reason.
                if local_image(docker, base_name).await?.is_none() {
                    return Err(base_missing(tag, base_name, &reason));
                }
                return Err(build_failed(tag, base_name, &reason, &lines));
            }
        }
    }
    if let Some(line) = lines.finish() {
        tracing::info!(image = tag, "{line}");
    }
    match local_image(docker, tag).await? {
        Some(image) if is_current(language, &image.labels) => Ok(image.id),
        Some(_) => Err(build_failed(
            tag,
            base_name,
            "the build ended but the image it tagged does not carry this definition's label",
            &lines,
        )),
        None => Err(build_failed(
            tag,
            base_name,
            "the build ended without tagging an image",
            &lines,
        )),
    }
}

/// The engine's own words for a failed step, without bollard's wrapping.
fn error_text(error: bollard::errors::Error) -> String {
    match error {
        bollard::errors::Error::DockerStreamError { error } => error,
        bollard::errors::Error::DockerResponseServerError { message, .. } => message,
        other => other.to_string(),
    }
}

fn base_missing(tag: &str, base: &str, reason: &str) -> SandboxError {
    let fix = if base == OFFLINE_BASE {
        format!("build it with scripts/build-offline-image.sh (it makes `{OFFLINE_BASE}`)")
    } else {
        format!(
            "pull it with `docker pull {base}` where a registry is reachable, or build the \
             offline base with scripts/build-offline-image.sh and pass `--base {OFFLINE_BASE}`"
        )
    };
    SandboxError::ImageUnavailable(format!(
        "cannot build `{tag}`: its base image `{base}` is not available locally and the \
         engine could not pull it ({}). To fix: {fix}",
        reason.trim()
    ))
}

fn build_failed(tag: &str, base: &str, reason: &str, lines: &OutputLines) -> SandboxError {
    let last = lines.last();
    let context = if last.is_empty() {
        String::new()
    } else {
        format!("; the last lines of its output:\n{}", last.join("\n"))
    };
    SandboxError::Engine(format!(
        "building `{tag}` from `{base}` failed: {}{context}",
        reason.trim()
    ))
}

/// The build's output as whole lines: the engine sends text in chunks that may hold
/// several lines or end halfway through one. Keeps the last few for an error message.
#[derive(Debug, Default)]
struct OutputLines {
    partial: String,
    last: VecDeque<String>,
}

impl OutputLines {
    /// Takes a chunk and returns the lines it completed (blank ones left out).
    fn push(&mut self, chunk: &str) -> Vec<String> {
        self.partial.push_str(chunk);
        let mut complete = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            if let Some(line) = self.keep(&line) {
                complete.push(line);
            }
        }
        complete
    }

    /// The unfinished last line, if any, once the output has ended.
    fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.partial);
        self.keep(&rest)
    }

    fn keep(&mut self, line: &str) -> Option<String> {
        // apt redraws progress with carriage returns: the last state is the line.
        let line = line.trim_end().rsplit('\r').next().unwrap_or("");
        let line = without_escapes(line).trim_end().to_string();
        if line.trim().is_empty() {
            return None;
        }
        if self.last.len() == ERROR_CONTEXT_LINES {
            self.last.pop_front();
        }
        self.last.push_back(line.clone());
        Some(line)
    }

    fn last(&self) -> Vec<&str> {
        self.last.iter().map(String::as_str).collect()
    }
}

/// `line` without terminal escape sequences: the engine colours a step's stderr red,
/// and the log would show those as `\x1b[91m`.
fn without_escapes(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            plain.push(c);
        } else if chars.next() == Some('[') {
            // A control sequence ends with its first byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_context_holds_exactly_the_dockerfile() {
        for language in Language::ALL {
            let bytes = build_context(dockerfile(language));
            let mut archive = tar::Archive::new(bytes.as_slice());
            let mut entries = Vec::new();
            for entry in archive.entries().unwrap() {
                let mut entry = entry.unwrap();
                let path = entry.path().unwrap().to_string_lossy().into_owned();
                let mut text = String::new();
                entry.read_to_string(&mut text).unwrap();
                entries.push((path, entry.header().mode().unwrap(), text));
            }
            assert_eq!(
                entries,
                vec![(
                    "Dockerfile".to_string(),
                    0o644,
                    dockerfile(language).to_string()
                )]
            );
            assert_eq!(bytes, build_context(dockerfile(language)), "reproducible");
        }
    }

    #[test]
    fn output_is_split_into_whole_lines_and_the_last_ones_kept() {
        let mut lines = OutputLines::default();
        assert_eq!(lines.push("Step 1/4 : ARG"), Vec::<String>::new());
        assert_eq!(
            lines.push(" BASE\n\n ---> abc\nGet:1"),
            ["Step 1/4 : ARG BASE", " ---> abc"]
        );
        assert_eq!(lines.push(" 10%\rGet:1 100%\n"), ["Get:1 100%"]);
        assert_eq!(lines.push("\x1b[0m\x1b[91m+ ls /x\n\x1b[0m\n"), ["+ ls /x"]);
        assert_eq!(lines.finish(), None);
        for n in 0..ERROR_CONTEXT_LINES + 5 {
            lines.push(&format!("line {n}\n"));
        }
        lines.push("unfinished");
        assert_eq!(lines.finish().as_deref(), Some("unfinished"));
        let last = lines.last();
        assert_eq!(last.len(), ERROR_CONTEXT_LINES);
        assert_eq!(last.last(), Some(&"unfinished"));
        assert_eq!(last[0], "line 6");
    }
}
