//! Every path and port inside a box, in one place. The core writes programs and files
//! to them, the assets (guards, bootstraps) read them, and each backend mounts what it
//! must at them; none of those spells a path of its own.
//!
//! A box sees: its working directory ([`WORKDIR`]) and `/tmp` as small writable
//! scratch space, everything else read-only; the box's assets at [`ASSETS`]; a package
//! set, when a run asks for one, at [`PACKAGES`]; the policy's CA bundle, if any, at
//! [`CERTIFICATES`]; and, under a network allowlist, the
//! egress proxy's socket at [`EGRESS_SOCKET`], which the bootstrap relays to from
//! `127.0.0.1:`[`RELAY_PORT`], and, when the proxy ends TLS for it (secrets), the
//! certificates it trusts at [`EGRESS_TRUST`].

/// The working directory: scratch space (a size-capped tmpfs) where the program's own
/// file and the files handed in are written, and where it writes its own.
pub const WORKDIR: &str = "/sandbox";

/// Scratch directories besides [`WORKDIR`] that the program may write.
pub const SCRATCH: [&str; 2] = ["/tmp", "/dev/shm"];

/// The box's assets: the guards and the kernel-floor helper, root's and read-only.
pub const ASSETS: &str = "/opt/code-sandbox";

/// Where a package set is mounted: writable in its install step, read-only in runs.
pub const PACKAGES: &str = "/opt/packages";

/// Where the policy's CA bundle (`certificates:`) appears, read-only, when it names one.
pub const CERTIFICATES: &str = "/opt/code-sandbox-certificates/bundle.pem";

/// The variables that make TLS clients trust [`CERTIFICATES`]: OpenSSL's default (and
/// so Python's `ssl`, httpx, urllib), requests', pip's, curl's; Node adds the file to
/// its own roots (it reads nothing else), and npm follows Node.
pub fn certificates_env() -> Vec<(String, String)> {
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "PIP_CERT",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    ]
    .into_iter()
    .map(|name| (name.to_string(), CERTIFICATES.to_string()))
    .collect()
}
/// The folder the egress proxy's socket is in, inside a box under a network allowlist:
/// a backend mounts a folder holding only the socket here (not the socket file itself,
/// which gVisor cannot mount).
pub const EGRESS_FOLDER: &str = "/run/code-sandbox";

/// The socket's name in [`EGRESS_FOLDER`].
pub const EGRESS_SOCKET_NAME: &str = "egress.sock";

/// Where the egress proxy's socket appears in a box under a network allowlist.
pub const EGRESS_SOCKET: &str = "/run/code-sandbox/egress.sock";

/// Where the certificates a box trusts are, when the egress proxy ends TLS for it
/// (the policy has secrets): the roots the server trusts and the proxy's own CA.
pub const EGRESS_TRUST: &str = "/run/code-sandbox/trust.pem";

/// The loopback port inside the box that the bootstrap relays to [`EGRESS_SOCKET`].
pub const RELAY_PORT: u16 = 3128;

/// Where the interpreter saves the figures it draws, for the supervisor to return.
pub const FIGURES: &str = "/tmp/.code-sandbox-figures";

/// The unprivileged user programs run as (`nobody:nogroup` on Debian images).
pub const USER: &str = "65534:65534";

/// The home directory programs see (`HOME`): the scratch `/tmp`, since nothing else
/// is writable.
pub const HOME: &str = "/tmp";

/// A path of `name` in [`WORKDIR`].
pub fn in_workdir(name: &str) -> String {
    format!("{WORKDIR}/{name}")
}

/// A path of `name` in [`ASSETS`].
pub fn asset(name: &str) -> String {
    format!("{ASSETS}/{name}")
}

/// The variables that point HTTP clients at the relay (both spellings: curl and
/// Python read the lower-case ones, many others the upper-case), and the switch that
/// makes newer Node releases read them for `fetch` and `http` (Node 20 ignores it).
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{RELAY_PORT}");
    ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .into_iter()
        .map(|name| (name.to_string(), url.clone()))
        .chain([("NODE_USE_ENV_PROXY".to_string(), "1".to_string())])
        .collect()
}

/// The variables that make HTTP clients trust [`EGRESS_TRUST`]: OpenSSL and Python's
/// `ssl` (and so urllib, httpx, aiohttp), requests, curl, and Node (which adds it to
/// its own roots).
pub fn trust_env() -> Vec<(String, String)> {
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
    ]
    .into_iter()
    .map(|name| (name.to_string(), EGRESS_TRUST.to_string()))
    .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_socket_is_in_its_folder() {
        assert_eq!(
            super::EGRESS_SOCKET,
            format!("{}/{}", super::EGRESS_FOLDER, super::EGRESS_SOCKET_NAME)
        );
    }
}
