//! The policy in words: tool descriptions, annotations and server instructions built
//! from the loaded [`Policy`] at startup.
//!
//! A model writes compliant code first time only if it knows the rules before it
//! writes, so every limit and every denied construct the policy has is spelled out
//! here, in the description the client shows the model with each tool.

use crate::analysis::Language;
use crate::policy::{Action, Matcher, NetworkMode, Policy, Rule};
use crate::sandbox::environment::Environment;
use rmcp::model::ToolAnnotations;

/// How many names of a rule's matcher a description lists before "…".
const EXAMPLES_PER_RULE: usize = 10;

/// The description of `run_python_code` / `run_javascript_code` under `policy`; with
/// the image's `environment` once it is known (its packages, named).
pub fn run_tool_description(
    policy: &Policy,
    language: Language,
    env_names: &[String],
    environment: Option<&Environment>,
) -> String {
    let (display, how_to_print) = (language.spec().display, language.spec().print_hint);
    let mut text = format!(
        "Run a {display} program in a fresh, locked-down container and get back its exit code, \
         stdout and stderr. Show results with {how_to_print}; nothing is kept between calls \
         unless they name a session (below).\n\
         \n\
         The code is checked against the sandbox policy before it runs. If the policy denies \
         something, nothing runs and the error lists each finding with its rule, line, column \
         and message: rewrite the code without it and call again. Findings of rules that only \
         warn come back with a normal result.\n\n"
    );
    text.push_str(&sessions_in_words(policy));
    text.push_str(&limits_in_words(policy, language, env_names, environment));
    text.push_str(&rules_in_words(policy, language));
    text
}

/// The sentence a model needs to use sessions well, or to know there are none.
fn sessions_in_words(policy: &Policy) -> String {
    let sessions = &policy.sessions;
    if !sessions.allowed {
        return "Sessions are off under this policy: every call starts empty.\n\n".to_string();
    }
    format!(
        "To keep state between calls (load data once, then explore it), pass the same \
         `session` name on each call: variables, functions, imports and files stay, and each \
         call only needs its new lines. Up to {} sessions at once; one ends after {} without a \
         call, {} after it started, when a call times out or exits, or with end_session.\n\n",
        sessions.max, sessions.idle_timeout, sessions.max_lifetime
    )
}

/// The description of `end_session`.
pub fn end_session_description(policy: &Policy) -> String {
    format!(
        "End a session started by passing `session` to run_python_code or \
         run_javascript_code: its interpreter and container are removed, and the name can \
         start a new, empty session. Sessions also end on their own after {} idle.",
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
         it. Returns whether run_python_code / run_javascript_code would run it (`allowed`) and \
         every finding: rule, action (deny or warn), line, column and message. Read-only.\n",
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
    env_names: &[String],
    environment: Option<&Environment>,
) -> String {
    let limits = &policy.limits;
    let network = match &policy.network {
        NetworkMode::None => "none: there is no network at all, so HTTP requests, sockets, \
             DNS lookups and package downloads fail"
            .to_string(),
        NetworkMode::Bridge => "bridge: outbound connections are possible".to_string(),
        NetworkMode::Allow(_) => {
            let hosts = policy.allowed_hosts().unwrap_or_default();
            let hosts: Vec<&str> = hosts.iter().map(|h| h.written.as_str()).collect();
            format!(
                "only {} (ports 443 and 80 unless one is named), through the sandbox's HTTP \
                 proxy, which HTTP_PROXY and HTTPS_PROXY name: clients that honour them \
                 (Python's requests, urllib and httpx, pip, curl) reach those hosts. DNS does \
                 not resolve in the sandbox, other hosts and direct connections fail, and each \
                 refused attempt is listed in the result",
                hosts.join(", ")
            )
        }
    };
    let mut text = format!(
        "Sandbox policy `{name}`:\n\
         - Network: {network}.\n\
         - Time: {timeout} wall clock per run; the optional `timeout` argument (seconds) can \
           only lower it. A run past it is killed (timed_out: true).\n\
         - Memory: {memory}, no swap; going over kills the run (oom_killed: true). CPU: {cpus} \
           core(s). At most {pids} processes and threads.\n\
         - Files: only /sandbox (the working directory) and /tmp are writable, {tmpfs} each; \
           the rest of the filesystem is read-only{mounts}.{outputs}\n\
         - Output: the first {output} of stdout plus stderr is kept, the rest is cut \
           (truncated: true). Code: at most {code}.\n\
         - {image}\n",
        name = policy.name,
        mounts = mounts_in_words(policy),
        outputs = outputs_in_words(policy, language),
        timeout = limits.timeout,
        memory = limits.memory,
        cpus = limits.cpus,
        pids = limits.pids,
        tmpfs = limits.tmpfs,
        output = limits.output,
        code = limits.code,
        image = match environment {
            Some(environment) => environment.in_words(),
            None => format!(
                "Image: {}; only the packages it contains are available, and nothing can be \
                 installed at run time.",
                policy.images.for_language(language).join(" or ")
            ),
        },
    );
    if !env_names.is_empty() {
        text.push_str(&format!(
            "- Environment variables set for the code: {}.\n",
            env_names.join(", ")
        ));
    }
    text.push_str(&secrets_in_words(policy));
    text
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
        return " and the host's files are not there".to_string();
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

/// What comes back besides the output, and how to get it.
fn outputs_in_words(policy: &Policy, language: Language) -> String {
    let outputs = &policy.outputs;
    let mut parts = Vec::new();
    if outputs.files {
        parts.push(format!(
            " Files the program writes under /sandbox come back with the result (up to {} \
             files, {} each, {} in all; images as images, small text inline).",
            outputs.max_files, outputs.max_file_size, outputs.max_total_size
        ));
    }
    if outputs.figures && language == Language::Python {
        parts.push(
            " matplotlib figures (plt.show(), or left open at the end) come back as PNG \
             images: no need to save them."
                .to_string(),
        );
    }
    let (packages, _) = policy.packages.for_language(language);
    if !packages.is_empty() {
        parts.push(format!(
            " Packages this policy installs on request (the `packages` argument, by name; \
             installed once, then kept): {}.",
            packages.join(", ")
        ));
    }
    if let Some(export) = &outputs.export {
        parts.push(format!(
            " Returned files are also saved in the project's {} folder.",
            export.path
        ));
    }
    parts.concat()
}

fn rules_in_words(policy: &Policy, language: Language) -> String {
    let mut text = String::new();
    for (action, heading) in [
        (Action::Deny, "Refused (nothing runs):"),
        (
            Action::Ask,
            "Run only after the user approves that exact code, asked each time (without a \
             yes, nothing runs):",
        ),
        (
            Action::Warn,
            "Reported but allowed (the code runs, a warning comes back):",
        ),
    ] {
        let lines: Vec<String> = policy
            .rules
            .iter()
            .filter(|rule| rule.action == action)
            .filter_map(|rule| rule_in_words(rule, language))
            .collect();
        if !lines.is_empty() {
            text.push_str(heading);
            text.push('\n');
            for line in lines {
                text.push_str(&line);
                text.push('\n');
            }
        }
    }
    text
}

/// One rule as a bullet: its message, then what it matches in this language.
/// `None` when the rule matches nothing in this language.
fn rule_in_words(rule: &Rule, language: Language) -> Option<String> {
    let own = rule.matcher(language);
    let mut parts = Vec::new();
    for matcher in [&rule.any_language, own] {
        parts.extend(matcher_in_words(matcher));
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "- {} [{}]: {}.",
        rule.message,
        rule.id,
        parts.join("; ")
    ))
}

fn matcher_in_words(matcher: &Matcher) -> Vec<String> {
    let mut parts = Vec::new();
    if matcher.hosts_outside_allowlist {
        parts.push("under a network allowlist, URLs to hosts it does not list".to_string());
    }
    if !matcher.modules.is_empty() {
        parts.push(format!("importing {}", examples(&matcher.modules)));
    }
    if !matcher.references.is_empty() {
        parts.push(format!("using {}", examples(&matcher.references)));
    }
    if !matcher.dynamic.is_empty() {
        let kinds: Vec<String> = matcher.dynamic.iter().map(|k| k.0.clone()).collect();
        parts.push(format!(
            "dynamic access the checker cannot follow ({}), such as __import__/require or \
             getattr with a computed name",
            kinds.join(", ")
        ));
    }
    if let Some(dirs) = &matcher.paths_outside {
        parts.push(format!(
            "absolute file paths outside {}",
            dirs.join(" and ")
        ));
    }
    if matcher.unparseable {
        parts.push("code with syntax errors".to_string());
    }
    parts
}

fn examples(names: &[String]) -> String {
    let shown: Vec<&str> = names
        .iter()
        .take(EXAMPLES_PER_RULE)
        .map(String::as_str)
        .collect();
    let mut text = shown.join(", ");
    if names.len() > EXAMPLES_PER_RULE {
        text.push_str(", …");
    }
    text
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
