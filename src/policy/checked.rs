//! Checks made while a policy file is read (the `deserialize_with` of its schema), so
//! that serde_yaml's error names the exact line and column of the value at fault (and
//! its key path), not a guess.

use super::network::NetworkMode;
use super::units::{ByteSize, HumanDuration};
use serde::de::{value, Deserializer, Error, IntoDeserializer, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

/// Deserializes an optional `T` and checks it. The value is read and checked inside
/// the deserializer's own call for the scalar (`deserialize_any`), which is what makes
/// serde_yaml stamp an error with that scalar's line, column and key path.
fn check<'de, D, T, F>(deserializer: D, valid: F) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
    F: FnOnce(&T) -> Result<(), String>,
{
    struct Optional<T, F>(F, PhantomData<T>);
    impl<'de, T: Deserialize<'de>, F: FnOnce(&T) -> Result<(), String>> Visitor<'de>
        for Optional<T, F>
    {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a value")
        }
        fn visit_none<E: Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
            d.deserialize_any(Scalar(self.0, PhantomData)).map(Some)
        }
    }
    deserializer.deserialize_option(Optional(valid, PhantomData))
}

/// A scalar turned into `T` and checked, within the visit of the scalar itself.
struct Scalar<T, F>(F, PhantomData<T>);

impl<T, F: FnOnce(&T) -> Result<(), String>> Scalar<T, F> {
    fn finish<E: Error>(self, read: Result<T, value::Error>) -> Result<T, E> {
        let value = read.map_err(E::custom)?;
        (self.0)(&value).map_err(E::custom)?;
        Ok(value)
    }
}

impl<'de, T: Deserialize<'de>, F: FnOnce(&T) -> Result<(), String>> Visitor<'de> for Scalar<T, F> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a string")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<T, E> {
        self.finish(T::deserialize(v.into_deserializer()))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<T, E> {
        self.finish(T::deserialize(v.into_deserializer()))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<T, E> {
        self.finish(T::deserialize(v.into_deserializer()))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<T, E> {
        self.finish(T::deserialize(v.into_deserializer()))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<T, E> {
        self.finish(T::deserialize(v.into_deserializer()))
    }
}

pub fn version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    check(d, |v: &u32| match v {
        1 => Ok(()),
        other => Err(format!(
            "unsupported version {other}; this build reads version 1"
        )),
    })
}

/// Above 0, and no more than this machine has: the engine would refuse every run
/// of a container asking for more, so the policy is refused once, here, instead.
pub fn cpus<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    check(d, |cpus: &f64| {
        let cores = std::thread::available_parallelism().map_or(1024, |n| n.get());
        if cpus.is_nan() || *cpus <= 0.0 {
            Err(format!("must be a number of cores above 0, got {cpus}"))
        } else if *cpus > cores as f64 {
            Err(format!(
                "{cpus} cores asked, and this machine has {cores}: the engine would refuse \
                 every run; use at most {cores}"
            ))
        } else {
            Ok(())
        }
    })
}

pub fn at_least_one<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + PartialOrd + From<u8>,
{
    check(d, |n: &T| {
        if *n >= T::from(1) {
            Ok(())
        } else {
            Err("must be at least 1".into())
        }
    })
}

pub fn nonzero_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
    check(d, |size: &ByteSize| {
        if size.bytes() > 0 {
            Ok(())
        } else {
            Err("must be above 0".into())
        }
    })
}

pub fn memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ByteSize>, D::Error> {
    check(d, |size: &ByteSize| {
        if size.bytes() >= 6 << 20 {
            Ok(())
        } else {
            Err("must be at least 6MiB (the engine's own floor)".into())
        }
    })
}

pub fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HumanDuration>, D::Error> {
    check(d, |t: &HumanDuration| {
        if t.0.is_zero() {
            Err("must be above 0".into())
        } else {
            Ok(())
        }
    })
}

/// `none`, `bridge`, or `{ allow: [host, host:port, *.domain, ...] }`, each entry
/// checked within the visit of its own scalar, so an error points at it.
pub fn network<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NetworkMode>, D::Error> {
    use serde::de::MapAccess;
    struct Network;
    impl<'de> Visitor<'de> for Network {
        type Value = NetworkMode;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("`none`, `bridge` or `{ allow: [hosts] }`")
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<NetworkMode, E> {
            match v {
                "none" => Ok(NetworkMode::None),
                "bridge" => Ok(NetworkMode::Bridge),
                other => Err(E::custom(format!(
                    "unknown variant `{other}`, expected `none` or `bridge`, or `{{ allow: [hosts] }}`"
                ))),
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NetworkMode, A::Error> {
            let mut hosts = None;
            while let Some(key) = map.next_key::<String>()? {
                if key != "allow" {
                    return Err(A::Error::custom(format!(
                        "unknown field `{key}`, expected `allow`"
                    )));
                }
                hosts = Some(map.next_value_seed(Hosts)?);
            }
            let hosts = hosts.ok_or_else(|| A::Error::custom("`allow:` is missing"))?;
            Ok(NetworkMode::Allow(hosts))
        }
    }
    struct Hosts;
    impl<'de> serde::de::DeserializeSeed<'de> for Hosts {
        type Value = Vec<crate::policy::allowlist::HostRule>;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            let names = names(d, "a list of hosts", |host| {
                crate::policy::allowlist::HostRule::parse(host).map(|_| ())
            })?
            .unwrap_or_default();
            Ok(names
                .iter()
                .filter_map(|host| crate::policy::allowlist::HostRule::parse(host).ok())
                .collect())
        }
    }
    d.deserialize_any(Network).map(Some)
}

/// An image reference, or a non-empty list of them (the first present is used).
pub fn images<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    fn valid(image: &String) -> Result<(), String> {
        if image.trim().is_empty() || image.contains(char::is_whitespace) {
            Err(format!("`{image}` is not an image reference"))
        } else {
            Ok(())
        }
    }
    struct OneOrMany;
    impl<'de> Visitor<'de> for OneOrMany {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an image name, or a list of image names")
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<String>, E> {
            let image = v.to_string();
            valid(&image).map_err(E::custom)?;
            Ok(vec![image])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut images = Vec::new();
            while let Some(image) = seq.next_element_seed(Checked(valid))? {
                images.push(image);
            }
            if images.is_empty() {
                return Err(A::Error::custom("the list of images is empty"));
            }
            Ok(images)
        }
    }
    d.deserialize_any(OneOrMany).map(Some)
}

pub fn runtime<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    check(d, |runtime: &String| {
        let valid = !runtime.is_empty()
            && runtime
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if valid {
            Ok(())
        } else {
            Err(format!(
                "`{runtime}` is not a container runtime name (such as `runsc`)"
            ))
        }
    })
}

pub fn variable_names<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    names(d, "a list of environment variable names", |name| {
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            Ok(())
        } else {
            Err(format!("`{name}` is not an environment variable name"))
        }
    })
}

/// Python's dotted module names, or npm package names (`lodash`, `@scope/pkg`).
pub fn module_names<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    names(d, "a list of module names", |name| {
        let valid = !name.is_empty()
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-@/:".contains(c));
        if valid {
            Ok(())
        } else {
            Err(format!("`{name}` is not a module name"))
        }
    })
}

/// A list of strings, each checked within the visit of its own scalar (so an error
/// points at the element at fault).
fn names<'de, D: Deserializer<'de>>(
    d: D,
    expecting: &'static str,
    valid: fn(&String) -> Result<(), String>,
) -> Result<Option<Vec<String>>, D::Error> {
    struct Names(&'static str, fn(&String) -> Result<(), String>);
    impl<'de> Visitor<'de> for Names {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = seq.next_element_seed(Checked(self.1))? {
                names.push(name);
            }
            Ok(names)
        }
    }
    d.deserialize_seq(Names(expecting, valid)).map(Some)
}

/// Package specs: a name, and at most a version requirement.
pub fn package_specs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    names(d, "a list of packages", |spec| {
        crate::policy::packages::valid_spec(spec)
    })
}

/// A package index: an `http` or `https` URL.
pub fn index_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    check(d, |url: &String| {
        if crate::analysis::urls::host_and_port(url).is_some()
            && (url.starts_with("http://") || url.starts_with("https://"))
        {
            Ok(())
        } else {
            Err(format!("`{url}` is not an http(s) URL of a package index"))
        }
    })
}

/// A host path as a policy names it: not empty, no NUL.
pub fn host_path<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let path = check(d, |path: &String| {
        if path.trim().is_empty() || path.contains('\0') {
            Err(format!("`{path}` is not a host path"))
        } else {
            Ok(())
        }
    })?;
    path.ok_or_else(|| D::Error::custom("a host path is needed"))
}

/// Where a mount appears: absolute, without `.` or `..`, and not a place the
/// sandbox itself needs (its scratch folders, the guard's files, the kernel's).
pub fn mount_target<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let target = check(d, |target: &String| {
        let parts: Vec<&str> = target.split('/').skip(1).collect();
        if !target.starts_with('/') || parts.iter().any(|p| matches!(*p, "." | "..")) {
            return Err(format!(
                "`{target}` must be an absolute path in the sandbox, without `.` or `..`"
            ));
        }
        let clean = format!(
            "/{}",
            parts
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join("/")
        );
        let reserved = ["/sandbox", "/tmp", "/"];
        let under = [
            "/proc",
            "/sys",
            "/dev",
            "/opt/code-sandbox",
            "/etc",
            "/usr",
            "/bin",
            "/lib",
        ];
        if reserved.contains(&clean.as_str())
            || under
                .iter()
                .any(|dir| clean == *dir || clean.starts_with(&format!("{dir}/")))
        {
            return Err(format!(
                "`{target}` is a place the sandbox needs for itself; mount somewhere else \
                 (say /data, or a folder under /sandbox)"
            ));
        }
        Ok(())
    })?;
    target.ok_or_else(|| D::Error::custom("a mount needs a `target`"))
}

pub fn rule_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let id = check(d, |id: &String| {
        let valid = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if valid {
            Ok(())
        } else {
            Err(format!(
                "rule id `{id}` must be lower-case letters, digits, `-` or `_`"
            ))
        }
    })?;
    id.ok_or_else(|| D::Error::custom("a rule needs an `id`"))
}

/// A value deserialized and then checked, as one seed (for list elements).
struct Checked<F>(F);

impl<'de, F: FnOnce(&String) -> Result<(), String>> serde::de::DeserializeSeed<'de> for Checked<F> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(Scalar(self.0, PhantomData))
    }
}
