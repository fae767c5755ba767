//! Where a request may come from: the `Host` it names and the `Origin` a browser adds.
//!
//! Both defend against DNS rebinding and against web pages in the user's browser: a
//! page of `evil.example` whose name is made to resolve to 127.0.0.1 reaches a loopback
//! server, but its requests name `evil.example` as their Host, and a browser marks
//! every cross-site request with the page's Origin. So a request is refused (403) when
//! its Host is not one this server is reached by (checked when bound to loopback or
//! given `--public-url`), or when it carries an Origin that is not the server's own or
//! one allowed with `--allow-origin`. A request without Origin is not from a web page
//! (browsers always send one on such requests) and passes this check.
//!
//! Spellings are judged as a browser would resolve them: scheme and host compared
//! without case, a default port made explicit. Everything else differs: `null`,
//! another port, a trailing dot (`localhost.` is another site to a browser), userinfo,
//! a path, two Origin headers.

use http::HeaderMap;

/// A host and port as a request names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// Lower case; an IPv6 address without its brackets.
    host: String,
    /// `None`: a Host header without a port, which means the scheme's default; a server
    /// reached on its scheme's default port lists its names both ways.
    port: Option<u16>,
}

/// A web origin: scheme, host, port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: Scheme,
    authority: Authority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 400: no Host, or one that is not a host.
    BadHost(&'static str),
    /// 403.
    Forbidden(&'static str),
}

impl Authority {
    /// `host[:port]` as in a Host header; `default_port` when it has none.
    pub fn parse(text: &str, default_port: Option<u16>) -> Option<Authority> {
        if text.is_empty() || text.contains(['@', '/', '?', '#', ' ', '\\']) {
            return None;
        }
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (address, after) = rest.split_once(']')?;
            address.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':')?),
            };
            (address.to_string(), port)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), Some(port)),
                None => (text.to_string(), None),
            }
        };
        let port = match port {
            None => default_port,
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Some(digits.parse().ok()?)
            }
            Some(_) => return None,
        };
        let host = host.to_ascii_lowercase();
        // A trailing dot stays: `localhost.` is not `localhost` to a browser, so it is
        // not to this check either.
        let valid = !host.is_empty()
            && (host.contains(':')
                || host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
        valid.then_some(Authority { host, port })
    }

    /// The authority of `host` (a name or an IP address) and `port`.
    pub fn of(host: &str, port: u16) -> Authority {
        Authority {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase(),
            port: Some(port),
        }
    }

    /// `host` named without a port (in a Host header: the scheme's default port).
    pub fn portless(host: &str) -> Authority {
        Authority {
            port: None,
            ..Authority::of(host, 0)
        }
    }

    /// Whether a port is named.
    pub fn has_port(&self) -> bool {
        self.port.is_some()
    }
}

impl Origin {
    /// An Origin header's value (or a `--allow-origin` one): `scheme://host[:port]`.
    pub fn parse(text: &str) -> Option<Origin> {
        let (scheme, rest) = text.split_once("://")?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return None,
        };
        // An origin has no path; a lone trailing slash is how people write one.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let authority = Authority::parse(rest, Some(scheme.default_port()))?;
        Some(Origin { scheme, authority })
    }

    /// `http://host:port` and `https://host:port` for `authority`.
    pub fn both_schemes(authority: &Authority) -> [Origin; 2] {
        [Scheme::Http, Scheme::Https].map(|scheme| Origin {
            scheme,
            authority: authority.clone(),
        })
    }
}

/// The Hosts and Origins this server accepts.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    /// `None`: any Host (a server on a public address with no `--public-url`).
    hosts: Option<Vec<Authority>>,
    origins: Vec<Origin>,
}

impl Gate {
    pub fn new(hosts: Option<Vec<Authority>>, origins: Vec<Origin>) -> Gate {
        Gate { hosts, origins }
    }

    /// Whether `headers` may reach this server.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
        if let Some(hosts) = &self.hosts {
            let mut values = headers.get_all(http::header::HOST).iter();
            let host = values.next().ok_or(Refused::BadHost("no Host header"))?;
            if values.next().is_some() {
                return Err(Refused::BadHost("more than one Host header"));
            }
            let host = host
                .to_str()
                .ok()
                .and_then(|text| Authority::parse(text, None))
                .ok_or(Refused::BadHost("the Host header is not a host"))?;
            if !hosts.contains(&host) {
                return Err(Refused::Forbidden(
                    "this server is not reached by that Host name (DNS rebinding?); a proxy in \
                     front of it passes the public name, which --public-url sets",
                ));
            }
        }
        let mut values = headers.get_all(http::header::ORIGIN).iter();
        if let Some(origin) = values.next() {
            if values.next().is_some() {
                return Err(Refused::Forbidden("more than one Origin header"));
            }
            let origin = origin.to_str().ok().and_then(Origin::parse);
            match origin {
                Some(origin) if self.origins.contains(&origin) => {}
                _ => {
                    return Err(Refused::Forbidden(
                        "requests from that web origin are not allowed (--allow-origin allows one)",
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn loopback_gate(port: u16) -> Gate {
        let hosts: Vec<Authority> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|h| Authority::of(h, port))
            .collect();
        let origins = hosts.iter().flat_map(Origin::both_schemes).collect();
        Gate::new(Some(hosts), origins)
    }

    #[test]
    fn a_host_without_a_port_passes_only_where_the_server_listed_its_name_so() {
        // Behind a proxy on https://sandbox.example.com, which passes the Host on.
        let hosts = vec![
            Authority::of("sandbox.example.com", 443),
            Authority::portless("sandbox.example.com"),
            Authority::of("localhost", 8080),
        ];
        let gate = Gate::new(Some(hosts), Vec::new());
        for host in [
            "sandbox.example.com",
            "sandbox.example.com:443",
            "Sandbox.Example.Com",
            "localhost:8080",
        ] {
            assert_eq!(gate.check(&headers(&[("host", host)])), Ok(()), "{host}");
        }
        for host in [
            "sandbox.example.com:80",
            "localhost",
            "sandbox.example.com.",
            "example.com",
        ] {
            assert!(gate.check(&headers(&[("host", host)])).is_err(), "{host}");
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value.as_bytes()).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_hosts_a_loopback_server_is_reached_by_pass() {
        let gate = loopback_gate(8080);
        for host in [
            "localhost:8080",
            "LOCALHOST:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            assert_eq!(gate.check(&headers(&[("host", host)])), Ok(()), "{host}");
        }
    }

    #[test]
    fn rebinding_and_odd_hosts_are_refused() {
        let gate = loopback_gate(8080);
        for host in [
            "evil.example:8080",
            "localhost.:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.2:8080",
            "0x7f000001:8080",
            "2130706433:8080",
            "127.1:8080",
            "[::ffff:127.0.0.1]:8080",
        ] {
            assert!(
                matches!(
                    gate.check(&headers(&[("host", host)])),
                    Err(Refused::Forbidden(_))
                ),
                "{host}"
            );
        }
        for host in [
            "user@localhost:8080",
            "localhost:8080/x",
            "localhost:",
            "localhost:80a",
            "[::1",
            "",
        ] {
            assert!(
                matches!(
                    gate.check(&headers(&[("host", host)])),
                    Err(Refused::BadHost(_))
                ),
                "{host}"
            );
        }
        assert!(gate.check(&headers(&[])).is_err());
        assert!(gate
            .check(&headers(&[
                ("host", "localhost:8080"),
                ("host", "evil.example")
            ]))
            .is_err());
    }

    #[test]
    fn only_the_servers_own_and_allowed_origins_pass() {
        let mut gate = loopback_gate(8080);
        gate.origins
            .push(Origin::parse("https://app.example").unwrap());
        let host = ("host", "localhost:8080");
        for origin in [
            "http://localhost:8080",
            "HTTP://LocalHost:8080",
            "http://127.0.0.1:8080",
            "https://app.example",
            "https://app.example:443",
            "https://APP.example/",
        ] {
            assert_eq!(
                gate.check(&headers(&[host, ("origin", origin)])),
                Ok(()),
                "{origin}"
            );
        }
        for origin in [
            "null",
            "http://localhost:8081",
            "http://localhost",
            "http://localhost.:8080",
            "http://evil.example",
            "https://app.example:8443",
            "http://app.example",
            "https://app.example.evil.example",
            "file://",
            "https://app.example/path",
            "https://user@app.example",
            "",
        ] {
            assert!(
                matches!(
                    gate.check(&headers(&[host, ("origin", origin)])),
                    Err(Refused::Forbidden(_))
                ),
                "{origin}"
            );
        }
        assert!(gate
            .check(&headers(&[
                host,
                ("origin", "http://localhost:8080"),
                ("origin", "http://evil.example")
            ]))
            .is_err());
    }

    #[test]
    fn without_a_host_list_any_host_passes_but_origins_are_still_checked() {
        let gate = Gate::new(None, Vec::new());
        assert_eq!(gate.check(&headers(&[("host", "anything:1")])), Ok(()));
        assert_eq!(gate.check(&headers(&[])), Ok(()));
        assert!(gate
            .check(&headers(&[("origin", "http://anything:1")]))
            .is_err());
    }
}
