//! How one policy file is laid over the policy it extends: every key the file gives
//! replaces the inherited value, every key it leaves out keeps it. One trait,
//! [`Overlay`], says that once for every kind of value, and [`sections!`] implements
//! it for each section of the file by naming its keys, so a new key is written in the
//! schema and in one list here, never in hand-written merge code (the idea of ty's
//! `Combine`).
//!
//! Values that need the file itself to be resolved (host paths, relative to the
//! file's folder) get their own impl; rules are merged by id in `load`.

use super::error::{error, PolicyError};
use super::host_paths;
use super::schema::{
    Audit, AuditFile, Certificates, EnvFile, EnvPolicy, Export, ExportFile, Images, ImagesFile,
    Limits, LimitsFile, Mount, MountFile, Outputs, OutputsFile, PackageIndexFile, Packages,
    PackagesFile, Policy, PolicyFile, PoolFile, PoolSettings, Preload, PreloadFile, Rule, RuleFile,
    SessionSettings, SessionsFile,
};
use std::path::Path;

/// The file being laid over: how errors name it, its text (to find where a value
/// stands), and its folder (relative host paths are read from there; none for a preset).
pub struct Origin<'a> {
    pub label: &'a str,
    pub text: &'a str,
    pub dir: Option<&'a Path>,
}

/// A layer of settings that can be laid over a `T`.
pub trait Overlay<T> {
    /// Sets on `onto` every key this layer gives; what it leaves out keeps its value.
    fn overlay(self, onto: &mut T, origin: &Origin) -> Result<(), PolicyError>;
}

/// A plain value given in the file replaces the inherited one.
impl<T> Overlay<T> for Option<T> {
    fn overlay(self, onto: &mut T, _: &Origin) -> Result<(), PolicyError> {
        if let Some(value) = self {
            *onto = value;
        }
        Ok(())
    }
}

/// A value that may be absent in the effective policy (`runtime:`) too.
impl<T> Overlay<Option<T>> for Option<T> {
    fn overlay(self, onto: &mut Option<T>, _: &Origin) -> Result<(), PolicyError> {
        if self.is_some() {
            *onto = self;
        }
        Ok(())
    }
}

/// The keys a root policy (one that extends nothing) must give, since nothing is
/// inherited: named by their path (`limits.timeout`) when missing.
pub trait Required {
    fn missing(&self, prefix: &str, out: &mut Vec<String>);
}

impl<S: Required + Default> Required for Option<S> {
    fn missing(&self, prefix: &str, out: &mut Vec<String>) {
        match self {
            Some(section) => section.missing(prefix, out),
            None => S::default().missing(prefix, out),
        }
    }
}

/// `sections! { File => Target { key, key => target_key, #[required] key, #[nested] key } }`
/// implements [`Overlay<Target>`] for `File` (and for `Option<File>`, an absent section)
/// by overlaying each key named onto the target's field of that name (or the one after
/// `=>`), and [`Required`]: `#[required]` keys must be given by a root policy,
/// `#[nested]` sections are asked in turn.
macro_rules! sections {
    ($(
        $file:ty => $target:ty {
            $( $(#[$mark:ident])? $key:ident $(=> $into:ident)? ),* $(,)?
        }
    )*) => {$(
        impl Overlay<$target> for $file {
            /// Every key is laid over even when an earlier one fails, so that the
            /// file's errors come together.
            fn overlay(self, onto: &mut $target, origin: &Origin) -> Result<(), PolicyError> {
                let mut errors = Vec::new();
                $(
                    if let Err(error) =
                        Overlay::overlay(self.$key, sections!(@field onto $key $($into)?), origin)
                    {
                        errors.push(error);
                    }
                )*
                PolicyError::gather(errors)
            }
        }

        impl Overlay<$target> for Option<$file> {
            fn overlay(self, onto: &mut $target, origin: &Origin) -> Result<(), PolicyError> {
                match self {
                    Some(section) => section.overlay(onto, origin),
                    None => Ok(()),
                }
            }
        }

        impl Required for $file {
            #[allow(unused_variables)]
            fn missing(&self, prefix: &str, out: &mut Vec<String>) {
                $( sections!(@required $($mark)? self prefix out $key); )*
            }
        }
    )*};
    (@field $onto:ident $key:ident) => { &mut $onto.$key };
    (@field $onto:ident $key:ident $into:ident) => { &mut $onto.$into };
    (@required required $file:ident $prefix:ident $out:ident $key:ident) => {
        if $file.$key.is_none() {
            $out.push(format!("{}{}", $prefix, stringify!($key)));
        }
    };
    (@required nested $file:ident $prefix:ident $out:ident $key:ident) => {
        $file.$key.missing(&format!("{}{}.", $prefix, stringify!($key)), $out)
    };
    (@required $file:ident $prefix:ident $out:ident $key:ident) => {};
}

sections! {
    PolicyFile => Policy {
        #[required] engine,
        runtime,
        #[nested] limits,
        #[required] network,
        #[nested] images,
        env,
        #[nested] pool,
        sessions,
        outputs,
        mounts,
        audit,
        packages,
        certificates,
        secrets,
    }
    LimitsFile => Limits {
        #[required] timeout,
        #[required] memory,
        #[required] cpus,
        #[required] pids,
        #[required] output,
        #[required] code,
        #[required] tmpfs,
    }
    ImagesFile => Images {
        #[required] python,
        #[required] javascript,
    }
    EnvFile => EnvPolicy { pass_through }
    PoolFile => PoolSettings {
        #[required] size,
        #[required] max_concurrent,
        preload,
    }
    PreloadFile => Preload { python, javascript }
    SessionsFile => SessionSettings { allowed, max, idle_timeout, max_lifetime, settle }
    OutputsFile => Outputs {
        files,
        figures,
        max_files,
        max_file_size,
        max_total_size,
        inline_text,
        export,
    }
    PackageIndexFile => Packages {
        python => python_index,
        javascript => javascript_registry,
    }
    RuleFile => Rule { category, action, message, any_language, python, javascript }
}

/// `packages:` has its lists, and `index:`, whose keys are fields of the same section.
impl Overlay<Packages> for PackagesFile {
    fn overlay(self, onto: &mut Packages, origin: &Origin) -> Result<(), PolicyError> {
        self.python.overlay(&mut onto.python, origin)?;
        self.javascript.overlay(&mut onto.javascript, origin)?;
        self.index.overlay(onto, origin)
    }
}

impl Overlay<Packages> for Option<PackagesFile> {
    fn overlay(self, onto: &mut Packages, origin: &Origin) -> Result<(), PolicyError> {
        self.map_or(Ok(()), |section| section.overlay(onto, origin))
    }
}

/// `secrets:`: the list given replaces the inherited one, each value read now from
/// the server's environment (a missing one is reported when the policy is served).
impl Overlay<Vec<super::secrets::Secret>> for Option<Vec<(String, super::secrets::SecretFile)>> {
    fn overlay(
        self,
        onto: &mut Vec<super::secrets::Secret>,
        origin: &Origin,
    ) -> Result<(), PolicyError> {
        if let Some(written) = self {
            let lookup = |name: &str| std::env::var(name).ok();
            *onto = super::secrets::declare(origin.label, origin.text, written, &lookup);
        }
        Ok(())
    }
}

/// `outputs.export`: the folder resolved against the file that names it.
impl Overlay<Option<Export>> for Option<ExportFile> {
    fn overlay(self, onto: &mut Option<Export>, origin: &Origin) -> Result<(), PolicyError> {
        if let Some(export) = self {
            *onto = Some(host_paths::export(
                origin.label,
                origin.text,
                origin.dir,
                export,
            )?);
        }
        Ok(())
    }
}

/// `audit:`: the log's file resolved against the file that names it.
impl Overlay<Option<Audit>> for Option<AuditFile> {
    fn overlay(self, onto: &mut Option<Audit>, origin: &Origin) -> Result<(), PolicyError> {
        if let Some(audit) = self {
            *onto = Some(host_paths::audit(
                origin.label,
                origin.text,
                origin.dir,
                audit,
            )?);
        }
        Ok(())
    }
}

/// `certificates:`: the bundle resolved against the file that names it, and read.
impl Overlay<Option<Certificates>> for Option<String> {
    fn overlay(self, onto: &mut Option<Certificates>, origin: &Origin) -> Result<(), PolicyError> {
        if let Some(path) = self {
            *onto = Some(host_paths::certificates(
                origin.label,
                origin.text,
                origin.dir,
                path,
            )?);
        }
        Ok(())
    }
}

/// `mounts:` replaces the inherited list whole; each source is resolved against the
/// file that names it (all of them, so that every bad one is reported).
impl Overlay<Vec<Mount>> for Option<Vec<MountFile>> {
    fn overlay(self, onto: &mut Vec<Mount>, origin: &Origin) -> Result<(), PolicyError> {
        let Some(mounts) = self else {
            return Ok(());
        };
        let (mounts, errors): (Vec<_>, Vec<_>) = mounts
            .into_iter()
            .map(|mount| host_paths::mount(origin.label, origin.text, origin.dir, mount))
            .partition(Result::is_ok);
        PolicyError::gather(errors.into_iter().filter_map(Result::err).collect())?;
        *onto = mounts.into_iter().filter_map(Result::ok).collect();
        Ok(())
    }
}

/// The policy a root file (one that extends nothing) is laid over: every value that
/// has a built-in default has it, and the file must give the rest.
pub fn root(file: &PolicyFile, label: &str) -> Result<Policy, PolicyError> {
    let mut missing = Vec::new();
    file.missing("", &mut missing);
    if let Some(key) = missing.first() {
        return Err(error(
            label,
            None,
            format!("`{key}` is required in a policy that extends nothing"),
        ));
    }
    Ok(Policy {
        name: String::new(),
        engine: Default::default(),
        runtime: None,
        limits: Default::default(),
        network: Default::default(),
        images: Default::default(),
        env: Default::default(),
        pool: Default::default(),
        sessions: Default::default(),
        outputs: Default::default(),
        mounts: Vec::new(),
        audit: None,
        packages: Default::default(),
        certificates: None,
        secrets: Vec::new(),
        rules: Vec::new(),
        files: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use crate::policy::{Policy, PolicySource};
    use serde_yaml::Value;

    /// Every key of every section, as a child file sets it, with where the value shows
    /// in the effective policy and what it must be there.
    const KEYS: &[(&str, &str, &str)] = &[
        ("engine: docker", "engine", "docker"),
        ("runtime: runsc", "runtime", "runsc"),
        ("limits: { timeout: 7s }", "limits.timeout", "7s"),
        ("limits: { memory: 7MiB }", "limits.memory", "7MiB"),
        ("limits: { cpus: 0.25 }", "limits.cpus", "0.25"),
        ("limits: { pids: 7 }", "limits.pids", "7"),
        ("limits: { output: 7KiB }", "limits.output", "7KiB"),
        ("limits: { code: 7KiB }", "limits.code", "7KiB"),
        ("limits: { tmpfs: 7MiB }", "limits.tmpfs", "7MiB"),
        ("network: bridge", "network", "bridge"),
        (
            "network: { allow: [pypi.org] }",
            "network",
            "{ allow: [pypi.org] }",
        ),
        ("images: { python: py:7 }", "images.python", "[py:7]"),
        (
            "images: { javascript: [js:7, js:8] }",
            "images.javascript",
            "[js:7, js:8]",
        ),
        (
            "env: { pass_through: [HOME] }",
            "env.pass_through",
            "[HOME]",
        ),
        ("pool: { size: 7 }", "pool.size", "7"),
        ("pool: { max_concurrent: 7 }", "pool.max_concurrent", "7"),
        (
            "pool: { preload: { python: [json] } }",
            "pool.preload.python",
            "[json]",
        ),
        (
            "pool: { preload: { javascript: [util] } }",
            "pool.preload.javascript",
            "[util]",
        ),
        ("sessions: { allowed: false }", "sessions.allowed", "false"),
        ("sessions: { max: 7 }", "sessions.max", "7"),
        (
            "sessions: { idle_timeout: 7s }",
            "sessions.idle_timeout",
            "7s",
        ),
        (
            "sessions: { max_lifetime: 7m }",
            "sessions.max_lifetime",
            "7m",
        ),
        ("outputs: { files: false }", "outputs.files", "false"),
        ("outputs: { figures: false }", "outputs.figures", "false"),
        ("outputs: { max_files: 7 }", "outputs.max_files", "7"),
        (
            "outputs: { max_file_size: 7KiB }",
            "outputs.max_file_size",
            "7KiB",
        ),
        (
            "outputs: { max_total_size: 7MiB }",
            "outputs.max_total_size",
            "7MiB",
        ),
        ("outputs: { inline_text: 7B }", "outputs.inline_text", "7B"),
        (
            "outputs: { export: { path: out, overwrite: true } }",
            "outputs.export",
            "{ path: out, overwrite: true }",
        ),
        (
            "mounts: [{ source: data, target: /data, rw: true }]",
            "mounts",
            "[{ source: data, target: /data, rw: true }]",
        ),
        (
            "audit: { path: audit.jsonl }",
            "audit",
            "{ path: audit.jsonl }",
        ),
        (
            "packages: { python: [numpy] }",
            "packages.python",
            "[numpy]",
        ),
        (
            "packages: { javascript: [lodash] }",
            "packages.javascript",
            "[lodash]",
        ),
        (
            "packages: { index: { python: 'https://mirror.test/simple' } }",
            "packages.python_index",
            "https://mirror.test/simple",
        ),
        (
            "packages: { index: { javascript: 'https://npm.test' } }",
            "packages.javascript_registry",
            "https://npm.test",
        ),
        ("certificates: ca.pem", "certificates", "ca.pem"),
        (
            "rules: [{ id: network, category: other }]",
            "rules.network.category",
            "other",
        ),
        (
            "rules: [{ id: network, action: off }]",
            "rules.network.action",
            "off",
        ),
        (
            "rules: [{ id: network, message: m }]",
            "rules.network.message",
            "m",
        ),
        (
            "rules: [{ id: network, any_language: { modules: [x] } }]",
            "rules.network.any_language",
            "{ modules: [x] }",
        ),
        (
            "rules: [{ id: network, python: { modules: [x] } }]",
            "rules.network.python",
            "{ modules: [x] }",
        ),
        (
            "rules: [{ id: network, javascript: { modules: [x] } }]",
            "rules.network.javascript",
            "{ modules: [x] }",
        ),
    ];

    /// The policy as YAML, nameless (the name says which file it came from), rules by id.
    fn shown(policy: &Policy) -> Value {
        let mut value = serde_yaml::to_value(policy).unwrap();
        let map = value.as_mapping_mut().unwrap();
        map.remove("name");
        let rules = map.remove("rules").unwrap();
        let by_id: serde_yaml::Mapping = rules
            .as_sequence()
            .unwrap()
            .iter()
            .map(|rule| (rule["id"].clone(), rule.clone()))
            .collect();
        map.insert("rules".into(), Value::Mapping(by_id));
        value
    }

    fn at<'a>(value: &'a mut Value, path: &str) -> &'a mut Value {
        path.split('.').fold(value, |value, key| {
            let map = value.as_mapping_mut().unwrap();
            if !map.contains_key(key) {
                map.insert(key.into(), Value::Null);
            }
            map.get_mut(key).unwrap()
        })
    }

    /// A key a child sets is the child's; every key it leaves out is the parent's; and a
    /// grandchild that sets nothing has the child's value.
    #[test]
    fn a_key_set_overrides_and_a_key_unset_inherits_in_every_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(
            dir.path().join("ca.pem"),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let parent = shown(&Policy::preset("default").unwrap());
        for (index, (yaml, path, expected)) in KEYS.iter().enumerate() {
            let child = dir.path().join(format!("child{index}.yaml"));
            std::fs::write(&child, format!("extends: default\n{yaml}\n")).unwrap();
            let loaded = PolicySource::File(child.clone())
                .load()
                .unwrap_or_else(|e| panic!("{yaml}: {e}"));
            let mut wanted = parent.clone();
            *at(&mut wanted, path) = serde_yaml::from_str(expected).unwrap();
            assert_ne!(wanted, parent, "{yaml}: the test value is the parent's");
            assert_eq!(shown(&loaded), wanted, "{yaml}");

            let grandchild = dir.path().join(format!("grandchild{index}.yaml"));
            std::fs::write(&grandchild, format!("extends: child{index}.yaml\n")).unwrap();
            let loaded = PolicySource::File(grandchild).load().unwrap();
            assert_eq!(shown(&loaded), wanted, "{yaml}, one file further");
        }
    }

    /// A root policy must give what has no built-in value, and is told which key.
    #[test]
    fn a_root_policy_must_give_the_keys_nothing_else_would() {
        let file: super::PolicyFile =
            serde_yaml::from_str("engine: auto\nnetwork: none\nlimits: { timeout: 1s }\n").unwrap();
        let error = super::root(&file, "root.yaml").unwrap_err();
        assert_eq!(
            error.to_string(),
            "root.yaml: `limits.memory` is required in a policy that extends nothing"
        );
        let mut missing = Vec::new();
        super::Required::missing(&file, "", &mut missing);
        assert!(
            missing.contains(&"images.python".to_string()),
            "{missing:?}"
        );
        assert!(missing.contains(&"pool.size".to_string()), "{missing:?}");
        assert!(
            !missing.iter().any(|key| key.starts_with("outputs")),
            "{missing:?}"
        );
    }
}
