//! Relaying HTTP requests to one upstream, request by request: each head is read
//! strictly and vetted (its target and `Host` must be the connection's host, and a
//! secret's placeholder is swapped or refused) before it is sent, and its body is
//! forwarded by its framing, so the bytes after it are read as the next request and
//! vetted in turn. Nothing the client sends reaches the upstream unread.
//!
//! Responses are not parsed: they are copied back as they come. A request refused in
//! the middle of a connection is answered in order: the proxy stops sending, lets the
//! upstream finish the responses it owes (bounded in time), then writes its own
//! refusal and closes.

use super::head::Head;
use super::incoming::{Incoming, ReadError};
use super::refusals::{Refusal, RefusalLog};
use crate::policy::allowlist::Host;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// How long a client may take to send a request head once it has started one.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the upstream may take to finish its responses before a refusal is written.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A request the proxy will not send, and the answer the client gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `403 Forbidden`, `400 Bad Request`…
    pub status: &'static str,
    pub reason: String,
    /// The refusal is in the log already (the vetting recorded it); otherwise the
    /// relay records it as a refused connection to its host.
    pub recorded: bool,
}

impl Refused {
    pub fn bad(reason: impl Into<String>) -> Refused {
        Refused {
            status: "400 Bad Request",
            reason: reason.into(),
            recorded: false,
        }
    }

    pub fn forbidden(reason: impl Into<String>) -> Refused {
        Refused {
            status: "403 Forbidden",
            reason: reason.into(),
            recorded: false,
        }
    }
}

/// Where refusals go.
pub struct Recorder<'a> {
    pub log: &'a RefusalLog,
    pub client: &'a str,
    pub host: Host,
    pub port: u16,
}

impl Recorder<'_> {
    pub fn record(&self, refused: &Refused) {
        if !refused.recorded {
            self.log.record(
                self.client,
                Refusal {
                    host: self.host.to_string(),
                    port: self.port,
                    reason: refused.reason.clone(),
                },
            );
        }
    }
}

/// How the request loop stopped.
enum Stop {
    /// The client closed its side after whole requests.
    ClientDone,
    /// The one request this connection carries was sent.
    Once,
    Refuse(Refused),
    Broken,
}

/// Relays the requests read from `incoming` (the first already read, when given) to
/// `upstream`, each through `vet`, and the responses back to `client`; only the first
/// when `once`.
pub async fn relay<R, W, U>(
    mut incoming: Incoming<R>,
    mut client: W,
    upstream: U,
    first: Option<Head>,
    once: bool,
    recorder: &Recorder<'_>,
    mut vet: impl FnMut(Head) -> Result<Head, Refused>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let (mut up_read, mut up_write) = tokio::io::split(upstream);
    let mut responses = Box::pin(async {
        let copied = tokio::io::copy(&mut up_read, &mut client).await;
        let _ = client.flush().await;
        copied.is_ok()
    });
    let requests = async {
        let mut next = first;
        loop {
            let head = match next.take() {
                Some(head) => head,
                None => match read_request(&mut incoming).await {
                    Ok(Some(head)) => head,
                    Ok(None) => return Stop::ClientDone,
                    Err(ReadError::Malformed(why)) => return Stop::Refuse(Refused::bad(why)),
                    Err(ReadError::Io(_)) => return Stop::Broken,
                },
            };
            let framing = match head.framing() {
                Ok(framing) => framing,
                Err(why) => return Stop::Refuse(Refused::bad(why)),
            };
            let head = match vet(head) {
                Ok(head) => head,
                Err(refused) => return Stop::Refuse(refused),
            };
            if up_write.write_all(&head.to_bytes()).await.is_err() {
                return Stop::Broken;
            }
            match incoming.forward_body(framing, &mut up_write).await {
                Ok(()) => {}
                Err(ReadError::Malformed(why)) => return Stop::Refuse(Refused::bad(why)),
                Err(ReadError::Io(_)) => return Stop::Broken,
            }
            if up_write.flush().await.is_err() {
                return Stop::Broken;
            }
            if once {
                return Stop::Once;
            }
        }
    };
    let stop = tokio::select! {
        stop = requests => Some(stop),
        // The upstream is done: nothing more can be answered on this connection.
        _ = &mut responses => None,
    };
    let refused = match stop {
        None => None,
        Some(Stop::ClientDone) => {
            let _ = up_write.shutdown().await;
            (&mut responses).await;
            None
        }
        Some(Stop::Once) => {
            (&mut responses).await;
            None
        }
        Some(Stop::Refuse(refused)) => {
            recorder.record(&refused);
            let _ = up_write.shutdown().await;
            tokio::time::timeout(DRAIN_TIMEOUT, &mut responses)
                .await
                .ok()
                .map(|_| refused)
        }
        Some(Stop::Broken) => return,
    };
    drop(responses);
    match refused {
        Some(refused) => {
            let _ = respond(&mut client, refused.status, &refused.reason).await;
        }
        None => {
            let _ = client.shutdown().await;
        }
    }
}

/// The next request head, parsed: `None` when the client closed first. Idle time
/// before a request is the client's; a head, once started, must end in time.
pub async fn read_request<R: AsyncRead + Unpin>(
    incoming: &mut Incoming<R>,
) -> Result<Option<Head>, ReadError> {
    if !incoming.has_more().await? {
        return Ok(None);
    }
    let bytes = match tokio::time::timeout(HEAD_TIMEOUT, incoming.read_head()).await {
        Ok(read) => read?,
        Err(_) => {
            return Err(ReadError::Malformed(format!(
                "the request head did not arrive within {} s",
                HEAD_TIMEOUT.as_secs()
            )))
        }
    };
    match bytes {
        Some(bytes) => Head::parse(&bytes).map(Some).map_err(ReadError::Malformed),
        None => Ok(None),
    }
}

/// Answers with `status` and `reason` (as the body, so the program's error says it),
/// then closes.
pub async fn respond<W: AsyncWrite + Unpin>(
    client: &mut W,
    status: &str,
    reason: &str,
) -> std::io::Result<()> {
    let body = format!("code-sandbox-mcp: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}
