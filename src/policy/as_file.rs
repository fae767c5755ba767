//! The effective policy written back as a policy file: what `policy show` prints. It
//! must be a file `policy validate` accepts and that loads to the same policy, so it
//! uses the file's own keys where the effective policy names a value differently
//! (`packages.index.python` for the effective `python_index`), leaves out what is not
//! a key (the policy's name), and says its version.

use super::schema::Policy;
use serde_yaml::{Mapping, Value};

/// `policy` as the YAML of a policy file that extends nothing but `default`, every
/// value spelled out.
pub fn to_file_yaml(policy: &Policy) -> String {
    let Value::Mapping(effective) = serde_yaml::to_value(policy).expect("a policy serializes")
    else {
        unreachable!("a policy serializes to a mapping")
    };
    let mut file = Mapping::new();
    file.insert("version".into(), 1.into());
    for (key, mut value) in effective {
        match key.as_str() {
            Some("name") => continue,
            Some("packages") => index_as_written(&mut value),
            _ => {}
        }
        file.insert(key, value);
    }
    serde_yaml::to_string(&file).expect("a mapping serializes")
}

/// `packages.python_index` and `packages.javascript_registry` as the file writes them:
/// `packages.index.python` and `packages.index.javascript`.
fn index_as_written(packages: &mut Value) {
    let Some(packages) = packages.as_mapping_mut() else {
        return;
    };
    let mut index = Mapping::new();
    for (effective, written) in [
        ("python_index", "python"),
        ("javascript_registry", "javascript"),
    ] {
        if let Some(url) = packages.remove(effective) {
            index.insert(written.into(), url);
        }
    }
    packages.insert("index".into(), Value::Mapping(index));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PolicySource, PRESETS};

    /// Each preset, written back and read again, is the same policy.
    #[test]
    fn every_preset_written_back_loads_to_the_same_policy() {
        let dir = tempfile::tempdir().unwrap();
        for (name, _) in PRESETS {
            let preset = Policy::preset(name).unwrap();
            let written = to_file_yaml(&preset);
            let path = dir.path().join(format!("{name}.yaml"));
            std::fs::write(&path, &written).unwrap();
            let again = PolicySource::File(path)
                .load()
                .unwrap_or_else(|e| panic!("{name}: {e}\n{written}"));
            assert_eq!(to_file_yaml(&again), written, "{name}");
        }
    }
}
