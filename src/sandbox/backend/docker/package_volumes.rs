//! Package sets' volumes, across instances: listing them with when each was made, and
//! removing one that no container uses (`cleanup --packages`). Their making is with the
//! other volumes' (`container`).

use super::{engine_error, LABEL_PACKAGES};
use crate::sandbox::backend::PackageStorage;
use crate::sandbox::SandboxError;
use bollard::query_parameters::ListVolumesOptionsBuilder;
use bollard::Docker;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Every package set's volume, with when the engine made it.
pub async fn list(docker: &Docker) -> Result<Vec<PackageStorage>, SandboxError> {
    let options = ListVolumesOptionsBuilder::default()
        .filters(&HashMap::from([(
            "label".to_string(),
            vec![LABEL_PACKAGES.to_string()],
        )]))
        .build();
    let listed = docker
        .list_volumes(Some(options))
        .await
        .map_err(|error| engine_error("listing the package volumes".into(), error))?;
    Ok(listed
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|volume| PackageStorage {
            created: volume.created_at.as_deref().and_then(rfc3339_time),
            name: volume.name,
        })
        .collect())
}

/// Removes a package set's volume unless a container uses it (`Ok(false)` then).
pub async fn remove(docker: &Docker, name: &str) -> Result<bool, SandboxError> {
    match docker
        .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
        .await
    {
        Ok(()) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => Ok(false),
        Err(error) => Err(engine_error(
            format!("removing the package volume {name}"),
            error,
        )),
    }
}

/// An engine's RFC 3339 time (`2024-05-01T10:20:30Z`, `…+02:00`, with or without
/// fractions) as a `SystemTime`; `None` for anything else.
fn rfc3339_time(text: &str) -> Option<SystemTime> {
    let (date, rest) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(|part| part.parse::<i64>().ok());
    let (year, month, day) = (date.next()??, date.next()??, date.next()??);
    let clock_end = rest.find(['Z', '+', '-'])?;
    let (clock, zone) = rest.split_at(clock_end);
    let clock = clock.split('.').next()?;
    let mut clock = clock.splitn(3, ':').map(|part| part.parse::<i64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    let offset = match zone {
        "Z" => 0,
        zone => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (hours, minutes) = zone[1..].split_once(':')?;
            sign * (hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60)
        }
    };
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's method).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let seconds = u64::try_from(seconds).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_times_are_read_in_any_zone() {
        let at = |text| rfc3339_time(text).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(at("2024-05-01T10:20:30Z"), Some(1_714_558_830));
        assert_eq!(
            at("2024-05-01T12:20:30.123456789+02:00"),
            Some(1_714_558_830)
        );
        assert_eq!(at("2024-05-01T05:20:30-05:00"), Some(1_714_558_830));
        assert_eq!(at("2000-02-29T00:00:00Z"), Some(951_782_400));
        assert_eq!(at("yesterday"), None);
        assert_eq!(at(""), None);
    }
}
