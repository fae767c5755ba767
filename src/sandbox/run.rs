//! A stateless run: one program in a fresh box (a warm one when the pool has one, else
//! a new one; one of its own when a person approved some of its rules or it asks for
//! packages), collected, and the box removed however the run ends. A package set the
//! run asks for is installed first, in a step of its own (see `install`), into storage
//! the run then mounts read-only.

use super::assets::Mode;
use super::backend::{short, BoxIo, BoxStatus};
use super::core::{once_per_key, Core, Permit};
use super::install::{install_program, key, volume_name};
use super::package_sets;
use super::pool::Claim;
use super::protocol::Program;
use super::{RunOutcome, RunRequest, SandboxError};
use crate::analysis::Language;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Runs one program in a fresh box (a warm one when the pool has one) and removes the
/// box afterwards; a run that asks for packages has them installed first.
pub async fn run(
    core: &Arc<Core>,
    request: RunRequest,
    cancel: CancellationToken,
) -> Result<RunOutcome, SandboxError> {
    let (permit, timeout) = core.admit(&request, &cancel).await?;
    let language = request.language();
    let packages = if request.packages.is_empty() {
        None
    } else {
        Some(ensure_packages(core, language, &request.packages, &cancel, &permit).await?)
    };
    let mut io = if request.approved.is_empty() && packages.is_none() {
        box_for(core, language, &cancel, &permit).await?
    } else {
        // A person approved this run's `ask` rules, or it has packages: a box of
        // its own, whose guard leaves out just the approved rules.
        let mode = Mode {
            relaxed: request.approved.clone(),
            packages,
            ..Mode::default()
        };
        core.start_cancellable(language, mode, &cancel, &permit)
            .await?
    };
    let id = io.id.clone();
    // Removes the box when this run ends, however it ends: returned, or dropped by
    // a caller that stopped waiting. The removal runs in the background, after the
    // answer is returned; timeouts and cancellations removed the box already, and
    // removing it again is harmless.
    let _cleanup = Discard {
        core: core.clone(),
        id: id.clone(),
    };
    let program = Program {
        file: request.kind.file_name(),
        code: request.code.as_bytes().to_vec(),
        env: super::modules_in::with_digests(&request.env, language, &request.files),
        tap: request.tap.clone(),
        call: None,
        files: request.files.clone(),
    };
    let since = std::time::Instant::now();
    let result = core.send(&mut io, &program, timeout, &cancel).await;
    let outcome = core.outcome(language, &id, since, result).await;
    // Refill once this run is done, so the new box's start does not compete with
    // this run for the CPU.
    core.refill(language);
    outcome
}

/// A started box with `language`'s interpreter waiting in it: a warm one when the
/// pool has one, else a new one. A pooled one that died while waiting (the engine
/// restarted, say) is replaced by a new one.
async fn box_for(
    core: &Arc<Core>,
    language: Language,
    cancel: &CancellationToken,
    permit: &Permit,
) -> Result<BoxIo, SandboxError> {
    let key = core.pool_key(language);
    loop {
        let claim = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            claim = core.pool.claim(&key) => claim,
        };
        match claim {
            Claim::Ready(io) => {
                if core.backend.status(&io.id).await == BoxStatus::Running {
                    return Ok(io);
                }
                tracing::warn!(
                    container = short(&io.id),
                    "a warm container is unusable; using another"
                );
                core.discard_in_background(io.id);
            }
            Claim::Create => break,
        }
    }
    core.start_cancellable(language, Mode::default(), cancel, permit)
        .await
}

/// How long a package install step may take.
const INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The volume holding `specs` installed for `language`: installed now, in a step of
/// its own, unless this instance (or an earlier one: the volume keeps a marker)
/// installed the same set before.
async fn ensure_packages(
    core: &Arc<Core>,
    language: Language,
    specs: &[String],
    cancel: &CancellationToken,
    permit: &Permit,
) -> Result<String, SandboxError> {
    let (_, index) = core.policy.packages.for_language(language);
    let program = install_program(language, index, specs).map_err(SandboxError::Engine)?;
    let image = core.image(language);
    let key = key(language, &image, index, specs);
    let volume = volume_name(&key);
    let cell = once_per_key(&core.package_sets, &volume);
    cell.get_or_try_init(|| async {
        core.backend.ensure_package_storage(&volume, &key).await?;
        let installed = install(core, language, &volume, program, specs, cancel, permit).await;
        if installed.is_err() {
            // Nothing of a failed install is kept: its storage is empty or half
            // written, and the next call installs afresh. One a box of another server
            // still uses stays (that server is installing the same set).
            match core.backend.remove_package_storage(&volume).await {
                Ok(true) => tracing::debug!(volume, "the failed install's storage removed"),
                Ok(false) => tracing::debug!(volume, "the failed install's storage is in use"),
                Err(error) => {
                    tracing::warn!(%error, volume, "could not remove a failed install's storage")
                }
            }
        }
        installed
    })
    .await?;
    package_sets::record_use(&volume);
    Ok(volume)
}

/// Runs the install step of `specs` into `volume`, in a box of its own.
async fn install(
    core: &Arc<Core>,
    language: Language,
    volume: &str,
    program: String,
    specs: &[String],
    cancel: &CancellationToken,
    permit: &Permit,
) -> Result<(), SandboxError> {
    let mode = Mode {
        install: true,
        relaxed: core
            .policy
            .rules
            .iter()
            .map(|rule| rule.id.clone())
            .collect(),
        packages: Some(volume.to_string()),
        ..Mode::default()
    };
    let mut installer = core
        .start_cancellable(language, mode, cancel, permit)
        .await?;
    let id = installer.id.clone();
    let program = Program {
        file: crate::analysis::SourceKind::plain(language).file_name(),
        code: program.into_bytes(),
        env: Vec::new(),
        tap: None,
        call: None,
        files: Vec::new(),
    };
    let since = std::time::Instant::now();
    let installed = core
        .send(&mut installer, &program, INSTALL_TIMEOUT, cancel)
        .await;
    // The proxy's word on the connections it could not make: pip says only that it
    // found no version when its index did not answer at all.
    let unreachable = core.install_egress.refusals(&id, since);
    core.discard(&id).await;
    let installed = installed?;
    let packages = specs.join(", ");
    let mut failure = if installed.timed_out {
        format!(
            "installing {packages} took longer than {} s and was stopped",
            INSTALL_TIMEOUT.as_secs()
        )
    } else if installed.exit_code != 0 {
        format!(
            "installing {packages} failed (exit {}): {}",
            installed.exit_code,
            installer_words(&installed.stderr, &installed.stdout)
        )
    } else {
        tracing::info!(volume, packages, "packages installed");
        return Ok(());
    };
    if !unreachable.is_empty() {
        let mut reasons: Vec<&str> = unreachable.iter().map(|r| r.reason.as_str()).collect();
        reasons.dedup();
        failure.push_str(&format!(
            "\nThe install step could not reach: {}",
            reasons.join("; ")
        ));
    }
    Err(SandboxError::InstallFailed(failure))
}

/// What the installer said about its failure: the end of its stderr (where pip and
/// npm write their errors; a traceback's last lines are its point), else of its stdout.
fn installer_words(stderr: &str, stdout: &str) -> String {
    const KEPT: usize = 2000;
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    }
    .trim();
    if text.is_empty() {
        return "the installer said nothing".to_string();
    }
    let mut start = text.len().saturating_sub(KEPT);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = &text[start..];
    if start > 0 {
        format!("…{kept}")
    } else {
        kept.to_string()
    }
}

/// Removes one run's box when dropped.
struct Discard {
    core: Arc<Core>,
    id: String,
}

impl Drop for Discard {
    fn drop(&mut self) {
        // Outside a Tokio runtime (the whole runtime is being torn down) nothing can be
        // spawned; `shutdown` or the next instance's sweep removes the box then.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.core
                .discard_in_background(std::mem::take(&mut self.id));
        }
    }
}
