//! The team server (`serve --http`) driven by MCP clients nobody here wrote, over real
//! HTTP: the official Python SDK's streamable HTTP client as two principals (runs,
//! sessions that stay apart, progress, cancellation, elicitation, per-principal limits,
//! a client killed mid-run), fastmcp with a bearer token, and the SDK's OAuth flow
//! against an issuer the test serves. Each test's policy uses an image tag of its own
//! with no warm pool, so "no container left" means this test's containers only.

crate::common::harness::tests! {
    sync the_python_sdk_over_http_as_two_principals_with_sessions_progress_cancellation_and_approval needs common::DOCKER, crate::e2e_clients::MCP_CLIENTS;
    sync fastmcp_runs_code_over_http_with_a_bearer_token needs common::DOCKER, crate::e2e_clients::MCP_CLIENTS;
    sync the_python_sdks_oauth_flow_gets_a_token_from_the_tests_issuer_and_runs_code needs common::DOCKER, crate::e2e_clients::MCP_CLIENTS;
}

use crate::common;
use crate::common::http::HttpServer;
use crate::common::mcp_client::TestImage;
use crate::e2e_clients::{clients, run};
use std::process::Command;

const ALICE: &str = "alice-http-0123456789abcdef";
const BOB: &str = "bob-http-0123456789abcdef00";

/// A token file for alice and bob, readable by its owner only.
fn tokens(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = common::scratch_file(name, format!("alice {ALICE}\nbob {BOB}\n").as_bytes());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn the_python_sdk_over_http_as_two_principals_with_sessions_progress_cancellation_and_approval() {
    let clients = clients();
    let image = TestImage::new("http-sdk", 0);
    let policy = std::fs::read_to_string(&image.policy_path).unwrap();
    std::fs::write(
        &image.policy_path,
        format!("{policy}audit: {{ path: audit.jsonl }}\nrules:\n  - {{ id: process-exec, action: ask }}\n"),
    )
    .unwrap();
    let tokens = tokens("http-sdk-tokens");
    let server = HttpServer::start(&[
        "--policy",
        image.policy_path.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
        "--principal-sessions",
        "2",
    ]);
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/http_python_sdk.py"))
        .arg(&server.url)
        .arg(ALICE)
        .arg(BOB)
        .arg(&image.tag);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the Python SDK client failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver:\n{}",
        server.log()
    );
    for scenario in [
        "ok: runs over http with a token",
        "ok: same-named sessions of two principals (and two connections) stay apart",
        "ok: progress with output over http",
        "ok: cancellation over http",
        "ok: elicitation over http",
        "ok: sessions are limited per principal",
        "ok: closing a connection removes its containers",
        "ok: a client killed mid-run leaves no container",
    ] {
        assert!(stdout.contains(scenario), "`{scenario}` missing:\n{stdout}");
    }
    let log = server.log();
    assert!(
        log.contains("the client's connection dropped and it did not come back"),
        "the killed client was not noticed:\n{log}"
    );
    // The audit log knows who made each call.
    let audit = image.policy_path.parent().unwrap().join("audit.jsonl");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(lines.iter().all(|l| l["auth"] == "token"), "{lines:?}");
    for who in ["alice", "bob"] {
        assert!(
            lines.iter().any(|l| l["principal"] == who),
            "{who}: {lines:?}"
        );
    }
    let approved = lines
        .iter()
        .find(|l| {
            l["phase"] == "completed"
                && l["principal"] == "alice"
                && l["findings"].as_array().is_some_and(|f| !f.is_empty())
        })
        .expect("alice's approved run");
    assert_eq!(approved["tool"], "run_python_code");
    assert!(
        lines
            .iter()
            .any(|l| l["phase"] == "cancelled" && l["principal"] == "alice"),
        "{lines:?}"
    );
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

fn fastmcp_runs_code_over_http_with_a_bearer_token() {
    let clients = clients();
    let image = TestImage::new("http-fastmcp", 0);
    let tokens = tokens("http-fastmcp-tokens");
    let server = HttpServer::start(&[
        "--policy",
        image.policy_path.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/http_fastmcp.py"))
        .arg(&server.url)
        .arg(BOB);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "fastmcp failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver:\n{}",
        server.log()
    );
    for scenario in [
        "ok: a wrong token is refused",
        "ok: fastmcp runs code over http",
        "ok: fastmcp session over http",
    ] {
        assert!(stdout.contains(scenario), "`{scenario}` missing:\n{stdout}");
    }
    assert!(server.log().contains("principal=bob"), "{}", server.log());
    let (status, log) = server.stop();
    assert!(status.success(), "{log}");
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}

fn the_python_sdks_oauth_flow_gets_a_token_from_the_tests_issuer_and_runs_code() {
    let clients = clients();
    let image = TestImage::new("http-oauth", 0);
    let mut command = Command::new(&clients.python);
    command
        .arg(common::root().join("tests/e2e/http_oauth_flow.py"))
        .arg(common::binary_path())
        .arg(&image.policy_path);
    let (ok, stdout, stderr) = run(command);
    assert!(
        ok,
        "the OAuth flow failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for scenario in [
        "ok: the SDK's OAuth flow gets a token and runs code",
        "ok: a client with a wrong secret gets no token and runs nothing",
    ] {
        assert!(stdout.contains(scenario), "`{scenario}` missing:\n{stdout}");
    }
    assert!(
        image.containers().is_empty(),
        "left behind: {:?}",
        image.containers()
    );
}
