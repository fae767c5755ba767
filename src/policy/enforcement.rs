//! What a policy asks the run-time layers of one language to hold: its blocking rules
//! as those layers read them (the names, modules and dynamic kinds each refuses), and
//! which blocking rule, if any, stands for a whole capability that a layer outside the
//! interpreter enforces (no processes: the kernel floor and Node's permission model;
//! no code from strings: Node's code-generation switch).
//!
//! The capability questions are asked of the engine itself ([`PolicyEngine::blocking_rule`]),
//! so a rule written with globs (`subprocess.*`, `os.exec*`) is understood here exactly
//! as the static check understands it.

use super::{PolicyEngine, Rule};
use crate::analysis::{FactKind, Language};
use serde::Serialize;

/// One blocking rule (`deny`, or `ask` unanswered) as a run-time layer reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnforcedRule {
    pub id: String,
    pub message: String,
    pub modules: Vec<String>,
    pub references: Vec<String>,
    pub dynamic: Vec<String>,
    /// Library functions allowed to evaluate strings on the program's behalf.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evaluators: Vec<String>,
}

/// A rule named as the reason a whole layer is on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleRef {
    pub id: String,
    pub message: String,
}

impl RuleRef {
    fn of(rule: &Rule) -> RuleRef {
        RuleRef {
            id: rule.id.clone(),
            message: rule.message.clone(),
        }
    }
}

/// The run-time side of a policy, for one language.
#[derive(Debug, Clone, PartialEq)]
pub struct Enforcement {
    pub language: Language,
    /// The blocking rules with something a run-time layer can see.
    pub rules: Vec<EnforcedRule>,
    /// The blocking rule that denies starting processes, if any.
    pub no_processes: Option<RuleRef>,
    /// JavaScript: the blocking rule that denies code from strings (`eval`,
    /// `Function`), if any.
    pub no_codegen: Option<RuleRef>,
    /// The blocking rule that holds the filesystem to some folders (`paths_outside`),
    /// with those folders, if any: the kernel then limits reading to them too.
    pub filesystem: Option<(RuleRef, Vec<String>)>,
}

/// The names whose denial means "no processes", per language.
fn process_names(language: Language) -> Vec<FactKind> {
    let reference = |name: &str| FactKind::Reference {
        name: name.into(),
        module_value: false,
    };
    match language {
        Language::Python => vec![
            reference("os.system"),
            reference("subprocess.Popen"),
            reference("os.execv"),
            reference("os.fork"),
            reference("os.posix_spawn"),
        ],
        Language::JavaScript => vec![
            FactKind::Import {
                module: "child_process".into(),
            },
            reference("child_process.spawn"),
        ],
    }
}

/// The names whose denial means "no code from strings".
fn codegen_names() -> Vec<FactKind> {
    ["eval", "Function"]
        .into_iter()
        .map(|name| FactKind::Reference {
            name: name.into(),
            module_value: false,
        })
        .collect()
}

impl Enforcement {
    /// What `engine`'s policy asks of `language`'s run-time layers.
    pub fn new(engine: &PolicyEngine, language: Language) -> Enforcement {
        let policy = engine.policy();
        let rules = policy
            .rules
            .iter()
            .filter(|rule| rule.action.blocks())
            .filter_map(|rule| enforced_rule(rule, language))
            .collect();
        let no_processes = engine
            .blocking_rule(language, &process_names(language))
            .map(RuleRef::of);
        let no_codegen = (language == Language::JavaScript)
            .then(|| engine.blocking_rule(language, &codegen_names()))
            .flatten()
            .map(RuleRef::of);
        let filesystem = policy
            .rules
            .iter()
            .filter(|rule| rule.action.blocks())
            .find_map(|rule| {
                let inside: Vec<String> = [&rule.any_language, rule.matcher(language)]
                    .iter()
                    .filter_map(|m| m.paths_outside.clone())
                    .flatten()
                    .collect();
                let named = rule.any_language.paths_outside.is_some()
                    || rule.matcher(language).paths_outside.is_some();
                named.then(|| (RuleRef::of(rule), inside))
            });
        Enforcement {
            language,
            rules,
            no_processes,
            no_codegen,
            filesystem,
        }
    }

    /// This enforcement without the rules in `approved` (rule ids a person approved
    /// for one run), and without the capabilities that stand for them.
    pub fn without(&self, approved: &[String]) -> Enforcement {
        let kept = |rule: &Option<RuleRef>| rule.clone().filter(|r| !approved.contains(&r.id));
        Enforcement {
            language: self.language,
            rules: self
                .rules
                .iter()
                .filter(|rule| !approved.contains(&rule.id))
                .cloned()
                .collect(),
            no_processes: kept(&self.no_processes),
            no_codegen: kept(&self.no_codegen),
            filesystem: self
                .filesystem
                .clone()
                .filter(|(rule, _)| !approved.contains(&rule.id)),
        }
    }
}

/// A blocking rule as the layers of `language` read it, or `None` when it matches
/// nothing that can be seen at run time (a parse-error rule, a rule for another
/// language).
fn enforced_rule(rule: &Rule, language: Language) -> Option<EnforcedRule> {
    let matchers = [&rule.any_language, rule.matcher(language)];
    let collect = |pick: fn(&super::Matcher) -> Vec<String>| -> Vec<String> {
        matchers.iter().flat_map(|m| pick(m)).collect()
    };
    let modules = collect(|m| m.modules.clone());
    let references = collect(|m| m.references.clone());
    let dynamic = collect(|m| m.dynamic.iter().map(|d| d.0.clone()).collect());
    let evaluators = collect(|m| m.evaluators.clone());
    if modules.is_empty() && references.is_empty() && dynamic.is_empty() {
        return None;
    }
    Some(EnforcedRule {
        id: rule.id.clone(),
        message: rule.message.clone(),
        modules,
        references,
        dynamic,
        evaluators,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Action, Policy};

    #[test]
    fn the_default_policy_denies_processes_and_codegen_by_its_own_rules() {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        let python = Enforcement::new(&engine, Language::Python);
        assert_eq!(python.no_processes.unwrap().id, "process-exec");
        assert_eq!(python.no_codegen, None);
        let node = Enforcement::new(&engine, Language::JavaScript);
        assert_eq!(node.no_processes.unwrap().id, "process-exec");
        assert_eq!(node.no_codegen.unwrap().id, "dynamic-code");
        assert!(node.rules.iter().any(|rule| rule.id == "process-exec"));
        // The filesystem rule warns by default: reading is not limited.
        assert_eq!(python.filesystem, None);
        let strict = PolicyEngine::new(Policy::preset("strict").unwrap());
        let (rule, inside) = Enforcement::new(&strict, Language::Python)
            .filesystem
            .unwrap();
        assert_eq!(rule.id, "filesystem-outside-sandbox");
        assert_eq!(inside, ["/sandbox", "/tmp"]);
    }

    #[test]
    fn a_rule_at_warn_enforces_nothing() {
        let mut policy = Policy::preset("default").unwrap();
        for rule in &mut policy.rules {
            rule.action = Action::Warn;
        }
        let enforcement = Enforcement::new(&PolicyEngine::new(policy), Language::Python);
        assert!(enforcement.rules.is_empty());
        assert_eq!(enforcement.no_processes, None);
    }

    #[test]
    fn an_approved_rule_is_left_out_with_its_capability() {
        let mut policy = Policy::preset("default").unwrap();
        for rule in &mut policy.rules {
            if rule.id == "process-exec" {
                rule.action = Action::Ask;
            }
        }
        let enforcement = Enforcement::new(&PolicyEngine::new(policy), Language::Python);
        assert_eq!(
            enforcement.no_processes.as_ref().unwrap().id,
            "process-exec"
        );
        let relaxed = enforcement.without(&["process-exec".to_string()]);
        assert_eq!(relaxed.no_processes, None);
        assert!(!relaxed.rules.iter().any(|rule| rule.id == "process-exec"));
        assert!(relaxed.rules.iter().any(|rule| rule.id == "dynamic-code"));
    }
}
