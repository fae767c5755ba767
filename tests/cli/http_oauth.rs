//! `serve --http --oauth-issuer` as a resource server, against an issuer this test
//! plays: its keys made here (an ECDSA P-256 key with ring, an RSA key with openssl),
//! its metadata and JWKS served from loopback. Good tokens pass; the classic attacks on
//! JWT verifiers do not: `alg: none`, an HMAC keyed with the public key, a symmetric
//! key slipped into the JWKS, an unknown or mismatched `kid`, a forged signature,
//! another issuer or audience, an expired or not-yet-valid token, no subject, no scope.
//! Also the discovery a client makes: the 401's challenge, the resource metadata.

crate::common::harness::tests! {
    sync good_tokens_pass_and_the_401_says_where_to_get_one;
    sync forged_confused_and_stale_tokens_are_refused;
    sync an_issuer_that_cannot_be_reached_or_lies_about_itself_stops_the_start;
}

use crate::common::http::{initialize_message, post_mcp, HttpServer, StaticServer};
use crate::common::{self, text};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const SCOPE: &str = "code-sandbox:run";

/// The issuer: its keys and the server publishing its documents.
struct Issuer {
    url: String,
    ec: EcdsaKeyPair,
    rsa: RsaKeyPair,
    /// The RSA public key as PEM: what an attacker has, and would try as an HMAC key.
    rsa_public_pem: String,
    documents: StaticServer,
}

impl Issuer {
    fn start() -> Issuer {
        let random = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &random)
                .unwrap();
        let ec = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &random,
        )
        .unwrap();
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = common::scratch(&format!("oauth-keys-{n}"));
        let der = dir.join("rsa.der");
        let made = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-outform",
                "DER",
                "-out",
            ])
            .arg(&der)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", text(&made.stderr));
        let bytes = std::fs::read(&der).unwrap();
        // OpenSSL writes PKCS#1 or PKCS#8 DER depending on its version.
        let rsa = RsaKeyPair::from_pkcs8(&bytes)
            .or_else(|_| RsaKeyPair::from_der(&bytes))
            .unwrap();
        let public = std::process::Command::new("openssl")
            .args(["pkey", "-inform", "DER", "-pubout", "-in"])
            .arg(&der)
            .output()
            .unwrap();
        assert!(public.status.success());
        let documents = StaticServer::start(Vec::new());
        let url = format!("http://127.0.0.1:{}", documents.port);
        let issuer = Issuer {
            url,
            ec,
            rsa,
            rsa_public_pem: text(&public.stdout),
            documents,
        };
        issuer.documents.set(
            "/.well-known/oauth-authorization-server",
            json!({
                "issuer": issuer.url,
                "jwks_uri": format!("{}/jwks", issuer.url),
                "token_endpoint": format!("{}/token", issuer.url),
                "grant_types_supported": ["client_credentials"],
            })
            .to_string(),
        );
        issuer.publish(&[]);
        issuer
    }

    /// Publishes the issuer's two keys, and `extra` ones.
    fn publish(&self, extra: &[Value]) {
        let point = self.ec.public_key().as_ref();
        let rsa = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(self.rsa.public());
        let mut keys = vec![
            json!({"kty": "EC", "crv": "P-256", "kid": "ec-1", "use": "sig", "alg": "ES256",
                   "x": b64(&point[1..33]), "y": b64(&point[33..65])}),
            json!({"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
                   "n": b64(&rsa.n), "e": b64(&rsa.e)}),
        ];
        keys.extend_from_slice(extra);
        self.documents
            .set("/jwks", json!({"keys": keys}).to_string());
    }

    /// Claims a good token for `audience` has.
    fn claims(&self, audience: &str) -> Value {
        let now = now();
        json!({"iss": self.url, "sub": "carol@team", "aud": audience, "exp": now + 600,
               "iat": now, "scope": format!("openid {SCOPE}")})
    }

    fn es256(&self, kid: &str, claims: &Value) -> String {
        let input = signing_input(
            &json!({"alg": "ES256", "typ": "at+jwt", "kid": kid}),
            claims,
        );
        let sig = self
            .ec
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", b64(sig.as_ref()))
    }

    fn rs256(&self, kid: &str, claims: &Value) -> String {
        let input = signing_input(&json!({"alg": "RS256", "typ": "JWT", "kid": kid}), claims);
        let mut sig = vec![0u8; self.rsa.public().modulus_len()];
        self.rsa
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .unwrap();
        format!("{input}.{}", b64(&sig))
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

fn hs256(kid: &str, secret: &[u8], claims: &Value) -> String {
    let input = signing_input(&json!({"alg": "HS256", "typ": "JWT", "kid": kid}), claims);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, input.as_bytes());
    format!("{input}.{}", b64(tag.as_ref()))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `name` made unique in this test process: scratch files of one name are shared by
/// the tests running at the same time, and made afresh by each.
fn unique(name: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{n}-{name}")
}

fn quiet_policy() -> std::path::PathBuf {
    common::scratch_file(
        &unique("oauth-no-pool.yaml"),
        b"version: 1\nextends: default\npool:\n  size: 0\n",
    )
}

fn resource_server(issuer: &Issuer) -> HttpServer {
    let policy = quiet_policy();
    HttpServer::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--oauth-issuer",
        &issuer.url,
    ])
}

/// `initialize` with `token`; the reply.
fn with_token(server: &HttpServer, token: &str) -> crate::common::http::Reply {
    post_mcp(
        server.port,
        &[("Authorization", &format!("Bearer {token}"))],
        &initialize_message(),
    )
}

fn good_tokens_pass_and_the_401_says_where_to_get_one() {
    let issuer = Issuer::start();
    let server = resource_server(&issuer);
    let claims = issuer.claims(&server.url);
    for token in [
        issuer.es256("ec-1", &claims),
        issuer.rs256("rsa-1", &claims),
    ] {
        let reply = with_token(&server, &token);
        assert_eq!(reply.status, 200, "{reply:?}\n{}", server.log());
        assert!(reply.header("mcp-session-id").is_some());
    }
    assert!(
        server.log().contains("principal=carol@team"),
        "{}",
        server.log()
    );
    // `aud` may be a list that names this server; `scp` may carry the scope.
    let mut listed = claims.clone();
    listed["aud"] = json!(["https://other.example", server.url]);
    listed.as_object_mut().unwrap().remove("scope");
    listed["scp"] = json!([SCOPE]);
    assert_eq!(
        with_token(&server, &issuer.es256("ec-1", &listed)).status,
        200
    );

    // A client without a token learns where the metadata is, and the metadata names
    // the issuer and the scope (RFC 9728, as the MCP authorization spec asks).
    let reply = post_mcp(server.port, &[], &initialize_message());
    assert_eq!(reply.status, 401);
    let challenge = reply.header("www-authenticate").unwrap().to_string();
    let metadata_url = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        server.url.trim_end_matches("/mcp")
    );
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    assert!(
        challenge.contains(&format!("scope=\"{SCOPE}\"")),
        "{challenge}"
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let host = format!("127.0.0.1:{}", server.port);
        let reply = crate::common::http::raw(server.port, "GET", path, &[("Host", &host)], b"");
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        let document: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(document["resource"], server.url);
        assert_eq!(document["authorization_servers"], json!([issuer.url]));
        assert_eq!(document["scopes_supported"], json!([SCOPE]));
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }
}

fn forged_confused_and_stale_tokens_are_refused() {
    let issuer = Issuer::start();
    // A symmetric key in the JWKS must never verify anything.
    let oct_secret = b"an-hmac-secret-anyone-reading-the-jwks-knows";
    issuer.publish(&[json!({"kty": "oct", "kid": "hmac-1", "k": b64(oct_secret)})]);
    let server = resource_server(&issuer);
    let good = issuer.claims(&server.url);
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut claims = good.clone();
        edit(&mut claims);
        claims
    };
    let unsigned = format!(
        "{}.",
        signing_input(&json!({"alg": "none", "typ": "JWT", "kid": "ec-1"}), &good)
    );
    let ec_token = issuer.es256("ec-1", &good);
    let (ec_input, _) = ec_token.rsplit_once('.').unwrap();
    let other_key = {
        let random = SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &random)
                .unwrap();
        EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &random,
        )
        .unwrap()
    };
    let forged = {
        let input = signing_input(&json!({"alg": "ES256", "kid": "ec-1"}), &good);
        let sig = other_key
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", b64(sig.as_ref()))
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("alg none", unsigned.clone(), "algorithm"),
        (
            "alg none, signature dropped",
            unsigned.trim_end_matches('.').to_string(),
            "not a JWT",
        ),
        (
            "HS256 keyed with the RSA public key",
            hs256("rsa-1", issuer.rsa_public_pem.as_bytes(), &good),
            "algorithm",
        ),
        (
            "HS256 keyed with the RSA public key, no kid",
            hs256("", issuer.rsa_public_pem.as_bytes(), &good),
            "algorithm",
        ),
        (
            "HS256 with the JWKS's symmetric key",
            hs256("hmac-1", oct_secret, &good),
            "algorithm",
        ),
        ("unknown kid", issuer.es256("ec-9", &good), "kid"),
        (
            "kid of a key of another type",
            issuer.es256("rsa-1", &good),
            "kid",
        ),
        ("signed by another key", forged, "signature"),
        (
            "claims swapped after signing",
            format!(
                "{}.{}.{}",
                ec_input.split('.').next().unwrap(),
                b64(with(&|c| c["sub"] = json!("admin")).to_string().as_bytes()),
                ec_token.rsplit('.').next().unwrap()
            ),
            "signature",
        ),
        (
            "expired",
            issuer.es256("ec-1", &with(&|c| c["exp"] = json!(now() - 3600))),
            "expired",
        ),
        (
            "not valid yet",
            issuer.es256("ec-1", &with(&|c| c["nbf"] = json!(now() + 3600))),
            "not valid yet",
        ),
        (
            "another audience",
            issuer.es256(
                "ec-1",
                &with(&|c| c["aud"] = json!("https://other.example/mcp")),
            ),
            "aud",
        ),
        (
            "no audience",
            issuer.es256(
                "ec-1",
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("aud");
                }),
            ),
            "aud",
        ),
        (
            "another issuer",
            issuer.es256("ec-1", &with(&|c| c["iss"] = json!("https://evil.example"))),
            "iss",
        ),
        (
            "no expiry",
            issuer.es256(
                "ec-1",
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
            ),
            "exp",
        ),
        (
            "no subject",
            issuer.es256(
                "ec-1",
                &with(&|c| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
            ),
            "sub",
        ),
        (
            "empty subject",
            issuer.es256("ec-1", &with(&|c| c["sub"] = json!(""))),
            "sub",
        ),
        (
            "a subject forging log lines",
            issuer.es256(
                "ec-1",
                &with(&|c| c["sub"] = json!("bob\n2026-01-01T00:00:00Z INFO admin logged in")),
            ),
            "sub",
        ),
        ("four parts", format!("{ec_token}.x"), "not a JWT"),
        ("garbage", "not-a-token".to_string(), "not a JWT"),
    ];
    for (name, token, reason) in &cases {
        let reply = with_token(&server, token);
        assert_eq!(reply.status, 401, "{name}: {reply:?}");
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{name}: {challenge}"
        );
        assert!(
            reply.body.contains(reason),
            "{name}: `{reason}` not in {}",
            reply.body
        );
        assert!(reply.header("mcp-session-id").is_none(), "{name}");
    }
    // A good token without the scope: 403, and the challenge says which scope.
    for claims in [
        with(&|c| c["scope"] = json!("openid profile")),
        with(&|c| {
            c.as_object_mut().unwrap().remove("scope");
        }),
        with(&|c| c["scope"] = json!("code-sandbox:run-not")),
    ] {
        let reply = with_token(&server, &issuer.es256("ec-1", &claims));
        assert_eq!(reply.status, 403, "{reply:?}");
        let challenge = reply.header("www-authenticate").unwrap();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(
            challenge.contains(&format!("scope=\"{SCOPE}\"")),
            "{challenge}"
        );
    }
    // Made-up `kid`s do not make the server hammer the issuer: the keys were fetched
    // at start, and at most once a minute again for a key not known.
    for n in 0..20 {
        assert_eq!(
            with_token(&server, &issuer.es256(&format!("made-up-{n}"), &good)).status,
            401
        );
    }
    assert!(
        issuer.documents.hits("/jwks") <= 2,
        "{}",
        issuer.documents.hits("/jwks")
    );
    // And after all that, the good token still passes.
    assert_eq!(
        with_token(&server, &issuer.es256("ec-1", &good)).status,
        200
    );
}

fn an_issuer_that_cannot_be_reached_or_lies_about_itself_stops_the_start() {
    let policy = quiet_policy();
    let documents = StaticServer::start(Vec::new());
    let issuer = format!("http://127.0.0.1:{}", documents.port);
    // Metadata naming another issuer is not taken.
    documents.set(
        "/.well-known/oauth-authorization-server",
        json!({"issuer": "https://evil.example", "jwks_uri": format!("{issuer}/jwks")}).to_string(),
    );
    documents.set("/jwks", json!({"keys": []}).to_string());
    let output = common::binary()
        .args(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .args(["--oauth-issuer", &issuer])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("names another issuer"), "{stderr}");
    // Keys over plain HTTP from another machine are not fetched at all.
    let output = common::binary()
        .args(["serve", "--http", "127.0.0.1:0", "--policy"])
        .arg(&policy)
        .args([
            "--oauth-issuer",
            "http://192.0.2.1",
            "--oauth-jwks-url",
            "http://192.0.2.1/jwks",
        ])
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("plain http"), "{stderr}");
}
