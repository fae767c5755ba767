//! Connecting to an allowed host: its addresses are found here, never by the client
//! (the sandbox has no DNS), each is judged ([`super::address`]) before it is tried,
//! and the connection goes to the judged address itself (resolved once: a name cannot
//! point elsewhere between the check and the connection). `localhost` and names under
//! it are this machine's loopback and never looked up.

use super::address::Surroundings;
use crate::policy::allowlist::{Host, HostRule};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpStream;

/// How long an upstream may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Fixed answers for names, in place of the system's resolver (tests).
pub type Answers = std::sync::Arc<dyn Fn(&str) -> Vec<IpAddr> + Send + Sync>;

/// Why no connection was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialError {
    /// Every address the host has is one the proxy does not connect to (a 403).
    Refused(String),
    /// The host has no address, or none answered (a 502).
    Failed(String),
}

/// Connects to `host:port`, which the entries `matched` of `allow` let through; or
/// says why not (a refusal of every address, or the last connection error).
pub async fn dial(
    host: &Host,
    port: u16,
    matched: &[&HostRule],
    allow: &[HostRule],
    surroundings: &Surroundings,
    answers: Option<&Answers>,
) -> Result<TcpStream, DialError> {
    let addresses: Vec<IpAddr> = match host {
        Host::Ip(ip) => vec![*ip],
        localhost if localhost.is_localhost() => {
            vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
        }
        Host::Name(name) if answers.is_some() => answers.map(|a| a(name)).unwrap_or_default(),
        Host::Name(name) => tokio::net::lookup_host((name.as_str(), port))
            .await
            .map_err(|e| DialError::Failed(format!("{name} does not resolve: {e}")))?
            .map(|address| address.ip())
            .collect(),
    };
    let mut refused = Vec::new();
    let mut last_error = None;
    for ip in addresses {
        let ip = match surroundings.judge(ip, port, matched, allow) {
            Ok(ip) => ip,
            Err(why) => {
                refused.push(why);
                continue;
            }
        };
        let address = SocketAddr::new(ip, port);
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                if !refused.is_empty() {
                    tracing::debug!(%host, refused = ?refused, "egress: some addresses of an allowed name were skipped");
                }
                return Ok(stream);
            }
            Ok(Err(error)) => {
                last_error = Some(format!(
                    "{} ({address}) refused the connection: {error}",
                    host.with_port(port)
                ))
            }
            Err(_) => {
                last_error = Some(format!(
                    "{} ({address}) did not answer",
                    host.with_port(port)
                ))
            }
        }
    }
    Err(match (last_error, refused.is_empty()) {
        (Some(error), _) => DialError::Failed(error),
        (None, false) => {
            let prefix = match host {
                Host::Name(name) => format!("{name} resolves to "),
                Host::Ip(_) => String::new(),
            };
            DialError::Refused(format!("{prefix}{}", refused.join("; ")))
        }
        (None, true) => DialError::Failed(format!("{host} has no address")),
    })
}
