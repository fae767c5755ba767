//! `image build|list`: build the project's sandbox images (Python and JavaScript with
//! their libraries) from the definitions embedded in this binary, and see which exist.
//!
//! The build goes through the engine's API with the runtime's own connection, so the
//! engine is the one `run` and `serve` would use: `--engine`, else the policy's
//! `engine:`. An image already built from the same definition is kept (it carries the
//! Dockerfile's sha256 as a label), which makes `image build` cheap to run every time,
//! in CI for one; `--force` builds anyway, without the engine's build cache.
//!
//! stdout gets one line per image (built, or already up to date); the build's own
//! output goes to stderr as it comes. Exit codes: 0 every image is there, 1 a build
//! failed (the error says why, with the last lines of output), 2 usage or bad policy,
//! 125 the engine cannot be reached.

use super::run::{parse_engine, EXIT_ENGINE};
use super::PolicyArg;
use crate::analysis::Language;
use crate::policy::EngineKind;
use crate::sandbox::backend::{self, Backend, LocalImage};
use crate::sandbox::images::{built_image, headline_packages, is_current, BASE_LABEL};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Build the sandbox images with their libraries (numpy, pandas…; lodash, d3…) from
    /// the definitions in this binary. An image already built from the same definition
    /// is kept.
    Build(BuildArgs),
    /// For each language, the image this binary defines and whether the engine has it.
    #[command(visible_alias = "status")]
    List(ListArgs),
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The languages to build (default: all of them).
    #[arg(value_name = "python|javascript")]
    pub languages: Vec<Language>,
    /// Start from this image instead of debian:trixie-slim: where no registry is
    /// reachable, the one scripts/build-offline-image.sh makes
    /// (code-sandbox-mcp-runtime:trixie).
    #[arg(long, value_name = "IMAGE")]
    pub base: Option<String>,
    /// Build even when the image exists and was built from the same definition, and
    /// build every step again (no build cache): to pick up newer Debian packages.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub engine: EngineArg,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// One JSON array instead of a line per language.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub engine: EngineArg,
}

/// Which engine to talk to: the flag, else the policy's `engine:`.
#[derive(Debug, clap::Args)]
pub struct EngineArg {
    /// Container engine, overriding the policy's `engine:` (docker, podman or auto).
    #[arg(long, value_name = "docker|podman|auto", value_parser = parse_engine)]
    pub engine: Option<EngineKind>,
    #[command(flatten)]
    pub policy: PolicyArg,
}

impl EngineArg {
    fn kind(&self) -> Result<EngineKind, ExitCode> {
        match self.engine {
            Some(kind) => Ok(kind),
            None => self.policy.load().map(|policy| policy.engine),
        }
    }
}

pub fn main(command: ImageCommand) -> ExitCode {
    super::init_logging(true);
    let kind = match &command {
        ImageCommand::Build(args) => args.engine.kind(),
        ImageCommand::List(args) => args.engine.kind(),
    };
    let kind = match kind {
        Ok(kind) => kind,
        Err(code) => return code,
    };
    let runtime = match super::async_runtime(false) {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let engine = backend::for_engine(kind);
        if let Err(error) = engine.connect().await {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_ENGINE);
        }
        match command {
            ImageCommand::Build(args) => build_images(engine.as_ref(), args).await,
            ImageCommand::List(args) => list(engine.as_ref(), args.json).await,
        }
    })
}

async fn build_images(engine: &dyn Backend, args: BuildArgs) -> ExitCode {
    let mut languages = args.languages;
    if languages.is_empty() {
        languages = Language::ALL.to_vec();
    }
    let mut seen = Vec::new();
    languages.retain(|language| {
        let first = !seen.contains(language);
        seen.push(*language);
        first
    });
    for language in languages {
        let tag = built_image(language);
        let existing = match engine.local_image(tag).await {
            Ok(existing) => existing,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_ENGINE);
            }
        };
        match &existing {
            Some(image) if !args.force && is_current(language, &image.labels) => {
                println!(
                    "{tag} is up to date ({}, built from {}); --force builds it again",
                    human_size(image.size),
                    image.labels.get(BASE_LABEL).map_or("?", String::as_str)
                );
                continue;
            }
            Some(_) if !args.force => tracing::info!(
                image = tag,
                "the image exists but was built from another definition: building it again"
            ),
            _ => {}
        }
        let started = Instant::now();
        let id = match engine
            .build_image(language, args.base.as_deref(), args.force)
            .await
        {
            Ok(id) => id,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
        let seconds = started.elapsed().as_secs_f64().round();
        let size = match engine.local_image(tag).await {
            Ok(Some(image)) => human_size(image.size),
            _ => "size unknown".into(),
        };
        println!("built {tag} ({size}) in {seconds} s");
        if let Some(replaced) = existing.filter(|old| old.id != id) {
            forget_replaced(engine, tag, &replaced.id).await;
        }
    }
    ExitCode::SUCCESS
}

/// Removes the image a rebuild replaced, now without its tag, so rebuilding does not
/// pile up untagged gigabytes. Not when anything still uses it (another tag, a
/// container): the engine refuses, and that is fine.
async fn forget_replaced(engine: &dyn Backend, tag: &str, id: &str) {
    match engine.remove_image(id).await {
        Ok(()) => tracing::info!(image = tag, replaced = id, "removed the image it replaced"),
        Err(error) => {
            tracing::debug!(image = tag, replaced = id, %error, "kept the image it replaced")
        }
    }
}

/// One language's line of `image list --json`.
#[derive(Debug, Serialize)]
struct ImageStatus<'a> {
    language: Language,
    image: &'a str,
    present: bool,
    /// Built from this binary's definition of the image.
    current: bool,
    id: Option<String>,
    size: Option<u64>,
    created: Option<String>,
    base: Option<String>,
    packages: Vec<String>,
}

async fn list(engine: &dyn Backend, json: bool) -> ExitCode {
    let mut statuses = Vec::new();
    for language in Language::ALL {
        let image = built_image(language);
        let local = match engine.local_image(image).await {
            Ok(local) => local,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_ENGINE);
            }
        };
        statuses.push(status(language, image, local));
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&statuses).expect("statuses serialize")
        );
        return ExitCode::SUCCESS;
    }
    let width = statuses.iter().map(|s| s.image.len()).max().unwrap_or(0);
    for status in &statuses {
        let state = match (&status.size, &status.created) {
            (Some(size), Some(created)) => format!(
                "{}, created {}{}",
                human_size(*size),
                short_time(created),
                if status.current {
                    ""
                } else {
                    "; built from another definition: `code-sandbox-mcp image build` rebuilds it"
                }
            ),
            _ => format!(
                "missing: `code-sandbox-mcp image build {}` builds it",
                status.language
            ),
        };
        println!(
            "{:<10}  {:<width$}  {state}",
            status.language.name(),
            status.image
        );
    }
    ExitCode::SUCCESS
}

fn status(language: Language, image: &str, local: Option<LocalImage>) -> ImageStatus<'_> {
    let current = local
        .as_ref()
        .is_some_and(|local| is_current(language, &local.labels));
    let packages = local
        .as_ref()
        .map(|local| {
            headline_packages(&local.labels)
                .into_iter()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    ImageStatus {
        language,
        image,
        present: local.is_some(),
        current,
        base: local
            .as_ref()
            .and_then(|local| local.labels.get(BASE_LABEL).cloned()),
        id: local.as_ref().map(|local| local.id.clone()),
        size: local.as_ref().map(|local| local.size),
        created: local.map(|local| local.created),
        packages,
    }
}

/// A size as `docker image ls` shows it (decimal units).
fn human_size(bytes: u64) -> String {
    let bytes = bytes as f64;
    if bytes >= 1e9 {
        format!("{:.1} GB", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.0} MB", bytes / 1e6)
    } else {
        format!("{:.0} kB", bytes / 1e3)
    }
}

/// An engine timestamp (`2025-06-01T12:34:56.789Z`) to the second.
fn short_time(created: &str) -> String {
    match created.get(..19) {
        Some(seconds) => format!("{} UTC", seconds.replace('T', " ")),
        None => created.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_dockers() {
        assert_eq!(human_size(1_234_567_890), "1.2 GB");
        assert_eq!(human_size(260_000_000), "260 MB");
        assert_eq!(human_size(5_000), "5 kB");
    }

    #[test]
    fn times_are_cut_to_the_second() {
        assert_eq!(
            short_time("2025-06-01T12:34:56.789012345Z"),
            "2025-06-01 12:34:56 UTC"
        );
        assert_eq!(short_time("?"), "?");
    }
}
