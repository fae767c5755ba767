//! `packages:`: the packages a run may ask for (`packages` argument of the run tools),
//! by name with an optional version requirement (`numpy`, `"pandas>=2"`, `lodash@^4`).
//! A request names packages; each must be on the list, and is installed as the list
//! writes it. Anything else is refused before anything runs.

/// The package name of a spec: `pandas` of `pandas>=2`, `@types/node` of
/// `@types/node@20`. `None` when it does not start with one.
pub fn name_of(spec: &str) -> Option<&str> {
    let spec = spec.trim();
    let scoped = spec.starts_with('@');
    let body = if scoped { &spec[1..] } else { spec };
    let mut end = 0;
    let mut slash = false;
    for (at, c) in body.char_indices() {
        if c.is_ascii_alphanumeric()
            || (at > 0 && "._-".contains(c))
            || (scoped && c == '/' && !slash)
        {
            slash |= c == '/';
            end = at + c.len_utf8();
        } else {
            break;
        }
    }
    let name = &spec[..end + usize::from(scoped)];
    let valid = end > 0 && !name.ends_with('/') && (!scoped || slash);
    valid.then_some(name)
}

/// Whether `spec` is a name with, at most, a version requirement after it: no spaces,
/// nothing a command line would read as an option or a path.
pub fn valid_spec(spec: &str) -> Result<(), String> {
    let name =
        name_of(spec).ok_or_else(|| format!("`{spec}` does not start with a package name"))?;
    let rest = &spec[name.len()..];
    let requirement = rest.is_empty()
        || (rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "<>=!~^@.*,+-".contains(c))
            && rest.starts_with(['<', '>', '=', '!', '~', '^', '@']));
    if requirement {
        Ok(())
    } else {
        Err(format!(
            "`{spec}`: only a version requirement may follow the name (`>=2`, `==1.0`, `@^4`)"
        ))
    }
}

/// Names compare as the package indexes compare them: without case, `-`, `_` and `.`
/// alike.
fn normalized(name: &str) -> String {
    name.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// The specs to install for `requested` (names, or specs written exactly as the list
/// writes them), or why one is refused.
pub fn resolve(requested: &[String], allowed: &[String], key: &str) -> Result<Vec<String>, String> {
    let mut specs: Vec<String> = Vec::new();
    for wanted in requested {
        let name = name_of(wanted).map(normalized);
        let found = allowed.iter().find(|spec| {
            name_of(spec).map(normalized) == name
                && (name_of(wanted) == Some(wanted.trim()) || spec.trim() == wanted.trim())
        });
        match found {
            Some(spec) if !specs.contains(spec) => specs.push(spec.clone()),
            Some(_) => {}
            None if allowed.is_empty() => {
                return Err(format!(
                "`{wanted}` is not allowed: the policy allows no packages (its `{key}` is empty)"
            ))
            }
            None => {
                return Err(format!(
                    "`{wanted}` is not allowed: the policy's `{key}` allows {}",
                    allowed.join(", ")
                ))
            }
        }
    }
    specs.sort();
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_requirements() {
        assert_eq!(name_of("pandas>=2"), Some("pandas"));
        assert_eq!(name_of("scikit_learn==1.4"), Some("scikit_learn"));
        assert_eq!(name_of("@types/node@20"), Some("@types/node"));
        assert_eq!(name_of("lodash@^4"), Some("lodash"));
        assert_eq!(name_of("-e"), None);
        assert_eq!(name_of("@scope"), None);
        assert!(valid_spec("pandas>=2").is_ok());
        assert!(valid_spec("lodash@^4.17").is_ok());
        assert!(valid_spec("numpy --index-url http://evil").is_err());
        assert!(valid_spec("./local.whl").is_err());
        assert!(valid_spec("pkg@file:/etc").is_err());
    }

    #[test]
    fn a_request_is_held_to_the_list() {
        let allowed = vec!["numpy".to_string(), "pandas>=2".to_string()];
        let key = "packages.python";
        assert_eq!(
            resolve(
                &["Pandas".into(), "numpy".into(), "numpy".into()],
                &allowed,
                key
            )
            .unwrap(),
            ["numpy", "pandas>=2"]
        );
        assert_eq!(
            resolve(&["pandas>=2".into()], &allowed, key).unwrap(),
            ["pandas>=2"]
        );
        assert!(
            resolve(&["pandas<2".into()], &allowed, key).is_err(),
            "not the listed requirement"
        );
        let error = resolve(&["requests".into()], &allowed, key).unwrap_err();
        assert!(error.contains("allows numpy, pandas>=2"), "{error}");
        assert!(resolve(&["x".into()], &[], key)
            .unwrap_err()
            .contains("allows no packages"));
    }
}
