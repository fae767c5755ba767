//! The shared state behind a [`super::Sandbox`]: the lazy engine connection, images
//! made available once, the warm pool, the concurrency limit, and the record of every
//! container this instance owns, so that each one is removed after its run, at
//! shutdown, or by the next instance if this process dies.

use super::container::{self, short, LABEL};
use super::engine;
use super::environment::{self, Environment};
use super::exec::{self, Interpreter, Program};
use super::guard::{self, Guard, Interpreters, Mode};
use super::instance::Instance;
use super::network::Egress;
use super::outputs;
use super::pool::{Claim, Pool};
use super::session::Sessions;
use super::{RunOutcome, RunRequest, SandboxError};
use crate::analysis::Language;
use crate::policy::{NetworkMode, Policy};
use bollard::Docker;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OnceCell, Semaphore};
use tokio_util::sync::CancellationToken;

/// A run's concurrency slot; shared with work the run leaves behind (a container
/// still being created when it was cancelled) so the slot outlives both.
pub(super) type Permit = Arc<tokio::sync::OwnedSemaphorePermit>;
/// How long `shutdown` waits for container creations already sent to the engine, so
/// that their containers are known and removed too.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(15);
/// Rounds of "list what is left, remove it" at shutdown: a removal another task started
/// answers 409 to ours and may still be under way when ours returns.
const SHUTDOWN_REMOVAL_ROUNDS: u32 = 50;

pub struct Runtime {
    pub(super) policy: Arc<Policy>,
    pub(super) instance: Instance,
    /// `None` until the first successful connection; a failure is not remembered, so the
    /// next run tries again.
    docker: tokio::sync::Mutex<Option<Docker>>,
    /// Containers of dead instances are swept once, after the first connection.
    swept: AtomicBool,
    /// Per image: checked (and pulled if missing) once. A failed check is retried.
    pub(super) images: Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    /// The image each language runs in, once chosen among the policy's choices.
    pub(super) chosen: Mutex<HashMap<Language, String>>,
    /// Under a network allowlist: the proxy the runs reach, made on first use.
    egress: Egress,
    /// The proxy of the package install step, whose list is the package indexes.
    install_egress: Egress,
    /// The package sets installed (or found installed) by this instance, by volume.
    pub(super) package_sets: Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    pool: Pool<Interpreter>,
    permits: Arc<Semaphore>,
    pub(super) closing: CancellationToken,
    /// Every container created and not yet removed: ready, running or being removed.
    live: Mutex<HashSet<String>>,
    /// What the policy installs at run time, per language (built once).
    guards: Vec<(Language, Guard)>,
    /// Per image: the volume holding the guard files, filled once, and what the image
    /// offers (probed then). A failed setup is retried.
    guard_files: Mutex<HashMap<String, Arc<OnceCell<GuardFiles>>>>,
    pub(super) sessions: Sessions,
    /// The task that ends idle and expired sessions runs once the first one opens.
    pub(super) reaping: AtomicBool,
    /// Creations sent to the engine and not yet recorded in `live`.
    creating: AtomicUsize,
    created: Notify,
}

impl Runtime {
    pub fn new(policy: Arc<Policy>) -> Runtime {
        let permits = policy.pool.max_concurrent.max(1);
        let pool = Pool::new(policy.pool.size, permits);
        let guards = Language::ALL
            .into_iter()
            .map(|language| (language, Guard::new(&policy, language)))
            .collect();
        Runtime {
            guards,
            guard_files: Mutex::new(HashMap::new()),
            policy,
            instance: Instance::new(),
            docker: tokio::sync::Mutex::new(None),
            swept: AtomicBool::new(false),
            images: Mutex::new(HashMap::new()),
            chosen: Mutex::new(HashMap::new()),
            egress: Egress::new("run"),
            install_egress: Egress::new("install"),
            package_sets: Mutex::new(HashMap::new()),
            pool,
            permits: Arc::new(Semaphore::new(permits)),
            closing: CancellationToken::new(),
            live: Mutex::new(HashSet::new()),
            sessions: Sessions::default(),
            reaping: AtomicBool::new(false),
            creating: AtomicUsize::new(0),
            created: Notify::new(),
        }
    }

    pub fn instance_id(&self) -> &str {
        &self.instance.id
    }

    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The engine, connecting on first use.
    pub(super) async fn docker(self: &Arc<Self>) -> Result<Docker, SandboxError> {
        let mut slot = self.docker.lock().await;
        if let Some(docker) = slot.as_ref() {
            return Ok(docker.clone());
        }
        let docker = engine::connect(self.policy.engine).await?;
        *slot = Some(docker.clone());
        if !self.swept.swap(true, Ordering::SeqCst) {
            let runtime = self.clone();
            let docker = docker.clone();
            tokio::spawn(async move {
                runtime.sweep_dead_instances(&docker).await;
            });
        }
        Ok(docker)
    }

    /// Connects, makes the images available and fills the pool; waits until done.
    pub async fn warm_up(self: &Arc<Self>) {
        let docker = match self.docker().await {
            Ok(docker) => docker,
            Err(error) => {
                tracing::warn!(%error, "warm-up skipped");
                return;
            }
        };
        let mut fills = Vec::new();
        for language in Language::ALL {
            if let Err(error) = self.choose_image(&docker, language).await {
                tracing::warn!(%error, "warm-up: image unavailable");
                continue;
            }
            fills.extend(self.refill(&docker, language));
        }
        futures_util::future::join_all(fills).await;
        tracing::debug!(instance = %self.instance.id, "warm pool ready");
    }

    pub async fn run(
        self: &Arc<Self>,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, SandboxError> {
        let (permit, docker, timeout) = self.admit(&request, &cancel).await?;
        let language = request.language();
        let packages = if request.packages.is_empty() {
            None
        } else {
            Some(
                self.ensure_packages(&docker, language, &request.packages, &cancel, &permit)
                    .await?,
            )
        };
        let mut interpreter = if request.approved.is_empty() && packages.is_none() {
            self.interpreter_for(&docker, language, &cancel, &permit)
                .await?
        } else {
            // A person approved this run's `ask` rules, or it has packages: a container
            // of its own, whose guard leaves out just the approved rules.
            let mode = Mode {
                relaxed: request.approved.clone(),
                packages,
                ..Mode::default()
            };
            self.start_cancellable(&docker, language, mode, &cancel, &permit)
                .await?
        };
        let id = interpreter.container.clone();
        // Removes the container when this run ends, however it ends: returned, or
        // dropped by a caller that stopped waiting. The removal runs in the background,
        // after the answer is returned; timeouts and cancellations removed the container
        // already, and removing it again is a harmless 404.
        let _cleanup = Discard {
            runtime: self.clone(),
            docker: docker.clone(),
            id: id.clone(),
        };
        let program = Program {
            file: request.kind.file_name(),
            code: request.code.as_bytes().to_vec(),
            env: request.env.clone(),
            tap: request.tap.clone(),
            call: None,
            files: request.files.clone(),
        };
        let since = std::time::Instant::now();
        let result = self
            .send(&docker, &mut interpreter, &program, timeout, &cancel)
            .await;
        let outcome = self.outcome(&docker, &id, since, result).await;
        // Refill once this run is done, so the new container's start does not compete
        // with this run for the CPU.
        self.refill(&docker, language);
        outcome
    }

    /// What every run waits for before it may start: its turn (calls beyond
    /// `pool.max_concurrent` wait here, in order; they never fail), the engine, and its
    /// image. Returns the turn, the engine and the run's wall-clock limit.
    pub(super) async fn admit(
        self: &Arc<Self>,
        request: &RunRequest,
        cancel: &CancellationToken,
    ) -> Result<(Permit, Docker, Duration), SandboxError> {
        if self.closing.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let permit = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            permit = self.permits.clone().acquire_owned() => Arc::new(permit
                .map_err(|_| SandboxError::ShuttingDown)?),
        };
        let docker = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            docker = self.docker() => docker?,
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
            ready = self.choose_image(&docker, request.language()) => ready?,
        };
        let limit = self.policy.limits.timeout();
        let timeout = request.timeout.map_or(limit, |wanted| wanted.min(limit));
        Ok((permit, docker, timeout))
    }

    /// Sends `program` to `interpreter` with an end token of its own, and collects the
    /// run (see [`exec::execute`]).
    pub(super) async fn send(
        &self,
        docker: &Docker,
        interpreter: &mut Interpreter,
        program: &Program,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<exec::Executed, SandboxError> {
        let token = format!("{}-{}", self.instance.id, end_token_salt());
        exec::execute(
            docker,
            interpreter,
            program,
            &token,
            timeout,
            self.policy.limits.output,
            cancel,
        )
        .await
    }

    /// What a run's result means to the caller: the guard's block lines become
    /// findings, a kill is told apart as the OOM killer's, and the egress proxy's
    /// refusals of this container's connections since `since` come with it.
    pub async fn outcome(
        &self,
        docker: &Docker,
        id: &str,
        since: std::time::Instant,
        result: Result<exec::Executed, SandboxError>,
    ) -> Result<RunOutcome, SandboxError> {
        let mut executed = result?;
        let oom_killed = !executed.timed_out
            && executed.exit_code == exec::KILLED_EXIT_CODE
            && exec::oom_killed(docker, id).await;
        let blocked = guard::take_blocks(&mut executed.stderr, &self.policy);
        let mut returned = executed
            .files
            .map(|record| outputs::read_record(&record, &self.policy))
            .unwrap_or_default();
        outputs::export(&mut returned.files, &self.policy);
        Ok(RunOutcome {
            exit_code: executed.exit_code,
            stdout: executed.stdout,
            stderr: executed.stderr,
            blocked,
            timed_out: executed.timed_out,
            oom_killed,
            truncated: executed.truncated,
            duration_ms: executed.duration.as_millis() as u64,
            files: returned.files,
            files_unlisted: returned.unlisted,
            network_refused: self.egress.refusals(id, since),
        })
    }

    /// A started container with `language`'s interpreter waiting in it: a warm one when
    /// the pool has one, else a new one. A pooled one that died while waiting (the
    /// engine restarted, say) is replaced by a new one.
    async fn interpreter_for(
        self: &Arc<Self>,
        docker: &Docker,
        language: Language,
        cancel: &CancellationToken,
        permit: &Permit,
    ) -> Result<Interpreter, SandboxError> {
        let key = self.pool_key(language);
        loop {
            let claim = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(SandboxError::Cancelled),
                claim = self.pool.claim(&key) => claim,
            };
            match claim {
                Claim::Ready(interpreter) => {
                    let id = interpreter.container.clone();
                    if exec::waiting(docker, &id).await {
                        return Ok(interpreter);
                    }
                    tracing::warn!(
                        container = short(&interpreter.container),
                        "a warm container is unusable; using another"
                    );
                    self.discard_in_background(docker, interpreter.container);
                }
                Claim::Create => break,
            }
        }
        self.start_cancellable(docker, language, Mode::default(), cancel, permit)
            .await
    }

    /// The interpreter a container of `language`'s image runs: what the image's probe
    /// found, under the guard the policy compiles to for the language.
    fn command_for(
        &self,
        language: Language,
        interpreters: &Interpreters,
        mode: &Mode,
    ) -> Result<guard::GuardedCommand, SandboxError> {
        let image = self.image(language);
        let guard = self
            .guards
            .iter()
            .find(|(l, _)| *l == language)
            .map(|(_, guard)| guard)
            .expect("a guard for every language");
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

    /// A new container of `language`'s image whose main process is the interpreter,
    /// started in `mode` and waiting for its program.
    pub async fn start_interpreter(
        self: &Arc<Self>,
        docker: &Docker,
        language: Language,
        mode: Mode,
    ) -> Result<Interpreter, SandboxError> {
        let image = self.image(language);
        let started = async {
            let files = self.guard_files(docker, &image).await?;
            let mode = Mode {
                // The install step imports nothing but what it runs.
                preload: if mode.install {
                    Vec::new()
                } else {
                    self.policy.pool.preload.for_language(language).to_vec()
                },
                ..mode
            };
            let (argv, mut env) = self.command_for(language, &files.interpreters, &mode)?;
            let egress = if mode.install {
                let (_, python_index) = self.policy.packages.for_language(Language::Python);
                let (_, registry) = self.policy.packages.for_language(Language::JavaScript);
                let hosts = super::packages::index_hosts(&[python_index, registry]);
                Some(self.install_egress.route(&self.instance, &hosts).await?)
            } else {
                match &self.policy.network {
                    NetworkMode::Allow(allow) => {
                        Some(self.egress.route(&self.instance, allow).await?)
                    }
                    _ => None,
                }
            };
            if mode.packages.is_some() && !mode.install {
                env.extend(super::packages::run_env(language));
            }
            let main = container::MainProcess {
                argv,
                env,
                guard_volume: files.volume.clone(),
                egress,
                packages: mode.packages.clone().map(|volume| (volume, mode.install)),
            };
            self.create(docker, &image, &main).await
        }
        .await;
        // Removed since it was checked (by the guard setup's container or this one's):
        // the next run checks, and pulls, again.
        if let Err(SandboxError::ImageUnavailable(_)) = &started {
            self.forget_image(&image);
        }
        started
    }

    /// [`Runtime::start_interpreter`] in its own task: if the caller is cancelled
    /// meanwhile, the task still learns the new container's id and removes it.
    pub async fn start_cancellable(
        self: &Arc<Self>,
        docker: &Docker,
        language: Language,
        mode: Mode,
        cancel: &CancellationToken,
        permit: &Permit,
    ) -> Result<Interpreter, SandboxError> {
        let mut task = tokio::spawn({
            let runtime = self.clone();
            let docker = docker.clone();
            async move { runtime.start_interpreter(&docker, language, mode).await }
        });
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                let runtime = self.clone();
                let docker = docker.clone();
                // The creation goes on using the engine: it keeps this run's
                // concurrency slot until it has ended and its container is gone.
                let slot = Arc::clone(permit);
                tokio::spawn(async move {
                    if let Ok(Ok(interpreter)) = task.await {
                        runtime.discard(&docker, &interpreter.container).await;
                    }
                    drop(slot);
                });
                Err(SandboxError::Cancelled)
            }
            created = &mut task => match created {
                Ok(result) => result,
                Err(join_error) => Err(SandboxError::Engine(format!("creating a container: {join_error}"))),
            },
        }
    }

    /// The guard files for containers of `image`: a volume of this instance's, filled
    /// once by a setup container of the image (which also probes what it offers).
    async fn guard_files(&self, docker: &Docker, image: &str) -> Result<GuardFiles, SandboxError> {
        let cell = once_per_image(&self.guard_files, image);
        cell.get_or_try_init(|| async {
            if self.closing.is_cancelled() {
                return Err(SandboxError::ShuttingDown);
            }
            // Counted like any creation: shutdown waits for the setup container to go.
            let _creating = Creating::start(self);
            let volume = container::create_volume(docker, &self.instance).await?;
            let script = format!("{}; {}", guard::install_script(), environment::PROBE_SCRIPT);
            let body = container::setup_body(image, &self.instance, &volume, &script);
            let probed = match container::create_attached(docker, &self.policy, image, body).await {
                Ok((id, attached)) => {
                    let probed =
                        exec::run_setup(docker, &id, attached, guard::install_input()).await;
                    container::remove(docker, &id).await;
                    probed
                }
                Err(error) => Err(error),
            };
            match probed {
                Ok(text) => {
                    tracing::debug!(image, volume = short(&volume), "guard files ready");
                    let headline_label =
                        docker.inspect_image(image).await.ok().and_then(|info| {
                            info.config?.labels?.remove(environment::PACKAGES_LABEL)
                        });
                    Ok(GuardFiles {
                        volume,
                        interpreters: Interpreters::parse(&text),
                        probe: text.into(),
                        headline_label,
                    })
                }
                Err(error) => {
                    container::remove_volume(docker, &volume).await;
                    Err(error)
                }
            }
        })
        .await
        .cloned()
    }

    /// Creates and starts one sandbox container running `main`, attached, and records
    /// it as ours.
    async fn create(
        self: &Arc<Self>,
        docker: &Docker,
        image: &str,
        main: &container::MainProcess,
    ) -> Result<Interpreter, SandboxError> {
        if self.closing.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let _creating = Creating::start(self);
        let body = container::create_body(&self.policy, image, &self.instance, main);
        let created = container::create_attached(docker, &self.policy, image, body).await;
        match created {
            Ok((id, _)) if self.closing.is_cancelled() => {
                container::remove(docker, &id).await;
                Err(SandboxError::ShuttingDown)
            }
            Ok((id, attached)) => {
                self.live_set().insert(id.clone());
                tracing::debug!(container = short(&id), image, "container ready");
                Ok(Interpreter::attached(id, attached))
            }
            Err(error) => Err(error),
        }
    }

    /// Starts the creations that bring `language`'s pool back to its target
    /// (`pool.size`, more while demand is high).
    fn refill(
        self: &Arc<Self>,
        docker: &Docker,
        language: Language,
    ) -> Vec<tokio::task::JoinHandle<()>> {
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
                let runtime = self.clone();
                let docker = docker.clone();
                let key = key.clone();
                tokio::spawn(async move {
                    match runtime
                        .start_interpreter(&docker, language, Mode::default())
                        .await
                    {
                        Ok(interpreter) => runtime.pool.finished(&key, Some(interpreter)),
                        Err(error) => {
                            runtime.pool.finished(&key, None);
                            if !runtime.closing.is_cancelled() {
                                tracing::warn!(%error, pool = key, "could not refill the warm pool");
                            }
                        }
                    }
                })
            })
            .collect()
    }

    pub(super) async fn discard(&self, docker: &Docker, id: &str) {
        container::remove(docker, id).await;
        self.live_set().remove(id);
    }

    fn discard_in_background(self: &Arc<Self>, docker: &Docker, id: String) {
        let runtime = self.clone();
        let docker = docker.clone();
        tokio::spawn(async move { runtime.discard(&docker, &id).await });
    }

    /// What `language`'s image offers (connecting, choosing and pulling the image, and
    /// setting its guard files up, when that has not happened yet).
    pub async fn environment(
        self: &Arc<Self>,
        language: Language,
    ) -> Result<Environment, SandboxError> {
        let docker = self.docker().await?;
        let image = self.choose_image(&docker, language).await?;
        let files = self.guard_files(&docker, &image).await?;
        Ok(Environment::parse(
            &files.probe,
            language,
            &image,
            files.headline_label.as_deref(),
        ))
    }

    /// The pool holds interpreters, so it is kept per language as well as per image.
    fn pool_key(&self, language: Language) -> String {
        format!("{language}@{}", self.image(language))
    }

    /// Removes every container this instance owns; no new ones are made afterwards.
    pub async fn shutdown(&self) {
        self.closing.cancel();
        self.permits.close();
        let Some(docker) = self.docker.lock().await.clone() else {
            return; // never connected: nothing was created
        };
        // Creations already sent to the engine finish and record their container (or
        // remove it, seeing `closing`), so none is missed below.
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
        drop(self.sessions.drain());
        let mut ids: HashSet<String> = self.live_set().drain().collect();
        let own = format!("{LABEL}={}", self.instance.id);
        let mut rounds = 0;
        loop {
            // Anything labelled with this instance's id, in case a record was missed.
            ids.extend(
                container::list_labelled(&docker, &own)
                    .await
                    .into_iter()
                    .map(|(id, _, _)| id),
            );
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
            futures_util::future::join_all(ids.iter().map(|id| container::remove(&docker, id)))
                .await;
            ids.clear();
        }
        // The egress network and the guard volumes go once no container uses them.
        self.egress.remove();
        self.install_egress.remove();
        for (name, _) in container::list_volumes_labelled(&docker, &own).await {
            container::remove_volume(&docker, &name).await;
        }
        tracing::debug!(instance = %self.instance.id, "sandbox containers removed at shutdown");
    }

    /// Removes containers whose owning process (by their labels) is gone from this host.
    /// Returns how many containers and volumes it removed.
    async fn sweep_dead_instances(&self, docker: &Docker) -> (usize, usize) {
        let stale: Vec<String> = container::list_labelled(docker, LABEL)
            .await
            .into_iter()
            .filter(|(_, labels, age)| self.instance.owner_is_gone(labels, *age))
            .map(|(id, _, _)| id)
            .collect();
        if !stale.is_empty() {
            tracing::info!(
                count = stale.len(),
                "removing sandbox containers left by processes that are gone"
            );
            futures_util::future::join_all(stale.iter().map(|id| container::remove(docker, id)))
                .await;
        }
        super::network::sweep(&self.instance);
        (stale.len(), self.sweep_dead_volumes(docker).await)
    }

    /// Removes the guard volumes of processes that are gone (after their containers);
    /// returns how many.
    async fn sweep_dead_volumes(&self, docker: &Docker) -> usize {
        let mut removed = 0;
        for (name, labels) in container::list_volumes_labelled(docker, LABEL).await {
            if self.instance.owner_is_gone(&labels, None) {
                container::remove_volume(docker, &name).await;
                removed += 1;
            }
        }
        removed
    }

    /// What `code-sandbox-mcp cleanup` does: the sweep every instance makes when it
    /// first connects, on its own, with what it removed (containers, volumes).
    pub async fn cleanup(self: &Arc<Self>) -> Result<(usize, usize), SandboxError> {
        self.swept.store(true, Ordering::SeqCst);
        let docker = self.docker().await?;
        Ok(self.sweep_dead_instances(&docker).await)
    }

    fn live_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ready containers in the pool for `language`'s image (for tests and the bench).
    pub fn warm_containers(&self, language: Language) -> usize {
        self.pool.ready(&self.pool_key(language))
    }
}

/// Makes a session call's end token unguessable in advance by the code it ends.
fn end_token_salt() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:016x}", hasher.finish())
}

/// The cell that makes something happen once per image (a failure is retried).
pub(super) fn once_per_image<T>(
    cells: &Mutex<HashMap<String, Arc<OnceCell<T>>>>,
    image: &str,
) -> Arc<OnceCell<T>> {
    cells
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(image.to_string())
        .or_default()
        .clone()
}

/// One container creation under way, counted from its start until this is dropped
/// (however the creation ends), so that `shutdown` can wait for it.
struct Creating<'a>(&'a Runtime);

impl<'a> Creating<'a> {
    fn start(runtime: &'a Runtime) -> Creating<'a> {
        runtime.creating.fetch_add(1, Ordering::SeqCst);
        Creating(runtime)
    }
}

impl Drop for Creating<'_> {
    fn drop(&mut self) {
        self.0.creating.fetch_sub(1, Ordering::SeqCst);
        self.0.created.notify_waiters();
    }
}

/// The guard files of one image, in a volume every container of it mounts read-only,
/// and what the setup container found in the image.
#[derive(Debug, Clone)]
struct GuardFiles {
    volume: String,
    interpreters: Interpreters,
    /// The setup's output, which [`Environment::parse`] reads.
    probe: Arc<str>,
    /// The image's [`environment::PACKAGES_LABEL`].
    headline_label: Option<String>,
}

/// Removes one run's container when dropped.
struct Discard {
    runtime: Arc<Runtime>,
    docker: Docker,
    id: String,
}

impl Drop for Discard {
    fn drop(&mut self) {
        // Outside a Tokio runtime (the whole runtime is being torn down) nothing can be
        // spawned; `shutdown` or the next instance's sweep removes the container then.
        if tokio::runtime::Handle::try_current().is_ok() {
            self.runtime
                .discard_in_background(&self.docker, std::mem::take(&mut self.id));
        }
    }
}
