//! `network: { allow: [...] }`: the hosts (and ports) code in the sandbox may reach,
//! by name. The same list is enforced by the egress proxy (`sandbox::egress`) and
//! read by the static check (a URL in the code to a host outside it is a finding).
//!
//! An entry is `host`, `host:port`, `*.domain` or `*.domain:port`; without a port, 443
//! and 80 are meant. `*.domain` matches names below the domain, not the domain itself
//! (list both when both are wanted). Names compare without case and without a final
//! dot. An IP address matches only when it is listed as such (`10.0.0.5`, `[::1]:8080`):
//! a name on the list never lets its addresses be used directly.

pub use crate::analysis::urls::split_port;
use serde::Serialize;

/// The ports an entry without one allows.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];

/// One entry of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As written, for messages and `policy show`.
    pub written: String,
    /// A lower-case name, `*.suffix`, or an IP address in its usual text form.
    host: String,
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
        let bad = |why: &str| Err(format!("`{written}` is not a host to allow: {why}"));
        if written.contains("://") || written.contains('/') {
            return bad(
                "write the host alone (`api.example.com` or `api.example.com:8443`), not a URL",
            );
        }
        let (host, port) = split_port(written).map_err(|why| format!("`{written}`: {why}"))?;
        let host = normalize(host);
        if host.is_empty() {
            return bad("the host is empty");
        }
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let is_ip = host.parse::<std::net::IpAddr>().is_ok();
        if !is_ip {
            if name.contains('*') {
                return bad("`*` may only start it, as `*.example.com`");
            }
            let valid = name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
            if !valid {
                return bad("not a host name");
            }
        }
        Ok(HostRule {
            written: written.to_string(),
            host,
            ports: port.map_or_else(|| DEFAULT_PORTS.to_vec(), |p| vec![p]),
        })
    }

    /// Whether `host:port` (a name or an address, as a client asked for it) is allowed
    /// by this entry.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if !self.ports.contains(&port) {
            return false;
        }
        let host = normalize(host);
        match self.host.strip_prefix("*.") {
            Some(domain) => {
                host.parse::<std::net::IpAddr>().is_err()
                    && host.len() > domain.len()
                    && host.ends_with(domain)
                    && host[..host.len() - domain.len()].ends_with('.')
            }
            None => self.host == host,
        }
    }
}

/// Whether any entry of `list` allows `host:port`.
pub fn allows(list: &[HostRule], host: &str, port: u16) -> bool {
    list.iter().any(|rule| rule.allows(host, port))
}

/// Lower case, no final dot, an IP address in its canonical form.
fn normalize(host: &str) -> String {
    let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Vec<HostRule> {
        entries
            .iter()
            .map(|e| HostRule::parse(e).unwrap())
            .collect()
    }

    #[test]
    fn names_wildcards_ports_and_addresses() {
        let list = list(&[
            "pypi.org",
            "*.pythonhosted.org",
            "api.example.com:8443",
            "10.0.0.5",
            "[::1]:8080",
        ]);
        assert!(allows(&list, "pypi.org", 443));
        assert!(allows(&list, "PyPI.org.", 80));
        assert!(
            !allows(&list, "pypi.org", 8080),
            "only 443 and 80 without a port"
        );
        assert!(!allows(&list, "evilpypi.org", 443));
        assert!(!allows(&list, "pypi.org.evil.com", 443));
        assert!(allows(&list, "files.pythonhosted.org", 443));
        assert!(
            !allows(&list, "pythonhosted.org", 443),
            "`*.` is below the domain only"
        );
        assert!(!allows(&list, "xpythonhosted.org", 443));
        assert!(allows(&list, "api.example.com", 8443));
        assert!(!allows(&list, "api.example.com", 443));
        assert!(allows(&list, "10.0.0.5", 80));
        assert!(!allows(&list, "10.0.0.6", 80));
        assert!(allows(&list, "::1", 8080));
        assert!(
            allows(&list, "0:0:0:0:0:0:0:1", 8080),
            "addresses compare by value"
        );
    }

    #[test]
    fn a_name_never_allows_an_address_and_a_wildcard_never_an_ip() {
        let list = list(&["*.0.0.1", "localhost"]);
        assert!(!allows(&list, "127.0.0.1", 443));
        assert!(allows(&list, "localhost", 443));
    }

    #[test]
    fn bad_entries_say_why() {
        for (entry, why) in [
            ("https://pypi.org", "not a URL"),
            ("pypi.org:0", "not a port"),
            ("pypi.org:http", "not a port"),
            ("py*pi.org", "may only start it"),
            ("bad_host!", "not a host name"),
            ("[::1", "unclosed"),
            ("", "empty"),
        ] {
            let error = HostRule::parse(entry).unwrap_err();
            assert!(error.contains(why), "{entry}: {error}");
        }
    }
}
