//! A range of IP addresses written as CIDR (`10.0.0.0/8`, `fd00::/8`, or one address),
//! as `network.allow` names the addresses the egress proxy may connect to, and as the
//! proxy describes the address blocks it judges (loopback, private, the engine's
//! networks).
//!
//! An IPv4 address written as IPv6 (`::ffff:10.0.0.5`) is the IPv4 address: a range
//! and an address compare by what they reach, not by how they are spelled.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Addresses whose first `prefix` bits are those of `network` (the rest are zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// The range of one address.
    pub fn single(ip: IpAddr) -> IpRange {
        let ip = unmap(ip);
        IpRange {
            network: ip,
            prefix: bits(ip),
        }
    }

    /// `network/prefix`, or why not: the prefix must fit the family, and no bit may be
    /// set past it (`10.0.0.1/8` is refused, so a range means what it says).
    pub fn new(network: IpAddr, prefix: u8) -> Result<IpRange, String> {
        let (network, prefix) = match network {
            // `::ffff:10.0.0.0/104` is `10.0.0.0/8`.
            IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() && prefix >= 96 => {
                (unmap(network), prefix - 96)
            }
            other => (other, prefix),
        };
        if prefix > bits(network) {
            return Err(format!(
                "`/{prefix}` is longer than an address of that family ({} bits)",
                bits(network)
            ));
        }
        let range = IpRange { network, prefix };
        if masked(network, prefix) != network {
            return Err(format!(
                "`{network}/{prefix}` has bits set past its prefix; the range is `{}`",
                IpRange {
                    network: masked(network, prefix),
                    prefix
                }
            ));
        }
        Ok(range)
    }

    /// `a.b.c.d/n`, `v6/n` or an address alone.
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| format!("`{address}` is not an IP address"))?;
        match prefix {
            None => Ok(IpRange::single(network)),
            Some(prefix) => {
                let prefix = prefix
                    .parse::<u8>()
                    .ok()
                    .filter(|_| prefix.chars().all(|c| c.is_ascii_digit()))
                    .ok_or_else(|| format!("`/{prefix}` is not a prefix length"))?;
                IpRange::new(network, prefix)
            }
        }
    }

    /// The first address of the range.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `ip` is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = unmap(ip);
        same_family(ip, self.network) && masked(ip, self.prefix) == self.network
    }

    /// Whether every address of `other` is in this range.
    pub fn covers(&self, other: &IpRange) -> bool {
        other.prefix >= self.prefix && self.contains(other.network)
    }

    /// Whether the range is a single address.
    pub fn is_single(&self) -> bool {
        self.prefix == bits(self.network)
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_single() {
            write!(f, "{}", self.network)
        } else {
            write!(f, "{}/{}", self.network, self.prefix)
        }
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it is; any
/// other address as it is.
pub fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

fn bits(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

/// `ip` with every bit past the first `prefix` cleared.
fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_contain_what_they_say() {
        let ten = IpRange::parse("10.0.0.0/8").unwrap();
        assert!(ten.contains(ip("10.255.1.2")));
        assert!(!ten.contains(ip("11.0.0.1")));
        assert!(
            ten.contains(ip("::ffff:10.1.2.3")),
            "a mapped address is the IPv4 one"
        );
        let all = IpRange::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("255.255.255.255")));
        assert!(!all.contains(ip("::1")), "families do not mix");
        let ula = IpRange::parse("fd00::/8").unwrap();
        assert!(ula.contains(ip("fd12::1")));
        assert!(!ula.contains(ip("fe80::1")));
        let one = IpRange::parse("::1").unwrap();
        assert!(one.is_single() && one.contains(ip("0:0:0:0:0:0:0:1")));
        assert_eq!(
            IpRange::parse("::ffff:10.0.0.0/104").unwrap(),
            ten,
            "a mapped range is the IPv4 one"
        );
        assert!(ten.covers(&IpRange::parse("10.1.0.0/16").unwrap()));
        assert!(!IpRange::parse("10.1.0.0/16").unwrap().covers(&ten));
        assert_eq!(ten.to_string(), "10.0.0.0/8");
        assert_eq!(
            IpRange::parse("127.0.0.1/32").unwrap().to_string(),
            "127.0.0.1"
        );
    }

    #[test]
    fn bad_ranges_say_why() {
        for (text, why) in [
            (
                "10.0.0.1/8",
                "bits set past its prefix; the range is `10.0.0.0/8`",
            ),
            ("10.0.0.0/33", "longer than an address"),
            ("10.0.0.0/+8", "not a prefix length"),
            ("10.0.0/8", "not an IP address"),
            ("fe80::1%eth0/64", "not an IP address"),
        ] {
            let error = IpRange::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
