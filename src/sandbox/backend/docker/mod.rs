//! The Docker backend (bollard), which also serves Podman through its
//! Docker-compatible socket. The only place in the crate that names bollard.
//!
//! A box is a container whose main process is the given command behind a minimal
//! init, attached (`container`); the box assets live in a volume per image, filled
//! once by a setup container of the image that also probes it (`setup`); a package
//! set is a named volume (`package_volumes` lists and prunes them); the egress route
//! is a Unix socket on this host, in a folder of this instance's, bind-mounted into
//! the container, and a connection's box is known from the peer's cgroup (`egress`). Every container and volume carries this
//! instance's labels (`instance`), which is what lets a later instance sweep what a
//! process that died left behind.
//!
//! Docker-only assumptions, all here: the engine shares this host's `/proc` and file
//! system (the socket mount, the cgroup attribution, the owner's pid in the labels).

mod build;
mod connect;
mod container;
mod egress;
mod images;
mod instance;
mod package_volumes;
mod setup;

pub use connect::{candidates, Endpoint, Machine};
pub use instance::LABEL;
use instance::LABEL_PACKAGES;

use super::{
    AssetSetup, Backend, BoxId, BoxIo, BoxSpec, BoxStatus, EgressListener, EgressPurpose,
    LocalImage, Prepared,
};
use crate::analysis::Language;
use crate::policy::EngineKind;
use crate::sandbox::SandboxError;
use async_trait::async_trait;
use bollard::Docker;
use instance::Instance;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// Containers and volumes of one server instance on a Docker (or Podman) engine.
pub struct DockerBackend {
    kind: EngineKind,
    instance: Instance,
    /// `None` until the first successful connection; a failure is not remembered, so
    /// the next call tries again.
    client: tokio::sync::Mutex<Option<Docker>>,
    /// The boxes of dead instances are swept once, after the first connection.
    swept: AtomicBool,
    /// Per image: checked (and pulled if missing) once. A failed check is retried.
    images: Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    /// The image each language runs in, once chosen among the policy's choices.
    chosen: Mutex<HashMap<Language, String>>,
    /// Per image: the volume its boxes mount the assets from.
    asset_volumes: Mutex<HashMap<String, String>>,
    /// Per egress purpose: the socket its boxes mount.
    egress_sockets: Mutex<HashMap<EgressPurpose, PathBuf>>,
}

impl DockerBackend {
    /// A backend for the engine `kind` names; no I/O until the first call.
    pub fn new(kind: EngineKind) -> DockerBackend {
        DockerBackend {
            kind,
            instance: Instance::new(),
            client: tokio::sync::Mutex::new(None),
            swept: AtomicBool::new(false),
            images: Mutex::new(HashMap::new()),
            chosen: Mutex::new(HashMap::new()),
            asset_volumes: Mutex::new(HashMap::new()),
            egress_sockets: Mutex::new(HashMap::new()),
        }
    }

    /// The engine, connecting on first use; the first connection also starts the
    /// sweep of what dead instances left behind, in the background.
    async fn docker(&self) -> Result<Docker, SandboxError> {
        let mut slot = self.client.lock().await;
        if let Some(docker) = slot.as_ref() {
            return Ok(docker.clone());
        }
        let docker = connect::connect(self.kind).await?;
        *slot = Some(docker.clone());
        if !self.swept.swap(true, Ordering::SeqCst) {
            let docker = docker.clone();
            let instance = self.instance.clone();
            tokio::spawn(async move {
                sweep_dead_instances(&docker, &instance).await;
            });
        }
        Ok(docker)
    }

    /// The engine if a connection was made already; never connects.
    async fn connected(&self) -> Option<Docker> {
        self.client.lock().await.clone()
    }
}

#[async_trait]
impl Backend for DockerBackend {
    fn instance_id(&self) -> &str {
        &self.instance.id
    }

    async fn connect(&self) -> Result<(), SandboxError> {
        self.docker().await.map(|_| ())
    }

    async fn choose_image(
        &self,
        language: Language,
        choices: &[String],
    ) -> Result<String, SandboxError> {
        let docker = self.docker().await?;
        images::choose(&docker, &self.images, &self.chosen, language, choices).await
    }

    fn chosen_image(&self, language: Language) -> Option<String> {
        lock(&self.chosen).get(&language).cloned()
    }

    fn forget_image(&self, image: &str) {
        lock(&self.images).remove(image);
        lock(&self.chosen).retain(|_, chosen| chosen != image);
    }

    async fn prepare(&self, image: &str, setup: &AssetSetup) -> Result<Prepared, SandboxError> {
        let docker = self.docker().await?;
        let (volume, prepared) = setup::fill(&docker, &self.instance, image, setup).await?;
        lock(&self.asset_volumes).insert(image.to_string(), volume);
        Ok(prepared)
    }

    async fn start(&self, spec: &BoxSpec) -> Result<BoxIo, SandboxError> {
        let docker = self.docker().await?;
        let volume = lock(&self.asset_volumes)
            .get(&spec.image)
            .cloned()
            .ok_or_else(|| {
                SandboxError::Engine(format!(
                    "the image `{}` was not prepared before a box of it was started",
                    spec.image
                ))
            })?;
        let socket = match spec.network {
            super::BoxNetwork::Egress(purpose) => Some(
                lock(&self.egress_sockets)
                    .get(&purpose)
                    .cloned()
                    .ok_or_else(|| {
                        SandboxError::Engine(format!(
                            "the {} egress route was not opened before a box used it",
                            purpose.name()
                        ))
                    })?,
            ),
            _ => None,
        };
        let body = container::create_body(spec, &self.instance, &volume, socket.as_deref());
        container::create_attached(&docker, spec, body).await
    }

    async fn status(&self, id: &str) -> BoxStatus {
        match self.docker().await {
            Ok(docker) => container::status(&docker, id).await,
            Err(_) => BoxStatus::Gone,
        }
    }

    async fn oom_killed(&self, id: &str) -> bool {
        match self.docker().await {
            Ok(docker) => container::oom_killed(&docker, id).await,
            Err(_) => false,
        }
    }

    async fn remove(&self, id: &str) {
        if let Some(docker) = self.connected().await {
            container::remove(&docker, id).await;
        }
    }

    async fn own_boxes(&self) -> Vec<BoxId> {
        let Some(docker) = self.connected().await else {
            return Vec::new(); // never connected: nothing was created
        };
        let own = format!("{LABEL}={}", self.instance.id);
        container::list_labelled(&docker, &own)
            .await
            .into_iter()
            .map(|(id, _, _)| id)
            .collect()
    }

    async fn release(&self) {
        for (_, socket) in lock(&self.egress_sockets).drain() {
            egress::remove_folder(&socket);
        }
        let Some(docker) = self.connected().await else {
            return;
        };
        let own = format!("{LABEL}={}", self.instance.id);
        for (name, _) in container::list_volumes_labelled(&docker, &own).await {
            container::remove_volume(&docker, &name).await;
        }
        lock(&self.asset_volumes).clear();
    }

    async fn sweep(&self) -> Result<(usize, usize), SandboxError> {
        self.swept.store(true, Ordering::SeqCst);
        let docker = self.docker().await?;
        Ok(sweep_dead_instances(&docker, &self.instance).await)
    }

    async fn ensure_package_storage(&self, name: &str, key: &str) -> Result<(), SandboxError> {
        let docker = self.docker().await?;
        container::create_package_volume(&docker, name, key).await
    }

    async fn package_storage(&self) -> Result<Vec<super::PackageStorage>, SandboxError> {
        let docker = self.docker().await?;
        package_volumes::list(&docker).await
    }

    async fn remove_package_storage(&self, name: &str) -> Result<bool, SandboxError> {
        let docker = self.docker().await?;
        package_volumes::remove(&docker, name).await
    }

    async fn open_egress(
        &self,
        purpose: EgressPurpose,
    ) -> Result<Box<dyn EgressListener>, SandboxError> {
        let (socket, listener) = egress::open(&self.instance, purpose)?;
        lock(&self.egress_sockets).insert(purpose, socket);
        Ok(Box::new(listener))
    }

    async fn publish_egress_trust(
        &self,
        purpose: EgressPurpose,
        pem: &str,
    ) -> Result<(), SandboxError> {
        let socket = lock(&self.egress_sockets)
            .get(&purpose)
            .cloned()
            .ok_or_else(|| {
                SandboxError::Engine(format!(
                    "the {} egress route was not opened before its certificates were published",
                    purpose.name()
                ))
            })?;
        // Beside the socket, in the folder boxes of the route mount: no mount of its own.
        egress::publish_trust(&socket, pem)?;
        Ok(())
    }

    async fn engine_networks(&self) -> Vec<crate::policy::allowlist::IpRange> {
        match self.docker().await {
            Ok(docker) => egress::networks(&docker).await,
            Err(_) => Vec::new(),
        }
    }

    async fn local_image(&self, name: &str) -> Result<Option<LocalImage>, SandboxError> {
        let docker = self.docker().await?;
        build::local_image(&docker, name).await
    }

    async fn build_image(
        &self,
        language: Language,
        base: Option<&str>,
        from_scratch: bool,
    ) -> Result<String, SandboxError> {
        let docker = self.docker().await?;
        build::build(&docker, language, base, from_scratch).await
    }

    async fn remove_image(&self, id: &str) -> Result<(), String> {
        let docker = self.docker().await.map_err(|error| error.to_string())?;
        docker
            .remove_image(
                id,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
}

/// Removes the containers, volumes and egress folders of processes that are gone
/// from this host; returns how many containers and volumes.
async fn sweep_dead_instances(docker: &Docker, instance: &Instance) -> (usize, usize) {
    let stale: Vec<String> = container::list_labelled(docker, LABEL)
        .await
        .into_iter()
        .filter(|(_, labels, age)| instance.owner_is_gone(labels, *age))
        .map(|(id, _, _)| id)
        .collect();
    if !stale.is_empty() {
        tracing::info!(
            count = stale.len(),
            "removing sandbox containers left by processes that are gone"
        );
        futures_util::future::join_all(stale.iter().map(|id| container::remove(docker, id))).await;
    }
    egress::sweep(instance);
    let mut volumes = 0;
    for (name, labels) in container::list_volumes_labelled(docker, LABEL).await {
        if instance.owner_is_gone(&labels, None) {
            container::remove_volume(docker, &name).await;
            volumes += 1;
        }
    }
    (stale.len(), volumes)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// An engine error in one line: what was being done, and bollard's words.
fn engine_error(doing: String, error: bollard::errors::Error) -> SandboxError {
    SandboxError::Engine(format!("{doing}: {error}"))
}
