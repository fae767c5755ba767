//! The box assets of one image: a volume of this instance's, filled once by a setup
//! container of the image (the image's own shell, as root, no network), which every
//! box of the image then mounts read-only. The setup's script also probes the image;
//! its stdout is the probe's report.

use super::container;
use super::instance::Instance;
use crate::sandbox::backend::{short, AssetSetup, Prepared};
use crate::sandbox::images::PACKAGES_LABEL;
use crate::sandbox::SandboxError;
use bollard::container::{AttachContainerResults, LogOutput};
use bollard::Docker;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

/// Fills a new volume with the assets for boxes of `image`; returns the volume and
/// what the probe found. A failed setup leaves no volume behind.
pub async fn fill(
    docker: &Docker,
    instance: &Instance,
    image: &str,
    setup: &AssetSetup,
) -> Result<(String, Prepared), SandboxError> {
    let volume = container::create_volume(docker, instance).await?;
    let body = container::setup_body(image, instance, &volume, &setup.script);
    let probed = match container::create_and_attach(docker, image, None, body).await {
        Ok((id, attached)) => {
            let probed = run(docker, &id, attached, setup.input.clone()).await;
            container::remove(docker, &id).await;
            probed
        }
        Err(error) => Err(error),
    };
    match probed {
        Ok(probe) => {
            tracing::debug!(image, volume = short(&volume), "box assets ready");
            let headline_label = docker
                .inspect_image(image)
                .await
                .ok()
                .and_then(|info| info.config?.labels?.remove(PACKAGES_LABEL));
            Ok((
                volume,
                Prepared {
                    probe,
                    headline_label,
                },
            ))
        }
        Err(error) => {
            container::remove_volume(docker, &volume).await;
            Err(error)
        }
    }
}

/// Feeds `input` to a setup container's script (attached before its start) and returns
/// its stdout once it has exited; a non-zero exit is an error carrying its stderr.
async fn run(
    docker: &Docker,
    id: &str,
    attached: AttachContainerResults,
    input: Vec<u8>,
) -> Result<String, SandboxError> {
    let AttachContainerResults {
        mut output,
        input: mut stdin,
    } = attached;
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    while let Some(item) = output.next().await {
        match item {
            Ok(LogOutput::StdOut { message }) => stdout.extend_from_slice(&message),
            Ok(LogOutput::StdErr { message }) => stderr.extend_from_slice(&message),
            Ok(_) => {}
            Err(error) => return Err(super::engine_error("reading the setup".into(), error)),
        }
    }
    writer.abort();
    match exit_code(docker, id).await {
        Some(0) => Ok(String::from_utf8_lossy(&stdout).into_owned()),
        code => Err(SandboxError::Engine(format!(
            "setting the box assets up failed (exit {code:?}): {}",
            String::from_utf8_lossy(&stderr).trim()
        ))),
    }
}

/// The container's exit code. The output stream can close a moment before the engine
/// records the exit, so a still-running answer is asked again, briefly.
async fn exit_code(docker: &Docker, id: &str) -> Option<i64> {
    for attempt in 0..200u32 {
        match container::status(docker, id).await {
            crate::sandbox::backend::BoxStatus::Exited(code) => return Some(code),
            crate::sandbox::backend::BoxStatus::Running => {}
            crate::sandbox::backend::BoxStatus::Gone => return None,
        }
        let pause = if attempt < 20 { 2 } else { 10 };
        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
    }
    None
}
