//! The egress proxy: an HTTP proxy in the server's own process, reached from a box only
//! through the backend's egress route (the box has no network at all), that takes the
//! sandbox's connections to the hosts the policy's `network.allow` names and refuses
//! the rest.
//!
//! What it holds to, and why:
//! - Three ways through: `CONNECT host:port` (a tunnel: HTTPS, or plain HTTP), and
//!   absolute-form requests, `GET http://host/…` (plain HTTP) or `GET https://host/…`
//!   (the proxy makes the TLS, verified against the server's roots: what Node's axios
//!   sends). Anything else is a 400.
//! - Requests are read strictly ([`super::head`], [`super::incoming`]): CRLF only, one
//!   `Host` that agrees with the target, one framing per body, and every request on a
//!   connection is read and vetted, never passed on as bytes.
//! - The host is checked against the list before anything is resolved; the address
//!   connected to is judged after ([`super::address`]): loopback, private, link-local,
//!   the engine's networks and this machine's own addresses only when the list names
//!   them by address.
//! - A tunnel carries what it was opened for ([`super::tunnel`]): TLS naming its host,
//!   or HTTP requests for its host. To a host a secret lists, the proxy ends the TLS
//!   itself to swap the secret's placeholder ([`super::intercept`]).
//! - One box holds at most [`super::limits::PER_BOX`] connections ([`super::limits`]).
//! - Every refusal is answered (403, 400 or 503, the reason in the body, so the
//!   program's error says it) and recorded with the box the connection came from (the
//!   backend knows it by the kernel's word, not the client's), so the run that made it
//!   gets it back in its result.

use super::address::Surroundings;
use super::dial::{dial, DialError};
use super::head::{Head, Target};
use super::incoming::{Incoming, ReadError};
use super::limits::Caps;
use super::refusals::{Refusal, RefusalLog};
use super::relay::{read_request, relay, respond, Recorder, Refused, HEAD_TIMEOUT};
use super::secrets::Secrets;
use super::tunnel::{self, Carries};
use super::{intercept, upstream_tls};
use crate::policy::allowlist::{Host, HostRule};
use crate::sandbox::backend::{EgressListener, EgressStream};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

/// What one proxy knows and holds.
pub struct Proxy {
    /// `network.allow`, and the hosts the secrets list.
    pub allow: Vec<HostRule>,
    pub surroundings: Arc<Surroundings>,
    pub log: Arc<RefusalLog>,
    pub caps: Arc<Caps>,
    /// The secrets and their placeholders (none: no secrets).
    pub secrets: Option<Arc<Secrets>>,
    /// The CA that signs the certificates of the hosts the proxy ends TLS for.
    pub interceptor: Option<Arc<intercept::Interceptor>>,
    /// The proxy's own TLS to real hosts.
    pub upstream_tls: upstream_tls::UpstreamTls,
    /// Where names are looked up: the system's resolver, unless a test brings answers.
    pub resolve: Option<super::dial::Answers>,
}

/// Serves the proxy on `listener` until the task is aborted.
pub async fn serve(listener: Box<dyn EgressListener>, proxy: Arc<Proxy>) {
    loop {
        let (client, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, most likely: wait for some to be closed.
                tracing::warn!(%error, "egress proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let from = from.unwrap_or_default();
        match proxy.caps.admit(&from) {
            Ok(slot) => {
                let proxy = proxy.clone();
                tokio::spawn(async move {
                    handle(client, &from, &proxy).await;
                    drop(slot);
                });
            }
            Err(over) => {
                proxy.log.record(
                    &from,
                    Refusal {
                        host: String::new(),
                        port: 0,
                        reason: over.reason(),
                    },
                );
                tokio::spawn(async move {
                    let mut client = client;
                    let _ = tokio::time::timeout(
                        Duration::from_secs(1),
                        respond(&mut client, "503 Service Unavailable", &over.reason()),
                    )
                    .await;
                });
            }
        }
    }
}

type ClientRead = ReadHalf<Box<dyn EgressStream>>;
type ClientWrite = WriteHalf<Box<dyn EgressStream>>;

/// One connection from box `from`.
async fn handle(client: Box<dyn EgressStream>, from: &str, proxy: &Proxy) {
    let (read, mut write) = tokio::io::split(client);
    let mut incoming = Incoming::new(read, Vec::new());
    let head = match read_request(&mut incoming).await {
        Ok(Some(head)) => head,
        Ok(None) | Err(ReadError::Io(_)) => return,
        Err(ReadError::Malformed(why)) => {
            let _ = respond(&mut write, "400 Bad Request", &why).await;
            return;
        }
    };
    let target = match head.target() {
        Ok(Target::Origin) => Err(format!(
            "this is a proxy: send `{} http://host{}` (or https://), or `CONNECT host:port`",
            head.method, head.target
        )),
        other => other,
    };
    let target = match target {
        Ok(target) => target,
        Err(why) => {
            let _ = respond(&mut write, "400 Bad Request", &why).await;
            return;
        }
    };
    match target {
        Target::Tunnel { host, port } => {
            let opened = Opened::open(proxy, from, &head, host, port, port).await;
            let Some(opened) = opened.answer(&mut write).await else {
                return;
            };
            let refused = opened.framing_refusal(&head);
            if let Some(refused) = refused {
                opened.refuse(&mut write, refused).await;
                return;
            }
            let _ = write
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await;
            tunnel_through(incoming, write, opened, proxy).await;
        }
        Target::Absolute {
            tls,
            host,
            port,
            path,
        } => {
            if let Err(why) = head.framing() {
                let _ = respond(&mut write, "400 Bad Request", &why).await;
                return;
            }
            let default_port = if tls { 443 } else { 80 };
            let opened = Opened::open(proxy, from, &head, host, port, default_port).await;
            let Some(opened) = opened.answer(&mut write).await else {
                return;
            };
            forward(incoming, write, opened, head, tls, path, proxy).await;
        }
        Target::Origin => unreachable!("refused above"),
    }
}

/// A connection to an allowed host's checked address, and what it is for.
struct Opened<'a> {
    host: Host,
    port: u16,
    upstream: tokio::net::TcpStream,
    recorder: Recorder<'a>,
}

/// The outcome of opening: a connection, or the refusal to answer with.
enum Opening<'a> {
    Open(Opened<'a>),
    Refused(Recorder<'a>, Refused),
}

impl<'a> Opened<'a> {
    /// Checks `head` (its `Host`), the list and the address, and connects.
    async fn open(
        proxy: &'a Proxy,
        from: &'a str,
        head: &Head,
        host: Host,
        port: u16,
        default_port: u16,
    ) -> Opening<'a> {
        let recorder = Recorder {
            log: &proxy.log,
            client: from,
            host: host.clone(),
            port,
        };
        if let Err(why) = head.check_host(&host, port, default_port) {
            if !names_the_proxy(head) {
                return Opening::Refused(recorder, Refused::bad(why));
            }
        }
        let matched: Vec<&HostRule> = proxy
            .allow
            .iter()
            .filter(|rule| rule.allows_host(&host, port))
            .collect();
        if matched.is_empty() {
            return Opening::Refused(
                recorder,
                Refused::forbidden(format!(
                    "{} is not in the policy's network.allow",
                    host.with_port(port)
                )),
            );
        }
        let resolve = proxy.resolve.as_ref();
        match dial(
            &host,
            port,
            &matched,
            &proxy.allow,
            &proxy.surroundings,
            resolve,
        )
        .await
        {
            Ok(upstream) => Opening::Open(Opened {
                host,
                port,
                upstream,
                recorder,
            }),
            Err(DialError::Refused(why)) => Opening::Refused(recorder, Refused::forbidden(why)),
            Err(DialError::Failed(why)) => Opening::Refused(
                recorder,
                Refused {
                    status: "502 Bad Gateway",
                    reason: why,
                    recorded: false,
                },
            ),
        }
    }

    /// Records and answers a refusal.
    async fn refuse<W: AsyncWrite + Unpin>(&self, client: &mut W, refused: Refused) {
        self.recorder.record(&refused);
        let _ = respond(client, refused.status, &refused.reason).await;
    }

    /// A tunnel's request carries no body.
    fn framing_refusal(&self, head: &Head) -> Option<Refused> {
        match head.framing() {
            Ok(super::head::Framing::None) | Ok(super::head::Framing::Length(0)) => None,
            Ok(_) => Some(Refused::bad("a CONNECT request carries no body")),
            Err(why) => Some(Refused::bad(why)),
        }
    }
}

impl<'a> Opening<'a> {
    /// The connection, or `None` once the refusal is recorded and answered.
    async fn answer<W: AsyncWrite + Unpin>(self, client: &mut W) -> Option<Opened<'a>> {
        match self {
            Opening::Open(opened) => Some(opened),
            Opening::Refused(recorder, refused) => {
                recorder.record(&refused);
                let _ = respond(client, refused.status, &refused.reason).await;
                None
            }
        }
    }
}

/// After `CONNECT` was answered: the TLS the proxy ends for a host with secrets, or
/// whatever the tunnel carries, checked to be what it was opened for.
async fn tunnel_through(
    mut incoming: Incoming<ClientRead>,
    write: ClientWrite,
    opened: Opened<'_>,
    proxy: &Proxy,
) {
    if let (Some(interceptor), Some(secrets)) = (&proxy.interceptor, &proxy.secrets) {
        if secrets.has_host(&opened.host, opened.port) {
            intercept::serve(
                interceptor,
                secrets,
                &proxy.upstream_tls,
                incoming,
                write,
                opened.upstream,
                &opened.host,
                opened.port,
                &opened.recorder,
            )
            .await;
            return;
        }
    }
    let carries = match tokio::time::timeout(HEAD_TIMEOUT, tunnel::first_bytes(&mut incoming)).await
    {
        Ok(Ok(Some(carries))) => carries,
        Ok(Ok(None)) => return,
        Ok(Err(why)) => {
            opened.recorder.record(&Refused::forbidden(why));
            return;
        }
        Err(_) => {
            opened.recorder.record(&Refused::forbidden(format!(
                "the tunnel carried nothing within {} s",
                HEAD_TIMEOUT.as_secs()
            )));
            return;
        }
    };
    match carries {
        Carries::Tls { server_name } => {
            if let Err(why) = tunnel::server_name_fits(server_name.as_deref(), &opened.host) {
                opened.recorder.record(&Refused::forbidden(why));
                return;
            }
            pipe(incoming, write, opened.upstream).await;
        }
        Carries::Http => {
            let (host, port) = (opened.host.clone(), opened.port);
            let recorder = &opened.recorder;
            relay(
                incoming,
                write,
                opened.upstream,
                None,
                false,
                recorder,
                |head| {
                    let head = tunnel::vet_request(head, &host, port, false)?;
                    no_placeholders(proxy, head, &host, port, recorder)
                },
            )
            .await;
        }
    }
}

/// Whether a request to the proxy has one `Host`, which names the proxy itself (the
/// box's relay): what Node's `http` sends when the proxy is its target. It names no
/// site, and the proxy sends the target's host in its place.
fn names_the_proxy(head: &Head) -> bool {
    let hosts: Vec<&str> = head.values("host").collect();
    let [value] = hosts.as_slice() else {
        return false;
    };
    let relay = crate::sandbox::layout::RELAY_PORT;
    match crate::policy::allowlist::parse_authority(value) {
        Ok((Host::Ip(ip), Some(port))) => ip.is_loopback() && port == relay,
        Ok((Host::Name(name), Some(port))) => name == "localhost" && port == relay,
        _ => false,
    }
}

/// Where the proxy sends a request to a host no secret lists, over no TLS of its own:
/// a placeholder in it is refused (never forwarded).
fn no_placeholders(
    proxy: &Proxy,
    head: Head,
    host: &Host,
    port: u16,
    recorder: &Recorder<'_>,
) -> Result<Head, Refused> {
    match &proxy.secrets {
        Some(secrets) => secrets.swap(head, host, port, false, recorder),
        None => Ok(head),
    }
}

/// A plain request for `http://host/…` or `https://host/…`: sent once, origin-form,
/// with the checked host as `Host`, over the proxy's own TLS for https.
async fn forward(
    incoming: Incoming<ClientRead>,
    mut write: ClientWrite,
    opened: Opened<'_>,
    head: Head,
    tls: bool,
    path: String,
    proxy: &Proxy,
) {
    let Opened {
        host,
        port,
        upstream,
        recorder,
    } = opened;
    let mut head = head;
    head.target = path;
    head.remove(|name| {
        name.starts_with("proxy-") || name == "connection" || name == "keep-alive" || name == "host"
    });
    let default_port = if tls { 443 } else { 80 };
    let authority = if port == default_port {
        match &host {
            Host::Ip(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
            other => other.to_string(),
        }
    } else {
        host.with_port(port)
    };
    head.fields.insert(0, ("Host".into(), authority));
    head.fields.push(("Connection".into(), "close".into()));
    let vet = |head: Head| match &proxy.secrets {
        Some(secrets) => secrets.swap(head, &host, port, tls, &recorder),
        None => Ok(head),
    };
    if tls {
        let handshake = proxy.upstream_tls.connect(upstream, &host);
        let connected = tokio::time::timeout(HEAD_TIMEOUT, handshake)
            .await
            .unwrap_or_else(|_| Err(format!("TLS to {host} did not finish in time")));
        match connected {
            Ok(upstream) => {
                relay(incoming, write, upstream, Some(head), true, &recorder, vet).await
            }
            Err(why) => {
                let refused = Refused {
                    status: "502 Bad Gateway",
                    reason: why,
                    recorded: false,
                };
                recorder.record(&refused);
                let _ = respond(&mut write, refused.status, &refused.reason).await;
            }
        }
    } else {
        relay(incoming, write, upstream, Some(head), true, &recorder, vet).await;
    }
}

/// Passes a tunnel's bytes both ways, starting with what was read ahead.
async fn pipe<U: AsyncRead + AsyncWrite + Unpin>(
    incoming: Incoming<ClientRead>,
    write: ClientWrite,
    mut upstream: U,
) {
    let (read, pending) = incoming.into_parts();
    if upstream.write_all(&pending).await.is_err() {
        return;
    }
    let mut client = read.unsplit(write);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

#[cfg(test)]
mod tests;
