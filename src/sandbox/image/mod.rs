//! Images: a policy's image is checked once per instance and pulled when it is missing,
//! with progress on stderr; one that cannot be had is an error that says how to get it.
//! The project's own images with libraries, and their build, are in [`build`].

pub mod build;

use super::SandboxError;
use bollard::query_parameters::CreateImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;

/// Pulls `image`, logging progress to stderr (through tracing) as layers arrive.
pub(crate) async fn pull(docker: &Docker, image: &str) -> Result<(), SandboxError> {
    tracing::info!(image, "image not found locally: pulling it");
    let options = CreateImageOptionsBuilder::default()
        .from_image(image)
        .build();
    let mut progress = docker.create_image(Some(options), None, None);
    let mut last = String::new();
    while let Some(item) = progress.next().await {
        match item {
            Ok(info) => {
                let line = [info.id.as_deref(), info.status.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(": ");
                if line != last && !line.is_empty() {
                    // Byte counts tick many times a second: those go to debug.
                    if info.progress_detail.is_some_and(|p| p.current.is_some()) {
                        tracing::debug!(image, "{line}");
                    } else {
                        tracing::info!(image, "{line}");
                    }
                    last = line;
                }
                if let Some(error) = info.error_detail.and_then(|d| d.message) {
                    return Err(image_unavailable(image, &error));
                }
            }
            Err(error) => return Err(image_unavailable(image, &error.to_string())),
        }
    }
    match docker.inspect_image(image).await {
        Ok(_) => {
            tracing::info!(image, "image pulled");
            Ok(())
        }
        Err(error) => Err(image_unavailable(image, &error.to_string())),
    }
}

fn image_unavailable(image: &str, reason: &str) -> SandboxError {
    SandboxError::ImageUnavailable(format!(
        "image `{image}` is not available locally and pulling it failed ({reason}). Pull it \
         with `docker pull {image}` where a registry is reachable, or build the offline image \
         with scripts/build-offline-image.sh (it makes `code-sandbox-mcp-runtime:trixie`) and \
         set the policy's `images:` (python:, javascript:) to an image that exists locally"
    ))
}
