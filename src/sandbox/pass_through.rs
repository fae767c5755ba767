//! Host environment variables handed to the sandbox: only those named, by the policy's
//! `env.pass_through` or by `--pass-through-env`, and only those the host has.

/// The variables to hand to every run: those named by the policy's `env.pass_through`
/// and by `--pass-through-env`, read from this process's environment.
pub fn pass_through(policy_names: &[String], cli_names: &[String]) -> Vec<(String, String)> {
    resolve(&names(policy_names, cli_names), |name| {
        std::env::var(name).ok()
    })
}

/// The names to pass: the policy's list, then the command line's, without duplicates
/// or empty entries, in that order.
fn names(policy_names: &[String], cli_names: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in policy_names.iter().chain(cli_names) {
        let name = name.trim();
        if !name.is_empty() && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// Reads each named variable with `lookup` (the host environment, in production). A
/// variable the host does not have is skipped with a warning, so a missing API key shows
/// up in the server log rather than as a confusing failure inside the snippet.
fn resolve(names: &[String], lookup: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut resolved = Vec::new();
    for name in names {
        match lookup(name) {
            Some(value) => resolved.push((name.clone(), value)),
            None => {
                tracing::warn!(variable = %name, "pass-through variable is not set on the host; skipped")
            }
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_a_union_in_order() {
        let policy = vec!["A".to_string(), "B".to_string()];
        let cli = vec!["B".to_string(), " C ".to_string(), String::new()];
        assert_eq!(names(&policy, &cli), vec!["A", "B", "C"]);
    }

    #[test]
    fn unset_variables_are_skipped() {
        let names = vec!["SET".to_string(), "UNSET".to_string()];
        let resolved = resolve(&names, |n| (n == "SET").then(|| "v".to_string()));
        assert_eq!(resolved, vec![("SET".to_string(), "v".to_string())]);
    }
}
