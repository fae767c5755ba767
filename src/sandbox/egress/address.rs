//! Judging the address the proxy is about to connect to, whatever name led there.
//!
//! A listed name proves nothing about where its DNS points: a name may answer with
//! `127.0.0.1`, `::ffff:127.0.0.1`, the engine's bridge gateway, this machine's own
//! address, a cloud metadata address or another container. So every address is
//! normalised first (an IPv4-mapped, NAT64 or 6to4 IPv6 address is judged as the IPv4
//! address it carries) and then placed in the narrowest *special block* that holds it:
//!
//! - never reached: unspecified (`0.0.0.0/8`, `::`), multicast, broadcast and the
//!   reserved class E, IPv4-compatible IPv6;
//! - reached only when `network.allow` names the address, or a range inside its block
//!   (an entry wider than the block, such as `0.0.0.0/0`, does not count): loopback
//!   (`localhost` and `*.localhost` entries name it too), this machine's own addresses
//!   (the block is the address alone), the engine's networks (the block is the
//!   network), private and shared ranges, link-local, documentation and benchmark
//!   ranges.
//!
//! Every other address is public and reached when the name (or address) is allowed.
//! "This machine's own" is asked of the kernel at the moment of the connection (can a
//! socket be bound to it?), so an address added to an interface later counts too.

use crate::policy::allowlist::{HostRule, IpRange};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::RwLock;

/// A special block an address lies in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Special {
    pub block: IpRange,
    /// What the block is, for messages: "loopback", "a private range"…
    pub what: String,
    /// Never reached, whatever the list says.
    pub never: bool,
    pub loopback: bool,
}

/// The blocks that are special on every machine: (range, what, never).
const STATIC_BLOCKS: &[(&str, &str, bool)] = &[
    ("0.0.0.0/8", "an unspecified address (`this network`)", true),
    ("127.0.0.0/8", "loopback (this machine)", false),
    ("10.0.0.0/8", "a private range", false),
    ("172.16.0.0/12", "a private range", false),
    ("192.168.0.0/16", "a private range", false),
    (
        "100.64.0.0/10",
        "shared address space (carrier-grade NAT)",
        false,
    ),
    (
        "169.254.0.0/16",
        "link-local (where cloud metadata services answer)",
        false,
    ),
    ("192.0.0.0/24", "reserved for protocol assignments", false),
    ("192.0.2.0/24", "reserved for documentation", false),
    ("198.51.100.0/24", "reserved for documentation", false),
    ("203.0.113.0/24", "reserved for documentation", false),
    ("198.18.0.0/15", "reserved for benchmarks", false),
    ("224.0.0.0/4", "multicast", true),
    ("240.0.0.0/4", "reserved (class E and broadcast)", true),
    ("::/128", "an unspecified address", true),
    ("::1/128", "loopback (this machine)", false),
    (
        "::/96",
        "an IPv4-compatible IPv6 address (deprecated)",
        true,
    ),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", false),
    ("100::/64", "discard-only", true),
    ("2001:db8::/32", "reserved for documentation", false),
    ("fc00::/7", "a unique local (private) range", false),
    ("fe80::/10", "link-local", false),
    ("fec0::/10", "site-local (deprecated)", false),
    ("ff00::/8", "multicast", true),
];

/// [`STATIC_BLOCKS`], read once.
fn static_blocks() -> &'static [(IpRange, &'static str, bool)] {
    static BLOCKS: std::sync::OnceLock<Vec<(IpRange, &'static str, bool)>> =
        std::sync::OnceLock::new();
    BLOCKS.get_or_init(|| {
        STATIC_BLOCKS
            .iter()
            .map(|(range, what, never)| {
                (
                    IpRange::parse(range).expect("the fixed blocks parse"),
                    *what,
                    *never,
                )
            })
            .collect()
    })
}

/// What the proxy knows of its surroundings besides the fixed blocks: the engine's
/// networks, refreshed by the owner of the proxy.
#[derive(Debug, Default)]
pub struct Surroundings {
    engine_networks: RwLock<Vec<IpRange>>,
}

impl Surroundings {
    pub fn set_engine_networks(&self, networks: Vec<IpRange>) {
        *self
            .engine_networks
            .write()
            .unwrap_or_else(|e| e.into_inner()) = networks;
    }

    fn engine_networks(&self) -> Vec<IpRange> {
        self.engine_networks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The narrowest special block holding `ip` (after normalising it), if any.
    pub fn special(&self, ip: IpAddr) -> Option<Special> {
        let ip = normalise(ip);
        let mut found: Option<Special> = static_blocks()
            .iter()
            .filter(|(block, _, _)| block.contains(ip))
            .max_by_key(|(block, _, _)| block.prefix())
            .map(|(block, what, never)| Special {
                block: *block,
                what: what.to_string(),
                never: *never,
                loopback: what.starts_with("loopback"),
            });
        let mut candidates: Vec<Special> = self
            .engine_networks()
            .into_iter()
            .filter(|network| network.contains(ip))
            .map(|network| Special {
                block: network,
                what: format!("the container engine's network {network}"),
                never: false,
                loopback: false,
            })
            .collect();
        let settled = found.as_ref().is_some_and(|f| f.never || f.loopback);
        if !settled && is_own_address(ip) {
            candidates.push(Special {
                block: IpRange::single(ip),
                what: "this machine's own address".to_string(),
                never: false,
                loopback: false,
            });
        }
        for candidate in candidates {
            if found
                .as_ref()
                .is_none_or(|f| candidate.block.prefix() > f.block.prefix())
            {
                found = Some(candidate);
            }
        }
        found
    }

    /// Whether the proxy may connect to `ip:port`, for a host that the entries
    /// `matched` of `allow` let through by name (or by address): the address to
    /// connect to, or why not.
    pub fn judge(
        &self,
        ip: IpAddr,
        port: u16,
        matched: &[&HostRule],
        allow: &[HostRule],
    ) -> Result<IpAddr, String> {
        let connect_to = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let Some(special) = self.special(ip) else {
            return Ok(connect_to);
        };
        let judged = normalise(ip);
        let shown = if judged == ip {
            format!("{ip}")
        } else {
            format!("{ip} (that is {judged})")
        };
        if special.never {
            return Err(format!("{shown} is {}: never reached", special.what));
        }
        let named = (special.loopback && matched.iter().any(|rule| rule.names_loopback()))
            || allow
                .iter()
                .any(|rule| rule.opens_address(&special.block, judged, port));
        if named {
            Ok(connect_to)
        } else {
            Err(format!(
                "{shown} is {}, which network.allow does not name (to allow it, list the \
                 address, or a range inside {})",
                special.what, special.block
            ))
        }
    }
}

/// The IPv4 address an IPv6 one carries, where it carries one that the network would
/// reach: IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4
/// (`2002:AABB:CCDD::/48`). Any other address as it is.
pub fn normalise(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let bits = u128::from(v6);
    let nat64: Ipv6Addr = "64:ff9b::".parse().expect("an address");
    if bits >> 32 == u128::from(nat64) >> 32 {
        return IpAddr::V4(Ipv4Addr::from(bits as u32));
    }
    if v6.segments()[0] == 0x2002 {
        return IpAddr::V4(Ipv4Addr::from((bits >> 80) as u32));
    }
    ip
}

/// Whether `ip` is one of this machine's own addresses: the kernel lets a socket be
/// bound only to those.
fn is_own_address(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn rules(entries: &[&str]) -> Vec<HostRule> {
        entries
            .iter()
            .map(|e| HostRule::parse(e).unwrap())
            .collect()
    }

    #[test]
    fn addresses_are_judged_as_what_they_reach() {
        assert_eq!(normalise(ip("::ffff:127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(normalise(ip("64:ff9b::7f00:1")), ip("127.0.0.1"));
        assert_eq!(normalise(ip("64:ff9b::a9fe:a9fe")), ip("169.254.169.254"));
        assert_eq!(normalise(ip("2002:7f00:1::1")), ip("127.0.0.1"));
        assert_eq!(normalise(ip("2606:4700::1")), ip("2606:4700::1"));
        let around = Surroundings::default();
        for (address, what) in [
            ("127.0.0.1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("::1", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("10.1.2.3", "private"),
            ("172.20.0.1", "private"),
            ("192.168.9.9", "private"),
            ("100.64.0.1", "carrier-grade"),
            ("169.254.169.254", "link-local"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("fe80::1", "link-local"),
            ("fd00::1", "unique local"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "class E"),
            ("ff02::1", "multicast"),
            ("::7f00:1", "IPv4-compatible"),
        ] {
            let special = around
                .special(ip(address))
                .unwrap_or_else(|| panic!("{address} is special"));
            assert!(special.what.contains(what), "{address}: {special:?}");
        }
        assert_eq!(around.special(ip("93.184.215.14")), None);
        assert_eq!(around.special(ip("2606:4700::1")), None);
    }

    #[test]
    fn the_engine_networks_and_this_machine_are_narrower_blocks() {
        let around = Surroundings::default();
        around.set_engine_networks(vec![IpRange::parse("172.17.0.0/16").unwrap()]);
        let special = around.special(ip("172.17.0.5")).unwrap();
        assert_eq!(special.block.to_string(), "172.17.0.0/16");
        assert!(special.what.contains("engine"), "{special:?}");
        // This process's own non-loopback addresses, if it has any, are a block each.
        if let Some(own) = own_non_loopback_address() {
            let special = around.special(own).unwrap();
            assert!(special.block.is_single(), "{own}: {special:?}");
            assert!(special.what.contains("own address"), "{special:?}");
        }
    }

    /// An address of this machine that is not loopback (the one the default route
    /// leaves from), found without sending anything.
    fn own_non_loopback_address() -> Option<IpAddr> {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.connect("192.0.2.1:9").ok()?;
        let local = socket.local_addr().ok()?.ip();
        (!local.is_loopback() && !local.is_unspecified()).then_some(local)
    }

    #[test]
    fn a_special_address_needs_an_entry_inside_its_block() {
        let around = Surroundings::default();
        around.set_engine_networks(vec![IpRange::parse("172.17.0.0/16").unwrap()]);
        let allow = rules(&[
            "api.example.com",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "172.17.0.0/16:8080",
        ]);
        let by_name: Vec<&HostRule> = vec![&allow[0]];
        assert!(around
            .judge(ip("93.184.215.14"), 443, &by_name, &allow)
            .is_ok());
        assert!(around.judge(ip("10.9.8.7"), 443, &by_name, &allow).is_ok());
        let error = around
            .judge(ip("::ffff:127.0.0.1"), 443, &by_name, &allow)
            .unwrap_err();
        assert!(
            error.contains("that is 127.0.0.1") && error.contains("loopback"),
            "{error}"
        );
        assert!(around
            .judge(ip("172.17.0.3"), 8080, &by_name, &allow)
            .is_ok());
        assert!(around
            .judge(ip("172.17.0.3"), 443, &by_name, &allow)
            .is_err());
        assert!(around
            .judge(ip("172.18.0.3"), 443, &by_name, &allow)
            .is_err());
        assert!(around
            .judge(ip("0.0.0.0"), 443, &by_name, &rules(&["0.0.0.0"]))
            .is_err());
        let localhost = rules(&["localhost:8080"]);
        let matched: Vec<&HostRule> = localhost.iter().collect();
        assert!(around
            .judge(ip("127.0.0.1"), 8080, &matched, &localhost)
            .is_ok());
        assert!(around.judge(ip("::1"), 8080, &matched, &localhost).is_ok());
        assert!(
            around
                .judge(ip("10.0.0.1"), 8080, &matched, &localhost)
                .is_err(),
            "`localhost` names loopback, nothing else"
        );
        assert_eq!(
            around.judge(ip("::ffff:10.1.1.1"), 443, &by_name, &allow),
            Ok(ip("10.1.1.1")),
            "a mapped address is connected to as IPv4"
        );
    }
}
