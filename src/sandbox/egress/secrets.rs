//! The policy's secrets at the egress proxy: each box gets a placeholder per secret
//! (unguessable, its own), never a value; the proxy swaps a placeholder for the value
//! in the request headers and the URL's query of a request that goes, over TLS the
//! proxy makes itself, to a host the secret lists. Anywhere else a placeholder is
//! refused and recorded (`secret_refused`: which secret, which host), never forwarded:
//! to another host, over plain HTTP (the value would cross the network readable), in
//! the URL's path.
//!
//! A placeholder is also looked for where a client might have encoded it (a Basic
//! `Authorization`, whose credentials are base64, is decoded, swapped and encoded
//! again; a percent-encoded one in the URL is refused, never swapped).

use super::head::Head;
use super::refusals::SecretRefusal;
use super::relay::{Recorder, Refused};
use crate::policy::allowlist::{Host, HostRule};
use crate::policy::secrets::{Secret, SecretValue};
use base64::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How every placeholder starts; 32 hex digits (128 random bits) follow.
pub const PREFIX: &str = "csm-secret-";
const RANDOM_HEX: usize = 32;

/// One secret, as the proxy holds it.
struct Held {
    name: String,
    hosts: Vec<HostRule>,
    value: SecretValue,
}

/// The secrets and the placeholders given out.
pub struct Secrets {
    held: Vec<Held>,
    issued: Mutex<Issued>,
}

#[derive(Default)]
struct Issued {
    /// Placeholder → the secret it stands for.
    secret_of: HashMap<String, usize>,
    /// Box → its placeholders.
    of_box: HashMap<String, Vec<String>>,
}

/// Placeholders given out for a box about to start; they go with the box
/// (`Secrets::bind`) or, dropped, are forgotten.
pub struct Ticket {
    secrets: Arc<Secrets>,
    placeholders: Vec<String>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut issued = self.secrets.lock();
        for placeholder in &self.placeholders {
            issued.secret_of.remove(placeholder);
        }
    }
}

impl Secrets {
    /// The proxy's view of the policy's secrets; an error names a secret whose value
    /// the server does not have.
    pub fn new(secrets: &[Secret]) -> Result<Secrets, String> {
        let held = secrets
            .iter()
            .map(|secret| {
                let value = secret.value.clone().ok_or_else(|| {
                    format!(
                        "the secret {} has no value: the server's `{}` was not set when the \
                         policy was read",
                        secret.name, secret.variable
                    )
                })?;
                Ok(Held {
                    name: secret.name.clone(),
                    hosts: secret.hosts.clone(),
                    value,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Secrets {
            held,
            issued: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Issued> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any secret lists `host:port` (the proxy ends TLS to it).
    pub fn has_host(&self, host: &Host, port: u16) -> bool {
        self.held
            .iter()
            .any(|held| held.hosts.iter().any(|rule| rule.allows_host(host, port)))
    }

    /// New placeholders, one per secret: the variables for a box, and the ticket that
    /// keeps them valid.
    pub fn issue(self: &Arc<Self>) -> (Vec<(String, String)>, Ticket) {
        let mut variables = Vec::new();
        let mut placeholders = Vec::new();
        let mut issued = self.lock();
        for (index, held) in self.held.iter().enumerate() {
            let placeholder = format!("{PREFIX}{}", random_hex());
            issued.secret_of.insert(placeholder.clone(), index);
            variables.push((held.name.clone(), placeholder.clone()));
            placeholders.push(placeholder);
        }
        drop(issued);
        let ticket = Ticket {
            secrets: self.clone(),
            placeholders,
        };
        (variables, ticket)
    }

    /// The placeholders of `ticket` belong to box `id` from now on, until
    /// [`Secrets::forget`].
    pub fn bind(&self, mut ticket: Ticket, id: &str) {
        let placeholders = std::mem::take(&mut ticket.placeholders);
        self.lock()
            .of_box
            .entry(id.to_string())
            .or_default()
            .extend(placeholders);
    }

    /// Box `id` is gone: its placeholders mean nothing any more.
    pub fn forget(&self, id: &str) {
        let mut issued = self.lock();
        for placeholder in issued.of_box.remove(id).unwrap_or_default() {
            issued.secret_of.remove(&placeholder);
        }
    }

    /// Placeholders alive now.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.lock().secret_of.len()
    }

    /// Swaps the placeholders of `head`, a request to `host:port` (over TLS the proxy
    /// makes when `over_tls`), or refuses it, recording each placeholder refused.
    pub fn swap(
        &self,
        mut head: Head,
        host: &Host,
        port: u16,
        over_tls: bool,
        recorder: &Recorder<'_>,
    ) -> Result<Head, Refused> {
        let mut refusals: Vec<(usize, String)> = Vec::new();
        let mut judge = |index: usize, place: &str| -> bool {
            let held = &self.held[index];
            let why = if !held.hosts.iter().any(|rule| rule.allows_host(host, port)) {
                let hosts: Vec<&str> = held.hosts.iter().map(|h| h.written.as_str()).collect();
                Some(format!(
                    "{} is only sent to {}, not to {}",
                    held.name,
                    hosts.join(", "),
                    host.with_port(port)
                ))
            } else if !over_tls {
                Some(format!(
                    "{} would cross the network unencrypted: secrets are swapped only into \
                     HTTPS requests",
                    held.name
                ))
            } else if place == "path" {
                Some(format!(
                    "{} is in the URL's path: secrets are swapped in headers and the query only",
                    held.name
                ))
            } else if place == "name" {
                Some(format!(
                    "{}'s placeholder is in a header's name: secrets are swapped in header values",
                    held.name
                ))
            } else if place == "encoded" {
                Some(format!(
                    "{}'s placeholder is percent-encoded in the URL: write it as it is",
                    held.name
                ))
            } else {
                None
            };
            match why {
                Some(why) => {
                    refusals.push((index, why));
                    false
                }
                None => true,
            }
        };
        let issued = self.lock();
        let find = |text: &str| find_placeholders(text, &issued.secret_of);

        // The request target: the path may not carry one; the query is swapped.
        let (path, query) = match head.target.split_once('?') {
            Some((path, query)) => (path.to_string(), Some(query.to_string())),
            None => (head.target.clone(), None),
        };
        for (index, _) in find(&path) {
            judge(index, "path");
        }
        let decoded = percent_decoded(&head.target);
        let literal: Vec<usize> = find(&head.target).into_iter().map(|(i, _)| i).collect();
        for (index, _) in find(&decoded) {
            if !literal.contains(&index) {
                judge(index, "encoded");
            }
        }
        let mut new_query = query.clone();
        if let Some(query) = &query {
            let mut swapped = query.clone();
            for (index, placeholder) in find(query) {
                if judge(index, "query") {
                    swapped = swapped.replace(
                        &placeholder,
                        &percent_encoded(self.held[index].value.expose()),
                    );
                }
            }
            new_query = Some(swapped);
        }
        // Header values (and Basic credentials, decoded).
        let mut fields = head.fields.clone();
        for (name, value) in fields.iter_mut() {
            for (index, _) in find(name) {
                judge(index, "name");
            }
            if name.eq_ignore_ascii_case("host") {
                continue;
            }
            for (index, placeholder) in find(value) {
                if judge(index, "header") {
                    *value = value.replace(&placeholder, self.held[index].value.expose());
                }
            }
            if let Some(credentials) = basic_credentials(name, value) {
                let mut swapped = credentials.clone();
                for (index, placeholder) in find(&credentials) {
                    if judge(index, "header") {
                        swapped = swapped.replace(&placeholder, self.held[index].value.expose());
                    }
                }
                if swapped != credentials {
                    *value = format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(swapped)
                    );
                }
            }
        }
        drop(issued);
        if let Some((_, first)) = refusals.first() {
            let reason = first.clone();
            for (index, why) in refusals.iter() {
                recorder.log.record_secret(
                    recorder.client,
                    SecretRefusal {
                        secret: self.held[*index].name.clone(),
                        host: host.to_string(),
                        port,
                        reason: why.clone(),
                    },
                );
            }
            return Err(Refused {
                status: "403 Forbidden",
                reason: format!("a secret's placeholder was refused: {reason}"),
                recorded: true,
            });
        }
        head.fields = fields;
        if let Some(query) = new_query {
            head.target = format!("{path}?{query}");
        }
        Ok(head)
    }
}

/// The placeholders in `text` that stand for a live secret: (secret, placeholder).
fn find_placeholders(text: &str, secret_of: &HashMap<String, usize>) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let candidate = rest[at..]
            .get(..PREFIX.len() + RANDOM_HEX)
            .unwrap_or(&rest[at..]);
        if let Some(index) = secret_of.get(candidate) {
            found.push((*index, candidate.to_string()));
        }
        rest = &rest[at + PREFIX.len()..];
    }
    found
}

/// The user and password of a `Basic` `Authorization` header, decoded.
fn basic_credentials(name: &str, value: &str) -> Option<String> {
    if !name.eq_ignore_ascii_case("authorization")
        && !name.eq_ignore_ascii_case("proxy-authorization")
    {
        return None;
    }
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// `text` with `%XX` sequences decoded (invalid ones kept as they are).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[at] == b'%' && at + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[at + 1]), hex(bytes[at + 2])) {
                out.push((high * 16 + low) as u8);
                at += 3;
                continue;
            }
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `value` percent-encoded for a URL's query (everything but unreserved characters).
fn percent_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// 128 random bits from the system's source, as hex.
fn random_hex() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; RANDOM_HEX / 2];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
