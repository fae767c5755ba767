//! Package installs (`packages:` in the policy, the `packages` argument of the run
//! tools): the set a run asks for is installed in a step of its own, before the run,
//! into an engine volume named by the set (language, image, index, specs). The run
//! mounts it read-only. The install step's container has no network but the egress
//! proxy, whose list for it is the package index alone; the run keeps its own network
//! policy. A set already installed (by this server, or by an earlier one: the volume
//! keeps a marker) costs nothing more.
//!
//! The image's own installer runs inside its interpreter, under the bootstrap (for its
//! relay to the proxy), without starting processes or running package code: pip with
//! `--only-binary=:all:` into `/opt/packages/python` (`PYTHONPATH`), npm with
//! `--ignore-scripts` into `/opt/packages/javascript` (`NODE_PATH`, which `require`
//! reads; ES `import` does not).

use super::layout::{PACKAGES, RELAY_PORT};
use crate::analysis::Language;
use crate::policy::allowlist::HostRule;

/// The name of the volume of a set, from its key (a sha256, hex).
pub fn volume_name(key: &str) -> String {
    format!("code-sandbox-mcp-packages-{}", &key[..16.min(key.len())])
}

/// The key of a set: the same language, image, index and specs make the same key.
pub fn key(language: Language, image: &str, index: &str, specs: &[String]) -> String {
    crate::digest::sha256_hex(
        format!(
            "{}\n{image}\n{index}\n{}",
            language.name(),
            specs.join("\n")
        )
        .as_bytes(),
    )
}

/// The hosts the install step may reach: the index's, and for PyPI its file host.
pub fn index_hosts(indexes: &[&str]) -> Vec<HostRule> {
    let mut hosts = Vec::new();
    for index in indexes {
        if let Some((host, port)) = crate::analysis::urls::host_and_port(index) {
            if let Ok(rule) = HostRule::parse(&format!("{host}:{port}")) {
                hosts.push(rule);
            }
            if host == "pypi.org" {
                hosts.extend(HostRule::parse("files.pythonhosted.org:443"));
            }
        }
    }
    hosts
}

/// The variables a run with the set needs to find it.
pub fn run_env(language: Language) -> Vec<(String, String)> {
    match language {
        Language::Python => vec![("PYTHONPATH".into(), format!("{PACKAGES}/python"))],
        Language::JavaScript => vec![(
            "NODE_PATH".into(),
            format!("{PACKAGES}/javascript/node_modules"),
        )],
    }
}

/// The program the install step runs, or why the language has none yet.
pub fn install_program(
    language: Language,
    index: &str,
    specs: &[String],
) -> Result<String, String> {
    match language {
        Language::Python => {
            let mut args = vec![
                "install",
                "--quiet",
                "--no-input",
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--only-binary=:all:",
                "--break-system-packages",
                "--target",
            ]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
            args.push(format!("{PACKAGES}/python"));
            args.extend(["--index-url".to_string(), index.to_string()]);
            if index.starts_with("http://") {
                if let Some((host, _)) = crate::analysis::urls::host_and_port(index) {
                    args.extend(["--trusted-host".to_string(), host]);
                }
            }
            args.extend(specs.iter().cloned());
            let args = serde_json::to_string(&args).expect("strings serialize");
            Ok(format!(
                "import os, runpy, sys, tempfile\n\
                 marker = '{PACKAGES}/.complete'\n\
                 if not os.path.exists(marker):\n\
                 \x20   os.makedirs('{PACKAGES}/.tmp', exist_ok=True)\n\
                 \x20   tempfile.tempdir = os.environ['TMPDIR'] = '{PACKAGES}/.tmp'\n\
                 \x20   sys.argv = ['pip'] + {args}\n\
                 \x20   try:\n\
                 \x20       runpy.run_module('pip', run_name='__main__', alter_sys=True)\n\
                 \x20   except SystemExit as end:\n\
                 \x20       if end.code not in (0, None):\n\
                 \x20           raise\n\
                 \x20   open(marker, 'w').close()\n\
                 print('installed')\n"
            ))
        }
        Language::JavaScript => {
            let proxy = format!("http://127.0.0.1:{RELAY_PORT}");
            let mut args: Vec<String> = vec![
                "install".into(),
                "--prefix".into(),
                format!("{PACKAGES}/javascript"),
                "--ignore-scripts".into(),
                "--no-audit".into(),
                "--no-fund".into(),
                "--no-update-notifier".into(),
                "--loglevel=error".into(),
                "--registry".into(),
                index.to_string(),
                "--proxy".into(),
                proxy.clone(),
                "--https-proxy".into(),
                proxy,
                "--cache".into(),
                format!("{PACKAGES}/.npm-cache"),
            ];
            args.extend(specs.iter().cloned());
            let args = serde_json::to_string(&args).expect("strings serialize");
            // npm runs in this interpreter (no process is started), as its own command
            // line would run it; the marker is written once it has exited well.
            Ok(format!(
                "const fs = require('fs');\n\
                 const marker = '{PACKAGES}/.complete';\n\
                 if (fs.existsSync(marker)) {{\n\
                 \x20 console.log('installed');\n\
                 }} else {{\n\
                 \x20 fs.mkdirSync('{PACKAGES}/javascript', {{ recursive: true }});\n\
                 \x20 process.on('exit', (code) => {{\n\
                 \x20   if ((process.exitCode ?? code ?? 0) == 0) {{ fs.writeFileSync(marker, ''); console.log('installed'); }}\n\
                 \x20 }});\n\
                 \x20 const cli = ['/usr/share/nodejs', '/usr/share/node_modules', '/usr/lib/node_modules', '/usr/local/lib/node_modules']\n\
                 \x20   .map((dir) => dir + '/npm/lib/cli.js').find((file) => fs.existsSync(file));\n\
                 \x20 if (!cli) throw new Error('this image has no npm, which installing packages needs');\n\
                 \x20 process.argv = [process.execPath, 'npm', ...{args}];\n\
                 \x20 require(cli)(process);\n\
                 }}\n"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_has_one_key_and_its_index_is_all_the_install_reaches() {
        let specs = vec!["numpy".to_string(), "pandas>=2".to_string()];
        let a = key(Language::Python, "img:1", "https://pypi.org/simple", &specs);
        assert_eq!(
            a,
            key(Language::Python, "img:1", "https://pypi.org/simple", &specs)
        );
        assert_ne!(
            a,
            key(Language::Python, "img:2", "https://pypi.org/simple", &specs)
        );
        assert_eq!(
            volume_name(&a).len(),
            "code-sandbox-mcp-packages-".len() + 16
        );
        let hosts = index_hosts(&["https://pypi.org/simple", "http://localhost:8080/simple"]);
        let allowed = |host: &str, port| crate::policy::allowlist::allows(&hosts, host, port);
        assert!(allowed("pypi.org", 443) && allowed("files.pythonhosted.org", 443));
        assert!(
            allowed("localhost", 8080) && !allowed("localhost", 80) && !allowed("example.com", 443)
        );
        let program =
            install_program(Language::Python, "http://localhost:8080/simple", &specs).unwrap();
        assert!(
            program.contains("\"--trusted-host\",\"localhost\""),
            "{program}"
        );
        assert!(program.contains("\"pandas>=2\""), "{program}");
    }
}
