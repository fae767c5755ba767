//! The engine-agnostic core behind a [`super::Sandbox`]: admission (the concurrency
//! limit, the engine, the image), the warm pool, starting boxes under the guard the
//! policy compiles to, sending a program and reading its outcome, and the record of
//! every box this instance owns, so that each one is removed after its run, at
//! shutdown, or by the next instance if this process dies. Stateless runs (`run.rs`)
//! and sessions (`session.rs`) are built on it. Everything an engine does goes through
//! the [`Backend`].

use super::assets::findings;
use super::assets::{self, Guard, Interpreters, Mode};
use super::backend::{short, Backend, BoxIo, BoxNetwork, BoxSpec, EgressPurpose, PackageMount};
use super::call::{self, Executed, KILLED_EXIT_CODE};
use super::egress::Egress;
use super::environment::Environment;
use super::environment_cache;
use super::files_out;
use super::pool::Pool;
use super::protocol::Program;
use super::{RunOutcome, RunRequest, SandboxError};
use crate::analysis::Language;
use crate::policy::{Finding, NetworkMode, Policy, PolicyEngine};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

/// A run's concurrency slot; shared with work the run leaves behind (a box still
/// being created when it was cancelled) so the slot outlives both.
pub(super) type Permit = Arc<tokio::sync::OwnedSemaphorePermit>;
/// How long `shutdown` waits for box creations already sent to the engine, so that
/// their boxes are known and removed too.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(15);
/// Rounds of "list what is left, remove it" at shutdown: a removal another task started
/// may still be under way when ours returns.
const SHUTDOWN_REMOVAL_ROUNDS: u32 = 50;

pub struct Core {
    pub(super) policy: Arc<Policy>,
    /// The policy compiled for checking code.
    engine: PolicyEngine,
    pub(super) backend: Arc<dyn Backend>,
    /// Per image: the box assets put in place once, and what the image offers (probed
    /// then). A failed preparation is retried.
    prepared: Mutex<HashMap<String, Arc<OnceCell<PreparedImage>>>>,
    /// Under a network allowlist: the proxy the runs reach, started on first use.
    egress: Egress,
    /// The proxy of the package install step, whose list is the package indexes.
    pub(super) install_egress: Egress,
    /// The package sets installed (or found installed) by this instance, by storage.
    pub(super) package_sets: Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    pub(super) pool: Pool<BoxIo>,
    permits: Arc<Semaphore>,
    pub(super) closing: CancellationToken,
    /// Every box created and not yet removed: ready, running or being removed.
    live: Mutex<HashSet<String>>,
    /// What the policy installs at run time, per language (built once).
    guards: Vec<(Language, Guard)>,
    /// Creations sent to the engine and not yet recorded in `live`.
    creating: AtomicUsize,
    created: Notify,
}

/// An image made ready for boxes: its assets in place, and what its probe found.
#[derive(Debug, Clone)]
struct PreparedImage {
    interpreters: Interpreters,
    /// The probe's report, which [`Environment::parse`] reads.
    probe: Arc<str>,
    /// The image's [`super::images::PACKAGES_LABEL`].
    headline_label: Option<String>,
}

impl Core {
    pub fn new(policy: Arc<Policy>, backend: Arc<dyn Backend>) -> Core {
        let permits = policy.pool.max_concurrent.max(1);
        let pool = Pool::new(policy.pool.size, permits);
        let engine = PolicyEngine::new(policy.as_ref().clone());
        let guards = Language::ALL
            .into_iter()
            .map(|language| (language, Guard::new(&engine, language)))
            .collect();
        let bundle = policy.certificates.as_ref().map(|c| c.pem.as_str());
        let egress = Egress::with_secrets(EgressPurpose::Run, &policy.secrets).trusting(bundle);
        let install_egress = Egress::new(EgressPurpose::Install).trusting(bundle);
        Core {
            engine,
            guards,
            prepared: Mutex::new(HashMap::new()),
            policy,
            backend,
            egress,
            install_egress,
            package_sets: Mutex::new(HashMap::new()),
            pool,
            permits: Arc::new(Semaphore::new(permits)),
            closing: CancellationToken::new(),
            live: Mutex::new(HashSet::new()),
            creating: AtomicUsize::new(0),
            created: Notify::new(),
        }
    }

    pub fn instance_id(&self) -> &str {
        self.backend.instance_id()
    }

    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    pub fn engine(&self) -> &PolicyEngine {
        &self.engine
    }

    /// Connects, makes the images available and fills the pool; waits until done.
    pub async fn warm_up(self: &Arc<Self>) {
        if let Err(error) = self.backend.connect().await {
            tracing::warn!(%error, "warm-up skipped");
            return;
        }
        let mut fills = Vec::new();
        for language in Language::ALL {
            if let Err(error) = self.choose_image(language).await {
                tracing::warn!(%error, "warm-up: image unavailable");
                continue;
            }
            fills.extend(self.refill(language));
        }
        futures_util::future::join_all(fills).await;
        tracing::debug!(instance = %self.instance_id(), "warm pool ready");
    }

    /// What every run waits for before it may start: its turn (calls beyond
    /// `pool.max_concurrent` wait here, in order; they never fail), the engine, and its
    /// image. Returns the turn and the run's wall-clock limit.
    pub(super) async fn admit(
        self: &Arc<Self>,
        request: &RunRequest,
        cancel: &CancellationToken,
    ) -> Result<(Permit, Duration), SandboxError> {
        if self.closing.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let permit = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            permit = self.permits.clone().acquire_owned() => Arc::new(permit
                .map_err(|_| SandboxError::ShuttingDown)?),
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            ready = self.choose_image(request.language()) => ready?,
        };
        let limit = self.policy.limits.timeout();
        let timeout = request.timeout.map_or(limit, |wanted| wanted.min(limit));
        Ok((permit, timeout))
    }

    /// Sends `program` to the box `io` and collects the run (see [`call::execute`]).
    pub(super) async fn send(
        &self,
        io: &mut BoxIo,
        program: &Program,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Executed, SandboxError> {
        call::execute(
            self.backend.as_ref(),
            io,
            program,
            timeout,
            self.policy.limits.output,
            cancel,
        )
        .await
    }

    /// What a run's result means to the caller: the kernel's refusals and the hooks'
    /// records become findings, a kill is told apart as the OOM killer's, and the
    /// egress proxy's refusals of this box's connections since `since` come with it.
    pub async fn outcome(
        &self,
        language: Language,
        id: &str,
        since: std::time::Instant,
        result: Result<Executed, SandboxError>,
    ) -> Result<RunOutcome, SandboxError> {
        let executed = result?;
        let oom_killed = !executed.timed_out
            && match executed.oom {
                Some(oom) => oom,
                None => executed.exit_code == KILLED_EXIT_CODE && self.backend.oom_killed(id).await,
            };
        let processes = self
            .guard(language)
            .denies_processes()
            .and_then(|rule| self.policy.rules.iter().find(|r| r.id == rule.id));
        let mut blocked: Vec<Finding> = executed
            .refused
            .iter()
            .map(|(syscall, detail)| findings::refused(syscall, detail, processes))
            .collect();
        blocked.extend(
            executed
                .explained
                .iter()
                .filter_map(|record| findings::explained(record, &self.policy)),
        );
        if executed.unreported > 0 {
            blocked.push(findings::unreported(executed.unreported, processes));
        }
        // Ended from outside: not by the sandbox, and not by the OOM killer.
        let killed_outside = executed.outside && !oom_killed && !executed.timed_out;
        let mut stderr = executed.stderr;
        if killed_outside {
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                stderr.push('\n');
            }
            stderr.push_str(&format!(
                "code-sandbox-mcp: {}\n",
                super::call::KILLED_OUTSIDE
            ));
        }
        let mut returned = executed
            .files
            .map(|(entries, unlisted)| files_out::from_entries(entries, unlisted, &self.policy))
            .unwrap_or_default();
        files_out::export(&mut returned.files, &self.policy);
        Ok(RunOutcome {
            exit_code: executed.exit_code,
            stdout: executed.stdout,
            stderr,
            blocked,
            timed_out: executed.timed_out,
            oom_killed,
            killed_outside,
            truncated: executed.truncated,
            duration_ms: executed.duration.as_millis() as u64,
            files: returned.files,
            files_unlisted: returned.unlisted,
            network_refused: self.egress.refusals(id, since),
            secret_refused: self.egress.secret_refusals(id, since),
        })
    }

    fn guard(&self, language: Language) -> &Guard {
        self.guards
            .iter()
            .find(|(l, _)| *l == language)
            .map(|(_, guard)| guard)
            .expect("a guard for every language")
    }

    /// The interpreter a box of `language`'s image runs: what the image's probe found,
    /// under the guard the policy compiles to for the language.
    fn command_for(
        &self,
        language: Language,
        interpreters: &Interpreters,
        mode: &Mode,
    ) -> Result<assets::GuardedCommand, SandboxError> {
        let image = self.image(language);
        let guard = self.guard(language);
        let relaxed;
        let guard = if mode.relaxed.is_empty() {
            guard
        } else {
            relaxed = guard.relaxed(&mode.relaxed);
            &relaxed
        };
        guard
            .command(interpreters, mode)
            .map_err(|reason| SandboxError::LayerUnavailable(format!("image `{image}`: {reason}")))
    }

    /// A new box of `language`'s image whose main process is the interpreter, started
    /// in `mode` and waiting for its program.
    pub async fn start_box(
        self: &Arc<Self>,
        language: Language,
        mode: Mode,
    ) -> Result<BoxIo, SandboxError> {
        let image = self.image(language);
        let started = async {
            let prepared = self.prepare(&image).await?;
            let mode = Mode {
                // The install step imports nothing but what it runs.
                preload: if mode.install {
                    Vec::new()
                } else {
                    self.policy.pool.preload.for_language(language).to_vec()
                },
                ..mode
            };
            let (argv, mut env) = self.command_for(language, &prepared.interpreters, &mode)?;
            let mut placeholders = None;
            let network = if mode.install {
                let (_, python_index) = self.policy.packages.for_language(Language::Python);
                let (_, registry) = self.policy.packages.for_language(Language::JavaScript);
                let hosts = super::install::index_hosts(&[python_index, registry]);
                self.install_egress.open(&self.backend, &hosts).await?;
                BoxNetwork::Egress(EgressPurpose::Install)
            } else {
                match &self.policy.network {
                    NetworkMode::Allow(allow) => {
                        self.egress.open(&self.backend, allow).await?;
                        let (secrets, ticket) = self.egress.box_env();
                        env.extend(secrets);
                        placeholders = ticket;
                        BoxNetwork::Egress(EgressPurpose::Run)
                    }
                    NetworkMode::Bridge => BoxNetwork::Bridge,
                    NetworkMode::None => BoxNetwork::None,
                }
            };
            if mode.packages.is_some() && !mode.install {
                env.extend(super::install::run_env(language));
            }
            let mut mounts = self.policy.mounts.clone();
            // The policy's CA bundle, for the install step and the run alike: both may
            // have to pass a TLS-inspecting proxy. Where the egress proxy ends TLS for
            // the box (secrets), the box trusts the proxy's bundle instead, which has
            // these certificates already.
            let proxy_trust = env.iter().any(|(name, _)| name == "SSL_CERT_FILE");
            if let (Some(certificates), false) = (&self.policy.certificates, proxy_trust) {
                mounts.push(crate::policy::Mount {
                    source: certificates.source.clone(),
                    host: certificates.host.clone(),
                    target: super::layout::CERTIFICATES.to_string(),
                    rw: false,
                });
                env.extend(super::layout::certificates_env());
            }
            let spec = BoxSpec {
                image: image.clone(),
                argv,
                env,
                limits: self.policy.limits.clone(),
                network,
                runtime: self.policy.runtime.clone(),
                mounts,
                packages: mode.packages.clone().map(|storage| PackageMount {
                    storage,
                    writable: mode.install,
                }),
            };
            let io = self.create(&spec).await?;
            if let Some(ticket) = placeholders {
                self.egress.bind(ticket, &io.id);
            }
            Ok(io)
        }
        .await;
        // Removed since it was checked (by the assets setup's box or this one's): the
        // next run checks, and pulls, again.
        if let Err(SandboxError::ImageUnavailable(_)) = &started {
            self.backend.forget_image(&image);
        }
        started
    }

    /// [`Core::start_box`] in its own task: if the caller is cancelled meanwhile, the
    /// task still learns the new box's id and removes it.
    pub async fn start_cancellable(
        self: &Arc<Self>,
        language: Language,
        mode: Mode,
        cancel: &CancellationToken,
        permit: &Permit,
    ) -> Result<BoxIo, SandboxError> {
        let task = tokio::spawn({
            let core = self.clone();
            async move { core.start_box(language, mode).await }
        });
        // Whoever stops waiting (a cancellation, or a caller that drops this future),
        // the creation goes on using the engine: it keeps this run's concurrency slot
        // until it has ended and its box is gone.
        let mut creation = Creation {
            task: Some(task),
            core: self.clone(),
            slot: Arc::clone(permit),
        };
        let task = creation.task.as_mut().expect("just set");
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(SandboxError::Cancelled),
            created = task => {
                creation.task = None;
                match created {
                    Ok(result) => result,
                    Err(join_error) => Err(SandboxError::Engine(format!("creating a container: {join_error}"))),
                }
            }
        }
    }

    /// The image's assets in place and what it offers: done once per image by the
    /// backend (which also probes it).
    async fn prepare(&self, image: &str) -> Result<PreparedImage, SandboxError> {
        let cell = once_per_key(&self.prepared, image);
        cell.get_or_try_init(|| async {
            if self.closing.is_cancelled() {
                return Err(SandboxError::ShuttingDown);
            }
            // Counted like any creation: shutdown waits for the setup's box to go.
            let _creating = Creating::start(self);
            let prepared = self.backend.prepare(image, &assets::setup()).await?;
            environment_cache::remember(self.backend.as_ref(), image, &prepared).await;
            Ok(PreparedImage {
                interpreters: Interpreters::parse(&prepared.probe),
                probe: prepared.probe.into(),
                headline_label: prepared.headline_label,
            })
        })
        .await
        .cloned()
    }

    /// Creates and starts one box of `spec`, attached, and records it as ours.
    async fn create(self: &Arc<Self>, spec: &BoxSpec) -> Result<BoxIo, SandboxError> {
        if self.closing.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let _creating = Creating::start(self);
        let io = self.backend.start(spec).await?;
        if self.closing.is_cancelled() {
            self.backend.remove(&io.id).await;
            return Err(SandboxError::ShuttingDown);
        }
        self.live_set().insert(io.id.clone());
        tracing::debug!(container = short(&io.id), image = %spec.image, "container ready");
        Ok(io)
    }

    /// Starts the creations that bring `language`'s pool back to its target
    /// (`pool.size`, more while demand is high).
    pub(super) fn refill(self: &Arc<Self>, language: Language) -> Vec<tokio::task::JoinHandle<()>> {
        if self.closing.is_cancelled() {
            return Vec::new();
        }
        let key = self.pool_key(language);
        let missing = self.pool.reserve(&key);
        if missing > 0 {
            tracing::debug!(
                pool = key,
                missing,
                target = self.pool.target(&key),
                "refilling the warm pool"
            );
        }
        (0..missing)
            .map(|_| {
                let core = self.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    match core.start_box(language, Mode::default()).await {
                        Ok(io) => core.pool.finished(&key, Some(io)),
                        Err(error) => {
                            core.pool.finished(&key, None);
                            if !core.closing.is_cancelled() {
                                tracing::warn!(%error, pool = key, "could not refill the warm pool");
                            }
                        }
                    }
                })
            })
            .collect()
    }

    pub(super) async fn discard(&self, id: &str) {
        self.egress.forget(id);
        self.backend.remove(id).await;
        self.live_set().remove(id);
    }

    pub(super) fn discard_in_background(self: &Arc<Self>, id: String) {
        let core = self.clone();
        tokio::spawn(async move { core.discard(&id).await });
    }

    /// The image `language` runs in, chosen among the policy's choices (and pulled)
    /// the first time.
    pub(super) async fn choose_image(&self, language: Language) -> Result<String, SandboxError> {
        self.backend
            .choose_image(language, self.policy.images.for_language(language))
            .await
    }

    /// The image chosen for `language`, or, before the engine was asked, the policy's
    /// last choice.
    pub(super) fn image(&self, language: Language) -> String {
        self.backend.chosen_image(language).unwrap_or_else(|| {
            let choices = self.policy.images.for_language(language);
            choices.last().cloned().unwrap_or_default()
        })
    }

    /// What `language`'s image offers (connecting, choosing and pulling the image, and
    /// putting its assets in place, when that has not happened yet).
    pub async fn environment(
        self: &Arc<Self>,
        language: Language,
    ) -> Result<Environment, SandboxError> {
        let image = self.choose_image(language).await?;
        let prepared = self.prepare(&image).await?;
        Ok(Environment::parse(
            &prepared.probe,
            language,
            &image,
            prepared.headline_label.as_deref(),
        ))
    }

    /// What `language`'s image offers, if that is known without waiting for a box:
    /// probed by this instance already, or kept on disk for the image's id from an
    /// earlier probe (see [`environment_cache`]). Never starts a container or pulls.
    pub async fn environment_known(&self, language: Language) -> Option<Environment> {
        let chosen = self.backend.chosen_image(language);
        if let Some(image) = &chosen {
            let cell = self.prepared.lock().ok()?.get(image).cloned();
            if let Some(prepared) = cell.as_ref().and_then(|cell| cell.get()) {
                return Some(Environment::parse(
                    &prepared.probe,
                    language,
                    image,
                    prepared.headline_label.as_deref(),
                ));
            }
        }
        let choices = match chosen {
            Some(image) => vec![image],
            None => self.policy.images.for_language(language).to_vec(),
        };
        let (image, prepared) = environment_cache::recall(self.backend.as_ref(), &choices).await?;
        Some(Environment::parse(
            &prepared.probe,
            language,
            &image,
            prepared.headline_label.as_deref(),
        ))
    }

    /// The pool holds interpreters, so it is kept per language as well as per image.
    pub(super) fn pool_key(&self, language: Language) -> String {
        format!("{language}@{}", self.image(language))
    }

    /// Removes every box this instance owns; no new ones are made afterwards.
    pub async fn shutdown(&self) {
        self.closing.cancel();
        self.permits.close();
        // Creations already sent to the engine finish and record their box (or remove
        // it, seeing `closing`), so none is missed below.
        let waited = tokio::time::timeout(SHUTDOWN_WAIT, async {
            loop {
                let notified = self.created.notified();
                if self.creating.load(Ordering::SeqCst) == 0 {
                    break;
                }
                notified.await;
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!("container creations still pending at shutdown");
        }
        drop(self.pool.drain());
        let mut ids: HashSet<String> = self.live_set().drain().collect();
        let mut rounds = 0;
        loop {
            // Anything the engine lists as this instance's, in case a record was missed.
            ids.extend(self.backend.own_boxes().await);
            if ids.is_empty() {
                break;
            }
            rounds += 1;
            if rounds > SHUTDOWN_REMOVAL_ROUNDS {
                tracing::warn!(
                    left = ids.len(),
                    "sandbox containers could not all be removed"
                );
                break;
            }
            if rounds > 1 {
                // A removal started elsewhere (a run's own cleanup) is still finishing.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            futures_util::future::join_all(ids.iter().map(|id| self.backend.remove(id))).await;
            ids.clear();
        }
        // The egress proxies, routes and asset storage go once no box uses them.
        self.egress.stop();
        self.install_egress.stop();
        self.backend.release().await;
        tracing::debug!(instance = %self.instance_id(), "sandbox containers removed at shutdown");
    }

    /// What `code-sandbox-mcp cleanup` does: the sweep every instance makes when it
    /// first connects, on its own, with what it removed (boxes, volumes).
    pub async fn cleanup(&self) -> Result<(usize, usize), SandboxError> {
        self.backend.sweep().await
    }

    fn live_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ready boxes in the pool for `language`'s image (for tests and the bench).
    pub fn warm_containers(&self, language: Language) -> usize {
        self.pool.ready(&self.pool_key(language))
    }
}

/// The cell that makes something happen once per key (a failure is retried).
pub(super) fn once_per_key<T>(
    cells: &Mutex<HashMap<String, Arc<OnceCell<T>>>>,
    key: &str,
) -> Arc<OnceCell<T>> {
    cells
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.to_string())
        .or_default()
        .clone()
}

/// A box creation someone waits for; when they stop waiting before it is done, its box
/// is removed once it exists.
struct Creation {
    task: Option<tokio::task::JoinHandle<Result<BoxIo, SandboxError>>>,
    core: Arc<Core>,
    slot: Permit,
}

impl Drop for Creation {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return; // the runtime is going: shutdown or the next sweep removes the box
        }
        let core = self.core.clone();
        let slot = Arc::clone(&self.slot);
        tokio::spawn(async move {
            if let Ok(Ok(io)) = task.await {
                core.discard(&io.id).await;
            }
            drop(slot);
        });
    }
}

/// One box creation under way, counted from its start until this is dropped (however
/// the creation ends), so that `shutdown` can wait for it.
struct Creating<'a>(&'a Core);

impl<'a> Creating<'a> {
    fn start(core: &'a Core) -> Creating<'a> {
        core.creating.fetch_add(1, Ordering::SeqCst);
        Creating(core)
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.0.creating.fetch_sub(1, Ordering::SeqCst);
        self.0.created.notify_waiters();
    }
}
