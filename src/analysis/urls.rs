//! URLs written as string literals (`"https://api.example.com/v1"`): the host and port a
//! program means to reach, which the policy's network allowlist can be held against
//! before anything runs. Only whole literals that start with a web scheme count; a URL
//! put together at run time is the egress proxy's to judge.

/// The host and port of `text` when it is an `http`, `https`, `ws` or `wss` URL.
pub fn host_and_port(text: &str) -> Option<(String, u16)> {
    let text = text.trim();
    let (scheme, rest) = text.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = split_port(authority).ok()?;
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    Some((host.to_ascii_lowercase(), port.unwrap_or(default)))
}

/// `host[:port]`, `[v6]`, `[v6]:port`, or a bare v6 address (no port).
pub fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            // Digits only: `+80` parses as a number but is no port in a URL.
            .filter(|_| p.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("`{p}` is not a port"))
    };
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("an unclosed `[`")?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(port(p)?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(format!("unexpected `{after}` after `]`")),
        };
    }
    if text.matches(':').count() > 1 {
        return Ok((text, None));
    }
    match text.split_once(':') {
        Some((host, p)) => Ok((host, Some(port(p)?))),
        None => Ok((text, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_urls_give_their_host_and_port() {
        assert_eq!(
            host_and_port("https://API.example.com/v1?x=1"),
            Some(("api.example.com".into(), 443))
        );
        assert_eq!(
            host_and_port("http://user:pw@h.io:8080/"),
            Some(("h.io".into(), 8080))
        );
        assert_eq!(
            host_and_port("ws://[::1]:9000/s"),
            Some(("::1".into(), 9000))
        );
        assert_eq!(
            host_and_port("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(host_and_port("ftp://example.com/"), None);
        assert_eq!(
            host_and_port("see https://example.com"),
            None,
            "a URL inside prose is not the literal"
        );
        assert_eq!(host_and_port("https://"), None);
    }
}
