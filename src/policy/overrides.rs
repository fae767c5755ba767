//! The original code-sandbox-mcp's environment variables, honoured as overrides of the
//! policy, so that a client configuration written for it keeps working:
//!
//! - `BACKEND`: `docker` or `podman`, the policy's `engine:`;
//! - `CONTAINER_IMAGE`: the image for both languages; `CONTAINER_IMAGE_PYTHON` and
//!   `CONTAINER_IMAGE_JAVASCRIPT` set one language's, and win over it.
//!
//! (`VERBOSE` is the third; it sets the log level, see `cli::init_logging`.) One more is
//! this project's own: `CODE_SANDBOX_CA_BUNDLE`, the policy's `certificates:` (a CA
//! bundle is the machine's, behind its network's proxy, more often than the project's;
//! a relative path is read from the working directory). A value
//! that cannot be used is an error naming the variable, as a bad key in a file would
//! be: never silently ignored.

use super::error::PolicyError;
use super::schema::{Certificates, EngineKind, Policy};

/// The variable naming a CA bundle for the sandbox, over the policy's `certificates:`.
pub const CA_BUNDLE_VAR: &str = "CODE_SANDBOX_CA_BUNDLE";

/// Applies the variables `env` has to `policy`.
pub fn apply(policy: &mut Policy, env: &dyn Fn(&str) -> Option<String>) -> Result<(), PolicyError> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let bad = |name: &str, message: String| PolicyError {
        file: format!("${name}"),
        line: None,
        column: None,
        message,
        more: Vec::new(),
    };
    if let Some(backend) = var("BACKEND") {
        policy.engine = match backend.to_ascii_lowercase().as_str() {
            "docker" => EngineKind::Docker,
            "podman" => EngineKind::Podman,
            _ => {
                return Err(bad(
                    "BACKEND",
                    format!("`{backend}` is not a container engine: use docker or podman"),
                ))
            }
        };
    }
    let image = |name: &str| -> Result<Option<String>, PolicyError> {
        match var(name) {
            Some(image) if image.contains(char::is_whitespace) => {
                Err(bad(name, format!("`{image}` is not an image reference")))
            }
            other => Ok(other),
        }
    };
    if let Some(path) = var(CA_BUNDLE_VAR) {
        let host = std::path::PathBuf::from(&path);
        let pem = super::host_paths::bundle(&host)
            .map_err(|why| bad(CA_BUNDLE_VAR, format!("`{path}` {why}")))?;
        policy.certificates = Some(Certificates {
            source: path,
            host,
            pem,
        });
    }
    let both = image("CONTAINER_IMAGE")?;
    if let Some(python) = image("CONTAINER_IMAGE_PYTHON")?.or_else(|| both.clone()) {
        policy.images.python = vec![python];
    }
    if let Some(javascript) = image("CONTAINER_IMAGE_JAVASCRIPT")?.or(both) {
        policy.images.javascript = vec![javascript];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(vars: &[(&str, &str)]) -> Result<Policy, PolicyError> {
        let mut policy = Policy::preset("default").unwrap();
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        apply(&mut policy, &env).map(|()| policy)
    }

    #[test]
    fn the_original_variables_override_the_policy() {
        let policy = applied(&[
            ("BACKEND", "Podman"),
            ("CONTAINER_IMAGE", "my/sandbox:1"),
            ("CONTAINER_IMAGE_JAVASCRIPT", "node:20"),
        ])
        .unwrap();
        assert_eq!(policy.engine, EngineKind::Podman);
        assert_eq!(policy.images.python, ["my/sandbox:1"]);
        assert_eq!(policy.images.javascript, ["node:20"]);
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("ca.pem");
        std::fs::write(
            &bundle,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let with = applied(&[(CA_BUNDLE_VAR, bundle.to_str().unwrap())]).unwrap();
        assert_eq!(with.certificates.unwrap().host, bundle);
        let untouched = applied(&[]).unwrap();
        assert!(untouched.certificates.is_none());
        assert_eq!(untouched.images.python.len(), 2);
    }

    #[test]
    fn an_unusable_value_is_an_error_naming_the_variable() {
        let error = applied(&[("BACKEND", "lxc")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "$BACKEND: `lxc` is not a container engine: use docker or podman"
        );
        let error = applied(&[(CA_BUNDLE_VAR, "/nonexistent/ca.pem")]).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("$CODE_SANDBOX_CA_BUNDLE: `/nonexistent/ca.pem` cannot be read"),
            "{error}"
        );
        let error = applied(&[("CONTAINER_IMAGE", "python 3")]).unwrap_err();
        assert!(
            error.to_string().starts_with("$CONTAINER_IMAGE:"),
            "{error}"
        );
    }
}
