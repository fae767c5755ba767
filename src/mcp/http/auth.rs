//! Who a request is from: the bearer credential in its `Authorization` header, proven
//! by the token file or by the OAuth issuer, turned into a [`Principal`], or the
//! answer that refuses it.
//!
//! A request without a credential, or with one that proves nothing, is 401 with a
//! `WWW-Authenticate: Bearer` challenge (RFC 6750); in OAuth mode the challenge names
//! the protected-resource metadata (RFC 9728), where a client finds the issuer to get a
//! token from, and the scope to ask for, as the MCP authorization specification asks.
//! A valid token without the scope is 403 `insufficient_scope`. A loopback server
//! started without authentication has one principal, `local`, for every request.
//!
//! Tokens are only accepted in the header (never in the URL, where logs keep them).

use super::jwt::{JwtVerifier, Rejection};
use super::tokens::TokenFile;
use crate::mcp::{Principal, Via};
use http::HeaderMap;
use std::sync::Arc;

/// The name of the one principal of a server without authentication.
pub const LOCAL_PRINCIPAL: &str = "local";

/// How this server authenticates.
pub struct Authenticator {
    pub tokens: Option<Arc<TokenFile>>,
    pub oauth: Option<Arc<JwtVerifier>>,
    /// The URL of the protected-resource metadata (OAuth mode).
    pub resource_metadata: Option<String>,
}

/// The outcome for one request.
#[derive(Debug)]
pub enum Outcome {
    /// The request is this principal's; with the policy its token line names.
    Allowed(Principal, Option<String>),
    /// 401, or 403 for a missing scope, with this `WWW-Authenticate` value and body.
    Refused {
        status: http::StatusCode,
        challenge: String,
        message: String,
    },
}

impl Authenticator {
    /// Whether any authentication is configured.
    pub fn is_on(&self) -> bool {
        self.tokens.is_some() || self.oauth.is_some()
    }

    /// Judges `headers`.
    pub async fn judge(&self, headers: &HeaderMap) -> Outcome {
        if !self.is_on() {
            return Outcome::Allowed(Principal::new(LOCAL_PRINCIPAL, Via::Loopback), None);
        }
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return self.refuse(None, "this server needs `Authorization: Bearer TOKEN`");
        };
        let Some(token) = value.to_str().ok().and_then(bearer) else {
            return self.refuse(
                Some("invalid_request"),
                "the Authorization header is not `Bearer TOKEN`",
            );
        };
        if let Some(tokens) = &self.tokens {
            let table = tokens.table();
            if let Some(entry) = table.find(token) {
                let policy = entry.policy.clone();
                return Outcome::Allowed(Principal::new(&entry.name, Via::Token), policy);
            }
        }
        if let Some(oauth) = &self.oauth {
            return match oauth.verify(token).await {
                Ok(verified) => {
                    Outcome::Allowed(Principal::new(&verified.subject, Via::OAuth), None)
                }
                Err(Rejection::Invalid(reason)) => self.refuse(Some("invalid_token"), &reason),
                Err(Rejection::InsufficientScope) => Outcome::Refused {
                    status: http::StatusCode::FORBIDDEN,
                    challenge: self.challenge(
                        Some("insufficient_scope"),
                        Some("the token does not grant the scope this server requires"),
                    ),
                    message: "the token does not grant the scope this server requires".into(),
                },
            };
        }
        self.refuse(
            Some("invalid_token"),
            "the token is not one this server knows",
        )
    }

    fn refuse(&self, error: Option<&str>, message: &str) -> Outcome {
        Outcome::Refused {
            status: http::StatusCode::UNAUTHORIZED,
            challenge: self.challenge(error, Some(message)),
            message: message.to_string(),
        }
    }

    /// A `WWW-Authenticate` value: the scheme and realm, the error, the scope to ask
    /// for and where the resource metadata is (OAuth mode).
    fn challenge(&self, error: Option<&str>, description: Option<&str>) -> String {
        let mut challenge = String::from("Bearer realm=\"code-sandbox-mcp\"");
        if let Some(error) = error {
            challenge.push_str(&format!(", error=\"{error}\""));
            if let Some(description) = description {
                challenge.push_str(&format!(
                    ", error_description=\"{}\"",
                    description.replace(['"', '\\'], "'")
                ));
            }
        }
        if let Some(oauth) = &self.oauth {
            let scopes = oauth.settings().scopes.join(" ");
            if !scopes.is_empty() {
                challenge.push_str(&format!(", scope=\"{scopes}\""));
            }
        }
        if let Some(url) = &self.resource_metadata {
            challenge.push_str(&format!(", resource_metadata=\"{url}\""));
        }
        challenge
    }

    /// The protected-resource metadata document (RFC 9728) for `resource`, in OAuth
    /// mode.
    pub fn resource_metadata_document(&self, resource: &str) -> Option<serde_json::Value> {
        let oauth = self.oauth.as_ref()?;
        Some(serde_json::json!({
            "resource": resource,
            "authorization_servers": [oauth.settings().issuer],
            "scopes_supported": oauth.settings().scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "code-sandbox-mcp",
        }))
    }
}

/// The token of a `Bearer TOKEN` value (scheme without case, RFC 6750's b64token).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim_start_matches(' ');
    let body = token.trim_end_matches('=');
    let valid = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    valid.then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_header_carries_a_token() {
        assert_eq!(bearer("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer("bearer  abc=="), Some("abc=="));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer abc def"), None);
        assert_eq!(bearer("Bearer ab\"c"), None);
        assert_eq!(bearer("Bearerabc"), None);
    }

    #[tokio::test]
    async fn without_authentication_everyone_is_local_and_with_it_nobody_is() {
        let open = Authenticator {
            tokens: None,
            oauth: None,
            resource_metadata: None,
        };
        match open.judge(&HeaderMap::new()).await {
            Outcome::Allowed(principal, None) => {
                assert_eq!(principal, Principal::new(LOCAL_PRINCIPAL, Via::Loopback))
            }
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "alice aaaaaaaaaaaaaaaaaaaa strict\n").unwrap();
        let closed = Authenticator {
            tokens: Some(Arc::new(TokenFile::open(&path).unwrap())),
            oauth: None,
            resource_metadata: None,
        };
        let mut headers = HeaderMap::new();
        match closed.judge(&headers).await {
            Outcome::Refused {
                status, challenge, ..
            } => {
                assert_eq!(status, 401);
                assert_eq!(challenge, "Bearer realm=\"code-sandbox-mcp\"");
            }
            other => panic!("{other:?}"),
        }
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer aaaaaaaaaaaaaaaaaaab".parse().unwrap(),
        );
        assert!(
            matches!(closed.judge(&headers).await, Outcome::Refused { status, .. } if status == 401)
        );
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer aaaaaaaaaaaaaaaaaaaa".parse().unwrap(),
        );
        match closed.judge(&headers).await {
            Outcome::Allowed(principal, policy) => {
                assert_eq!(principal, Principal::new("alice", Via::Token));
                assert_eq!(policy.as_deref(), Some("strict"));
            }
            other => panic!("{other:?}"),
        }
        headers.append(
            http::header::AUTHORIZATION,
            "Bearer aaaaaaaaaaaaaaaaaaaa".parse().unwrap(),
        );
        assert!(matches!(
            closed.judge(&headers).await,
            Outcome::Refused { .. }
        ));
    }
}
