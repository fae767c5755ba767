//! The server's resources: what a client (or the person behind it) can read to know
//! the sandbox before any code runs.
//!
//! - `sandbox://policy`: the policy in force, every value resolved (`extends` merged),
//!   as YAML, the same text `code-sandbox-mcp policy show` prints;
//! - `sandbox://environments`: for each language, the image, its interpreter and every
//!   package installed, as JSON (probed from the image, see `sandbox::environment`).

use crate::analysis::Language;
use crate::policy::Policy;
use crate::sandbox::environment::Environment;
use crate::sandbox::Sandbox;
use rmcp::model::{Resource, ResourceContents};
use std::time::Duration;

pub const POLICY_URI: &str = "sandbox://policy";
pub const ENVIRONMENTS_URI: &str = "sandbox://environments";

/// How long a description or resource waits for the images to be chosen and probed
/// (which may mean a pull) before it says what it knows without them.
pub const ENVIRONMENT_WAIT: Duration = Duration::from_secs(15);

/// The resources this server lists.
pub fn list() -> Vec<Resource> {
    vec![
        Resource::new(POLICY_URI, "policy")
            .with_title("Sandbox policy")
            .with_description(
                "The policy in force, every value resolved: limits, network, images, \
                 outputs, mounts, and the rules with their actions.",
            )
            .with_mime_type("application/yaml"),
        Resource::new(ENVIRONMENTS_URI, "environments")
            .with_title("Languages, images and packages")
            .with_description(
                "For Python and JavaScript: the image code runs in, its interpreter's \
                 version and every package installed.",
            )
            .with_mime_type("application/json"),
    ]
}

/// The contents of the resource at `uri`, or `None` when there is no such resource.
pub async fn read(uri: &str, policy: &Policy, sandbox: &Sandbox) -> Option<ResourceContents> {
    let text = match uri {
        POLICY_URI => serde_yaml::to_string(policy).expect("a policy serializes"),
        ENVIRONMENTS_URI => {
            let mut environments = serde_json::Map::new();
            for (language, found) in environments_now(sandbox).await {
                let value = match found {
                    Ok(environment) => serde_json::to_value(environment).expect("serializes"),
                    Err(error) => serde_json::json!({ "error": error }),
                };
                environments.insert(language.name().to_string(), value);
            }
            serde_json::to_string_pretty(&environments).expect("serializes")
        }
        _ => return None,
    };
    let mime_type = if uri == POLICY_URI {
        "application/yaml"
    } else {
        "application/json"
    };
    Some(ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some(mime_type.to_string()),
        text,
        meta: None,
    })
}

/// Each language's environment, or why it is not known (within [`ENVIRONMENT_WAIT`]).
pub async fn environments_now(sandbox: &Sandbox) -> Vec<(Language, Result<Environment, String>)> {
    let probes = Language::ALL.map(|language| async move {
        let found = tokio::time::timeout(ENVIRONMENT_WAIT, sandbox.environment(language)).await;
        let found = match found {
            Ok(Ok(environment)) => Ok(environment),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!(
                "the image was not ready within {} s (being pulled?)",
                ENVIRONMENT_WAIT.as_secs()
            )),
        };
        (language, found)
    });
    futures_util::future::join_all(probes).await
}
