//! The policy in words: tool descriptions, annotations and server instructions built
//! from the loaded [`Policy`] at startup.
//!
//! A model writes compliant code first time only if it knows the rules before it
//! writes, so every limit and every denied construct the policy has is spelled out
//! here, in the description the client shows the model with each tool.

use crate::analysis::Language;
use crate::policy::{Action, NetworkMode, Policy, Rule};
use crate::sandbox::environment::Environment;
use rmcp::model::ToolAnnotations;

/// How many names of a rule's matcher a description lists before "…".
const EXAMPLES_PER_RULE: usize = 4;

/// The description of `run_python_code` / `run_javascript_code` under `policy`; with
/// the image's `environment` once it is known (its packages, named).
///
/// A few lines, because every agent carries them on every turn: what the tool does,
/// the limits, what comes back, the image and its packages, the rules by name with a
/// few examples each. The resources `sandbox://policy` and `sandbox://environments`
/// carry the rest (every rule's full list, every package).
pub fn run_tool_description(
    policy: &Policy,
    language: Language,
    env_names: &[String],
    environment: Option<&Environment>,
) -> String {
    let (display, how_to_print) = (language.spec().display, language.spec().print_hint);
    let mut text = format!(
        "Run a {display} program in a fresh, locked-down container; returns exit code, stdout \
         and stderr (show results with {how_to_print}). Checked first against the sandbox \
         policy `{}`: denied code does not run, and its findings (rule, line) say what to \
         rewrite.\n",
        policy.name
    );
    text.push_str(&limits_in_words(policy, language, environment));
    text.push_str(&sessions_in_words(policy));
    if !env_names.is_empty() {
        text.push_str(&format!(
            "- Environment variables set: {}.\n",
            env_names.join(", ")
        ));
    }
    text.push_str(&rules_in_words(policy, language));
    text.push_str("Every rule and limit: resource sandbox://policy.");
    text
}

/// The line a model needs to use sessions well, or to know there are none.
fn sessions_in_words(policy: &Policy) -> String {
    let sessions = &policy.sessions;
    if !sessions.allowed {
        return "- Sessions are off: every call starts empty.\n".to_string();
    }
    format!(
        "- State: calls share nothing unless they pass the same `session` name (up to {}; \
         one ends after {} idle, {} in all, or with end_session).\n",
        sessions.max, sessions.idle_timeout, sessions.max_lifetime
    )
}

/// The description of `end_session`.
pub fn end_session_description(policy: &Policy) -> String {
    format!(
        "End a session (the `session` of the run tools): its interpreter and container are \
         removed; the name can start a new one. Sessions also end after {} idle.",
        policy.sessions.idle_timeout
    )
}

/// Annotations of `end_session`: it removes the session's state, on the host's engine.
pub fn end_session_annotations() -> ToolAnnotations {
    ToolAnnotations::with_title("End a sandbox session")
        .read_only(false)
        .destructive(true)
        .idempotent(true)
        .open_world(false)
}

/// The description of `check_code`.
pub fn check_tool_description(policy: &Policy) -> String {
    let mut text = format!(
        "Check a Python or JavaScript snippet against the sandbox policy `{}` without running \
         it: whether the run tools would run it (`allowed`), and every finding (rule, action, \
         line, message).\n",
        policy.name
    );
    let denied: Vec<&str> = policy
        .rules
        .iter()
        .filter(|r| r.action == Action::Deny)
        .map(|r| r.id.as_str())
        .collect();
    if !denied.is_empty() {
        text.push_str(&format!("Rules that deny: {}.\n", denied.join(", ")));
    }
    text
}

/// Instructions sent with `initialize`: what the server is, in two sentences.
pub fn server_instructions(policy: &Policy) -> String {
    format!(
        "Runs Python and JavaScript snippets in disposable containers on this machine, after \
         checking them against the sandbox policy `{}` (network {}, {} memory, {} per run). \
         Each tool description lists what the policy allows; a denied snippet returns its \
         findings so it can be rewritten.",
        policy.name,
        policy.network.as_str(),
        policy.limits.memory,
        policy.limits.timeout
    )
}

/// Annotations of the run tools: they change nothing on the host (the container is
/// thrown away), and they reach the outside world only when the policy gives a network.
pub fn run_tool_annotations(policy: &Policy, language: Language) -> ToolAnnotations {
    let title = language.spec().run_tool_title;
    ToolAnnotations::with_title(title)
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(policy.network != NetworkMode::None)
}

/// Annotations of `check_code`: it only reads the snippet.
pub fn check_tool_annotations() -> ToolAnnotations {
    ToolAnnotations::with_title("Check code against the sandbox policy")
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn limits_in_words(
    policy: &Policy,
    language: Language,
    environment: Option<&Environment>,
) -> String {
    let limits = &policy.limits;
    let network = match &policy.network {
        NetworkMode::None => "none (no HTTP, sockets or DNS)".to_string(),
        NetworkMode::Bridge => "the engine's network: outbound connections work".to_string(),
        NetworkMode::Allow(_) => {
            let hosts = policy.allowed_hosts().unwrap_or_default();
            let hosts: Vec<&str> = hosts.iter().map(|h| h.written.as_str()).collect();
            format!(
                "only {}, through the proxy HTTP_PROXY/HTTPS_PROXY name (requests, urllib, \
                 httpx, pip and fetch-with-agent honour it); no DNS, other hosts fail and are \
                 listed in the result",
                hosts.join(", ")
            )
        }
    };
    let image = match environment {
        Some(environment) => environment.in_words(),
        None => format!(
            "Image {} (its packages: resource sandbox://environments).",
            policy.images.for_language(language).join(" or ")
        ),
    };
    format!(
        "- Limits: {timeout} per run (`timeout` can only lower it), {memory} memory, {cpus} \
         CPU, {pids} processes, {output} output, {code} code.\n\
         - Network: {network}.\n\
         - Files: /sandbox (the working directory) and /tmp are writable, {tmpfs} \
         each{mounts}.{outputs}\n\
         - {image} {packages}\n{secrets}",
        timeout = limits.timeout,
        memory = limits.memory,
        cpus = limits.cpus,
        pids = limits.pids,
        output = limits.output,
        code = limits.code,
        tmpfs = limits.tmpfs,
        mounts = mounts_in_words(policy),
        outputs = outputs_in_words(policy, language),
        packages = packages_in_words(policy, language),
        secrets = secrets_in_words(policy),
    )
}

/// Whether anything can be installed, and what: true under every policy. Code cannot
/// install anything itself (no process can start, the root filesystem is read-only);
/// a policy may list packages the `packages` argument installs before the run.
fn packages_in_words(policy: &Policy, language: Language) -> String {
    let (packages, _) = policy.packages.for_language(language);
    if packages.is_empty() {
        "Code cannot install packages (no pip or npm at run time).".to_string()
    } else {
        format!(
            "Code cannot install packages itself; the `packages` argument installs any of these \
             before the run (once, then kept): {}.",
            packages.join(", ")
        )
    }
}

/// The secrets by name (never a value), where each may go, and how they work.
fn secrets_in_words(policy: &Policy) -> String {
    if policy.secrets.is_empty() {
        return String::new();
    }
    let each: Vec<String> = policy
        .secrets
        .iter()
        .map(|secret| {
            let hosts: Vec<&str> = secret.hosts.iter().map(|h| h.written.as_str()).collect();
            format!("{} (for {})", secret.name, hosts.join(", "))
        })
        .collect();
    format!(
        "- Secrets: {}. Read them from the environment and send them as usual (a header, \
         or the URL's query) in HTTPS requests through the proxy: the variable holds a \
         placeholder, which the proxy replaces with the real value only in requests to \
         the secret's hosts. Printing one shows the placeholder; sending it anywhere else, \
         or over plain HTTP, is refused and listed in the result (secret_refused).\n",
        each.join(", ")
    )
}

/// The host folders the sandbox sees, or that it sees none.
fn mounts_in_words(policy: &Policy) -> String {
    if policy.mounts.is_empty() {
        return String::new();
    }
    let mounts: Vec<String> = policy
        .mounts
        .iter()
        .map(|mount| {
            let access = if mount.rw { "read-write" } else { "read-only" };
            format!(
                "{} ({access}, the project's {})",
                mount.target, mount.source
            )
        })
        .collect();
    format!("; the project's files are at {}", mounts.join(", "))
}

/// What comes back besides the output.
fn outputs_in_words(policy: &Policy, language: Language) -> String {
    let outputs = &policy.outputs;
    let figures = outputs.figures && language == Language::Python;
    let mut text = match (outputs.files, figures) {
        (true, true) => " Files written in /sandbox and matplotlib figures (no need to save \
                         them) come back with the result."
            .to_string(),
        (true, false) => " Files written in /sandbox come back with the result.".to_string(),
        (false, true) => " matplotlib figures come back with the result.".to_string(),
        (false, false) => String::new(),
    };
    if let Some(export) = &outputs.export {
        text.push_str(&format!(
            " They are also saved in the project's {}.",
            export.path
        ));
    }
    text
}

/// The rules that deny or ask, by id with a few examples each; those that only warn,
/// by id.
fn rules_in_words(policy: &Policy, language: Language) -> String {
    let mut text = String::new();
    for (action, heading) in [
        (Action::Deny, "Refused"),
        (
            Action::Ask,
            "Run only after the user approves the exact code",
        ),
    ] {
        let rules: Vec<String> = policy
            .rules
            .iter()
            .filter(|rule| rule.action == action)
            .filter_map(|rule| rule_in_words(rule, language))
            .collect();
        if !rules.is_empty() {
            text.push_str(&format!("{heading}: {}.\n", rules.join("; ")));
        }
    }
    let warned: Vec<&str> = policy
        .rules
        .iter()
        .filter(|rule| rule.action == Action::Warn)
        .filter(|rule| rule_in_words(rule, language).is_some())
        .map(|rule| rule.id.as_str())
        .collect();
    if !warned.is_empty() {
        text.push_str(&format!("Runs, with a warning: {}.\n", warned.join(", ")));
    }
    text
}

/// One rule as `id (examples)`; `None` when it matches nothing in this language.
fn rule_in_words(rule: &Rule, language: Language) -> Option<String> {
    let mut names = Vec::new();
    let mut other = Vec::new();
    for matcher in [&rule.any_language, rule.matcher(language)] {
        names.extend(matcher.modules.iter().cloned());
        names.extend(matcher.references.iter().cloned());
        if !matcher.dynamic.is_empty() {
            other.push("computed imports or attributes".to_string());
        }
        if matcher.paths_outside.is_some() {
            other.push("absolute paths outside the sandbox".to_string());
        }
        if matcher.unparseable {
            other.push("syntax errors".to_string());
        }
        if matcher.hosts_outside_allowlist {
            other.push("URLs to hosts not allowed".to_string());
        }
    }
    if names.is_empty() && other.is_empty() {
        return None;
    }
    let more = names.len() > EXAMPLES_PER_RULE;
    let mut shown: Vec<String> = names.into_iter().take(EXAMPLES_PER_RULE).collect();
    if more {
        shown.push("…".to_string());
    }
    shown.extend(other);
    Some(format!("{} ({})", rule.id, shown.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_state_the_limits_and_the_denied_rules() {
        let policy = Policy::preset("default").unwrap();
        let text = run_tool_description(&policy, Language::Python, &["API_KEY".to_string()], None);
        assert!(text.contains("Network: none"), "{text}");
        assert!(text.contains(&policy.limits.memory.to_string()), "{text}");
        assert!(text.contains(&policy.limits.timeout.to_string()), "{text}");
        assert!(text.contains("process-exec"), "{text}");
        assert!(text.contains("subprocess"), "{text}");
        assert!(text.contains("API_KEY"), "{text}");
        let js = run_tool_description(&policy, Language::JavaScript, &[], None);
        assert!(js.contains("child_process"), "{js}");
        assert!(!js.contains("Environment variables"), "{js}");
    }

    #[test]
    fn what_can_be_installed_is_said_truly_under_each_policy() {
        let mut policy = Policy::preset("default").unwrap();
        let probed = Environment::parse(
            "python-version=3.13.5\npackage=python numpy 2.2.4\n",
            Language::Python,
            "img:1",
            None,
        );
        for environment in [None, Some(&probed)] {
            let text = run_tool_description(&policy, Language::Python, &[], environment);
            assert!(text.contains("Code cannot install packages"), "{text}");
            assert!(!text.contains("`packages` argument"), "{text}");
        }
        policy.packages.python = vec!["tinypkg".to_string()];
        for environment in [None, Some(&probed)] {
            let text = run_tool_description(&policy, Language::Python, &[], environment);
            assert!(
                text.contains("the `packages` argument installs any of these before the run")
                    && text.contains("tinypkg"),
                "{text}"
            );
            assert!(!text.contains("cannot install packages (no pip"), "{text}");
            assert!(
                !text.to_lowercase().contains("nothing can be installed"),
                "{text}"
            );
        }
        // JavaScript has no packages under this policy, and says so.
        let js = run_tool_description(&policy, Language::JavaScript, &[], None);
        assert!(js.contains("Code cannot install packages"), "{js}");
    }

    #[test]
    fn run_tools_are_closed_world_without_a_network() {
        let mut policy = Policy::preset("default").unwrap();
        assert_eq!(
            run_tool_annotations(&policy, Language::Python).open_world_hint,
            Some(false)
        );
        policy.network = NetworkMode::Bridge;
        assert_eq!(
            run_tool_annotations(&policy, Language::Python).open_world_hint,
            Some(true)
        );
        assert_eq!(check_tool_annotations().read_only_hint, Some(true));
    }
}
