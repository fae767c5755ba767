//! One box as a container: a [`BoxSpec`] turned into a create request (limits into a
//! `HostConfig`, the labels that mark it as ours), its creation attached, what the
//! engine says of it afterwards, and its removal.
//!
//! A container's main process is the spec's command behind a minimal init, started
//! ahead of the call and attached so that it waits for its program on stdin. Everything
//! that makes it safe is set here, so `docker inspect` on any sandbox container shows
//! exactly what the policy asked for.

use super::instance::Instance;
use super::{engine_error, LABEL_PACKAGES};
use crate::sandbox::backend::{short, BoxIo, BoxNetwork, BoxSpec, BoxStatus};
use crate::sandbox::capture::Stream;
use crate::sandbox::{layout, SandboxError};
use bollard::container::{AttachContainerResults, LogOutput};
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::VolumeCreateRequest;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    AttachContainerOptions, ListContainersOptionsBuilder, ListVolumesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder,
};
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// The create request for the container of `spec`, whose assets come from the volume
/// `assets` and, under an egress route, whose proxy socket is `egress` on this host (in
/// a folder of its own, which is what is mounted, with the certificates the box trusts
/// when the proxy ends TLS for it).
pub fn create_body(
    spec: &BoxSpec,
    instance: &Instance,
    assets: &str,
    egress: Option<&Path>,
) -> ContainerCreateBody {
    let limits = &spec.limits;
    let tmpfs_options = format!(
        "rw,nosuid,nodev,noexec,size={},mode=1777",
        limits.tmpfs.bytes()
    );
    let tmpfs = HashMap::from([
        (layout::WORKDIR.to_string(), tmpfs_options.clone()),
        ("/tmp".to_string(), tmpfs_options),
    ]);
    let memory = i64::try_from(limits.memory.bytes()).unwrap_or(i64::MAX);
    let installing = spec.packages.as_ref().is_some_and(|p| p.writable);
    let host_config = HostConfig {
        // An egress route is no network either: its one way out is the proxy's socket.
        network_mode: Some(
            match spec.network {
                BoxNetwork::Bridge => "bridge",
                BoxNetwork::None | BoxNetwork::Egress(_) => "none",
            }
            .to_string(),
        ),
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        // The assets: root-owned and read-only to everyone in the container; the
        // policy's `mounts:`, read-only unless it says `rw`; a package set; the proxy.
        mounts: Some(
            std::iter::once(assets_mount(assets, true))
                .chain(spec.mounts.iter().map(|mount| Mount {
                    target: Some(mount.target.clone()),
                    source: Some(mount.host.to_string_lossy().into_owned()),
                    typ: Some(MountType::BIND),
                    read_only: Some(!mount.rw),
                    ..Default::default()
                }))
                .chain(spec.packages.iter().map(|packages| Mount {
                    target: Some(layout::PACKAGES.to_string()),
                    source: Some(packages.storage.clone()),
                    typ: Some(MountType::VOLUME),
                    read_only: Some(!packages.writable),
                    ..Default::default()
                }))
                // The socket's folder, read-only (a connection needs no write to the
                // mount): the box can neither add to it nor replace the socket.
                .chain(egress.map(|socket| {
                    Mount {
                        target: Some(layout::EGRESS_FOLDER.to_string()),
                        source: Some(
                            socket
                                .parent()
                                .unwrap_or(socket)
                                .to_string_lossy()
                                .into_owned(),
                        ),
                        typ: Some(MountType::BIND),
                        read_only: Some(true),
                        ..Default::default()
                    }
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
        runtime: spec.runtime.clone(),
        ..Default::default()
    };
    let mut env: Vec<String> = vec![
        format!("HOME={}", layout::HOME),
        "PYTHONDONTWRITEBYTECODE=1".into(),
    ];
    env.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
    if egress.is_some() {
        env.extend(
            layout::proxy_env()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}")),
        );
    }
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        // The image's own entrypoint (node's docker-entrypoint.sh, say) is bypassed.
        entrypoint: Some(spec.argv.clone()),
        cmd: Some(Vec::new()),
        env: Some(env),
        // The install step writes a fresh volume, which only root may.
        user: Some(if installing { "0" } else { layout::USER }.to_string()),
        working_dir: Some(layout::WORKDIR.to_string()),
        network_disabled: Some(spec.network != BoxNetwork::Bridge),
        labels: Some(instance.labels()),
        host_config: Some(host_config),
        ..attached()
    }
}

/// The create request of the container that fills `volume` with the assets: the
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
            mounts: Some(vec![assets_mount(volume, false)]),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            cap_drop: Some(vec!["ALL".to_string()]),
            ..Default::default()
        }),
        ..attached()
    }
}

fn assets_mount(volume: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(layout::ASSETS.to_string()),
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

/// Creates the box of `spec` from `body`, attached, then starts it.
pub async fn create_attached(
    docker: &Docker,
    spec: &BoxSpec,
    body: ContainerCreateBody,
) -> Result<BoxIo, SandboxError> {
    let (id, attached) =
        create_and_attach(docker, &spec.image, spec.runtime.as_deref(), body).await?;
    let output = attached.output.filter_map(|item| async move {
        match item {
            Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                Some(Ok((Stream::Stdout, message.to_vec())))
            }
            Ok(LogOutput::StdErr { message }) => Some(Ok((Stream::Stderr, message.to_vec()))),
            Ok(LogOutput::StdIn { .. }) => None,
            Err(error) => Some(Err(error.to_string())),
        }
    });
    Ok(BoxIo {
        id,
        input: attached.input,
        output: Box::pin(output),
    })
}

/// Creates a container from `body`, attaches to its stdin and output, then starts it;
/// a container that fails to start is removed.
pub async fn create_and_attach(
    docker: &Docker,
    image: &str,
    runtime: Option<&str>,
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
                if runtime.is_some() && message.contains("runtime") =>
            {
                SandboxError::LayerUnavailable(format!(
                    "the policy asks for the container runtime `{}`, which this engine does not \
                     offer ({message}); register it with the engine (for gVisor: install runsc \
                     and add it under \"runtimes\" in /etc/docker/daemon.json), or remove \
                     `runtime:` from the policy. Nothing was run with a weaker runtime.",
                    runtime.unwrap_or_default()
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

/// What the engine says of container `id` now.
pub async fn status(docker: &Docker, id: &str) -> BoxStatus {
    let Ok(info) = docker.inspect_container(id, None).await else {
        return BoxStatus::Gone;
    };
    match info.state {
        Some(state) if state.running == Some(true) => BoxStatus::Running,
        Some(state) => state.exit_code.map_or(BoxStatus::Gone, BoxStatus::Exited),
        None => BoxStatus::Gone,
    }
}

/// Whether the kernel's OOM killer struck inside the container: the engine's flag, set
/// for a kill anywhere in the container's memory cgroup, or, for a session whose
/// container still runs, the cgroup's own counter (`oom_kill` in cgroup v2's
/// `memory.events`).
pub async fn oom_killed(docker: &Docker, id: &str) -> bool {
    let Ok(info) = docker.inspect_container(id, None).await else {
        return false;
    };
    let state = info.state.unwrap_or_default();
    if state.oom_killed == Some(true) {
        return true;
    }
    if state.running != Some(true) {
        return false;
    }
    let options = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(false),
        cmd: Some(vec![
            "cat".to_string(),
            "/sys/fs/cgroup/memory.events".to_string(),
            "/sys/fs/cgroup/memory/memory.oom_control".to_string(),
        ]),
        ..Default::default()
    };
    let Ok(exec) = docker.create_exec(id, options).await else {
        return false;
    };
    let Ok(StartExecResults::Attached { mut output, .. }) = docker.start_exec(&exec.id, None).await
    else {
        return false;
    };
    let mut text = Vec::new();
    while let Some(Ok(chunk)) = output.next().await {
        text.extend_from_slice(chunk.as_ref());
        if text.len() > 64 * 1024 {
            break;
        }
    }
    oom_kills(&String::from_utf8_lossy(&text)) > 0
}

/// The `oom_kill N` count in cgroup memory statistics (0 when absent).
fn oom_kills(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("oom_kill "))
        .filter_map(|n| n.trim().parse::<u64>().ok())
        .sum()
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
        .map_err(|error| engine_error("creating the assets volume".into(), error))
}

/// The volume of a package set, `name`, labelled with its `key`: made when missing,
/// kept as it is otherwise (it outlives this instance, so that the next server does
/// not install the same set again).
pub async fn create_package_volume(
    docker: &Docker,
    name: &str,
    key: &str,
) -> Result<(), SandboxError> {
    let request = VolumeCreateRequest {
        name: Some(name.to_string()),
        labels: Some(HashMap::from([(
            LABEL_PACKAGES.to_string(),
            key.to_string(),
        )])),
        ..Default::default()
    };
    docker
        .create_volume(request)
        .await
        .map(|_| ())
        .map_err(|error| engine_error("making the packages volume".into(), error))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ByteSize, Limits, Policy};
    use crate::sandbox::backend::{EgressPurpose, PackageMount};
    use crate::sandbox::LABEL;

    fn limits() -> Limits {
        let mut limits = Policy::preset("default").expect("default preset").limits;
        limits.memory = ByteSize(64 << 20);
        limits.tmpfs = ByteSize(16 << 20);
        limits.pids = 32;
        limits.cpus = 0.5;
        limits
    }

    fn spec() -> BoxSpec {
        BoxSpec {
            image: "python:3.12-slim".into(),
            argv: vec!["/usr/bin/python3".into(), "-c".into(), "pass".into()],
            env: vec![("A".into(), "b".into())],
            limits: limits(),
            network: BoxNetwork::None,
            runtime: None,
            mounts: Vec::new(),
            packages: None,
        }
    }

    #[test]
    fn every_hardening_setting_comes_from_the_spec() {
        let instance = Instance::for_tests("abc");
        let body = create_body(&spec(), &instance, "assets", None);
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
        assert_eq!(body.entrypoint, Some(spec().argv));
        assert_eq!((body.open_stdin, body.stdin_once), (Some(true), Some(true)));
        assert_eq!(host.init, Some(true));
        assert!(body.env.as_ref().unwrap().contains(&"A=b".to_string()));
        let mount = &host.mounts.as_ref().unwrap()[0];
        assert_eq!(mount.target.as_deref(), Some("/opt/code-sandbox"));
        assert_eq!(
            (mount.source.as_deref(), mount.read_only),
            (Some("assets"), Some(true))
        );
    }

    #[test]
    fn bridge_only_when_the_spec_says_so() {
        let spec = BoxSpec {
            network: BoxNetwork::Bridge,
            ..spec()
        };
        let body = create_body(&spec, &Instance::for_tests("abc"), "x", None);
        assert_eq!(
            body.host_config.unwrap().network_mode.as_deref(),
            Some("bridge")
        );
        assert_eq!(body.network_disabled, Some(false));
    }

    #[test]
    fn the_egress_route_is_a_socket_and_the_install_step_is_root() {
        let spec = BoxSpec {
            network: BoxNetwork::Egress(EgressPurpose::Install),
            packages: Some(PackageMount {
                storage: "set".into(),
                writable: true,
            }),
            ..spec()
        };
        let body = create_body(
            &spec,
            &Instance::for_tests("abc"),
            "x",
            Some(Path::new("/dev/shm/e/socket/egress.sock")),
        );
        let host = body.host_config.as_ref().unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        let mounts = host.mounts.as_ref().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m.target.as_deref() == Some(layout::EGRESS_FOLDER)
                && m.source.as_deref() == Some("/dev/shm/e/socket")
                && m.read_only == Some(true)));
        assert!(mounts
            .iter()
            .any(|m| m.target.as_deref() == Some(layout::PACKAGES) && m.read_only == Some(false)));
        assert_eq!(body.user.as_deref(), Some("0"));
        assert!(body
            .env
            .as_ref()
            .unwrap()
            .contains(&"HTTPS_PROXY=http://127.0.0.1:3128".to_string()));
    }

    #[test]
    fn counts_oom_kills_in_both_cgroup_versions() {
        let v2 = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(oom_kills(v2), 1);
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
        assert_eq!(oom_kills(v1), 2);
        assert_eq!(
            oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
            0
        );
        assert_eq!(oom_kills(""), 0);
    }
}
