//! The policies a team server runs calls under: the server's own, and those token-file
//! lines name for their principals. Each policy in use has one template server (its
//! checker, its sandbox and warm pool, its tool descriptions); every connection is
//! made from its principal's template.
//!
//! A policy named by a token line is read when a reading of the token file first names
//! it, and kept for the life of the server: a SIGHUP re-reads the token file, so a
//! line can move to another policy, but a policy file's own changes take a restart.

use crate::mcp::CodeSandboxServer;
use crate::policy::Policy;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

pub struct Tenants {
    default: CodeSandboxServer,
    /// `--pass-through-env` names, added to each policy's own.
    pass_through: Vec<String>,
    named: Mutex<HashMap<String, CodeSandboxServer>>,
}

impl Tenants {
    pub fn new(default: CodeSandboxServer, pass_through: Vec<String>) -> Tenants {
        Tenants {
            default,
            pass_through,
            named: Mutex::new(HashMap::new()),
        }
    }

    /// The template for `policy` (a preset, or a file relative to `dir`), or the
    /// server's own for `None`; loaded the first time, with its errors if it has some.
    pub fn template(&self, policy: Option<&str>, dir: &Path) -> Result<CodeSandboxServer, String> {
        let Some(spec) = policy else {
            return Ok(self.default.clone());
        };
        let key = format!("{}\u{0}{spec}", dir.display());
        if let Some(server) = self.lock().get(&key) {
            return Ok(server.clone());
        }
        let policy = Policy::discover(Some(spec), dir).map_err(|e| e.to_string())?;
        let env = crate::sandbox::pass_through(&policy.env.pass_through, &self.pass_through);
        let server = CodeSandboxServer::new(policy, env);
        if let Some(error) = server.policy_error() {
            return Err(error.to_string());
        }
        let mut named = self.lock();
        // Two readers racing for one new policy: the first one kept wins.
        let server = named.entry(key).or_insert(server).clone();
        Ok(server)
    }

    /// Every template: the server's own first.
    pub fn all(&self) -> Vec<CodeSandboxServer> {
        let mut all = vec![self.default.clone()];
        all.extend(self.lock().values().cloned());
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CodeSandboxServer>> {
        self.named.lock().unwrap_or_else(|e| e.into_inner())
    }
}
