//! A small HTTPS GET for the OAuth issuer's documents (its metadata and its keys).
//!
//! The keys decide who may run code, so they are fetched over TLS checked against the
//! system's roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` add others); plain HTTP only to a
//! loopback address (an issuer on this machine, and tests), judged on the address the
//! name resolves to. No redirects, a size cap and a time limit: a slow or hostile
//! endpoint cannot hold the server up or fill its memory.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_rustls::rustls;

/// The largest document read.
const MAX_BYTES: usize = 1024 * 1024;
/// How long one fetch may take, connection included.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// Fetches `url` and parses it as JSON.
pub async fn json(url: &url::Url) -> Result<serde_json::Value, String> {
    let body = tokio::time::timeout(TIME_LIMIT, get(url))
        .await
        .map_err(|_| format!("{url}: no answer within {}s", TIME_LIMIT.as_secs()))??;
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}

async fn get(url: &url::Url) -> Result<Bytes, String> {
    let host = url
        .host_str()
        .ok_or_else(|| format!("{url}: no host"))?
        .to_string();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("{url}: no port"))?;
    let addresses: Vec<std::net::SocketAddr> =
        tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
            .await
            .map_err(|e| format!("{url}: cannot resolve {host}: {e}"))?
            .collect();
    let address = *addresses
        .first()
        .ok_or_else(|| format!("{url}: {host} has no address"))?;
    let tls = match url.scheme() {
        "https" => true,
        "http"
            if addresses
                .iter()
                .all(|a| a.ip().to_canonical().is_loopback()) =>
        {
            false
        }
        "http" => {
            return Err(format!(
                "{url}: plain http is accepted only for an issuer on this machine; use https"
            ))
        }
        other => return Err(format!("{url}: `{other}` is not http(s)")),
    };
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| format!("{url}: cannot connect to {address}: {e}"))?;
    let request = http::Request::get(&url[url::Position::BeforePath..])
        .header(http::header::HOST, authority(url))
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("code-sandbox-mcp/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("{url}: {e}"))?;
    if tls {
        let name = rustls::pki_types::ServerName::try_from(
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
        )
        .map_err(|e| format!("{url}: {e}"))?;
        let connector = tokio_rustls::TlsConnector::from(client_config()?);
        let stream = connector
            .connect(name, stream)
            .await
            .map_err(|e| format!("{url}: TLS: {e}"))?;
        send(url, TokioIo::new(stream), request).await
    } else {
        send(url, TokioIo::new(stream), request).await
    }
}

async fn send<T>(
    url: &url::Url,
    io: T,
    request: http::Request<Empty<Bytes>>,
) -> Result<Bytes, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let driver = tokio::spawn(connection);
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if response.status() != http::StatusCode::OK {
            return Err(format!("{url}: answered {}", response.status()));
        }
        Limited::new(response.into_body(), MAX_BYTES)
            .collect()
            .await
            .map(|body| body.to_bytes())
            .map_err(|e| format!("{url}: {e} (at most {MAX_BYTES} bytes are read)"))
    }
    .await;
    driver.abort();
    result
}

fn authority(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// TLS with the system's roots, built once.
fn client_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for error in &found.errors {
                tracing::warn!(%error, "a system root certificate could not be loaded");
            }
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no root certificates found on this system (SSL_CERT_FILE names a bundle)"
                        .into(),
                );
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_http_goes_to_loopback_only() {
        let url = url::Url::parse("http://192.0.2.1:9/keys").unwrap();
        let error = json(&url).await.unwrap_err();
        assert!(error.contains("plain http"), "{error}");
        let url = url::Url::parse("ftp://127.0.0.1/keys").unwrap();
        assert!(json(&url).await.is_err());
    }

    #[tokio::test]
    async fn a_loopback_document_is_read_and_a_huge_one_is_not() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for body in [r#"{"keys":[]}"#.to_string(), "x".repeat(MAX_BYTES + 10)] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            }
        });
        let url = url::Url::parse(&format!("http://127.0.0.1:{port}/keys")).unwrap();
        assert_eq!(json(&url).await.unwrap(), serde_json::json!({"keys": []}));
        let error = json(&url).await.unwrap_err();
        assert!(error.contains("at most"), "{error}");
    }
}
