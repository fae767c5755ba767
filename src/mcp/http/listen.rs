//! The socket: which address `--http` means, whether it is loopback, and the loop that
//! accepts connections (TLS first when configured) and hands them to hyper.
//!
//! Loopback is judged on the address bound, after name resolution, with IPv4-mapped
//! IPv6 addresses seen as the IPv4 address they are: `localhost` is loopback when it
//! resolves there, `[::ffff:127.0.0.1]` is, `0.0.0.0` and `::` are not.
//!
//! Each connection has [`HEADER_TIME`] to send a request head and [`HANDSHAKE_TIME`]
//! for TLS, and at most [`MAX_CONNECTIONS`] are served at once (more wait to be
//! accepted): a client that opens sockets and says nothing holds little.

use super::service::HttpService;
use super::tls::Tls;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client has to send a request's head.
pub const HEADER_TIME: Duration = Duration::from_secs(10);
/// How long a TLS handshake may take.
pub const HANDSHAKE_TIME: Duration = Duration::from_secs(10);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long open connections get to finish once the server stops.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The address `--http HOST:PORT` names (the first one, when a name resolves to
/// several).
pub async fn resolve(listen: &str) -> Result<SocketAddr, String> {
    let mut addresses = tokio::net::lookup_host(listen).await.map_err(|e| {
        format!(
            "--http {listen}: not an address to listen on (HOST:PORT, e.g. 127.0.0.1:8080): {e}"
        )
    })?;
    addresses
        .next()
        .ok_or_else(|| format!("--http {listen}: the name has no address"))
}

/// Whether only this machine can reach `address`.
pub fn is_loopback(address: &SocketAddr) -> bool {
    address.ip().to_canonical().is_loopback()
}

/// Accepts connections on `listener` until `stop`, serving each with `service`.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    service: Arc<HttpService>,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let tracker = TaskTracker::new();
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let (service, tls, stop) = (service.clone(), tls.clone(), stop.clone());
        tracker.spawn(async move {
            let _permit = permit;
            match tls {
                None => connection(TokioIo::new(stream), service, stop).await,
                Some(tls) => {
                    let handshake =
                        tokio::time::timeout(HANDSHAKE_TIME, tls.acceptor().accept(stream)).await;
                    match handshake {
                        Ok(Ok(stream)) => connection(TokioIo::new(stream), service, stop).await,
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake too slow"),
                    }
                }
            }
        });
    }
    tracker.close();
    if tokio::time::timeout(DRAIN_TIME, tracker.wait())
        .await
        .is_err()
    {
        tracing::debug!("some HTTP connections were still open at the end");
    }
}

async fn connection<I>(io: I, service: Arc<HttpService>, stop: CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let handler = service_fn(move |request| {
        let service = service.clone();
        async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIME)
        .keep_alive(true)
        .serve_connection(io, handler);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "an HTTP connection ended with an error");
            }
        }
        _ = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN_TIME, connection).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn loopback_is_judged_on_the_resolved_address() {
        for (listen, loopback) in [
            ("127.0.0.1:0", true),
            ("127.8.9.10:0", true),
            ("[::1]:0", true),
            ("[::ffff:127.0.0.1]:0", true),
            ("localhost:0", true),
            ("0.0.0.0:0", false),
            ("[::]:0", false),
            ("[::ffff:0.0.0.0]:0", false),
            ("192.0.2.7:0", false),
        ] {
            let address = resolve(listen).await.unwrap();
            assert_eq!(is_loopback(&address), loopback, "{listen}");
        }
        assert!(resolve("127.0.0.1").await.is_err());
        assert!(resolve("nonsense:port").await.is_err());
    }
}
