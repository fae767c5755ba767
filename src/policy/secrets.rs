//! `secrets:`: values the sandboxed code may *use* toward the hosts they belong to,
//! without ever holding them.
//!
//! ```yaml
//! secrets:
//!   OPENAI_API_KEY: { hosts: [api.openai.com] }      # the server's variable of that name
//!   GITHUB_TOKEN:   { from: GH_TOKEN, hosts: ["api.github.com", "*.githubusercontent.com"] }
//! ```
//!
//! The box's environment gets a placeholder under each name; the egress proxy swaps it
//! for the value only in requests to the secret's hosts (entries written as in
//! `network.allow`, which they join). A secret therefore needs `network: { allow: [...] }`.
//!
//! Values are read from the server's environment once, when the policy is loaded, and
//! kept in [`SecretValue`], which neither prints nor serializes. A variable that is not
//! set is a policy error ([`missing`]) for the commands that run code, with the line
//! that declares the secret; linting (`check`) does not need the values.

use super::allowlist::HostRule;
use serde::de::{Deserializer, Error, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Names the sandbox's environment uses for itself: a secret may not take them.
const RESERVED: &[&str] = &[
    "HOME",
    "PATH",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "PYTHONPATH",
    "NODE_PATH",
    "NODE_OPTIONS",
    "NODE_USE_ENV_PROXY",
    "PYTHONDONTWRITEBYTECODE",
    "TMPDIR",
];

/// One secret as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretFile {
    /// The server's variable holding the value; the secret's own name when absent.
    pub from: Option<String>,
    /// Where the value may go: `host`, `host:port`, `*.domain` (as in `network.allow`).
    pub hosts: Vec<String>,
}

/// A secret's value: never printed, never serialized.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(Arc<str>);

impl SecretValue {
    /// The value itself, for the one place that sends it: the egress proxy.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// One effective secret.
#[derive(Debug, Clone)]
pub struct Secret {
    /// The name the sandbox sees (with a placeholder for its value).
    pub name: String,
    /// The server's variable the value comes from.
    pub variable: String,
    pub hosts: Vec<HostRule>,
    /// The file and line that declare it, for errors.
    pub declared: (String, Option<usize>),
    /// `None`: the variable was not set when the policy was loaded.
    pub value: Option<SecretValue>,
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        if self.variable != self.name {
            map.serialize_entry("from", &self.variable)?;
        }
        map.serialize_entry("hosts", &self.hosts)?;
        map.end()
    }
}

/// The secrets of a policy, in order, shown as the map they were written as.
pub fn serialize<S: serde::Serializer>(
    secrets: &[Secret],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(secrets.len()))?;
    for secret in secrets {
        map.serialize_entry(&secret.name, secret)?;
    }
    map.end()
}

/// `secrets:` as written: names checked, hosts readable, no name twice.
pub fn deserialize<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<(String, SecretFile)>>, D::Error> {
    struct Secrets;
    impl<'de> Visitor<'de> for Secrets {
        type Value = Vec<(String, SecretFile)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of secret names to `{ hosts: [...] }` (and `from: VARIABLE`)")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut secrets: Vec<(String, SecretFile)> = Vec::new();
            while let Some(name) = map.next_key::<String>()? {
                check_name(&name).map_err(A::Error::custom)?;
                if secrets.iter().any(|(seen, _)| *seen == name) {
                    return Err(A::Error::custom(format!("`{name}` is declared twice")));
                }
                let secret: SecretFile = map.next_value()?;
                if let Some(from) = &secret.from {
                    check_variable(from)
                        .map_err(|why| A::Error::custom(format!("{name}.from: {why}")))?;
                }
                if secret.hosts.is_empty() {
                    return Err(A::Error::custom(format!(
                        "{name}.hosts: name at least one host the secret may be sent to"
                    )));
                }
                for host in &secret.hosts {
                    HostRule::parse(host)
                        .map_err(|why| A::Error::custom(format!("{name}.hosts: {why}")))?;
                }
                secrets.push((name, secret));
            }
            Ok(secrets)
        }
    }
    d.deserialize_map(Secrets).map(Some)
}

fn check_variable(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and `_`, not starting with a digit)"
        ));
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    check_variable(name)?;
    if RESERVED
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
    {
        return Err(format!(
            "`{name}` is a variable the sandbox sets for itself; give the secret another name \
             (and `from: {name}` if that is the server's variable)"
        ));
    }
    Ok(())
}

/// The secrets a file declares, their values read from `lookup` (the server's
/// environment) now.
pub fn declare(
    label: &str,
    text: &str,
    written: Vec<(String, SecretFile)>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Secret> {
    written
        .into_iter()
        .map(|(name, file)| {
            let variable = file.from.unwrap_or_else(|| name.clone());
            let value = lookup(&variable)
                .filter(|value| !value.is_empty())
                .map(|value| SecretValue(value.into()));
            Secret {
                declared: (label.to_string(), line_of(text, &name)),
                hosts: file
                    .hosts
                    .iter()
                    .filter_map(|host| HostRule::parse(host).ok())
                    .collect(),
                name,
                variable,
                value,
            }
        })
        .collect()
}

/// The line that declares `name` under `secrets:` (or the `secrets:` line itself).
fn line_of(text: &str, name: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let section = lines.iter().position(|line| line.starts_with("secrets:"))?;
    let declared = lines[section + 1..].iter().position(|line| {
        let line = line.trim_start().trim_start_matches(['"', '\'']);
        line.strip_prefix(name).is_some_and(|rest| {
            rest.trim_start_matches(['"', '\''])
                .trim_start()
                .starts_with(':')
        })
    });
    Some(section + 1 + declared.map_or(0, |at| at + 1))
}

/// The secrets whose value the server does not have, as one policy error (each with
/// the line that declares it); `Ok` when every value was read.
pub fn missing(secrets: &[Secret]) -> Result<(), super::PolicyError> {
    let mut errors: Vec<super::PolicyError> = secrets
        .iter()
        .filter(|secret| secret.value.is_none())
        .map(|secret| {
            super::error::error(
                &secret.declared.0,
                secret.declared.1,
                format!(
                    "secrets.{}: the server's environment has no `{}` (or it is empty); set it \
                     where the server starts, or remove the secret",
                    secret.name, secret.variable
                ),
            )
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut first = errors.remove(0);
    first.more = errors;
    Err(first)
}

/// Checks what a merged policy's secrets need: the egress proxy (a network
/// allowlist), and values that fit in a request header.
pub fn check(
    label: &str,
    text: &str,
    secrets: &[Secret],
    network: &super::NetworkMode,
) -> Result<(), super::PolicyError> {
    if secrets.is_empty() {
        return Ok(());
    }
    if !matches!(network, super::NetworkMode::Allow(_)) {
        let line = text
            .lines()
            .position(|line| line.starts_with("network:") || line.starts_with("secrets:"))
            .map(|at| at + 1);
        return Err(super::error::error(
            label,
            line,
            format!(
                "secrets: the egress proxy swaps secrets into requests, so they need `network: \
                 {{ allow: [...] }}` (this policy's network is `{}`); the secrets' hosts join \
                 the list",
                network.as_str()
            ),
        ));
    }
    for secret in secrets {
        let bad = secret
            .value
            .as_ref()
            .is_some_and(|value| value.expose().chars().any(|c| c.is_control()));
        if bad {
            return Err(super::error::error(
                &secret.declared.0,
                secret.declared.1,
                format!(
                    "secrets.{}: the value of `{}` has a line break or another control \
                     character, which no request header may carry",
                    secret.name, secret.variable
                ),
            ));
        }
    }
    Ok(())
}

impl super::Policy {
    /// Under `network: { allow: [...] }`, the hosts code may reach: the list, then
    /// the secrets' hosts, which join it. `None` under `none` and `bridge`.
    pub fn allowed_hosts(&self) -> Option<Vec<HostRule>> {
        match &self.network {
            super::NetworkMode::Allow(list) => Some(
                list.iter()
                    .chain(self.secrets.iter().flat_map(|secret| &secret.hosts))
                    .cloned()
                    .collect(),
            ),
            _ => None,
        }
    }

    /// Whether the server has every secret's value; the error names each that is
    /// missing, at the line that declares it.
    pub fn check_secrets(&self) -> Result<(), super::PolicyError> {
        missing(&self.secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_the_declaration() {
        let text = "version: 1\nnetwork:\n  allow: []\nsecrets:\n  A_KEY: { hosts: [a.com] }\n  \"B_KEY\":\n    hosts: [b.com]\n";
        assert_eq!(line_of(text, "A_KEY"), Some(5));
        assert_eq!(line_of(text, "B_KEY"), Some(6));
        assert_eq!(
            line_of(text, "C_KEY"),
            Some(4),
            "the section when not found"
        );
        assert_eq!(line_of("secrets: { A: {hosts: [a]} }\n", "A"), Some(1));
    }

    #[test]
    fn values_are_read_once_and_never_shown() {
        let written = vec![
            (
                "API_KEY".to_string(),
                SecretFile {
                    from: Some("SERVER_KEY".into()),
                    hosts: vec!["api.example.com".into()],
                },
            ),
            (
                "OTHER".to_string(),
                SecretFile {
                    from: None,
                    hosts: vec!["*.example.org".into()],
                },
            ),
        ];
        let text = "secrets:\n  API_KEY: {}\n  OTHER: {}\n";
        let secrets = declare("p.yaml", text, written, &|name| {
            (name == "SERVER_KEY").then(|| "s3cr3t-value".to_string())
        });
        assert_eq!(secrets[0].value.as_ref().unwrap().expose(), "s3cr3t-value");
        let shown = format!("{secrets:?} {}", serde_json::to_string(&secrets).unwrap());
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
        let error = missing(&secrets).unwrap_err();
        assert_eq!((error.file.as_str(), error.line), ("p.yaml", Some(3)));
        assert!(error.message.contains("no `OTHER`"), "{error}");
    }

    #[test]
    fn names_are_variables_and_not_the_sandboxs_own() {
        assert!(check_name("OPENAI_API_KEY").is_ok());
        assert!(check_name("1KEY").is_err());
        assert!(check_name("A-B").is_err());
        assert!(check_name("https_proxy")
            .unwrap_err()
            .contains("sets for itself"));
        assert!(check_name("SSL_CERT_FILE").is_err());
    }
}
