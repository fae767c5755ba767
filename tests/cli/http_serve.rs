//! `serve --http` as a user starts it and as an attacker meets it: who may start it
//! where, credentials (401), Host and Origin (403), another principal's session id
//! (404), huge bodies (413), the stateless protocol revision (400), SIGHUP re-reading
//! the token file, and TLS. Requests are written byte for byte by the test. Nothing
//! here runs code (the policy keeps no warm pool), so no container engine is needed.

crate::common::harness::tests! {
    sync a_public_address_without_authentication_is_refused_at_start_and_loopback_is_not;
    sync odd_token_files_are_refused_at_start_with_file_and_line_and_never_the_token;
    sync a_missing_or_wrong_credential_is_401_with_a_bearer_challenge;
    sync foreign_origins_and_host_names_are_403_before_any_credential_is_looked_at;
    sync a_session_id_of_another_principal_is_not_found_and_the_owner_keeps_it;
    sync a_huge_body_is_413_a_stateless_request_400_and_the_server_serves_on;
    sync sighup_rereads_the_token_file_and_a_bad_one_leaves_the_tokens_in_force;
    sync an_allowed_web_origin_gets_cors_answers_and_a_principal_has_a_bounded_number_of_sessions;
    sync behind_a_proxy_the_public_name_is_accepted_as_the_proxy_passes_it;
    sync a_token_line_that_names_a_policy_runs_its_principals_calls_under_it;
}

use crate::common::http::{initialize_message, open_session, post_mcp, raw, HttpServer};
use crate::common::{self, binary, text};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const ALICE: &str = "alice-0123456789abcdef0123";
const BOB: &str = "bob-0123456789abcdef012345";

/// A policy with no warm pool: starting the server creates no container.
/// `name` made unique in this test process: scratch files of one name are shared by
/// the tests running at the same time, and made afresh by each.
fn unique(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{n}-{name}")
}

fn quiet_policy() -> PathBuf {
    common::scratch_file(
        &unique("no-pool.yaml"),
        b"version: 1\nextends: default\npool:\n  size: 0\n",
    )
}

/// A token file with `text`, readable by its owner only.
fn token_file(name: &str, text: &str) -> PathBuf {
    let path = common::scratch_file(&unique(name), text.as_bytes());
    chmod_600(&path);
    path
}

fn chmod_600(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// A server with alice's and bob's tokens.
fn team_server() -> HttpServer {
    let tokens = token_file("team-tokens", &format!("alice {ALICE}\nbob {BOB}\n"));
    let policy = quiet_policy();
    HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ])
}

fn a_public_address_without_authentication_is_refused_at_start_and_loopback_is_not() {
    let policy = quiet_policy();
    for address in ["0.0.0.0:0", "[::]:0", "[::ffff:0.0.0.0]:0"] {
        let output = binary()
            .args(["serve", "--http", address, "--policy"])
            .arg(&policy)
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{address}: {stderr}");
        assert!(
            stderr.contains("no authentication") && stderr.contains("--token-file FILE"),
            "{address}: {stderr}"
        );
    }
    // Loopback starts without tokens; every call is the one principal `local`.
    let server = HttpServer::try_start(&["--policy", policy.to_str().unwrap()], &[]);
    let server = server.unwrap_or_else(|e| panic!("{e:?}"));
    let id = open_session(server.port, &[]);
    assert!(!id.is_empty());
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(log.contains("principal=local"), "{log}");
}

fn odd_token_files_are_refused_at_start_with_file_and_line_and_never_the_token() {
    let policy = quiet_policy();
    let secret = "s3cr3t-s3cr3t-s3cr3t-0001";
    let tokens = token_file(
        "odd-tokens",
        &format!(
            "# comment\r\n{secret}\r\nalice {ALICE}   \r\ncarol {ALICE}\r\nbob {BOB} no-such-policy.yaml\r\ndave short\r\n"
        ),
    );
    let output = binary()
        .args(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .arg("--token-file")
        .arg(&tokens)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("odd-tokens:2: one field"), "{stderr}");
    assert!(
        stderr.contains("odd-tokens:4: the same token as line 3"),
        "{stderr}"
    );
    assert!(
        stderr.contains("odd-tokens:6: the token is 5 characters"),
        "{stderr}"
    );
    for leaked in [secret, ALICE, BOB, "short"] {
        assert!(!stderr.contains(leaked), "`{leaked}` leaked: {stderr}");
    }
    // Once the lines are right, the policy a line names must load.
    let tokens = token_file(
        "policy-tokens",
        &format!("alice {ALICE}\nbob {BOB} no-such-policy.yaml\n"),
    );
    let output = binary()
        .args(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .arg("--token-file")
        .arg(&tokens)
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("token file line 2: policy `no-such-policy.yaml`"),
        "{stderr}"
    );
}

fn a_missing_or_wrong_credential_is_401_with_a_bearer_challenge() {
    let server = team_server();
    let port = server.port;
    let wrong = [
        None,
        Some(bearer("wrong-0123456789abcdef0123")),
        Some(bearer(&ALICE[..ALICE.len() - 1])),
        Some(bearer(&format!("{ALICE}x"))),
        Some(bearer(&ALICE.to_uppercase())),
        Some(format!("Basic {ALICE}")),
        Some(format!("Bearer{ALICE}")),
        Some("Bearer".to_string()),
        Some(format!("Bearer {ALICE} {ALICE}")),
    ];
    for authorization in &wrong {
        let headers: Vec<(&str, &str)> = authorization
            .iter()
            .map(|value| ("Authorization", value.as_str()))
            .collect();
        let reply = post_mcp(port, &headers, &initialize_message());
        assert_eq!(reply.status, 401, "{authorization:?}: {reply:?}");
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(challenge.starts_with("Bearer realm="), "{challenge}");
        assert!(reply.header("mcp-session-id").is_none());
    }
    // Two Authorization headers, one of them right: refused, not picked from.
    let good = bearer(ALICE);
    let reply = post_mcp(
        port,
        &[
            ("Authorization", &good),
            ("Authorization", "Bearer nope-nope-nope-nope"),
        ],
        &initialize_message(),
    );
    assert_eq!(reply.status, 401);
    // A token in the URL is not a credential.
    let host = format!("127.0.0.1:{port}");
    let reply = raw(
        port,
        "POST",
        &format!("/mcp?access_token={ALICE}"),
        &[
            ("Host", &host),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        initialize_message().to_string().as_bytes(),
    );
    assert_eq!(reply.status, 401);
    // The right token, in any case of the scheme.
    for value in [bearer(ALICE), format!("bearer {BOB}")] {
        let reply = post_mcp(port, &[("Authorization", &value)], &initialize_message());
        assert_eq!(reply.status, 200, "{reply:?}");
        assert!(reply.header("mcp-session-id").is_some());
        assert_eq!(
            reply.messages()[0]["result"]["serverInfo"]["name"],
            "code-sandbox-mcp"
        );
    }
    // Everything else the server serves is 404, credential or not.
    let reply = raw(port, "GET", "/", &[("Host", &host)], b"");
    assert_eq!(reply.status, 404);
    let reply = raw(
        port,
        "GET",
        "/.well-known/oauth-protected-resource",
        &[("Host", &host)],
        b"",
    );
    assert_eq!(reply.status, 404, "no OAuth, no metadata: {reply:?}");
}

fn foreign_origins_and_host_names_are_403_before_any_credential_is_looked_at() {
    let server = team_server();
    let port = server.port;
    let good = bearer(ALICE);
    let own = format!("127.0.0.1:{port}");
    let post = |host: Option<&str>, origin: Option<&str>, auth: bool| {
        let mut headers = Vec::new();
        if let Some(host) = host {
            headers.push(("Host", host));
        }
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        if auth {
            headers.push(("Authorization", good.as_str()));
        }
        headers.push(("Content-Type", "application/json"));
        headers.push(("Accept", "application/json, text/event-stream"));
        raw(
            port,
            "POST",
            "/mcp",
            &headers,
            initialize_message().to_string().as_bytes(),
        )
    };
    // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
    for host in [
        format!("evil.example:{port}"),
        format!("localhost.:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
        format!("0x7f000001:{port}"),
        "localhost".to_string(),
    ] {
        for auth in [false, true] {
            let reply = post(Some(&host), None, auth);
            assert_eq!(reply.status, 403, "Host {host}: {reply:?}");
        }
    }
    assert_eq!(post(None, None, true).status, 400, "no Host");
    assert_eq!(
        post(Some(&format!("a@127.0.0.1:{port}")), None, true).status,
        400
    );
    let other_port = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    let trailing_dot = format!("http://localhost.:{port}");
    let https_other = format!("https://localhost:{}", port.wrapping_add(1));
    for origin in [
        "null",
        "http://evil.example",
        other_port.as_str(),
        trailing_dot.as_str(),
        https_other.as_str(),
        "file://",
        "chrome-extension://abcdef",
    ] {
        for auth in [false, true] {
            let reply = post(Some(&own), Some(origin), auth);
            assert_eq!(reply.status, 403, "Origin {origin}: {reply:?}");
        }
    }
    // The server's own names and origin, in any case, pass.
    for (host, origin) in [
        (own.clone(), format!("http://127.0.0.1:{port}")),
        (
            format!("LOCALHOST:{port}"),
            format!("HTTP://LocalHost:{port}"),
        ),
        (format!("[::1]:{port}"), format!("http://[::1]:{port}")),
    ] {
        let reply = post(Some(&host), Some(&origin), true);
        assert_eq!(reply.status, 200, "{host} {origin}: {reply:?}");
    }
}

fn a_session_id_of_another_principal_is_not_found_and_the_owner_keeps_it() {
    let server = team_server();
    let port = server.port;
    let (alice, bob) = (bearer(ALICE), bearer(BOB));
    let id = open_session(port, &[("Authorization", &alice)]);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let as_bob = [
        ("Authorization", bob.as_str()),
        ("Mcp-Session-Id", id.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let reply = post_mcp(port, &as_bob, &list);
    assert_eq!(reply.status, 404, "{reply:?}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "end_session", "arguments": {"session": "x"}}});
    assert_eq!(post_mcp(port, &as_bob, &call).status, 404);
    let host = format!("127.0.0.1:{port}");
    let mut headers = as_bob.to_vec();
    headers.push(("Host", &host));
    headers.push(("Accept", "text/event-stream"));
    assert_eq!(raw(port, "GET", "/mcp", &headers, b"").status, 404);
    assert_eq!(raw(port, "DELETE", "/mcp", &headers, b"").status, 404);
    // A made-up id is no better.
    let made_up = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", "00000000-0000-4000-8000-000000000000"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    assert_eq!(post_mcp(port, &made_up, &list).status, 404);
    // Alice's session is untouched by all that.
    let as_alice = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", id.as_str()),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    let reply = post_mcp(port, &as_alice, &list);
    assert_eq!(reply.status, 200, "{reply:?}");
    let tools = &reply.messages()[0]["result"]["tools"];
    assert_eq!(tools.as_array().map(Vec::len), Some(4), "{reply:?}");
    // Her DELETE ends it; the id then means nothing, to her too.
    let mut headers = as_alice.to_vec();
    headers.push(("Host", &host));
    let reply = raw(port, "DELETE", "/mcp", &headers, b"");
    assert!(reply.status < 300, "{reply:?}");
    assert_eq!(post_mcp(port, &as_alice, &list).status, 404);
}

fn a_huge_body_is_413_a_stateless_request_400_and_the_server_serves_on() {
    let server = team_server();
    let port = server.port;
    let alice = bearer(ALICE);
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(5 * 1024 * 1024)
    );
    let host = format!("127.0.0.1:{port}");
    let headers = [
        ("Host", host.as_str()),
        ("Authorization", alice.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let reply = raw(port, "POST", "/mcp", &headers, huge.as_bytes());
    assert_eq!(reply.status, 413, "{}", reply.status);
    // Without a credential the body is not even read.
    let reply = raw(port, "POST", "/mcp", &headers[..1], huge.as_bytes());
    assert_eq!(reply.status, 401);
    // The 2026 revision has no sessions, which this server's sandbox sessions need.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let reply = post_mcp(port, &[("Authorization", &alice)], &list);
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.body.contains("initialize"), "{reply:?}");
    let reply = post_mcp(
        port,
        &[
            ("Authorization", &alice),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert_eq!(reply.status, 400, "{reply:?}");
    // A client probing `server/discover` learns to fall back to `initialize`.
    let discover = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let reply = post_mcp(
        port,
        &[
            ("Authorization", &alice),
            ("MCP-Protocol-Version", "2026-07-28"),
        ],
        &discover,
    );
    assert!(
        !reply.body.contains("\"2026-07-28\"") || reply.status != 200,
        "the stateless revision is offered: {reply:?}"
    );
    let id = open_session(port, &[("Authorization", &alice)]);
    assert!(!id.is_empty());
}

fn sighup_rereads_the_token_file_and_a_bad_one_leaves_the_tokens_in_force() {
    let tokens = token_file("hup-tokens", &format!("alice {ALICE}\n"));
    let policy = quiet_policy();
    let server = HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let port = server.port;
    let status_of = |token: &str| {
        post_mcp(
            port,
            &[("Authorization", &bearer(token))],
            &initialize_message(),
        )
        .status
    };
    assert_eq!(status_of(ALICE), 200);
    assert_eq!(status_of(BOB), 401);

    // Alice has a session open when her line goes: it ends with her token.
    let _alice_session = open_session(port, &[("Authorization", &bearer(ALICE))]);
    std::fs::write(&tokens, format!("bob {BOB}\n")).unwrap();
    server.signal("HUP");
    wait_until(|| status_of(BOB) == 200, "bob's token taken after SIGHUP");
    assert_eq!(status_of(ALICE), 401, "alice's token was removed");
    // Waited for as a whole: the log is read while the server may be writing the line.
    let removed = "principal=alice why=\"its principal's token was taken out";
    let log = server.wait_for_log(removed);
    assert!(log.contains(removed), "{log}");

    std::fs::write(&tokens, format!("bob\ncarol {ALICE}\n")).unwrap();
    server.signal("HUP");
    let log = server.wait_for_log("the tokens read before stay in force");
    assert!(log.contains("hup-tokens:1: one field"), "{log}");
    assert_eq!(status_of(BOB), 200, "the last good file is in force");
    assert_eq!(status_of(ALICE), 401);
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
}

fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "gave up waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn an_allowed_web_origin_gets_cors_answers_and_a_principal_has_a_bounded_number_of_sessions() {
    let tokens = token_file("cors-tokens", &format!("alice {ALICE}\nbob {BOB}\n"));
    let policy = quiet_policy();
    let server = HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
        "--allow-origin",
        "https://app.example",
    ]);
    let port = server.port;
    let host = format!("127.0.0.1:{port}");
    let preflight = |origin: &str| {
        raw(
            port,
            "OPTIONS",
            "/mcp",
            &[
                ("Host", &host),
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization, content-type",
                ),
            ],
            b"",
        )
    };
    let reply = preflight("https://app.example");
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(reply
        .header("access-control-allow-headers")
        .is_some_and(|h| h.contains("Authorization") && h.contains("Mcp-Session-Id")));
    assert_eq!(preflight("https://evil.example").status, 403);
    let alice = bearer(ALICE);
    let reply = post_mcp(
        port,
        &[("Authorization", &alice), ("Origin", "https://app.example")],
        &initialize_message(),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(reply
        .header("access-control-expose-headers")
        .is_some_and(|h| h.contains("Mcp-Session-Id")));

    // Each MCP session holds memory until it ends: 64 per principal at most.
    for _ in 1..64 {
        open_session(port, &[("Authorization", &alice)]);
    }
    let reply = post_mcp(port, &[("Authorization", &alice)], &initialize_message());
    assert_eq!(reply.status, 429, "{reply:?}");
    assert!(reply.body.contains("DELETE"), "{reply:?}");
    // Another principal is not held back by that.
    let reply = post_mcp(
        port,
        &[("Authorization", &bearer(BOB))],
        &initialize_message(),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
}

fn behind_a_proxy_the_public_name_is_accepted_as_the_proxy_passes_it() {
    let tokens = token_file("proxy-tokens", &format!("alice {ALICE}\n"));
    let policy = quiet_policy();
    let server = HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
        "--public-url",
        "https://sandbox.example.com",
    ]);
    let port = server.port;
    assert_eq!(server.url, "https://sandbox.example.com/mcp");
    let alice = bearer(ALICE);
    let post = |host: &str, origin: Option<&str>| {
        let mut headers = vec![
            ("Host", host),
            ("Authorization", alice.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        raw(
            port,
            "POST",
            "/mcp",
            &headers,
            initialize_message().to_string().as_bytes(),
        )
        .status
    };
    assert_eq!(post("sandbox.example.com", None), 200);
    assert_eq!(post("sandbox.example.com:443", None), 200);
    assert_eq!(post(&format!("127.0.0.1:{port}"), None), 200);
    assert_eq!(
        post("sandbox.example.com", Some("https://sandbox.example.com")),
        200
    );
    assert_eq!(post("sandbox.example.com:8443", None), 403);
    assert_eq!(post("evil.example", None), 403);
    assert_eq!(
        post(
            "sandbox.example.com",
            Some("http://sandbox.example.com:8080")
        ),
        403
    );
}

fn a_token_line_that_names_a_policy_runs_its_principals_calls_under_it() {
    let tokens = token_file(
        "policy-per-principal",
        &format!("alice {ALICE}\nbob {BOB} strict\n"),
    );
    let policy = quiet_policy();
    let server = HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let port = server.port;
    let policy_of = |token: &str| {
        let auth = bearer(token);
        let id = open_session(port, &[("Authorization", &auth)]);
        let headers = [
            ("Authorization", auth.as_str()),
            ("Mcp-Session-Id", id.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "check_code", "arguments": {"language": "python", "code": "print(1)"}}});
        let reply = post_mcp(port, &headers, &call);
        assert_eq!(reply.status, 200, "{reply:?}");
        let answer = reply
            .messages()
            .into_iter()
            .find(|m| m["id"] == 7)
            .expect("the call's answer");
        answer["result"]["structuredContent"]["policy"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(policy_of(BOB), "strict");
    let alices = policy_of(ALICE);
    assert!(alices.ends_with("no-pool.yaml"), "{alices}");
}
