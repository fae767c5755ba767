//! Images: which of the policy's choices each language runs in (the first the engine
//! has), checked once per instance and pulled when it is missing, with progress on
//! stderr; one that cannot be had is an error that says how to get it.
//! The project's own images with libraries, and their build, are in [`build`].

pub mod build;

use super::SandboxError;
use crate::analysis::Language;
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

/// The images of one instance: which of the policy's choices each language runs in,
/// and that it is there.
impl super::runtime::Runtime {
    /// Checks that `image` exists, pulling it once if it does not.
    pub(super) async fn ensure_image(
        &self,
        docker: &Docker,
        image: &str,
    ) -> Result<(), SandboxError> {
        let cell = super::runtime::once_per_image(&self.images, image);
        cell.get_or_try_init(|| async {
            match docker.inspect_image(image).await {
                Ok(_) => Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => pull(docker, image).await,
                Err(error) => Err(super::container::engine_error(
                    format!("inspecting image `{image}`"),
                    error,
                )),
            }
        })
        .await
        .map(|_| ())
    }

    /// Makes the next run check (and pull, or choose again) `image`.
    pub(super) fn forget_image(&self, image: &str) {
        self.images
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(image);
        self.chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, chosen| chosen != image);
    }

    /// The image `language` runs in: the first of the policy's choices the engine has
    /// (when it has none, the last, pulled), chosen once and then kept.
    pub(super) async fn choose_image(
        &self,
        docker: &Docker,
        language: Language,
    ) -> Result<String, SandboxError> {
        let chosen = self
            .chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&language)
            .cloned();
        let image = match chosen {
            Some(image) => image,
            None => {
                let choices = self.policy.images.for_language(language);
                let (last, earlier) = choices.split_last().expect("never empty");
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
        self.ensure_image(docker, &image).await?;
        self.chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(language, image.clone());
        Ok(image)
    }

    /// The image chosen for `language`, or, before the engine was asked, the policy's
    /// last choice.
    pub(super) fn image(&self, language: Language) -> String {
        self.chosen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&language)
            .cloned()
            .unwrap_or_else(|| {
                let choices = self.policy.images.for_language(language);
                choices.last().cloned().unwrap_or_default()
            })
    }
}
