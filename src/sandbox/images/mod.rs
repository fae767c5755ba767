//! The project's own sandbox images, one per language, with the libraries snippets
//! reach for (numpy, pandas, matplotlib…; lodash, axios, d3…): their definitions, which
//! any backend builds (`code-sandbox-mcp image build`), and how a built one is known.
//!
//! The definitions are Dockerfiles embedded in the binary, so an image builds with no
//! checkout on disk; everything comes from the base's package manager, so the build
//! needs no context but the Dockerfile. Every image carries a label with the sha256 of
//! the Dockerfile it was built from, so a build can be skipped when the image is
//! already the one this binary defines.

use crate::analysis::Language;
use std::collections::HashMap;

/// The Python image's name. The tag is the definition's version: bump it whenever
/// python.Dockerfile changes, so an image built from the old text is never taken for
/// the new one by a server that only knows the name.
pub const PYTHON_IMAGE: &str = "code-sandbox-mcp-python:2";
/// The JavaScript image's name; bump its tag whenever javascript.Dockerfile changes.
pub const JAVASCRIPT_IMAGE: &str = "code-sandbox-mcp-javascript:2";

const PYTHON_DOCKERFILE: &str = include_str!("python.Dockerfile");
const JAVASCRIPT_DOCKERFILE: &str = include_str!("javascript.Dockerfile");

/// Label (set by the Dockerfiles) listing the headline packages by import or require
/// name, space separated: what a tool description can promise is installed.
pub const PACKAGES_LABEL: &str = "io.code-sandbox-mcp.packages";
/// Label (set at build time) holding `sha256:<hex>` of the Dockerfile the image was
/// built from.
pub const DEFINITION_LABEL: &str = "io.code-sandbox-mcp.definition";
/// Label (set at build time) naming the base image the build started from.
pub const BASE_LABEL: &str = "io.code-sandbox-mcp.base";

/// The base a Dockerfile starts from when no `--base` is given (its `ARG BASE` default).
pub const DEFAULT_BASE: &str = "debian:trixie-slim";

/// The base scripts/build-offline-image.sh makes where no registry is reachable.
pub const OFFLINE_BASE: &str = "code-sandbox-mcp-runtime:trixie";

/// The name of the image this binary defines for `language`.
pub fn built_image(language: Language) -> &'static str {
    match language {
        Language::Python => PYTHON_IMAGE,
        Language::JavaScript => JAVASCRIPT_IMAGE,
    }
}

/// The embedded Dockerfile for `language`.
pub fn dockerfile(language: Language) -> &'static str {
    match language {
        Language::Python => PYTHON_DOCKERFILE,
        Language::JavaScript => JAVASCRIPT_DOCKERFILE,
    }
}

/// `sha256:<hex>` of the embedded Dockerfile: the value of [`DEFINITION_LABEL`] on an
/// image built from it.
pub fn definition_digest(language: Language) -> String {
    format!(
        "sha256:{}",
        crate::digest::sha256_hex(dockerfile(language).as_bytes())
    )
}

/// Whether an image with these labels was built from this binary's definition for
/// `language` (and so need not be built again).
pub fn is_current(language: Language, labels: &HashMap<String, String>) -> bool {
    labels
        .get(DEFINITION_LABEL)
        .is_some_and(|digest| *digest == definition_digest(language))
}

/// The packages an image's [`PACKAGES_LABEL`] lists (empty for an image without one).
pub fn headline_packages(labels: &HashMap<String, String>) -> Vec<&str> {
    labels
        .get(PACKAGES_LABEL)
        .map(|list| list.split_whitespace().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_prefers_these_images_then_the_slim_ones() {
        let policy = crate::policy::Policy::preset("default").unwrap();
        for language in Language::ALL {
            let choices = policy.images.for_language(language);
            assert_eq!(choices.len(), 2, "{choices:?}");
            assert_eq!(choices[0], built_image(language));
        }
    }

    #[test]
    fn each_language_has_its_own_definition_and_name() {
        assert_eq!(built_image(Language::Python), "code-sandbox-mcp-python:2");
        assert_eq!(
            built_image(Language::JavaScript),
            "code-sandbox-mcp-javascript:2"
        );
        assert!(dockerfile(Language::Python).contains("python3-numpy"));
        assert!(dockerfile(Language::JavaScript).contains("node-lodash"));
        let digest = definition_digest(Language::Python);
        assert!(
            digest.starts_with("sha256:") && digest.len() == 7 + 64,
            "{digest}"
        );
        assert_ne!(digest, definition_digest(Language::JavaScript));
    }

    #[test]
    fn every_dockerfile_takes_its_base_as_an_argument_and_labels_its_packages() {
        for language in Language::ALL {
            let text = dockerfile(language);
            let code: Vec<&str> = text
                .lines()
                .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
                .collect();
            assert_eq!(code[0], format!("ARG BASE={DEFAULT_BASE}"), "{language}");
            assert_eq!(code[1], "FROM ${BASE}", "{language}");
            assert!(
                text.contains(&format!("LABEL {PACKAGES_LABEL}=\"")),
                "{language}"
            );
            assert!(text.contains("WORKDIR /sandbox"), "{language}");
        }
    }

    #[test]
    fn only_an_image_labelled_with_this_definition_is_current() {
        let language = Language::Python;
        let labelled = |value: &str| HashMap::from([(DEFINITION_LABEL.to_string(), value.into())]);
        assert!(is_current(
            language,
            &labelled(&definition_digest(language))
        ));
        assert!(!is_current(
            language,
            &labelled(&definition_digest(Language::JavaScript))
        ));
        assert!(!is_current(language, &labelled("sha256:00")));
        assert!(!is_current(language, &HashMap::new()));
    }
}
