use super::*;
use crate::policy::secrets::{declare, SecretFile};

const VALUE: &str = "sk-real value&=/";

fn secrets() -> Arc<Secrets> {
    let written = vec![
        (
            "API_KEY".to_string(),
            SecretFile {
                from: None,
                hosts: vec!["api.example.com".into()],
            },
        ),
        (
            "OTHER_KEY".to_string(),
            SecretFile {
                from: None,
                hosts: vec!["other.example.com".into()],
            },
        ),
    ];
    let declared = declare("p.yaml", "", written, &|name| {
        Some(
            if name == "API_KEY" {
                VALUE
            } else {
                "other-value"
            }
            .to_string(),
        )
    });
    Arc::new(Secrets::new(&declared).unwrap())
}

fn head(text: &str) -> Head {
    Head::parse(text.as_bytes()).unwrap()
}

fn name(text: &str) -> Host {
    Host::Name(text.into())
}

fn placeholder_of(env: &[(String, String)], secret: &str) -> String {
    env.iter().find(|(n, _)| n == secret).unwrap().1.clone()
}

#[test]
fn placeholders_are_unguessable_and_die_with_their_box() {
    let secrets = secrets();
    let (env, ticket) = secrets.issue();
    let (again, other) = secrets.issue();
    let first = placeholder_of(&env, "API_KEY");
    assert!(first.starts_with(PREFIX) && first.len() == PREFIX.len() + RANDOM_HEX);
    assert_ne!(first, placeholder_of(&again, "API_KEY"), "one per box");
    assert!(!first.contains(VALUE));
    assert_eq!(secrets.live(), 4);
    drop(other);
    assert_eq!(
        secrets.live(),
        2,
        "an unbound ticket's placeholders go with it"
    );
    secrets.bind(ticket, "box-1");
    assert_eq!(secrets.live(), 2);
    secrets.forget("box-1");
    assert_eq!(secrets.live(), 0);
}

#[test]
fn the_value_goes_only_to_its_host_in_headers_and_query() {
    let secrets = secrets();
    let log = crate::sandbox::egress::RefusalLog::default();
    let recorder = Recorder {
        log: &log,
        client: "box",
        host: name("api.example.com"),
        port: 443,
    };
    let (env, _ticket) = secrets.issue();
    let key = placeholder_of(&env, "API_KEY");
    let other = placeholder_of(&env, "OTHER_KEY");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{key}"));
    let request = head(&format!(
        "GET /v1/x?key={key}&q=1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer {key}\r\nX-Both: {key},{key}\r\nProxy-Authorization: Basic {basic}\r\n\r\n"
    ));
    let swapped = secrets
        .swap(request, &name("api.example.com"), 443, true, &recorder)
        .unwrap();
    let text = String::from_utf8(swapped.to_bytes()).unwrap();
    assert!(!text.contains(PREFIX), "{text}");
    assert!(
        text.contains(&format!("Authorization: Bearer {VALUE}\r\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("X-Both: {VALUE},{VALUE}\r\n")),
        "{text}"
    );
    assert!(
        text.contains("GET /v1/x?key=sk-real%20value%26%3D%2F&q=1 HTTP/1.1"),
        "the query gets the value percent-encoded: {text}"
    );
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("user:{VALUE}"));
    assert!(text.contains(&format!("Basic {expected}")), "{text}");

    // Toward another host, over plain HTTP, in the path, percent-encoded: refused.
    let encoded = key.replace('-', "%2D");
    for (request, host, tls, why) in [
        (
            format!("GET / HTTP/1.1\r\nHost: evil.example.net\r\nX-Key: {key}\r\n\r\n"),
            "evil.example.net",
            true,
            "only sent to api.example.com",
        ),
        (
            format!("GET /?k={key} HTTP/1.1\r\nHost: other.example.com\r\n\r\n"),
            "other.example.com",
            true,
            "only sent to api.example.com",
        ),
        (
            format!("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Key: {key}\r\n\r\n"),
            "api.example.com",
            false,
            "unencrypted",
        ),
        (
            format!("GET /bot{key}/send HTTP/1.1\r\nHost: api.example.com\r\n\r\n"),
            "api.example.com",
            true,
            "path",
        ),
        (
            format!("GET /?k={encoded} HTTP/1.1\r\nHost: api.example.com\r\n\r\n"),
            "api.example.com",
            true,
            "percent-encoded",
        ),
        (
            format!("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-{key}: 1\r\n\r\n"),
            "api.example.com",
            true,
            "header's name",
        ),
        (
            format!("GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Key: {other}\r\n\r\n"),
            "api.example.com",
            true,
            "OTHER_KEY is only sent to other.example.com",
        ),
    ] {
        let refused = secrets
            .swap(head(&request), &name(host), 443, tls, &recorder)
            .unwrap_err();
        assert_eq!(refused.status, "403 Forbidden");
        assert!(
            refused.reason.contains(why),
            "{request:?}: {}",
            refused.reason
        );
        assert!(refused.recorded);
        assert!(!refused.reason.contains(VALUE));
    }
    let refused = log.take_secrets(
        "box",
        std::time::Instant::now() - std::time::Duration::from_secs(60),
    );
    assert_eq!(refused.len(), 7, "{refused:?}");
    assert_eq!(refused[0].secret, "API_KEY");
    assert_eq!(refused[0].host, "evil.example.net");
    assert!(!format!("{refused:?}").contains(VALUE));

    // A request with no placeholder, or an unknown one, passes untouched.
    let plain = head("GET /?k=csm-secret-00000000000000000000000000000000 HTTP/1.1\r\nHost: evil.example.net\r\n\r\n");
    assert_eq!(
        secrets.swap(
            plain.clone(),
            &name("evil.example.net"),
            80,
            false,
            &recorder
        ),
        Ok(plain)
    );
}
