//! The egress proxy: an HTTP proxy in the server's own process, reached from a box only
//! through the backend's egress route (the box has no network at all), that takes the sandbox's connections to the hosts the policy's
//! `network.allow` names and refuses the rest.
//!
//! What it holds to, and why:
//! - `CONNECT host:port` (HTTPS, and any TLS or TCP a client tunnels) and absolute-form
//!   requests (`GET http://host/…`, plain HTTP) are the only ways through; a request
//!   naming neither gets 400.
//! - The host and port the client names are checked against the list before anything is
//!   resolved. An IP address passes only when the list names it: a name on the list
//!   never lets its addresses be used directly.
//! - The proxy resolves an allowed name itself and connects to that name's own
//!   addresses: the client cannot pick the address (the sandbox has no DNS at all), so
//!   a name cannot be pointed elsewhere from inside.
//! - Every refusal is answered (403, with the reason in the body, so the program's
//!   error says it) and recorded with the box the connection came from (which the
//!   backend knows by the kernel's word, not the client's), so the run that made it
//!   gets it back in its result.
//!
//! What it does not do: look inside TLS. A tunnel to an allowed host carries whatever
//! the client sends there (a CDN that serves many sites on one name's addresses can be
//! asked, inside TLS, for another of its sites).

use crate::policy::allowlist::{self, HostRule};
use crate::sandbox::backend::EgressListener;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest request head read before the request is refused.
const MAX_HEAD: usize = 32 * 1024;
/// How long a client may take to send its request head, and an upstream to answer a
/// connection.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// One connection the proxy refused.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Refusal {
    /// The host as the program named it.
    pub host: String,
    pub port: u16,
    /// Why, in a sentence.
    pub reason: String,
}

/// What the proxy refused, by the container that asked, and when.
#[derive(Debug, Default)]
pub struct RefusalLog {
    entries: Mutex<Vec<(String, Instant, Refusal)>>,
}

impl RefusalLog {
    fn record(&self, client: String, refusal: Refusal) {
        tracing::info!(%client, host = %refusal.host, port = refusal.port, reason = %refusal.reason, "egress refused");
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        // Old entries of runs long over go; a flood of refusals stays bounded.
        if entries.len() >= 10_000 {
            entries.drain(..5_000);
        }
        entries.push((client, Instant::now(), refusal));
    }

    /// The refusals of connections from container `client` since `since`, taken out
    /// of the log.
    pub fn take(&self, client: &str, since: Instant) -> Vec<Refusal> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        entries.retain(|(from, at, refusal)| {
            let theirs = from == client && *at >= since;
            if theirs {
                taken.push(refusal.clone());
            }
            !theirs
        });
        taken
    }
}

/// Serves the proxy on `listener` until the task is aborted.
pub async fn serve(
    listener: Box<dyn EgressListener>,
    allow: Arc<Vec<HostRule>>,
    log: Arc<RefusalLog>,
) {
    loop {
        let (client, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "egress proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let from = from.unwrap_or_default();
        let (allow, log) = (allow.clone(), log.clone());
        tokio::spawn(async move {
            if let Err(error) = handle(client, from.clone(), &allow, &log).await {
                tracing::debug!(container = %from, %error, "egress proxy: connection ended");
            }
        });
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    /// `CONNECT host:port`: a tunnel.
    Tunnel { host: String, port: u16 },
    /// An absolute-form request: forwarded with its target made origin-form.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    from: String,
    allow: &[HostRule],
    log: &RefusalLog,
) -> std::io::Result<()> {
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(read)) => read,
        Ok(Err(error)) => return Err(error),
        Err(_) => return Ok(()),
    };
    let request = match parse(&head) {
        Ok(request) => request,
        Err(why) => {
            return respond(&mut client, "400 Bad Request", &why).await;
        }
    };
    let (host, port) = match &request {
        Request::Tunnel { host, port } | Request::Forward { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    let refuse = |reason: String| Refusal {
        host: host.clone(),
        port,
        reason,
    };
    if !allowlist::allows(allow, &host, port) {
        let refusal = refuse(format!(
            "{host}:{port} is not in the policy's network.allow"
        ));
        let body = format!("code-sandbox-mcp: {}\n", refusal.reason);
        log.record(from.clone(), refusal);
        return respond(&mut client, "403 Forbidden", &body).await;
    }
    let mut upstream = match connect(&host, port).await {
        Ok(upstream) => upstream,
        Err(reason) => {
            let refusal = refuse(reason);
            let body = format!("code-sandbox-mcp: {}\n", refusal.reason);
            log.record(from.clone(), refusal);
            return respond(&mut client, "502 Bad Gateway", &body).await;
        }
    };
    match request {
        Request::Tunnel { .. } => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            upstream.write_all(&rest).await?;
        }
        Request::Forward { head, .. } => {
            upstream.write_all(&head).await?;
            upstream.write_all(&rest).await?;
        }
    }
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// Reads up to the end of the request head; returns it and whatever came after it.
async fn read_head<S: AsyncRead + Unpin>(client: &mut S) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "closed before the request head ended",
            ));
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return Ok((buffer, rest));
        }
        if buffer.len() > MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
    }
}

/// Reads a request head: a tunnel, or an absolute-form request rewritten for the origin
/// server (origin-form target, `Connection: close`, no `Proxy-*` headers).
fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not text".to_string())?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) if v.starts_with("HTTP/") => (m, t, v),
        _ => return Err(format!("not an HTTP request line: `{request_line}`")),
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = allowlist::split_port(target)?;
        let port = port.ok_or_else(|| format!("CONNECT needs host:port, got `{target}`"))?;
        return Ok(Request::Tunnel {
            host: host.to_string(),
            port,
        });
    }
    let rest = target.strip_prefix("http://").ok_or_else(|| {
        format!(
            "this is a proxy: send `{method} http://host/path` or `CONNECT host:port` \
             (HTTPS), not `{target}`"
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = allowlist::split_port(authority)?;
    let mut rewritten = format!("{method} {path} {version}\r\n");
    // The Host header is the checked target's: a client's own would ask a server that
    // shares the target's addresses for another site behind it.
    rewritten.push_str(&format!("Host: {authority}\r\n"));
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if name.to_ascii_lowercase().starts_with("proxy-")
            || name.eq_ignore_ascii_case("connection")
            || name.eq_ignore_ascii_case("host")
        {
            continue;
        }
        rewritten.push_str(line);
        rewritten.push_str("\r\n");
    }
    rewritten.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        host: host.to_string(),
        port: port.unwrap_or(80),
        head: rewritten.into_bytes(),
    })
}

/// Connects to `host`'s own addresses (a name is resolved here, never by the client).
async fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("{host} does not resolve: {e}"))?
            .collect(),
    };
    let resolved = addresses.len();
    let addresses: Vec<SocketAddr> = addresses
        .into_iter()
        .filter(|address| name_may_reach(host, address.ip()))
        .collect();
    let mut last = if resolved > 0 && addresses.is_empty() {
        format!("{host} resolves only to this machine's own addresses, which a name on the list never leads to")
    } else {
        format!("{host} has no address")
    };
    for address in addresses {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(error)) => {
                last = format!("{host}:{port} ({address}) refused the connection: {error}")
            }
            Err(_) => last = format!("{host}:{port} ({address}) did not answer"),
        }
    }
    Err(last)
}

/// Whether the allowed name `host` may be reached at `ip`. A public name whose DNS
/// answers with this machine's own addresses (loopback, unspecified) would hand the
/// sandbox the host's services on that port: only a name that means this machine
/// (`localhost`, `*.localhost`) goes there. Listing an address itself is the other way.
fn name_may_reach(host: &str, ip: IpAddr) -> bool {
    let local = ip.is_loopback() || ip.is_unspecified();
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    !local || host == "localhost" || host.ends_with(".localhost")
}

async fn respond<S: AsyncWrite + Unpin>(
    client: &mut S,
    status: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::backend::{BoxId, EgressStream};

    /// A listener whose connections come from no box.
    struct Unattributed(tokio::net::UnixListener);

    #[async_trait::async_trait]
    impl EgressListener for Unattributed {
        async fn accept(&self) -> std::io::Result<(Box<dyn EgressStream>, Option<BoxId>)> {
            let (client, _) = self.0.accept().await?;
            Ok((Box::new(client), None))
        }
    }

    #[test]
    fn reads_tunnels_and_absolute_requests() {
        assert_eq!(
            parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"),
            Ok(Request::Tunnel {
                host: "pypi.org".into(),
                port: 443
            })
        );
        let Ok(Request::Forward { host, port, head }) = parse(
            b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        ) else {
            panic!("not a forward")
        };
        assert_eq!((host.as_str(), port), ("example.com", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        // A Host header of the client's own choosing is replaced by the checked target.
        let Ok(Request::Forward { head, .. }) =
            parse(b"GET http://example.com/ HTTP/1.1\r\nHost: other.example.net\r\nhost: third.example\r\n\r\n")
        else {
            panic!("not a forward")
        };
        let head = String::from_utf8(head).unwrap();
        assert!(head.contains("Host: example.com\r\n"), "{head}");
        assert!(
            !head.contains("other.example.net") && !head.contains("third.example"),
            "{head}"
        );
        assert!(parse(b"GET /local HTTP/1.1\r\n\r\n")
            .unwrap_err()
            .contains("this is a proxy"));
        assert!(parse(b"CONNECT pypi.org HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn a_public_name_never_leads_to_this_machine() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(!name_may_reach("api.example.com", loopback));
        assert!(!name_may_reach(
            "rebind.example.com",
            "::1".parse().unwrap()
        ));
        assert!(!name_may_reach(
            "zero.example.com",
            "0.0.0.0".parse().unwrap()
        ));
        assert!(name_may_reach("localhost", loopback));
        assert!(name_may_reach("app.localhost.", loopback));
        assert!(name_may_reach(
            "api.example.com",
            "93.184.215.14".parse().unwrap()
        ));
    }

    #[tokio::test]
    async fn an_allowed_host_is_reached_and_another_is_refused_and_recorded() {
        // An upstream on loopback, reached by name (`localhost`) through the proxy.
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = upstream.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 1024];
                    let read = stream.read(&mut buffer).await.unwrap_or(0);
                    let request = String::from_utf8_lossy(&buffer[..read]).to_string();
                    let first = request.lines().next().unwrap_or_default().to_string();
                    let body = format!("upstream saw: {first}");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        let allow = Arc::new(vec![
            HostRule::parse(&format!("localhost:{upstream_port}")).unwrap()
        ]);
        let log = Arc::new(RefusalLog::default());
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let server = tokio::spawn(serve(
            Box::new(Unattributed(
                tokio::net::UnixListener::bind(&socket).unwrap(),
            )),
            allow,
            log.clone(),
        ));
        let started = Instant::now();
        let ask = |request: String| {
            let socket = socket.clone();
            async move {
                let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
                stream.write_all(request.as_bytes()).await.unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).await.unwrap();
                answer
            }
        };
        let answer = ask(format!(
            "GET http://localhost:{upstream_port}/x HTTP/1.1\r\nHost: localhost\r\n\r\n"
        ))
        .await;
        assert!(answer.contains("upstream saw: GET /x HTTP/1.1"), "{answer}");
        let answer = ask(format!(
            "CONNECT localhost:{upstream_port} HTTP/1.1\r\n\r\nGET /tunnel HTTP/1.1\r\n\r\n"
        ))
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 200 Connection Established"),
            "{answer}"
        );
        assert!(answer.contains("upstream saw: GET /tunnel"), "{answer}");

        // The same upstream by address, another port, another name: refused.
        for target in [
            format!("127.0.0.1:{upstream_port}"),
            format!("localhost:{}", upstream_port.wrapping_add(1).max(1)),
            "example.com:443".to_string(),
        ] {
            let answer = ask(format!("CONNECT {target} HTTP/1.1\r\n\r\n")).await;
            assert!(
                answer.starts_with("HTTP/1.1 403 Forbidden"),
                "{target}: {answer}"
            );
            assert!(
                answer.contains("not in the policy's network.allow"),
                "{answer}"
            );
        }
        // This test is in no container: its refusals go under no container id.
        let refused = log.take("", started);
        let hosts: Vec<String> = refused
            .iter()
            .map(|r| format!("{}:{}", r.host, r.port))
            .collect();
        assert_eq!(hosts.len(), 3, "{hosts:?}");
        assert_eq!(hosts[0], format!("127.0.0.1:{upstream_port}"));
        assert!(log.take("", started).is_empty(), "taken once");
        server.abort();
    }
}
