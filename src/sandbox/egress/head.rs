//! A request head read strictly (RFC 9112), so that the proxy and the server behind it
//! can never read the same bytes as different requests: lines end in CRLF and nothing
//! else (a bare LF or CR is an error, not a line break), a header line is
//! `name: value` with no space before the colon and no continuation lines (obs-fold),
//! the request line is exactly `METHOD SP target SP HTTP/1.x`, and a body is framed by
//! at most one `Content-Length` or by `Transfer-Encoding: chunked` alone, never both.
//! `Host` is there exactly once (HTTP/1.1) and agrees with the request target.

use crate::policy::allowlist::{self, Host};

/// The most header lines a head may have.
const MOST_FIELDS: usize = 128;

/// One request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub method: String,
    pub target: String,
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    /// Header fields in order, names as written, values without surrounding blanks.
    pub fields: Vec<(String, String)>,
}

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// What a request target names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `CONNECT host:port`.
    Tunnel { host: Host, port: u16 },
    /// `http://host[:port]/path` or `https://…`: the proxy makes the connection (and,
    /// for https, the TLS) itself.
    Absolute {
        tls: bool,
        host: Host,
        port: u16,
        /// The path and query, origin-form (`/` at least).
        path: String,
    },
    /// `/path?query`: a request inside a tunnel.
    Origin,
}

impl Head {
    /// Reads a head: the bytes up to and including its empty line.
    pub fn parse(bytes: &[u8]) -> Result<Head, String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| "the request head is not UTF-8 text".to_string())?;
        let body = text
            .strip_suffix("\r\n\r\n")
            .ok_or("the request head does not end with an empty line (CRLF CRLF)")?;
        for (at, byte) in body.bytes().enumerate() {
            let before = at.checked_sub(1).map(|b| body.as_bytes()[b]);
            let after = body.as_bytes().get(at + 1).copied();
            if byte == b'\n' && before != Some(b'\r') {
                return Err("a bare LF in the request head: lines end with CRLF".into());
            }
            if byte == b'\r' && after != Some(b'\n') {
                return Err("a bare CR in the request head: lines end with CRLF".into());
            }
        }
        let mut lines = body.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let parts: Vec<&str> = request_line.split(' ').collect();
        let [method, target, version] = parts[..] else {
            return Err(format!(
                "not a request line (METHOD SP target SP HTTP/1.1): `{}`",
                shown(request_line)
            ));
        };
        if !is_token(method) {
            return Err(format!("`{}` is not a method", shown(method)));
        }
        if target.is_empty() || !target.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(format!(
                "the request target `{}` has blanks, control or non-ASCII characters",
                shown(target)
            ));
        }
        if version != "HTTP/1.1" && version != "HTTP/1.0" {
            return Err(format!("`{}` is not HTTP/1.1 or HTTP/1.0", shown(version)));
        }
        let mut fields = Vec::new();
        for line in lines {
            if line.starts_with([' ', '\t']) {
                return Err("a header line continued on the next (obs-fold) is not taken".into());
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| format!("`{}` is not a header line", shown(line)))?;
            if !is_token(name) {
                return Err(format!(
                    "`{}` is not a header name (no blank before the colon)",
                    shown(name)
                ));
            }
            let value = value.trim_matches([' ', '\t']);
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(format!("the value of `{name}` has control characters"));
            }
            fields.push((name.to_string(), value.to_string()));
            if fields.len() > MOST_FIELDS {
                return Err(format!("more than {MOST_FIELDS} header lines"));
            }
        }
        Ok(Head {
            method: method.to_string(),
            target: target.to_string(),
            version: version.to_string(),
            fields,
        })
    }

    /// The head as bytes, CRLF-terminated.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut text = format!("{} {} {}\r\n", self.method, self.target, self.version);
        for (name, value) in &self.fields {
            text.push_str(name);
            text.push_str(": ");
            text.push_str(value);
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        text.into_bytes()
    }

    /// The values of the fields called `name` (any case).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Removes the fields whose name `drop` says.
    pub fn remove(&mut self, drop: impl Fn(&str) -> bool) {
        self.fields
            .retain(|(name, _)| !drop(&name.to_ascii_lowercase()));
    }

    pub fn is_connect(&self) -> bool {
        self.method == "CONNECT"
    }

    /// How the body is delimited, or why the head is ambiguous about it.
    pub fn framing(&self) -> Result<Framing, String> {
        let lengths: Vec<&str> = self.values("content-length").collect();
        let encodings: Vec<&str> = self.values("transfer-encoding").collect();
        match (lengths.as_slice(), encodings.as_slice()) {
            ([], []) => Ok(Framing::None),
            ([length], []) => {
                if length.is_empty()
                    || length.len() > 18
                    || !length.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(format!("`Content-Length: {length}` is not a length"));
                }
                Ok(Framing::Length(length.parse().expect("digits")))
            }
            ([], [encoding]) => {
                if self.version == "HTTP/1.0" {
                    return Err("Transfer-Encoding in an HTTP/1.0 request".into());
                }
                if !encoding.eq_ignore_ascii_case("chunked") {
                    return Err(format!(
                        "`Transfer-Encoding: {encoding}`: only `chunked` alone is taken"
                    ));
                }
                Ok(Framing::Chunked)
            }
            ([], _) => Err("more than one Transfer-Encoding".into()),
            (_, []) => Err("more than one Content-Length".into()),
            _ => Err("both Content-Length and Transfer-Encoding".into()),
        }
    }

    /// What the request target names; an origin-form target (`/…`) is read as such,
    /// and only a tunnel takes one.
    pub fn target(&self) -> Result<Target, String> {
        if self.is_connect() {
            let (host, port) = allowlist::parse_authority(&self.target)?;
            let port = port
                .ok_or_else(|| format!("CONNECT needs host:port, got `{}`", shown(&self.target)))?;
            return Ok(Target::Tunnel { host, port });
        }
        if self.target.starts_with('/') {
            return Ok(Target::Origin);
        }
        let lower = self.target.to_ascii_lowercase();
        let (tls, rest) = if lower.starts_with("http://") {
            (false, &self.target["http://".len()..])
        } else if lower.starts_with("https://") {
            (true, &self.target["https://".len()..])
        } else {
            return Err(format!(
                "this is a proxy: send `{} http://host/path` (or https://), or `CONNECT \
                 host:port`, not `{}`",
                self.method,
                shown(&self.target)
            ));
        };
        if rest.contains('#') {
            return Err("a fragment (`#…`) is not sent in a request".into());
        }
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        let (host, port) = allowlist::parse_authority(authority)?;
        let path = match path {
            "" => "/".to_string(),
            query if query.starts_with('?') => format!("/{query}"),
            path => path.to_string(),
        };
        Ok(Target::Absolute {
            tls,
            host,
            port: port.unwrap_or(if tls { 443 } else { 80 }),
            path,
        })
    }

    /// Checks that `Host` is there once (HTTP/1.1; at most once in HTTP/1.0) and names
    /// `host:port`, where a `Host` without a port means `default_port`.
    pub fn check_host(&self, host: &Host, port: u16, default_port: u16) -> Result<(), String> {
        let hosts: Vec<&str> = self.values("host").collect();
        let value = match hosts.as_slice() {
            [] if self.version == "HTTP/1.0" => return Ok(()),
            [] => return Err("no Host header".into()),
            [value] => *value,
            _ => return Err("more than one Host header".into()),
        };
        let (named, named_port) =
            allowlist::parse_authority(value).map_err(|why| format!("the Host header: {why}"))?;
        if named != *host || named_port.unwrap_or(default_port) != port {
            return Err(format!(
                "the Host header names `{}`, the request is for `{}`",
                shown(value),
                host.with_port(port)
            ));
        }
        Ok(())
    }
}

/// A token (RFC 9110): method and header-name characters.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Text from a request, cut short and with control characters escaped, for messages.
pub fn shown(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(120)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > 120 {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests;
