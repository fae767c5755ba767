//! What each language's image offers: the interpreter's version and the packages
//! installed, so that the tool descriptions can tell a model "numpy 2.2 is there"
//! before it writes `pip install`, and the `environments` resource can list them all.
//!
//! Probed once per image and instance, by the setup container that fills the image's
//! guard volume anyway (so it costs no container of its own), and kept with the guard
//! files. An image may name its headline packages in the label [`PACKAGES_LABEL`]
//! (the images `code-sandbox-mcp image build` makes do); those are the ones a
//! description names, with their versions, when they are installed. Without the label
//! every installed package is a headline one, up to a count.

use crate::analysis::Language;
use serde::Serialize;

pub use super::images::PACKAGES_LABEL;

/// Shell commands, run in the setup container after the guard files are in place, that
/// print `python-version=X.Y.Z` and `package=<language> <name> <version>` lines.
/// Failures print nothing: an image without Python simply has no Python packages.
pub const PROBE_SCRIPT: &str = r#"if command -v python3 >/dev/null; then python3 -c "
import sys
print('python-version=%d.%d.%d' % sys.version_info[:3])
try:
    from importlib import metadata
    for d in metadata.distributions():
        name = d.metadata.get('Name')
        if name:
            print('package=python %s %s' % (name, d.version))
except Exception:
    pass
" 2>/dev/null; fi; if command -v node >/dev/null; then node -e "
const fs = require('fs');
const dirs = (process.env.NODE_PATH || '').split(':').concat(['/usr/share/nodejs', '/usr/lib/nodejs', '/usr/lib/node_modules', '/usr/local/lib/node_modules']);
const seen = new Set();
for (const dir of dirs.filter(Boolean)) {
  let names = [];
  try { names = fs.readdirSync(dir); } catch { continue; }
  for (const top of names) {
    let list = [top];
    if (top.startsWith('@')) { try { list = fs.readdirSync(dir + '/' + top).map((n) => top + '/' + n); } catch { continue; } }
    for (const name of list) {
      if (seen.has(name)) continue;
      try {
        const meta = JSON.parse(fs.readFileSync(dir + '/' + name + '/package.json', 'utf8'));
        seen.add(name);
        console.log('package=javascript ' + name + ' ' + (meta.version || '?'));
      } catch {}
    }
  }
}
" 2>/dev/null; fi"#;

/// How many packages a description names when the image names no headline ones.
const HEADLINE_WITHOUT_LABEL: usize = 30;
/// Installed with the interpreter, never what a model is looking for.
const TOOLING: &[&str] = &["pip", "setuptools", "wheel", "npm", "corepack"];

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Package {
    pub name: String,
    pub version: String,
}

/// One language's image, as a model should know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Environment {
    pub language: Language,
    pub image: String,
    /// `Python 3.13.5`, `Node v20.19.2`; empty when the probe did not say.
    pub interpreter: String,
    /// The packages worth naming (the image's label's, or all, up to a count).
    pub headline: Vec<Package>,
    /// Everything installed, by name.
    pub packages: Vec<Package>,
}

impl Environment {
    /// Reads the setup container's output for `language` in `image`, whose
    /// [`PACKAGES_LABEL`] is `label`.
    pub fn parse(text: &str, language: Language, image: &str, label: Option<&str>) -> Environment {
        let mut interpreter = String::new();
        let mut packages = Vec::new();
        for line in text.lines() {
            match (language, line.split_once('=')) {
                (Language::Python, Some(("python-version", version))) => {
                    interpreter = format!("Python {}", version.trim())
                }
                (Language::JavaScript, Some(("node-version", version))) if !version.is_empty() => {
                    interpreter = format!("Node {}", version.trim())
                }
                (_, Some(("package", rest))) => {
                    let mut parts = rest.split_whitespace();
                    if let (Some(lang), Some(name), Some(version)) =
                        (parts.next(), parts.next(), parts.next())
                    {
                        if lang == language.name() {
                            packages.push(Package {
                                name: name.to_string(),
                                version: version.to_string(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        packages.sort_by_key(|p| p.name.to_ascii_lowercase());
        packages.dedup_by(|a, b| a.name.eq_ignore_ascii_case(&b.name));
        let headline = match label {
            Some(label) => label
                .split_whitespace()
                .filter_map(|wanted| {
                    packages
                        .iter()
                        .find(|p| same_package(&p.name, wanted))
                        .cloned()
                })
                .collect(),
            None => packages
                .iter()
                .filter(|p| !TOOLING.contains(&p.name.as_str()))
                .take(HEADLINE_WITHOUT_LABEL)
                .cloned()
                .collect(),
        };
        Environment {
            language,
            image: image.to_string(),
            interpreter,
            headline,
            packages,
        }
    }

    /// One line for a tool description: the image, its interpreter, its packages.
    pub fn in_words(&self) -> String {
        let interpreter = if self.interpreter.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.interpreter)
        };
        let packages = if self.headline.is_empty() {
            "the standard library only".to_string()
        } else {
            let names: Vec<String> = self
                .headline
                .iter()
                .map(|p| format!("{} {}", p.name, p.version))
                .collect();
            let more = self.packages.len().saturating_sub(self.headline.len());
            let more = if more > 0 {
                format!(" (and {more} more: resource sandbox://environments)")
            } else {
                String::new()
            };
            format!("{}{more}", names.join(", "))
        };
        format!("Image {}{interpreter}: {packages}.", self.image)
    }
}

/// Python distribution names compare without case, `-` and `_` apart
/// (`scikit-learn`, `scikit_learn`); the label may name `sklearn`-style import names
/// for the packages whose distribution is called otherwise.
fn same_package(installed: &str, wanted: &str) -> bool {
    let fold = |name: &str| name.to_ascii_lowercase().replace('_', "-");
    let aliases: &[(&str, &str)] = &[
        ("sklearn", "scikit-learn"),
        ("pil", "pillow"),
        ("bs4", "beautifulsoup4"),
    ];
    let wanted = fold(wanted);
    let wanted = aliases
        .iter()
        .find(|(alias, _)| *alias == wanted)
        .map_or(wanted.as_str(), |(_, name)| name)
        .to_string();
    fold(installed) == wanted
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBED: &str = "python3=/usr/bin/python3\nnode=/usr/bin/node\nnode-version=v20.19.2\n\
        python-version=3.13.5\npackage=python numpy 2.2.4\npackage=python pandas 2.2.3\n\
        package=python scikit-learn 1.4.2\npackage=python pip 25.1\n\
        package=javascript lodash 4.17.21\npackage=javascript npm 10.0.0\n";

    #[test]
    fn the_label_picks_the_headline_and_versions_come_from_the_probe() {
        let python = Environment::parse(
            PROBED,
            Language::Python,
            "img:1",
            Some("numpy sklearn requests"),
        );
        assert_eq!(python.interpreter, "Python 3.13.5");
        let names: Vec<&str> = python.headline.iter().map(|p| p.name.as_str()).collect();
        // `requests` is named by the label but not installed: not claimed.
        assert_eq!(names, ["numpy", "scikit-learn"]);
        assert_eq!(python.packages.len(), 4);
        let words = python.in_words();
        assert!(
            words.contains("numpy 2.2.4, scikit-learn 1.4.2 (and 2 more"),
            "{words}"
        );
    }

    #[test]
    fn without_a_label_every_package_but_the_tooling_is_named() {
        let javascript = Environment::parse(PROBED, Language::JavaScript, "img:1", None);
        assert_eq!(javascript.interpreter, "Node v20.19.2");
        assert_eq!(
            javascript.headline,
            vec![Package {
                name: "lodash".into(),
                version: "4.17.21".into()
            }]
        );
        let bare = Environment::parse(
            "python-version=3.12.1\n",
            Language::Python,
            "python:3.12-slim",
            None,
        );
        assert!(
            bare.in_words().contains("the standard library only"),
            "{}",
            bare.in_words()
        );
    }
}
