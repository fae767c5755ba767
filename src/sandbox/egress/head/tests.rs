use super::*;

fn head(text: &str) -> Result<Head, String> {
    Head::parse(text.as_bytes())
}

fn name(text: &str) -> Host {
    Host::Name(text.into())
}

#[test]
fn a_plain_head_is_read_and_written_back() {
    let text = "GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept:  */* \r\n\r\n";
    let read = head(text).unwrap();
    assert_eq!(read.method, "GET");
    assert_eq!(read.fields[1], ("Accept".to_string(), "*/*".to_string()));
    assert_eq!(
        read.target(),
        Ok(Target::Absolute {
            tls: false,
            host: name("example.com"),
            port: 8080,
            path: "/a?b=1".into()
        })
    );
    assert_eq!(read.check_host(&name("example.com"), 8080, 80), Ok(()));
    assert_eq!(
        String::from_utf8(read.to_bytes()).unwrap(),
        "GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\r\n"
    );
    let tunnel = head("CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n").unwrap();
    assert_eq!(
        tunnel.target(),
        Ok(Target::Tunnel {
            host: Host::Ip("::1".parse().unwrap()),
            port: 443
        })
    );
    let secure =
        head("GET https://API.example.com?x=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n").unwrap();
    assert_eq!(
        secure.target(),
        Ok(Target::Absolute {
            tls: true,
            host: name("api.example.com"),
            port: 443,
            path: "/?x=1".into()
        })
    );
    assert_eq!(
        head("GET /x HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().target(),
        Ok(Target::Origin)
    );
}

#[test]
fn line_endings_are_crlf_and_nothing_else() {
    for (text, why) in [
        ("GET http://a/ HTTP/1.1\nHost: a\r\n\r\n", "bare LF"),
        (
            "GET http://a/ HTTP/1.1\r\nX: 1\nHost: evil\r\n\r\n",
            "bare LF",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nX: 1\rHost: evil\r\n\r\n",
            "bare CR",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nX: 1\r\n continued\r\n\r\n",
            "obs-fold",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nX: 1\r\n\tcontinued\r\n\r\n",
            "obs-fold",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n",
            "not a header name",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nno colon\r\n\r\n",
            "not a header line",
        ),
        ("GET  http://a/ HTTP/1.1\r\n\r\n", "not a request line"),
        ("GET http://a/ HTTP/1.1 \r\n\r\n", "not a request line"),
        ("GET http://a/ HTTP/2\r\n\r\n", "not HTTP/1.1"),
        ("G\u{0}T http://a/ HTTP/1.1\r\n\r\n", "not a method"),
        (
            "GET http://a/\u{7f} HTTP/1.1\r\n\r\n",
            "control or non-ASCII",
        ),
        (
            "GET http://a/ HTTP/1.1\r\nX: a\u{0}b\r\n\r\n",
            "control characters",
        ),
        ("GET http://a/ HTTP/1.1\r\nHost: a\r\n", "does not end"),
    ] {
        let error = head(text).unwrap_err();
        assert!(error.contains(why), "{text:?}: {error}");
    }
}

#[test]
fn one_host_that_agrees_with_the_target() {
    let check = |text: &str, host: &str, port: u16, default: u16| {
        head(text).unwrap().check_host(&name(host), port, default)
    };
    assert!(check("GET / HTTP/1.1\r\nHost: a.com\r\n\r\n", "a.com", 80, 80).is_ok());
    assert!(check("GET / HTTP/1.1\r\nhost: A.com.\r\n\r\n", "a.com", 80, 80).is_ok());
    assert!(check("GET / HTTP/1.0\r\n\r\n", "a.com", 80, 80).is_ok());
    for (text, port, why) in [
        ("GET / HTTP/1.1\r\n\r\n", 80, "no Host"),
        (
            "GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n",
            80,
            "more than one Host",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a.com\r\nhost: a.com\r\n\r\n",
            80,
            "more than one Host",
        ),
        ("GET / HTTP/1.1\r\nHost: b.com\r\n\r\n", 80, "names `b.com`"),
        (
            "GET / HTTP/1.1\r\nHost: a.com\r\n\r\n",
            8080,
            "names `a.com`",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a.com:8080\r\n\r\n",
            80,
            "names `a.com:8080`",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a.com@b.com\r\n\r\n",
            80,
            "credentials",
        ),
        ("GET / HTTP/1.1\r\nHost: a%2ecom\r\n\r\n", 80, "percent"),
    ] {
        let error = check(text, "a.com", port, 80).unwrap_err();
        assert!(error.contains(why), "{text:?}: {error}");
    }
}

#[test]
fn a_body_has_one_framing() {
    let framing = |fields: &str| {
        head(&format!("POST / HTTP/1.1\r\nHost: a\r\n{fields}\r\n"))
            .unwrap()
            .framing()
    };
    assert_eq!(framing(""), Ok(Framing::None));
    assert_eq!(framing("Content-Length: 12\r\n"), Ok(Framing::Length(12)));
    assert_eq!(
        framing("Transfer-Encoding: Chunked\r\n"),
        Ok(Framing::Chunked)
    );
    for (fields, why) in [
        (
            "Content-Length: 5\r\nContent-Length: 5\r\n",
            "more than one Content-Length",
        ),
        ("Content-Length: 5, 5\r\n", "not a length"),
        ("Content-Length: +5\r\n", "not a length"),
        ("Content-Length: 0x5\r\n", "not a length"),
        ("Content-Length: 99999999999999999999\r\n", "not a length"),
        (
            "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
            "both",
        ),
        ("Transfer-Encoding: gzip, chunked\r\n", "only `chunked`"),
        (
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "more than one Transfer-Encoding",
        ),
        ("Transfer-Encoding: xchunked\r\n", "only `chunked`"),
    ] {
        let error = framing(fields).unwrap_err();
        assert!(error.contains(why), "{fields:?}: {error}");
    }
    let old = head("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
    assert!(old.framing().unwrap_err().contains("HTTP/1.0"));
}

#[test]
fn targets_in_disguise_are_refused() {
    for (target, why) in [
        ("http://user:pass@a.com/", "credentials"),
        ("http://a.com@evil.com/", "credentials"),
        ("http://a%2ecom/", "percent"),
        ("http://2130706433/", "another spelling"),
        ("http://0x7f.1/", "another spelling"),
        ("http://[fe80::1%25eth0]/", "zone id"),
        ("http://a.com/#x", "fragment"),
        ("ftp://a.com/", "this is a proxy"),
        ("a.com:443", "this is a proxy"),
        ("*", "this is a proxy"),
    ] {
        let read = head(&format!("GET {target} HTTP/1.1\r\nHost: a.com\r\n\r\n")).unwrap();
        let error = read.target().unwrap_err();
        assert!(error.contains(why), "{target}: {error}");
    }
    let connect = head("CONNECT a.com HTTP/1.1\r\n\r\n").unwrap();
    assert!(connect.target().unwrap_err().contains("host:port"));
}
