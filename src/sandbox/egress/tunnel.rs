//! What a `CONNECT` tunnel may carry: what it was opened for, and nothing else.
//!
//! Once the tunnel is open the proxy reads what the client sends first:
//! - a TLS ClientHello, whose server name (SNI) must be the tunnel's host (and absent
//!   when the tunnel is to an address): the rest of the TLS connection is then
//!   passed through unread;
//! - or plain HTTP requests, each of which is read and vetted as a proxied request is
//!   (its `Host` must be the tunnel's host and port), so that a tunnel to an allowed
//!   host's port 80 cannot carry a request for another site behind the same address;
//! - anything else is refused: the tunnel is closed before a byte reaches the upstream.

use super::head::{Head, Target};
use super::incoming::Incoming;
use super::relay::Refused;
use crate::policy::allowlist::Host;
use tokio::io::AsyncRead;

/// The most bytes read to find the end of a ClientHello.
const MAX_HELLO: usize = 64 * 1024;

/// What the client started the tunnel with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carries {
    /// TLS, naming this server (SNI), if any.
    Tls { server_name: Option<String> },
    /// Plain HTTP/1.x.
    Http,
}

/// Reads (without consuming) what the tunnel starts with, or why it cannot be taken.
pub async fn first_bytes<R: AsyncRead + Unpin>(
    incoming: &mut Incoming<R>,
) -> Result<Option<Carries>, String> {
    let io = |e: std::io::Error| format!("reading the tunnel: {e}");
    if !incoming.has_more().await.map_err(io)? {
        return Ok(None);
    }
    if incoming.peek()[0] == 0x16 {
        return client_hello(incoming).await.map(Some);
    }
    // An HTTP request starts with a method (a token) and a space.
    incoming.fill_to(16).await.map_err(io)?;
    let start = incoming.peek();
    let method_end = start.iter().position(|&b| b == b' ');
    let looks_like_http = method_end.is_some_and(|end| {
        end > 0
            && start[..end]
                .iter()
                .all(|b| b.is_ascii_uppercase() || *b == b'-')
    });
    if looks_like_http {
        Ok(Some(Carries::Http))
    } else {
        Err("the tunnel carried neither TLS nor an HTTP request".into())
    }
}

/// Reads the whole ClientHello (it may span records and reads) and the server name it
/// asks for.
async fn client_hello<R: AsyncRead + Unpin>(incoming: &mut Incoming<R>) -> Result<Carries, String> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut fed = 0;
    loop {
        let available = incoming.peek().len();
        if available > fed {
            let mut unread = &incoming.peek()[fed..];
            let before = unread.len();
            acceptor
                .read_tls(&mut unread)
                .map_err(|e| format!("not a TLS ClientHello: {e}"))?;
            fed += before - unread.len();
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    let server_name = accepted.client_hello().server_name().map(str::to_string);
                    return Ok(Carries::Tls { server_name });
                }
                Ok(None) => {}
                Err((error, _)) => return Err(format!("not a TLS ClientHello: {error}")),
            }
            if fed < incoming.peek().len() {
                // The acceptor's buffer took what it could; offer the rest first.
                continue;
            }
        }
        if fed > MAX_HELLO {
            return Err("a TLS ClientHello longer than 64 KiB".into());
        }
        let wanted = incoming.peek().len() + 1;
        incoming
            .fill_to(wanted)
            .await
            .map_err(|e| format!("reading the tunnel: {e}"))?;
        if incoming.peek().len() < wanted {
            return Err("the tunnel closed inside a TLS ClientHello".into());
        }
    }
}

/// Whether TLS asking for `server_name` may go through a tunnel to `host`: the name
/// must be the host's, and an address is asked for by no name.
pub fn server_name_fits(server_name: Option<&str>, host: &Host) -> Result<(), String> {
    match (host, server_name) {
        (Host::Name(name), Some(asked))
            if asked.trim_end_matches('.').eq_ignore_ascii_case(name) =>
        {
            Ok(())
        }
        (Host::Name(name), Some(asked)) => Err(format!(
            "the TLS in a tunnel to {name} asked for the server `{asked}`"
        )),
        (Host::Name(name), None) => Err(format!(
            "the TLS in a tunnel to {name} named no server (SNI); it must name {name}"
        )),
        (Host::Ip(_), None) => Ok(()),
        (Host::Ip(ip), Some(asked)) => Err(format!(
            "the TLS in a tunnel to the address {ip} asked for the server `{asked}`"
        )),
    }
}

/// A request inside a tunnel: origin-form, for the tunnel's host and port.
pub fn vet_request(head: Head, host: &Host, port: u16, tls: bool) -> Result<Head, Refused> {
    if head.is_connect() {
        return Err(Refused::forbidden("a CONNECT inside a tunnel"));
    }
    match head.target() {
        Ok(Target::Origin) => {}
        _ => {
            return Err(Refused::bad(format!(
                "inside a tunnel a request names its path alone (`{} /path`), not `{}`",
                head.method, head.target
            )))
        }
    }
    head.check_host(host, port, if tls { 443 } else { 80 })
        .map_err(Refused::forbidden)?;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_tunnels_host() {
        let name = Host::Name("api.example.com".into());
        assert!(server_name_fits(Some("API.example.com"), &name).is_ok());
        assert!(server_name_fits(Some("other.example.com"), &name).is_err());
        assert!(server_name_fits(None, &name).is_err());
        let ip = Host::Ip("10.0.0.5".parse().unwrap());
        assert!(server_name_fits(None, &ip).is_ok());
        assert!(server_name_fits(Some("internal.example.com"), &ip).is_err());
    }

    #[tokio::test]
    async fn plain_http_and_anything_else_are_told_apart() {
        let mut http = Incoming::new(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..], Vec::new());
        assert_eq!(first_bytes(&mut http).await, Ok(Some(Carries::Http)));
        assert_eq!(http.peek().len(), 27, "nothing is consumed");
        let mut ssh = Incoming::new(&b"SSH-2.0-OpenSSH_9.6\r\n"[..], Vec::new());
        assert!(first_bytes(&mut ssh).await.is_err());
        let mut binary = Incoming::new(&b"\x00\x01\x02"[..], Vec::new());
        assert!(first_bytes(&mut binary).await.is_err());
        let mut nothing = Incoming::new(&b""[..], Vec::new());
        assert_eq!(first_bytes(&mut nothing).await, Ok(None));
        let mut not_tls = Incoming::new(&b"\x16\x03\x01\x00\x05hello"[..], Vec::new());
        assert!(first_bytes(&mut not_tls).await.is_err());
    }
}
