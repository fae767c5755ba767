//! Images: which of the policy's choices each language runs in (the first the engine
//! has), checked once per instance and pulled when it is missing, with progress on
//! stderr; one that cannot be had is an error that says how to get it.

use super::lock;
use crate::analysis::Language;
use crate::sandbox::SandboxError;
use bollard::query_parameters::CreateImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;

/// Pulls `image`, logging progress to stderr (through tracing) as layers arrive.
async fn pull(docker: &Docker, image: &str) -> Result<(), SandboxError> {
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

/// Checks that `image` exists, pulling it once if it does not (a failure is retried
/// by the next call).
async fn ensure(
    docker: &Docker,
    images: &Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    image: &str,
) -> Result<(), SandboxError> {
    let cell = lock(images).entry(image.to_string()).or_default().clone();
    cell.get_or_try_init(|| async {
        match docker.inspect_image(image).await {
            Ok(_) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => pull(docker, image).await,
            Err(error) => Err(super::engine_error(
                format!("inspecting image `{image}`"),
                error,
            )),
        }
    })
    .await
    .map(|_| ())
}

/// The image `language` runs in: the first of `choices` the engine has (when it has
/// none, the last, pulled), chosen once and then kept in `chosen`.
pub(super) async fn choose(
    docker: &Docker,
    images: &Mutex<HashMap<String, Arc<OnceCell<()>>>>,
    chosen: &Mutex<HashMap<Language, String>>,
    language: Language,
    choices: &[String],
) -> Result<String, SandboxError> {
    let earlier_choice = lock(chosen).get(&language).cloned();
    let image = match earlier_choice {
        Some(image) => image,
        None => {
            let (last, earlier) = choices.split_last().ok_or_else(|| {
                SandboxError::ImageUnavailable(format!("the policy names no image for {language}"))
            })?;
            let mut pick = last.clone();
            for choice in earlier {
                if docker.inspect_image(choice).await.is_ok() {
                    pick = choice.clone();
                    break;
                }
            }
            pick
        }
    };
    ensure(docker, images, &image).await?;
    lock(chosen).insert(language, image.clone());
    Ok(image)
}
