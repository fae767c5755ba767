//! The egress route of a Docker box: a Unix socket on this host, in a private folder (one
//! per instance and purpose) of a tmpfs whose path says nothing of the user (`/dev/shm`,
//! else the host's temporary directory), bind-mounted into the container. A box can
//! read the source path of each of its mounts in `/proc/self/mountinfo`, as a path
//! within the source's filesystem: from `/dev/shm` that is `/code-sandbox-mcp-egress-…`,
//! not a temporary directory that can name the user (`$TMPDIR` on macOS). Which container a connection comes from is the kernel's word: the
//! peer's pid (`SO_PEERCRED`) and that process's cgroup, which names the container.
//!
//! A folder records its owner (the instance's labels), so that the sweep of a process
//! that is gone (a server killed with SIGKILL cannot remove its own) removes it.

use super::instance::Instance;
use crate::policy::allowlist::IpRange;
use crate::sandbox::backend::{BoxId, EgressListener, EgressPurpose, EgressStream};
use crate::sandbox::{layout, SandboxError};
use async_trait::async_trait;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// The folders of the instances' sockets, in the host's temporary directory.
const FOLDER_PREFIX: &str = "code-sandbox-mcp-egress-";
/// The labels of the instance a folder is for.
const OWNER_FILE: &str = "owner.json";
/// The folder, in an instance's folder, that holds the socket alone.
const SOCKET_FOLDER: &str = "socket";

/// Connections to one socket, each with the container it comes from.
pub struct SocketListener(UnixListener);

#[async_trait]
impl EgressListener for SocketListener {
    async fn accept(&self) -> std::io::Result<(Box<dyn EgressStream>, Option<BoxId>)> {
        let (client, _) = self.0.accept().await?;
        let from = client
            .peer_cred()
            .ok()
            .and_then(|credentials| credentials.pid())
            .and_then(container_of);
        Ok((Box::new(client), from))
    }
}

/// Makes the folder and socket of `instance`'s egress route for `purpose`; returns
/// the socket's path and its listener.
pub fn open(
    instance: &Instance,
    purpose: EgressPurpose,
) -> Result<(PathBuf, SocketListener), SandboxError> {
    let failed = |doing: &str, error: std::io::Error| {
        SandboxError::Engine(format!("{doing} for the egress proxy: {error}"))
    };
    let dir = socket_base().join(format!("{FOLDER_PREFIX}{}-{}", purpose.name(), instance.id));
    // Made here and now, or not at all: a folder of this name already there is not this
    // instance's (its name is unique to it), and may be another user's.
    make_private_folder(&dir).map_err(|e| failed("making a folder", e))?;
    // Whose folder it is, for the sweep of a process that is gone.
    let owner = serde_json::to_string(&instance.labels()).expect("labels serialize");
    std::fs::write(dir.join(OWNER_FILE), owner).map_err(|e| failed("writing the owner", e))?;
    // The socket alone in a folder of its own, which the box gets: the owner file stays
    // out of its sight.
    let socket_folder = dir.join(SOCKET_FOLDER);
    make_private_folder(&socket_folder).map_err(|e| failed("making a folder", e))?;
    let socket = socket_folder.join(layout::EGRESS_SOCKET_NAME);
    let listener = UnixListener::bind(&socket).map_err(|e| failed("making the socket", e))?;
    // The sandbox runs as an unprivileged user of its own, which must be able to
    // connect; the folder keeps everyone else on the host from finding it by listing
    // (it is only traversable).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| failed("opening the socket", e))?;
        for folder in [&socket_folder, &dir] {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| failed("closing the folder", e))?;
        }
    }
    tracing::info!(socket = %socket.display(), "egress route ready");
    Ok((socket, SocketListener(listener)))
}

/// Where the socket folders go: `/dev/shm` when it is a folder (a tmpfs on Linux),
/// else the host's temporary directory.
fn socket_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if cfg!(target_os = "linux") && shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

#[cfg(unix)]
fn make_private_folder(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn make_private_folder(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)
}

/// Writes `pem` beside the route's socket, readable by the boxes' user; returns its
/// path, which boxes of the route mount read-only at [`layout::EGRESS_TRUST`].
///
/// [`layout::EGRESS_TRUST`]: crate::sandbox::layout::EGRESS_TRUST
pub fn publish_trust(socket: &Path, pem: &str) -> Result<PathBuf, SandboxError> {
    let path = socket.with_file_name("trust.pem");
    std::fs::write(&path, pem).map_err(|e| {
        SandboxError::Engine(format!("writing the egress proxy's certificates: {e}"))
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).map_err(|e| {
            SandboxError::Engine(format!("opening the egress proxy's certificates: {e}"))
        })?;
    }
    Ok(path)
}

/// The address ranges of the engine's networks (their IPAM subnets).
pub async fn networks(docker: &bollard::Docker) -> Vec<IpRange> {
    let networks = match docker
        .list_networks(None::<bollard::query_parameters::ListNetworksOptions>)
        .await
    {
        Ok(networks) => networks,
        Err(error) => {
            tracing::debug!(%error, "the engine's networks could not be listed");
            return Vec::new();
        }
    };
    networks
        .iter()
        .filter_map(|network| network.ipam.as_ref()?.config.as_ref())
        .flatten()
        .filter_map(|config| config.subnet.as_deref())
        .filter_map(|subnet| {
            // An engine may write a subnet with host bits set (`172.17.0.1/16`).
            let (address, prefix) = subnet.split_once('/')?;
            let address: std::net::IpAddr = address.parse().ok()?;
            let prefix: u8 = prefix.parse().ok()?;
            IpRange::new(address, prefix)
                .or_else(|_| IpRange::parse(&masked_text(address, prefix)))
                .ok()
        })
        .collect()
}

/// `address/prefix` with the bits past the prefix cleared, as text.
fn masked_text(address: std::net::IpAddr, prefix: u8) -> String {
    match address {
        std::net::IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            format!(
                "{}/{prefix}",
                std::net::Ipv4Addr::from(u32::from(v4) & mask)
            )
        }
        std::net::IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            format!(
                "{}/{prefix}",
                std::net::Ipv6Addr::from(u128::from(v6) & mask)
            )
        }
    }
}

/// Removes the folder of the route whose socket is `socket`.
pub fn remove_folder(socket: &Path) {
    if let Some(dir) = socket.parent().and_then(Path::parent) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Removes the socket folders of processes that are gone; returns how many.
pub fn sweep(instance: &Instance) -> usize {
    // The temporary directory too: earlier versions made the folders there.
    let mut bases = vec![socket_base(), std::env::temp_dir()];
    bases.dedup();
    let mut removed = 0;
    for entry in bases
        .iter()
        .filter_map(|base| std::fs::read_dir(base).ok())
        .flat_map(|entries| entries.flatten())
    {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(FOLDER_PREFIX) {
            continue;
        }
        let owner: Option<HashMap<String, String>> =
            std::fs::read_to_string(entry.path().join(OWNER_FILE))
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok());
        if owner.is_some_and(|labels| instance.owner_is_gone(&labels, None))
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// The container a process of this host belongs to: the 64-hex-digit id in its
/// cgroup path (`/docker/<id>`, `docker-<id>.scope`, `libpod-<id>.scope`).
fn container_of(pid: i32) -> Option<String> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroups.lines().find_map(|line| {
        line.split(|c: char| !c.is_ascii_hexdigit())
            .find(|part| part.len() == 64)
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_is_known_by_its_cgroup() {
        // This process is in no container: no id.
        assert_eq!(container_of(std::process::id() as i32), None);
    }
}
