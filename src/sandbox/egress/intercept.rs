//! Ending a box's TLS to a host that has secrets, so that the placeholders in its
//! requests can be swapped: after `CONNECT host:port`, the proxy answers the box's TLS
//! itself with a certificate for `host` from this instance's CA ([`Authority`]), once
//! it has checked that the TLS asks for that very host (SNI = the CONNECT target, and
//! every request's `Host` is checked after), and opens its own TLS to the real host,
//! verified against the roots the server trusts. The two handshakes run at once.
//!
//! Only HTTP/1.1 is spoken on both sides (ALPN), so every request is read and vetted
//! ([`super::relay`]).

use super::authority::Authority;
use super::incoming::Incoming;
use super::relay::{relay, respond, Recorder, Refused, HEAD_TIMEOUT};
use super::secrets::Secrets;
use super::tunnel::{server_name_fits, vet_request};
use super::upstream_tls;
use crate::policy::allowlist::Host;
use crate::sandbox::backend::EgressStream;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};

/// How long the two handshakes (the box's, the real host's) may take.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The CA and the TLS settings made with it, per host.
pub struct Interceptor {
    authority: Authority,
    configs: Mutex<HashMap<Host, Arc<rustls::ServerConfig>>>,
}

impl Interceptor {
    pub fn new(authority: Authority) -> Interceptor {
        Interceptor {
            authority,
            configs: Mutex::new(HashMap::new()),
        }
    }

    /// The CA's certificate, PEM.
    #[cfg(test)]
    pub fn certificate_pem(&self) -> &str {
        self.authority.certificate_pem()
    }

    /// The server side of the TLS for `host`: its certificate, HTTP/1.1 only.
    fn config(&self, host: &Host) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(config) = configs.get(host) {
            return Ok(config.clone());
        }
        if configs.len() >= super::authority::MOST_LEAVES {
            configs.clear();
        }
        let leaf = self.authority.leaf(host)?;
        let mut config = rustls::ServerConfig::builder_with_provider(upstream_tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(One(leaf)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        configs.insert(host.clone(), config.clone());
        Ok(config)
    }
}

/// Always the one certificate.
#[derive(Debug)]
struct One(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for One {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

type ClientRead = ReadHalf<Box<dyn EgressStream>>;
type ClientWrite = WriteHalf<Box<dyn EgressStream>>;

/// Serves a tunnel to `host:port` (already answered `200`) whose TLS the proxy ends.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    interceptor: &Interceptor,
    secrets: &Secrets,
    upstream_tls: &upstream_tls::UpstreamTls,
    incoming: Incoming<ClientRead>,
    write: ClientWrite,
    upstream: tokio::net::TcpStream,
    host: &Host,
    port: u16,
    recorder: &Recorder<'_>,
) {
    let refuse = |why: String| recorder.record(&Refused::forbidden(why));
    let (read, pending) = incoming.into_parts();
    let client = Prefixed {
        pending,
        inner: read.unsplit(write),
    };
    let acceptor =
        tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), client);
    let start = match tokio::time::timeout(HEAD_TIMEOUT, acceptor).await {
        Ok(Ok(start)) => start,
        Ok(Err(error)) => {
            return refuse(format!(
                "the tunnel to {} did not start with TLS: {error}",
                host.with_port(port)
            ))
        }
        Err(_) => {
            return refuse(format!(
                "the tunnel to {} carried no TLS in time",
                host.with_port(port)
            ))
        }
    };
    if let Err(why) = server_name_fits(start.client_hello().server_name(), host) {
        return refuse(why);
    }
    let config = match interceptor.config(host) {
        Ok(config) => config,
        Err(why) => return refuse(why),
    };
    let handshakes = async {
        tokio::join!(
            start.into_stream(config),
            upstream_tls.connect(upstream, host)
        )
    };
    let Ok((client, upstream)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshakes).await else {
        return refuse(format!(
            "the TLS handshakes for {} did not finish within {} s",
            host.with_port(port),
            HANDSHAKE_TIMEOUT.as_secs()
        ));
    };
    let client = match client {
        Ok(client) => client,
        Err(error) => {
            return refuse(format!(
                "the sandbox's TLS to {host} failed (does it trust the proxy's CA, through \
                 SSL_CERT_FILE?): {error}"
            ))
        }
    };
    let (client_read, mut client_write) = tokio::io::split(client);
    let upstream = match upstream {
        Ok(upstream) => upstream,
        Err(why) => {
            let refused = Refused {
                status: "502 Bad Gateway",
                reason: why,
                recorded: false,
            };
            recorder.record(&refused);
            let _ = respond(&mut client_write, refused.status, &refused.reason).await;
            return;
        }
    };
    relay(
        Incoming::new(client_read, Vec::new()),
        client_write,
        upstream,
        None,
        false,
        recorder,
        |head| {
            let head = vet_request(head, host, port, true)?;
            secrets.swap(head, host, port, true, recorder)
        },
    )
    .await;
}

/// A stream that first yields bytes already read from it.
struct Prefixed<S> {
    pending: Vec<u8>,
    inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.pending.is_empty() {
            let take = self.pending.len().min(buf.remaining());
            buf.put_slice(&self.pending[..take]);
            self.pending.drain(..take);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
