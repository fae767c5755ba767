//! OAuth 2.1 resource-server mode: a bearer token is a JWT the configured issuer
//! signed, checked here against the issuer's published keys (JWKS).
//!
//! What is checked, in order: three base64url parts of sane size; a signature
//! algorithm from the asymmetric list (RS*, PS*, ES256/ES384, EdDSA: never `none`,
//! never an HMAC, whose "secret" a confused verifier would take from the public key);
//! the key named by `kid` (or the issuer's only key when the token names none), used
//! only when its type, curve, `use` and `alg` agree with the token's algorithm; the
//! signature; `iss` equal to the issuer; `aud` naming this server (RFC 8707: a token
//! issued for another resource is not accepted here); `exp` in the future and `nbf` not
//! (60 s of leeway for clocks); a `sub`, which becomes the principal; and every scope
//! the server requires, from `scope` (space-separated) or `scp`. A missing scope is
//! `insufficient_scope` (403), anything else `invalid_token` (401).
//!
//! The keys are fetched at start (the issuer's metadata, RFC 8414 or OpenID discovery,
//! names them unless `--oauth-jwks-url` does), refreshed every [`REFRESH_EVERY`], and
//! re-fetched when a token names a key not yet known, at most once per
//! [`REFETCH_AT_MOST`]: an attacker inventing `kid`s cannot make the server hammer the
//! issuer.

use super::fetch;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How often the keys are fetched again anyway.
pub const REFRESH_EVERY: Duration = Duration::from_secs(15 * 60);
/// The least time between two fetches caused by unknown `kid`s.
pub const REFETCH_AT_MOST: Duration = Duration::from_secs(60);
/// Clock leeway for `exp` and `nbf`, in seconds.
const LEEWAY: u64 = 60;
/// The longest subject taken as a principal's name.
const MAX_SUBJECT_LEN: usize = 256;
/// The longest token looked at.
const MAX_TOKEN_LEN: usize = 16 * 1024;

/// What the operator configured.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The issuer, exactly as tokens name it in `iss`.
    pub issuer: String,
    /// Where its keys are; `None`: from the issuer's metadata.
    pub jwks_url: Option<url::Url>,
    /// What `aud` must contain: this server's resource identifier.
    pub audience: String,
    /// The scopes every token must grant.
    pub scopes: Vec<String>,
}

/// A token that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub subject: String,
}

/// Why a token did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// 401 `invalid_token`, with a reason the client may read.
    Invalid(String),
    /// 403 `insufficient_scope`.
    InsufficientScope,
}

/// The verifier, with the issuer's keys.
pub struct JwtVerifier {
    settings: OAuthSettings,
    jwks_url: url::Url,
    keys: RwLock<Arc<Vec<Jwk>>>,
    last_fetch: Mutex<Instant>,
}

impl JwtVerifier {
    /// Finds the issuer's keys and fetches them; an error says what failed.
    pub async fn start(settings: OAuthSettings) -> Result<Arc<JwtVerifier>, String> {
        let jwks_url = match &settings.jwks_url {
            Some(url) => url.clone(),
            None => discover_jwks(&settings.issuer).await?,
        };
        let keys = fetch_keys(&jwks_url).await?;
        if keys.is_empty() {
            return Err(format!("{jwks_url}: no signing keys this server can use"));
        }
        tracing::info!(issuer = %settings.issuer, jwks = %jwks_url, keys = keys.len(), "OAuth: the issuer's keys are loaded");
        Ok(Arc::new(JwtVerifier {
            settings,
            jwks_url,
            keys: RwLock::new(Arc::new(keys)),
            last_fetch: Mutex::new(Instant::now()),
        }))
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Fetches the keys again every [`REFRESH_EVERY`] until the returned task is aborted.
    pub fn keep_fresh(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let verifier = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH_EVERY).await;
                let Some(verifier) = verifier.upgrade() else {
                    return;
                };
                verifier.refetch().await;
            }
        })
    }

    /// Checks `token`.
    pub async fn verify(&self, token: &str) -> Result<Verified, Rejection> {
        let invalid = |reason: &str| Rejection::Invalid(reason.to_string());
        if token.len() > MAX_TOKEN_LEN || token.split('.').count() != 3 {
            return Err(invalid("not a JWT"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            invalid("the token's header cannot be read, or names no algorithm this server knows")
        })?;
        if !ACCEPTED.contains(&header.alg) {
            return Err(invalid(
                "the token's algorithm is not an asymmetric one this server accepts",
            ));
        }
        let key = match self.key_for(header.kid.as_deref(), header.alg) {
            Some(key) => key,
            None => {
                // A key the issuer added since the last fetch, perhaps.
                if self.refetch_if_due().await {
                    self.key_for(header.kid.as_deref(), header.alg)
                        .ok_or_else(|| {
                            invalid("no key of the issuer matches the token's `kid` and algorithm")
                        })?
                } else {
                    return Err(invalid(
                        "no key of the issuer matches the token's `kid` and algorithm",
                    ));
                }
            }
        };
        let key =
            DecodingKey::from_jwk(&key).map_err(|_| invalid("the issuer's key cannot be used"))?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = LEEWAY;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|error| {
            use jsonwebtoken::errors::ErrorKind;
            Rejection::Invalid(
                match error.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired",
                    ErrorKind::ImmatureSignature => "the token is not valid yet",
                    ErrorKind::InvalidAudience => "the token is not for this server (`aud`)",
                    ErrorKind::InvalidIssuer => "the token is from another issuer (`iss`)",
                    ErrorKind::MissingRequiredClaim(_) => {
                        "the token lacks `exp`, `iss`, `aud` or `sub`"
                    }
                    ErrorKind::InvalidSignature => "the token's signature does not verify",
                    _ => "the token is not valid",
                }
                .to_string(),
            )
        })?;
        let claims = data.claims;
        let subject = match &claims.sub {
            Some(sub) if !sub.is_empty() => sub.clone(),
            _ => return Err(invalid("the token's `sub` is empty")),
        };
        // The subject names the principal in logs and the audit log.
        if subject.chars().count() > MAX_SUBJECT_LEN || subject.chars().any(char::is_control) {
            return Err(invalid(
                "the token's `sub` is too long or has control characters",
            ));
        }
        let granted = claims.granted();
        if !self
            .settings
            .scopes
            .iter()
            .all(|needed| granted.iter().any(|g| g == needed))
        {
            return Err(Rejection::InsufficientScope);
        }
        Ok(Verified { subject })
    }

    /// The issuer's key for a token with `kid` and `alg`: the key of that id, or with
    /// no `kid` the issuer's only key that fits; in both cases only a key that fits.
    fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Option<Jwk> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner()).clone();
        match kid {
            Some(kid) => keys
                .iter()
                .find(|key| key.common.key_id.as_deref() == Some(kid))
                .filter(|key| fits(key, alg))
                .cloned(),
            None => {
                let mut fitting = keys.iter().filter(|key| fits(key, alg));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => Some(key.clone()),
                    _ => None,
                }
            }
        }
    }

    /// Fetches the keys when the last fetch is [`REFETCH_AT_MOST`] old; whether it did.
    async fn refetch_if_due(&self) -> bool {
        {
            let mut last = self.last_fetch.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() < REFETCH_AT_MOST {
                return false;
            }
            *last = Instant::now();
        }
        self.refetch().await
    }

    async fn refetch(&self) -> bool {
        match fetch_keys(&self.jwks_url).await {
            Ok(keys) if !keys.is_empty() => {
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                true
            }
            Ok(_) => {
                tracing::warn!(jwks = %self.jwks_url, "the issuer publishes no usable keys now; keeping the previous ones");
                false
            }
            Err(error) => {
                tracing::warn!(%error, "could not fetch the issuer's keys; keeping the previous ones");
                false
            }
        }
    }
}

/// The algorithms a token may be signed with.
const ACCEPTED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Whether `key` may verify a signature made with `alg`.
fn fits(key: &Jwk, alg: Algorithm) -> bool {
    let usable = match &key.common.public_key_use {
        None | Some(PublicKeyUse::Signature) => true,
        Some(_) => false,
    };
    // A key that names its algorithm is used for that one only.
    let same_alg = key
        .common
        .key_algorithm
        .is_none_or(|named| format!("{named:?}") == format!("{alg:?}"));
    let kind = match (&key.algorithm, alg) {
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512,
        ) => true,
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256) => {
            ec.curve == EllipticCurve::P256
        }
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES384) => {
            ec.curve == EllipticCurve::P384
        }
        (AlgorithmParameters::OctetKeyPair(okp), Algorithm::EdDSA) => {
            okp.curve == EllipticCurve::Ed25519
        }
        _ => false,
    };
    usable && same_alg && kind
}

#[derive(Debug, Deserialize)]
struct Claims {
    /// Required (checked by the validation), optional here so that its absence is
    /// reported as such.
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<ScopeList>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ScopeList {
    Text(String),
    List(Vec<String>),
}

impl Claims {
    fn granted(&self) -> Vec<String> {
        let mut granted: Vec<String> = self
            .scope
            .iter()
            .flat_map(|s| s.split_ascii_whitespace().map(str::to_string))
            .collect();
        match &self.scp {
            Some(ScopeList::Text(text)) => {
                granted.extend(text.split_ascii_whitespace().map(str::to_string))
            }
            Some(ScopeList::List(list)) => granted.extend(list.iter().cloned()),
            None => {}
        }
        granted
    }
}

/// The signing keys at `url`; keys of kinds this server cannot use are skipped.
async fn fetch_keys(url: &url::Url) -> Result<Vec<Jwk>, String> {
    let document = fetch::json(url).await?;
    let keys = document
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or_else(|| format!("{url}: not a JWKS (no `keys` list)"))?;
    Ok(keys
        .iter()
        .filter_map(|key| match serde_json::from_value::<Jwk>(key.clone()) {
            Ok(jwk) if !matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) => Some(jwk),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(%error, "skipping a key of the JWKS");
                None
            }
        })
        .collect())
}

/// The issuer's `jwks_uri`, from its RFC 8414 metadata or, failing that, its OpenID
/// configuration; the document must name the same issuer.
async fn discover_jwks(issuer: &str) -> Result<url::Url, String> {
    let base = url::Url::parse(issuer).map_err(|e| format!("--oauth-issuer `{issuer}`: {e}"))?;
    let path = base.path().trim_end_matches('/');
    let mut rfc8414 = base.clone();
    rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    let mut openid = base.clone();
    openid.set_path(&format!("{path}/.well-known/openid-configuration"));
    let mut failures = Vec::new();
    for url in [rfc8414, openid] {
        match fetch::json(&url).await {
            Ok(document) => {
                if document.get("issuer").and_then(|i| i.as_str()) != Some(issuer) {
                    failures.push(format!("{url}: names another issuer"));
                    continue;
                }
                let jwks = document
                    .get("jwks_uri")
                    .and_then(|j| j.as_str())
                    .ok_or_else(|| format!("{url}: no `jwks_uri`"))?;
                return url::Url::parse(jwks).map_err(|e| format!("{url}: `jwks_uri`: {e}"));
            }
            Err(error) => failures.push(error),
        }
    }
    Err(format!(
        "cannot find the issuer's keys ({}); give --oauth-jwks-url",
        failures.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rsa_key(kid: &str, alg: Option<&str>, key_use: Option<&str>) -> Jwk {
        let mut value = serde_json::json!({"kty": "RSA", "kid": kid, "n": "sXch", "e": "AQAB"});
        if let Some(alg) = alg {
            value["alg"] = alg.into();
        }
        if let Some(key_use) = key_use {
            value["use"] = key_use.into();
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_key_verifies_only_the_algorithms_it_fits() {
        let plain = rsa_key("a", None, None);
        assert!(fits(&plain, Algorithm::RS256));
        assert!(fits(&plain, Algorithm::PS256));
        assert!(!fits(&plain, Algorithm::ES256));
        assert!(!fits(&plain, Algorithm::HS256));
        assert!(!fits(&rsa_key("a", Some("RS384"), None), Algorithm::RS256));
        assert!(fits(
            &rsa_key("a", Some("RS256"), Some("sig")),
            Algorithm::RS256
        ));
        assert!(!fits(&rsa_key("a", None, Some("enc")), Algorithm::RS256));
        let ec: Jwk = serde_json::from_value(serde_json::json!({
            "kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"
        }))
        .unwrap();
        assert!(fits(&ec, Algorithm::ES384));
        assert!(!fits(&ec, Algorithm::ES256));
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let claims: Claims =
            serde_json::from_str(r#"{"sub":"a","scope":"x y","scp":["z"]}"#).unwrap();
        assert_eq!(claims.granted(), ["x", "y", "z"]);
        let claims: Claims = serde_json::from_str(r#"{"sub":"a","scp":"x y"}"#).unwrap();
        assert_eq!(claims.granted(), ["x", "y"]);
    }
}
