//! `check` honours `# noqa: RULE-ID` / `// noqa: RULE-ID` (see [`crate::analysis::noqa`]):
//! a finding of that rule on the comment's line is left out of the report and counted
//! as suppressed. Only `check` does this. The server and `run` never look at these
//! comments, because there the code under judgement is an agent's, and a comment
//! would let it switch the policy off.
//!
//! A bare `# noqa` (no rule ids) suppresses nothing: code bases carry bare `noqa`
//! comments for other linters, and a security finding should not vanish under one. On
//! a line with a finding it earns a note saying what to write instead. So does an id
//! that is not a rule of the policy but is one typo away from one.

use crate::analysis::noqa::Noqa;
use crate::policy::Finding;

/// What the directives of one file did to its findings.
#[derive(Debug, Default)]
pub struct Applied {
    pub kept: Vec<Finding>,
    pub suppressed: usize,
    /// `line:column: text`, for the user (stderr).
    pub notes: Vec<String>,
}

/// Leaves out each finding whose line has a directive naming its rule.
pub fn apply(findings: Vec<Finding>, directives: &[Noqa], rule_ids: &[&str]) -> Applied {
    let mut applied = Applied::default();
    for finding in findings {
        let named = directives
            .iter()
            .any(|noqa| noqa.line == finding.line && noqa.rules.contains(&finding.rule));
        if named {
            applied.suppressed += 1;
        } else {
            applied.kept.push(finding);
        }
    }
    for noqa in directives {
        if noqa.rules.is_empty() {
            let mut rules: Vec<&str> = applied
                .kept
                .iter()
                .filter(|finding| finding.line == noqa.line)
                .map(|finding| finding.rule.as_str())
                .collect();
            rules.dedup();
            if !rules.is_empty() {
                applied.notes.push(format!(
                    "{}:{}: a `noqa` without rule ids suppresses nothing; to suppress this \
                     line's finding, write `noqa: {}`",
                    noqa.line,
                    noqa.column,
                    rules.join(", ")
                ));
            }
        }
        for id in &noqa.rules {
            if rule_ids.contains(&id.as_str()) {
                continue;
            }
            let nearest = rule_ids
                .iter()
                .map(|rule| (strsim::damerau_levenshtein(id, rule), *rule))
                .filter(|(distance, _)| *distance <= 2)
                .min();
            if let Some((_, rule)) = nearest {
                applied.notes.push(format!(
                    "{}:{}: `{id}` is not a rule of this policy; did you mean `{rule}`?",
                    noqa.line, noqa.column
                ));
            }
        }
    }
    applied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{noqa, Language};
    use crate::policy::{Policy, PolicyEngine};

    fn checked(code: &str) -> Applied {
        let engine = PolicyEngine::new(Policy::preset("default").unwrap());
        let findings = engine.check(Language::Python, code).unwrap().findings;
        let ids: Vec<&str> = engine
            .policy()
            .rules
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        apply(findings, &noqa::directives(Language::Python, code), &ids)
    }

    #[test]
    fn a_named_rule_is_suppressed_on_its_line_only() {
        let applied = checked("import os\nos.system('a')  # noqa: process-exec\nos.system('b')\n");
        assert_eq!(applied.suppressed, 1);
        let lines: Vec<u32> = applied.kept.iter().map(|f| f.line).collect();
        assert_eq!(lines, [3]);
        assert!(applied.notes.is_empty(), "{:?}", applied.notes);
    }

    #[test]
    fn another_rule_a_bare_noqa_and_a_typo_suppress_nothing_and_say_so() {
        let applied = checked(
            "import os\nos.system('a')  # noqa: network\nos.system('b')  # noqa\n\
             os.system('c')  # noqa: proces-exec, E501\n",
        );
        assert_eq!(applied.suppressed, 0);
        assert_eq!(applied.kept.len(), 3);
        assert_eq!(
            applied.notes,
            [
                "3:17: a `noqa` without rule ids suppresses nothing; to suppress this \
                 line's finding, write `noqa: process-exec`",
                "4:17: `proces-exec` is not a rule of this policy; did you mean `process-exec`?",
            ]
        );
    }
}
