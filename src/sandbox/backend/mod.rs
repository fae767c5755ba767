//! The seam between the sandbox core and a container engine: exactly what the core
//! asks of an engine, as one trait ([`Backend`]), held as `Arc<dyn Backend>` so that
//! nothing above it is generic over the engine.
//!
//! The core (admission, the warm pool, sessions, the program protocol, outputs, files,
//! the egress allowlist) never names an engine. A backend turns a [`BoxSpec`] into a
//! running box whose main process is the given command, attached: the program goes in
//! through [`BoxIo::input`], both output streams come out through [`BoxIo::output`].
//! What a box is made of (a container, a pod) and how the box's assets, package sets
//! and the egress route reach it are the backend's business.
//!
//! One implementation today, [`docker`] (bollard; Podman through its Docker-compatible
//! API). The next ones plug in here: an engine that is not on this host (a remote
//! `DOCKER_HOST`: no host socket to mount, maybe another CPU architecture), then
//! Kubernetes (a pod per box with a gVisor RuntimeClass, the egress route as a
//! sidecar or a NetworkPolicy to the proxy's service).

pub mod docker;

use super::capture::Stream;
use super::SandboxError;
use crate::analysis::Language;
use crate::policy::{EngineKind, Limits, Mount};
use async_trait::async_trait;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

/// A box's id, as its backend names it (a container id, a pod name).
pub type BoxId = String;

/// One box to start.
#[derive(Debug, Clone)]
pub struct BoxSpec {
    /// The image, as [`Backend::choose_image`] chose it (and [`Backend::prepare`]d it).
    pub image: String,
    /// The main process: the box runs this and nothing else (no image entrypoint).
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Memory, CPU, processes and scratch space (`limits:` of the policy).
    pub limits: Limits,
    pub network: BoxNetwork,
    /// The OCI runtime to run it under (`runsc` for gVisor), when not the engine's own.
    /// One the engine lacks is [`SandboxError::LayerUnavailable`], never a fallback.
    pub runtime: Option<String>,
    /// Host folders the policy mounts (`mounts:`), read-only unless `rw`.
    pub mounts: Vec<Mount>,
    /// A package set's storage (see [`Backend::ensure_package_storage`]), mounted at
    /// [`super::layout::PACKAGES`]; writable only in its install step, which then runs
    /// as root so that it can write the fresh storage.
    pub packages: Option<PackageMount>,
}

/// How a box reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoxNetwork {
    /// No interface but loopback.
    None,
    /// The engine's default network (`network: bridge`).
    Bridge,
    /// No interface but loopback, and the egress proxy of this purpose at
    /// [`super::layout::EGRESS_SOCKET`] (see [`Backend::open_egress`]).
    Egress(EgressPurpose),
}

/// Which of an instance's egress proxies a box reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EgressPurpose {
    /// Runs under a network allowlist: the policy's `network.allow`.
    Run,
    /// Package install steps: the package indexes alone.
    Install,
}

impl EgressPurpose {
    pub fn name(self) -> &'static str {
        match self {
            EgressPurpose::Run => "run",
            EgressPurpose::Install => "install",
        }
    }
}

/// A package set's storage in a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageMount {
    pub storage: String,
    pub writable: bool,
}

/// One package set's storage, as the engine lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageStorage {
    pub name: String,
    /// When the engine made it; `None` when it does not say.
    pub created: Option<std::time::SystemTime>,
}

/// The output stream of a box: chunks of its stdout and stderr as they come, until
/// its main process ends (or the backend loses it: an error).
pub type BoxOutput =
    Pin<Box<dyn futures_util::Stream<Item = Result<(Stream, Vec<u8>), String>> + Send>>;

/// A started box, attached.
pub struct BoxIo {
    pub id: BoxId,
    /// The main process's stdin.
    pub input: Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    pub output: BoxOutput,
}

impl std::fmt::Debug for BoxIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxIo")
            .field("id", &short(&self.id))
            .finish()
    }
}

/// What a box is doing, by its backend's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoxStatus {
    Running,
    /// The main process exited with this code (137 for a kill).
    Exited(i64),
    /// No such box (removed), or the backend cannot say.
    Gone,
}

/// What preparing an image found: the output of the probe the assets' setup ran in
/// it, and the image's headline packages label ([`super::images::PACKAGES_LABEL`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub probe: String,
    pub headline_label: Option<String>,
}

/// The box's own assets (guards, bootstraps, the kernel-floor helper) and the setup
/// that puts them at [`super::layout::ASSETS`] of every box of an image: a shell
/// script run in the image as root, reading `input` on stdin, whose stdout is the
/// probe's report.
#[derive(Debug, Clone)]
pub struct AssetSetup {
    pub script: String,
    pub input: Vec<u8>,
}

/// An image as the engine has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    pub id: String,
    /// Bytes, as the engine counts them (all layers, shared ones included).
    pub size: u64,
    /// When it was built, as the engine reports it (RFC 3339).
    pub created: String,
    pub labels: HashMap<String, String>,
}

/// A connection from a box to its egress proxy.
pub trait EgressStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> EgressStream for T {}

/// Where the boxes' connections to one egress proxy arrive.
#[async_trait]
pub trait EgressListener: Send + Sync {
    /// The next connection, with the box it comes from (`None`: it cannot be told, by
    /// the kernel's word; the proxy still serves it, and records its refusals as no
    /// box's).
    async fn accept(&self) -> std::io::Result<(Box<dyn EgressStream>, Option<BoxId>)>;
}

/// Everything the sandbox core asks of a container engine.
///
/// Methods reach the engine lazily: a backend is made without I/O, an engine that is
/// down is [`SandboxError::EngineUnreachable`] on the call that needed it, and the
/// next call tries again.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The value every box of this instance is labelled with, so that an engine's own
    /// tools can list them (`docker ps --filter label=code-sandbox-mcp=<id>`).
    fn instance_id(&self) -> &str;

    /// Connects (the first time) and says whether the engine answers.
    async fn connect(&self) -> Result<(), SandboxError>;

    /// The first of `choices` the engine has, else the last, pulled: chosen once per
    /// language and kept, until [`Backend::forget_image`].
    async fn choose_image(
        &self,
        language: Language,
        choices: &[String],
    ) -> Result<String, SandboxError>;

    /// The image `language` runs in, if chosen already.
    fn chosen_image(&self, language: Language) -> Option<String>;

    /// Forgets that `image` is there (it was removed from under us): the next run
    /// checks, pulls, or chooses again.
    fn forget_image(&self, image: &str);

    /// Puts the box assets where every box of `image` will see them, once per image,
    /// and returns what the setup's probe found.
    async fn prepare(&self, image: &str, setup: &AssetSetup) -> Result<Prepared, SandboxError>;

    /// Starts one box, attached, with the assets of its image (prepared before).
    async fn start(&self, spec: &BoxSpec) -> Result<BoxIo, SandboxError>;

    /// What box `id` is doing now.
    async fn status(&self, id: &str) -> BoxStatus;

    /// Whether the kernel's OOM killer struck inside box `id` (which may have ended).
    async fn oom_killed(&self, id: &str) -> bool;

    /// Kills and removes box `id`; one that is gone already is not an error.
    async fn remove(&self, id: &str);

    /// Every box of this instance the engine knows of (running or not).
    async fn own_boxes(&self) -> Vec<BoxId>;

    /// Releases everything else this instance made (assets storage, egress routes),
    /// once its boxes are gone.
    async fn release(&self);

    /// Removes the boxes, storage and routes left by instances that are gone (a
    /// process killed with SIGKILL cannot remove its own); returns how many boxes and
    /// how many storage volumes it removed.
    async fn sweep(&self) -> Result<(usize, usize), SandboxError>;

    /// Makes the storage of a package set called `name` (for `key`) exist: empty when
    /// new, as an earlier install left it otherwise.
    async fn ensure_package_storage(&self, name: &str, key: &str) -> Result<(), SandboxError>;

    /// Every package set's storage the engine has (any instance's), with when it was
    /// made.
    async fn package_storage(&self) -> Result<Vec<PackageStorage>, SandboxError>;

    /// Removes the storage of the package set `name`. `Ok(false)`: a box still uses
    /// it, and it stays.
    async fn remove_package_storage(&self, name: &str) -> Result<bool, SandboxError>;

    /// Opens the route from this instance's boxes to an egress proxy of `purpose`
    /// (once per purpose): boxes started with [`BoxNetwork::Egress`] of it connect at
    /// [`super::layout::EGRESS_SOCKET`], and the connections arrive here.
    async fn open_egress(
        &self,
        purpose: EgressPurpose,
    ) -> Result<Box<dyn EgressListener>, SandboxError>;

    /// Makes `pem` (certificates: nothing secret) readable in every box of the egress
    /// route of `purpose` at [`super::layout::EGRESS_TRUST`], for boxes started from
    /// now on. Called after [`Backend::open_egress`], before a box of it starts, when
    /// the proxy ends TLS for the boxes (a policy with secrets).
    async fn publish_egress_trust(
        &self,
        purpose: EgressPurpose,
        pem: &str,
    ) -> Result<(), SandboxError>;

    /// The address ranges of the engine's own networks (its bridges, and the networks
    /// made on it), which the egress proxy treats as this machine's surroundings:
    /// refused unless `network.allow` names them by address. Empty when the engine
    /// cannot say (or is not reached).
    async fn engine_networks(&self) -> Vec<crate::policy::allowlist::IpRange>;

    /// The local image called `name`, if the engine has one.
    async fn local_image(&self, name: &str) -> Result<Option<LocalImage>, SandboxError>;

    /// Builds the project's image for `language` from its embedded definition (see
    /// [`super::images`]) on `base`; `from_scratch` takes nothing from the build cache.
    /// Returns the new image's id.
    async fn build_image(
        &self,
        language: Language,
        base: Option<&str>,
        from_scratch: bool,
    ) -> Result<String, SandboxError>;

    /// Removes the image `id` unless something still uses it; says why not otherwise.
    async fn remove_image(&self, id: &str) -> Result<(), String>;
}

/// The backend for the engine `kind` names (`engine:` in the policy). No I/O.
pub fn for_engine(kind: EngineKind) -> Arc<dyn Backend> {
    Arc::new(docker::DockerBackend::new(kind))
}

/// The first 12 characters of an id, as `docker ps` shows it.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
