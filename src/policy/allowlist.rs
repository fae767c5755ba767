//! `network: { allow: [...] }`: the hosts (and ports) code in the sandbox may reach,
//! by name or by address. The same list is enforced by the egress proxy
//! (`sandbox::egress`) and read by the static check (a URL in the code to a host
//! outside it is a finding).
//!
//! An entry is `host`, `host:port`, `*.domain`, `*.domain:port`, an IP address
//! (`10.0.0.5`, `[::1]:8080`) or a range of them (`10.0.0.0/8`, `fd00::/8`,
//! `[fd00::/8]:5432`); without a port, 443 and 80 are meant. `*.domain` matches names
//! below the domain, not the domain itself (list both when both are wanted). Names
//! compare without case and without a final dot. An address or range matches only
//! addresses: a name on the list never lets its addresses be used directly.
//!
//! Address entries have a second use: the proxy refuses to connect to this machine's
//! own addresses, loopback, link-local, private ranges and the engine's networks, even
//! for a listed name, unless an address entry names that address or a range inside
//! the block it belongs to (see `sandbox::egress`). `localhost` and `*.localhost` name
//! the loopback addresses by themselves.
//!
//! Hosts as a client writes them are read strictly ([`parse_host`]): ASCII names of
//! letters, digits and hyphens, or an IP address in its usual spelling. Anything that a
//! resolver might read as something else (an address in decimal, octal or hex, a zone
//! id, percent-encoding, an international name not in its `xn--` form) is no host.

pub use super::ip_range::IpRange;
/// `host[:port]`, `[v6]`, `[v6]:port`, or a bare v6 address or range (no port): read
/// as the static check reads a URL's authority, one way for both.
pub use crate::analysis::urls::split_port;
use serde::Serialize;
use std::net::IpAddr;

/// The ports an entry without one allows.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// A host as a client names it, read strictly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A lower-case name without a final dot.
    Name(String),
    /// An address; an IPv4-mapped IPv6 address is the IPv4 one.
    Ip(IpAddr),
}

impl Host {
    /// `host:port` as a request would write it (`[v6]:port`).
    pub fn with_port(&self, port: u16) -> String {
        match self {
            Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            other => format!("{other}:{port}"),
        }
    }

    /// Whether this is `localhost` or a name under it, which means this machine's
    /// loopback whatever a resolver says (RFC 6761).
    pub fn is_localhost(&self) -> bool {
        matches!(self, Host::Name(name) if is_localhost_name(name))
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// Reads a host as a client wrote it: a name, an IP address, or `[v6]`.
pub fn parse_host(text: &str) -> Result<Host, String> {
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("`{text}`: an unclosed `[`"))?;
        if inner.contains('%') {
            return Err(format!(
                "`{text}`: an address with a zone id is no host to reach"
            ));
        }
        return inner
            .parse::<std::net::Ipv6Addr>()
            .map(|v6| Host::Ip(super::ip_range::unmap(IpAddr::V6(v6))))
            .map_err(|_| format!("`{text}` is not an IPv6 address"));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Host::Ip(super::ip_range::unmap(ip)));
    }
    parse_name(text).map(Host::Name)
}

/// A host name: ASCII letters, digits and hyphens in dot-separated labels, at most
/// one final dot; lower-cased. A last label of digits (or `0x` and hex digits) is
/// refused: resolvers read such names as addresses (`2130706433`, `0177.0.0.1`,
/// `0x7f.1` are all 127.0.0.1 to `inet_aton`).
fn parse_name(text: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("`{text}` is not a host name: {why}"));
    if text.is_empty() {
        return bad("it is empty");
    }
    if !text.is_ascii() {
        return bad("write an international name in its ASCII (`xn--`) form");
    }
    if text.contains('%') {
        return bad("percent-encoding is not read in a host");
    }
    if text.contains(':') {
        return bad("an IPv6 address is written in brackets, `[::1]`");
    }
    let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    if name.len() > 253 {
        return bad("longer than 253 characters");
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return bad("a label is empty or longer than 63 characters");
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return bad("only letters, digits, `-` and `.` make a name");
        }
    }
    let last = labels.last().copied().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_hexdigit()));
    if last.chars().all(|c| c.is_ascii_digit()) || hex {
        return bad(
            "it reads as an IP address in another spelling; write the address as `a.b.c.d`",
        );
    }
    Ok(name)
}

/// What an entry matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// This name.
    Exact(String),
    /// Names below this domain.
    Below(String),
    /// Addresses in this range (one address is a range too).
    Range(IpRange),
}

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As written, for messages and `policy show`.
    pub written: String,
    pattern: Pattern,
    ports: Vec<u16>,
}

impl Serialize for HostRule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.written)
    }
}

impl HostRule {
    /// Reads one entry, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<HostRule, String> {
        let written = text.trim();
        let bad = |why: &str| -> Result<HostRule, String> {
            Err(format!("`{written}` is not a host to allow: {why}"))
        };
        if written.contains("://") {
            return bad(
                "write the host alone (`api.example.com` or `api.example.com:8443`), not a URL",
            );
        }
        let (host, port) = split_port(written).map_err(|why| format!("`{written}`: {why}"))?;
        if host.is_empty() {
            return bad("the host is empty");
        }
        let pattern = if let Some(domain) = host.strip_prefix("*.") {
            if domain.contains('*') {
                return bad("`*` may only start it, as `*.example.com`");
            }
            match parse_name(domain) {
                Ok(domain) => Pattern::Below(domain),
                Err(why) => return bad(&why),
            }
        } else if host.contains('*') {
            return bad("`*` may only start it, as `*.example.com`");
        } else if let Some((address, _)) = host.split_once('/') {
            if address.parse::<IpAddr>().is_err() {
                return bad(
                    "write the host alone (`api.example.com` or `api.example.com:8443`), not a URL; \
                     a range is an address and a prefix length (`10.0.0.0/8`)",
                );
            }
            match IpRange::parse(host) {
                Ok(range) => Pattern::Range(range),
                Err(why) => return bad(&why),
            }
        } else {
            match parse_host(host) {
                Ok(Host::Name(name)) => Pattern::Exact(name),
                Ok(Host::Ip(ip)) => Pattern::Range(IpRange::single(ip)),
                Err(why) => return bad(&why),
            }
        };
        Ok(HostRule {
            written: written.to_string(),
            pattern,
            ports: port.map_or_else(|| DEFAULT_PORTS.to_vec(), |p| vec![p]),
        })
    }

    /// Whether `host:port` (a name or an address, as a client asked for it) is allowed
    /// by this entry. A host that is not one ([`parse_host`]) is allowed by none.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        parse_host(host).is_ok_and(|host| self.allows_host(&host, port))
    }

    /// Whether `host:port` is allowed by this entry.
    pub fn allows_host(&self, host: &Host, port: u16) -> bool {
        if !self.ports.contains(&port) {
            return false;
        }
        match (&self.pattern, host) {
            (Pattern::Exact(name), Host::Name(host)) => name == host,
            (Pattern::Below(domain), Host::Name(host)) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Range(range), Host::Ip(ip)) => range.contains(*ip),
            _ => false,
        }
    }

    /// Whether this entry opens address `ip` at `port`, which lies in the special
    /// `block` (loopback, a private range, an engine network, this machine's own
    /// address): an address entry holding it that lies inside that block. A wider range
    /// (`0.0.0.0/0`) does not name what is special in it.
    pub fn opens_address(&self, block: &IpRange, ip: IpAddr, port: u16) -> bool {
        self.ports.contains(&port)
            && matches!(&self.pattern, Pattern::Range(range) if range.contains(ip) && block.covers(range))
    }

    /// Whether the entry names this machine's loopback by name (`localhost`,
    /// `*.localhost`).
    pub fn names_loopback(&self) -> bool {
        match &self.pattern {
            Pattern::Exact(name) | Pattern::Below(name) => is_localhost_name(name),
            Pattern::Range(_) => false,
        }
    }

    /// What the entry names, for the name constraints of a certificate authority: a
    /// DNS subtree (a name and the names below it), or a range of addresses.
    pub fn subtree(&self) -> Subtree<'_> {
        match &self.pattern {
            Pattern::Exact(name) | Pattern::Below(name) => Subtree::Dns(name),
            Pattern::Range(range) => Subtree::Range(*range),
        }
    }
}

/// See [`HostRule::subtree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subtree<'a> {
    Dns(&'a str),
    Range(IpRange),
}

/// Whether any entry of `list` allows `host:port`.
pub fn allows(list: &[HostRule], host: &str, port: u16) -> bool {
    list.iter().any(|rule| rule.allows(host, port))
}

/// An authority as a request writes it, strictly: `host`, `host:port`, `[v6]` or
/// `[v6]:port` (an IPv6 address only in brackets, a port of digits, no user part).
pub fn parse_authority(text: &str) -> Result<(Host, Option<u16>), String> {
    if text.contains('@') {
        return Err(format!(
            "`{text}`: credentials in the authority are not taken (send an Authorization header)"
        ));
    }
    let (host, port) = match text.rfind(':') {
        Some(at) if !text[at..].contains(']') => (&text[..at], Some(&text[at + 1..])),
        _ => (text, None),
    };
    let port = match port {
        None => None,
        Some(digits) => Some(
            digits
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0 && digits.chars().all(|c| c.is_ascii_digit()))
                .ok_or_else(|| format!("`{text}`: `{digits}` is not a port"))?,
        ),
    };
    if host.contains(':') && !host.starts_with('[') {
        return Err(format!(
            "`{text}`: an IPv6 address is written in brackets, `[::1]:443`"
        ));
    }
    Ok((parse_host(host)?, port))
}

#[cfg(test)]
mod tests;
