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
    assert!(!allows(&list, ".pythonhosted.org", 443));
    assert!(allows(&list, "api.example.com", 8443));
    assert!(!allows(&list, "api.example.com", 443));
    assert!(allows(&list, "10.0.0.5", 80));
    assert!(!allows(&list, "10.0.0.6", 80));
    assert!(allows(&list, "::1", 8080));
    assert!(
        allows(&list, "0:0:0:0:0:0:0:1", 8080),
        "addresses compare by value"
    );
    assert!(
        allows(&list, "::ffff:10.0.0.5", 443),
        "a mapped address is the IPv4 one"
    );
}

#[test]
fn ranges_allow_the_addresses_in_them() {
    let list = list(&["10.0.0.0/8", "[fd00::/8]:5432", "192.168.1.0/24:8080"]);
    assert!(allows(&list, "10.20.30.40", 443));
    assert!(!allows(&list, "11.0.0.1", 443));
    assert!(allows(&list, "fd12::7", 5432));
    assert!(!allows(&list, "fd12::7", 443));
    assert!(allows(&list, "192.168.1.9", 8080));
    assert!(!allows(&list, "192.168.2.9", 8080));
}

#[test]
fn a_name_never_allows_an_address_and_a_range_never_a_name() {
    let both = list(&["localhost", "127.0.0.0/8"]);
    assert!(allows(&both, "localhost", 443));
    assert!(allows(&both, "127.0.0.1", 443));
    assert!(!allows(&both, "localhost.example.com", 443));
    let names = list(&["localhost"]);
    assert!(!allows(&names, "127.0.0.1", 443));
}

#[test]
fn addresses_in_other_spellings_are_no_hosts() {
    let list = list(&["*.example.com", "127.0.0.1"]);
    for spelling in [
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "0x7f000001",
        "127.1",
        "017700000001",
        "1.0x7f",
        "127.0.0.1.",
        "fe80::1%25eth0",
        "[fe80::1%eth0]",
        "a.example.com%2e",
        "xn--bcher-kva.example.com\u{0}",
        "bücher.example.com",
        "a.example.com..",
        "a..example.com",
        "a_b.example.com",
        "a.example.com\\@evil.com",
    ] {
        assert!(
            !allows(&list, spelling, 443),
            "`{spelling}` must not be read as a listed host"
        );
    }
    assert!(allows(&list, "xn--bcher-kva.example.com", 443));
    assert!(
        allows(&list, "A.Example.COM.", 443),
        "one final dot is the name"
    );
    for spelling in ["2130706433", "0177.0.0.1", "0x7f.1", "1.0x7f"] {
        let error = parse_host(spelling).unwrap_err();
        assert!(error.contains("another spelling"), "{spelling}: {error}");
    }
    assert!(parse_host("bücher.de").unwrap_err().contains("xn--"));
    assert!(parse_host("a%2eb").unwrap_err().contains("percent"));
    assert!(parse_host("[fe80::1%eth0]").unwrap_err().contains("zone"));
}

#[test]
fn authorities_are_read_strictly() {
    let ok = |text: &str| parse_authority(text).unwrap();
    assert_eq!(
        ok("Example.com:8080"),
        (Host::Name("example.com".into()), Some(8080))
    );
    assert_eq!(ok("example.com"), (Host::Name("example.com".into()), None));
    assert_eq!(
        ok("[::1]:443"),
        (Host::Ip("::1".parse().unwrap()), Some(443))
    );
    assert_eq!(
        ok("[::ffff:127.0.0.1]"),
        (Host::Ip("127.0.0.1".parse().unwrap()), None)
    );
    for (text, why) in [
        ("user:pass@example.com", "credentials"),
        ("example.com@evil.com", "credentials"),
        ("::1", "brackets"),
        ("example.com:", "not a port"),
        ("example.com:+80", "not a port"),
        ("example.com:0", "not a port"),
        ("example.com:99999", "not a port"),
        ("[::1", "unclosed"),
    ] {
        let error = parse_authority(text).unwrap_err();
        assert!(error.contains(why), "{text}: {error}");
    }
}

#[test]
fn a_special_address_is_opened_only_by_a_range_inside_its_block() {
    let ip: IpAddr = "172.17.0.1".parse().unwrap();
    let own = IpRange::single(ip);
    let bridge = IpRange::parse("172.17.0.0/16").unwrap();
    let narrow = list(&["172.17.0.1"]);
    let wide = list(&["172.16.0.0/12", "0.0.0.0/0"]);
    assert!(narrow[0].opens_address(&own, ip, 443));
    assert!(
        !narrow[0].opens_address(&own, ip, 8080),
        "ports still count"
    );
    assert!(narrow[0].opens_address(&bridge, ip, 443));
    for rule in &wide {
        assert!(!rule.opens_address(&own, ip, 443), "{}", rule.written);
        assert!(!rule.opens_address(&bridge, ip, 443), "{}", rule.written);
    }
    assert!(list(&["localhost"])[0].names_loopback());
    assert!(list(&["*.localhost:8080"])[0].names_loopback());
    assert!(!list(&["localhost.example.com"])[0].names_loopback());
}

#[test]
fn bad_entries_say_why() {
    for (entry, why) in [
        ("https://pypi.org", "not a URL"),
        ("pypi.org/simple", "not a URL"),
        ("pypi.org:0", "not a port"),
        ("pypi.org:http", "not a port"),
        ("py*pi.org", "may only start it"),
        ("*.*.org", "may only start it"),
        ("bad_host!", "not a host name"),
        ("*.0.0.1", "another spelling"),
        ("2130706433", "another spelling"),
        ("10.0.0.1/8", "bits set past its prefix"),
        ("10.0.0.0/40", "longer than an address"),
        ("[::1", "unclosed"),
        ("", "empty"),
    ] {
        let error = HostRule::parse(entry).unwrap_err();
        assert!(error.contains(why), "{entry}: {error}");
    }
}
