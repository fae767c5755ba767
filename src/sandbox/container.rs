//! One sandbox container: the policy's limits turned into a `HostConfig`, the labels
//! that mark it as ours, and its creation and removal.
//!
//! A container's main process is the interpreter, under the guard, started ahead of the
//! call and attached so that it waits for its program on stdin (see `exec.rs`); it runs
//! once (or a session's calls), and then the container is removed. The guard's files
//! come from a volume this instance fills once per image (`setup_body`), mounted
//! read-only. Everything that makes it safe is set here, from the policy, so
//! `docker inspect` on any sandbox container shows exactly what the policy asked for.

use super::instance::Instance;
use super::SandboxError;
use crate::policy::{NetworkMode, Policy};
use bollard::container::AttachContainerResults;
use bollard::models::VolumeCreateRequest;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    AttachContainerOptions, ListContainersOptionsBuilder, ListVolumesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
};
use bollard::Docker;
use std::collections::HashMap;
use std::time::Duration;

/// The label every sandbox container carries; its value is the owning instance's id.
pub const LABEL: &str = "code-sandbox-mcp";
/// The owning process's pid, to find containers left behind by a process that died.
pub const LABEL_PID: &str = "code-sandbox-mcp.pid";
/// The owning process's start time (clock ticks since boot), so a reused pid is not
/// mistaken for the owner still being alive.
pub const LABEL_PID_START: &str = "code-sandbox-mcp.pid-start";
/// The owning process's PID namespace (`pid:[inode]`): a pid only names the owner when
/// read in the same namespace, so two containers of one host (same host name, same
/// daemon socket) cannot mistake each other's live owner for a dead one.
pub const LABEL_PIDNS: &str = "code-sandbox-mcp.pidns";
/// The owning process's host name: pids only mean something on the same host.
pub const LABEL_HOST: &str = "code-sandbox-mcp.host";

/// The unprivileged user code runs as (`nobody:nogroup` on Debian images).
pub const SANDBOX_USER: &str = "65534:65534";
/// The working directory, a tmpfs; the code file is written there.
pub const WORKDIR: &str = "/sandbox";

/// What a sandbox container runs as its main process, and where the guard's files are.
#[derive(Debug, Clone)]
pub struct MainProcess {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The volume holding the guard files, mounted read-only at the guard's place.
    pub guard_volume: String,
    /// Under a network allowlist, and in the package install step: the proxy's socket.
    pub egress: Option<super::network::Route>,
    /// A volume of installed packages, and whether this container writes it (the
    /// install step, which runs as root so that it can write a fresh volume).
    pub packages: Option<(String, bool)>,
}

/// The create request for one sandbox container of `image` under `policy`.
pub fn create_body(
    policy: &Policy,
    image: &str,
    instance: &Instance,
    main: &MainProcess,
) -> ContainerCreateBody {
    let limits = &policy.limits;
    let tmpfs_options = format!(
        "rw,nosuid,nodev,noexec,size={},mode=1777",
        limits.tmpfs.bytes()
    );
    let tmpfs = HashMap::from([
        (WORKDIR.to_string(), tmpfs_options.clone()),
        ("/tmp".to_string(), tmpfs_options),
    ]);
    let memory = i64::try_from(limits.memory.bytes()).unwrap_or(i64::MAX);
    let host_config = HostConfig {
        // An allowlist is no network either: its one way out is the proxy's socket.
        network_mode: Some(
            match (&policy.network, &main.egress) {
                (NetworkMode::Bridge, None) => "bridge",
                _ => "none",
            }
            .to_string(),
        ),
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        // The guard files: root-owned and read-only to everyone in the container.
        // and the policy's `mounts:`, read-only unless it says `rw`.
        mounts: Some(
            std::iter::once(guard_mount(&main.guard_volume, true))
                .chain(policy.mounts.iter().map(|mount| Mount {
                    target: Some(mount.target.clone()),
                    source: Some(mount.host.to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(!mount.rw),
                    ..Default::default()
                }))
                .chain(main.packages.iter().map(|(volume, writable)| Mount {
                    target: Some(super::packages::MOUNT.to_string()),
                    source: Some(volume.clone()),
                    typ: Some(MountType::VOLUME),
                    read_only: Some(!writable),
                    ..Default::default()
                }))
                .chain(main.egress.iter().map(|route| Mount {
                    target: Some(super::network::SOCKET_IN_SANDBOX.to_string()),
                    source: Some(route.socket.to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(false),
                    ..Default::default()
                }))
                .collect(),
        ),
        // A minimal init as PID 1 reaps orphans and passes signals on, so the
        // interpreter behaves as it does anywhere else (not as a PID 1 would).
        init: Some(true),
        cap_drop: Some(vec!["ALL".to_string()]),
        security_opt: Some(vec!["no-new-privileges".to_string()]),
        pids_limit: Some(i64::from(limits.pids)),
        memory: Some(memory),
        // Equal to `memory`: no swap on top, so the memory limit is the real limit.
        memory_swap: Some(memory),
        nano_cpus: Some((limits.cpus * 1e9).round() as i64),
        // /dev/shm is writable too; keep it no larger than the other scratch space.
        shm_size: Some(i64::try_from(limits.tmpfs.bytes()).unwrap_or(i64::MAX)),
        runtime: policy.runtime.clone(),
        ..Default::default()
    };
    let mut env: Vec<String> = vec!["HOME=/tmp".into(), "PYTHONDONTWRITEBYTECODE=1".into()];
    env.extend(main.env.iter().map(|(k, v)| format!("{k}={v}")));
    if let Some(route) = &main.egress {
        env.extend(route.env().into_iter().map(|(k, v)| format!("{k}={v}")));
    }
    ContainerCreateBody {
        image: Some(image.to_string()),
        // The image's own entrypoint (node's docker-entrypoint.sh, say) is bypassed.
        entrypoint: Some(main.argv.clone()),
        cmd: Some(Vec::new()),
        env: Some(env),
        user: Some(match main.packages {
            Some((_, true)) => "0".to_string(),
            _ => SANDBOX_USER.to_string(),
        }),
        working_dir: Some(WORKDIR.to_string()),
        network_disabled: Some(policy.network != NetworkMode::Bridge || main.egress.is_some()),
        labels: Some(instance.labels()),
        host_config: Some(host_config),
        ..attached()
    }
}

/// The create request of the container that fills `volume` with the guard files: the
/// image's own shell, as root (the files are root's), running `script`, reading stdin;
/// no network, nothing else writable.
pub fn setup_body(
    image: &str,
    instance: &Instance,
    volume: &str,
    script: &str,
) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec!["sh".into(), "-c".into(), script.to_string()]),
        cmd: Some(Vec::new()),
        user: Some("0".to_string()),
        network_disabled: Some(true),
        labels: Some(instance.labels()),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_string()),
            readonly_rootfs: Some(true),
            mounts: Some(vec![guard_mount(volume, false)]),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            cap_drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        ..attached()
    }
}

fn guard_mount(volume: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(super::guard::INSTALL_DIR.to_string()),
        source: Some(volume.to_string()),
        typ: Some(MountType::VOLUME),
        read_only: Some(read_only),
        ..Default::default()
    }
}

/// A container whose main process reads the stdin it is attached to, once.
fn attached() -> ContainerCreateBody {
    ContainerCreateBody {
        open_stdin: Some(true),
        stdin_once: Some(true),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        ..Default::default()
    }
}

/// Creates a container from `body`, attaches to its stdin and output, then starts it;
/// a container that fails to start is removed.
pub async fn create_attached(
    docker: &Docker,
    policy: &Policy,
    image: &str,
    body: ContainerCreateBody,
) -> Result<(String, AttachContainerResults), SandboxError> {
    let created = docker
        .create_container(None, body)
        .await
        .map_err(|error| match error {
            // Removed since it was checked (`docker rmi`): the next run checks again.
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message,
            } if message.contains("image") || message.contains("No such") => {
                SandboxError::ImageUnavailable(format!(
                    "image `{image}` is no longer available ({message}); the next run pulls it \
                     again, or set the policy's `images:` to an image that exists locally"
                ))
            }
            // The runtime the policy names is not registered with this engine: refused,
            // never retried with the default (weaker) runtime.
            bollard::errors::Error::DockerResponseServerError { message, .. }
                if policy.runtime.is_some() && message.contains("runtime") =>
            {
                SandboxError::LayerUnavailable(format!(
                    "the policy asks for the container runtime `{}`, which this engine does not \
                     offer ({message}); register it with the engine (for gVisor: install runsc \
                     and add it under \"runtimes\" in /etc/docker/daemon.json), or remove \
                     `runtime:` from the policy. Nothing was run with a weaker runtime.",
                    policy.runtime.as_deref().unwrap_or_default()
                ))
            }
            error => engine_error(format!("creating a container from `{image}`"), error),
        })?;
    let id = created.id;
    let options = AttachContainerOptions {
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let attached = match docker.attach_container(&id, Some(options)).await {
        Ok(attached) => attached,
        Err(error) => {
            remove(docker, &id).await;
            return Err(engine_error("attaching to a container".into(), error));
        }
    };
    if let Err(error) = docker.start_container(&id, None).await {
        remove(docker, &id).await;
        return Err(engine_error(
            format!("starting a container from `{image}`"),
            error,
        ));
    }
    Ok((id, attached))
}

/// A new, empty volume labelled as this instance's.
pub async fn create_volume(docker: &Docker, instance: &Instance) -> Result<String, SandboxError> {
    let request = VolumeCreateRequest {
        labels: Some(instance.labels()),
        ..Default::default()
    };
    docker
        .create_volume(request)
        .await
        .map(|volume| volume.name)
        .map_err(|error| engine_error("creating the guard volume".into(), error))
}

/// Removes a volume; one that is gone already is not an error.
pub async fn remove_volume(docker: &Docker, name: &str) {
    let options = RemoveVolumeOptionsBuilder::default().force(true).build();
    match docker.remove_volume(name, Some(options)).await {
        Ok(()) => tracing::debug!(volume = short(name), "volume removed"),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(error) => {
            tracing::warn!(volume = short(name), %error, "could not remove a sandbox volume")
        }
    }
}

/// Kills and removes a container; one that is already gone is not an error.
pub async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(id, Some(options)).await {
        Ok(()) => tracing::debug!(container = short(id), "removed"),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        // 409: removal already in progress (a timeout kill racing the normal cleanup).
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => {}
        Err(error) => {
            tracing::warn!(container = short(id), %error, "could not remove a sandbox container")
        }
    }
}

/// Containers (running or not) matching a label filter, with their labels and age.
pub async fn list_labelled(
    docker: &Docker,
    filter: &str,
) -> Vec<(String, HashMap<String, String>, Option<Duration>)> {
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&HashMap::from([(
            "label".to_string(),
            vec![filter.to_string()],
        )]))
        .build();
    match docker.list_containers(Some(options)).await {
        Ok(containers) => containers
            .into_iter()
            .filter_map(|c| {
                let age = c.created.and_then(|created| {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .ok()?;
                    now.checked_sub(Duration::from_secs(u64::try_from(created).ok()?))
                });
                Some((c.id?, c.labels.unwrap_or_default(), age))
            })
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "listing sandbox containers");
            Vec::new()
        }
    }
}

/// Volumes matching a label filter, with their labels.
pub async fn list_volumes_labelled(
    docker: &Docker,
    filter: &str,
) -> Vec<(String, HashMap<String, String>)> {
    let options = ListVolumesOptionsBuilder::default()
        .filters(&HashMap::from([(
            "label".to_string(),
            vec![filter.to_string()],
        )]))
        .build();
    match docker.list_volumes(Some(options)).await {
        Ok(list) => list
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|volume| (volume.name, volume.labels))
            .collect(),
        Err(error) => {
            tracing::warn!(%error, "listing sandbox volumes");
            Vec::new()
        }
    }
}

/// The first 12 characters of an id, as `docker ps` shows it.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

pub fn engine_error(doing: String, error: bollard::errors::Error) -> SandboxError {
    SandboxError::Engine(format!("{doing}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    fn policy() -> Policy {
        let mut policy = Policy::preset("default").expect("default preset");
        policy.limits.memory = crate::policy::ByteSize(64 << 20);
        policy.limits.tmpfs = crate::policy::ByteSize(16 << 20);
        policy.limits.pids = 32;
        policy.limits.cpus = 0.5;
        policy
    }

    fn main() -> MainProcess {
        MainProcess {
            argv: vec!["/usr/bin/python3".into(), "-c".into(), "pass".into()],
            env: vec![("A".into(), "b".into())],
            guard_volume: "guard".into(),
            egress: None,
            packages: None,
        }
    }

    #[test]
    fn every_hardening_setting_comes_from_the_policy() {
        let instance = Instance::for_tests("abc");
        let body = create_body(&policy(), "python:3.12-slim", &instance, &main());
        let host = body.host_config.as_ref().unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges".to_string()])
        );
        assert_eq!(host.pids_limit, Some(32));
        assert_eq!(host.memory, Some(64 << 20));
        assert_eq!(host.memory_swap, Some(64 << 20));
        assert_eq!(host.nano_cpus, Some(500_000_000));
        let tmpfs = host.tmpfs.as_ref().unwrap();
        assert!(tmpfs["/sandbox"].contains("size=16777216"));
        assert!(tmpfs["/tmp"].contains("size=16777216"));
        assert_eq!(body.user.as_deref(), Some("65534:65534"));
        assert_eq!(body.working_dir.as_deref(), Some("/sandbox"));
        assert_eq!(body.labels.as_ref().unwrap()[LABEL], "abc");
        assert_eq!(body.image.as_deref(), Some("python:3.12-slim"));
        // The interpreter is the main process, waiting on its stdin, behind an init.
        assert_eq!(body.entrypoint, Some(main().argv));
        assert_eq!((body.open_stdin, body.stdin_once), (Some(true), Some(true)));
        assert_eq!(host.init, Some(true));
        assert!(body.env.as_ref().unwrap().contains(&"A=b".to_string()));
        let mount = &host.mounts.as_ref().unwrap()[0];
        assert_eq!(mount.target.as_deref(), Some("/opt/code-sandbox"));
        assert_eq!(
            (mount.source.as_deref(), mount.read_only),
            (Some("guard"), Some(true))
        );
    }

    #[test]
    fn bridge_only_when_the_policy_says_so() {
        let mut policy = policy();
        policy.network = NetworkMode::Bridge;
        let body = create_body(&policy, "x", &Instance::for_tests("abc"), &main());
        assert_eq!(
            body.host_config.unwrap().network_mode.as_deref(),
            Some("bridge")
        );
        assert_eq!(body.network_disabled, Some(false));
    }
}
