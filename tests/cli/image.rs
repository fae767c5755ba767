//! `code-sandbox-mcp image list|build` against the real engine, and the library images
//! it builds: every package an image's label promises imports when a snippet is run the
//! way a user runs one (the binary's `run`, the default policy and its run-time guard,
//! the unprivileged sandbox user, no network).

use crate::common::{self, binary, text};
use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::sandbox::images::{
    built_image, definition_digest, DEFINITION_LABEL, PACKAGES_LABEL,
};
use serde_json::Value;
use std::process::{Command, Output};

crate::common::harness::tests! {
    sync image_list_says_what_the_engine_has needs common::DOCKER;
    sync an_unreachable_engine_says_which_socket_and_exits_125;
    sync building_images_that_are_up_to_date_builds_nothing needs common::DOCKER;
    sync the_python_image_imports_every_package_it_lists needs common::DOCKER;
    sync the_javascript_image_requires_every_package_it_lists needs common::DOCKER;
}

/// `image ARGS…` with the default preset, so that no project file changes the engine.
fn image(args: &[&str]) -> Output {
    binary()
        .arg("image")
        .args(args)
        .args(["--policy", "default"])
        .output()
        .unwrap()
}

/// What `docker image inspect` says about `image`, or `None` when there is no such image.
fn inspect(image: &str) -> Option<Value> {
    let output = Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .expect("docker image inspect");
    if !output.status.success() {
        return None;
    }
    let found: Value = serde_json::from_slice(&output.stdout).expect("inspect JSON");
    Some(found[0].clone())
}

/// The packages the image's label lists.
fn packages(image: &str) -> Vec<String> {
    let found = inspect(image).expect("the image exists");
    found["Config"]["Labels"][PACKAGES_LABEL]
        .as_str()
        .expect("the image lists its packages")
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Runs `code` as a file called `name` with a policy that is the default one but for
/// its images, which are the library images; returns its stdout, once it exited 0.
fn run_in_library_image(name: &str, code: &str) -> String {
    let policy = common::scratch_file(
        &format!("library-images-for-{name}.yaml"),
        format!(
            "version: 1\nextends: default\nimages:\n  python: {}\n  javascript: {}\n",
            built_image(Language::Python),
            built_image(Language::JavaScript)
        )
        .as_bytes(),
    );
    let file = common::scratch_file(name, code.as_bytes());
    let output = binary()
        .arg("run")
        .arg(&file)
        .arg("--policy")
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

fn image_list_says_what_the_engine_has() {
    let output = image(&["list", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let listed: Vec<Value> = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(listed.len(), Language::ALL.len());
    for (entry, language) in listed.iter().zip(Language::ALL) {
        let name = built_image(language);
        assert_eq!(entry["language"], language.name());
        assert_eq!(entry["image"], name);
        match inspect(name) {
            None => {
                assert_eq!(entry["present"], false, "{entry}");
                assert_eq!(entry["current"], false, "{entry}");
                assert!(entry["id"].is_null() && entry["size"].is_null(), "{entry}");
            }
            Some(found) => {
                assert_eq!(entry["present"], true, "{entry}");
                assert_eq!(entry["id"], found["Id"], "{entry}");
                assert_eq!(entry["size"], found["Size"], "{entry}");
                assert_eq!(entry["created"], found["Created"], "{entry}");
                let labels = &found["Config"]["Labels"];
                let current = labels[DEFINITION_LABEL] == definition_digest(language).as_str();
                assert_eq!(entry["current"], current, "{entry}");
                let listed: Vec<&str> = labels[PACKAGES_LABEL]
                    .as_str()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                assert_eq!(entry["packages"], serde_json::json!(listed), "{entry}");
            }
        }
    }

    // For people: a line per language, naming its image and whether it is there.
    let output = image(&["status"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), Language::ALL.len(), "{stdout}");
    for (line, language) in lines.iter().zip(Language::ALL) {
        let name = built_image(language);
        assert!(line.starts_with(language.name()), "{line}");
        assert!(line.contains(name), "{line}");
        let present = inspect(name).is_some();
        assert_eq!(line.contains(" created "), present, "{line}");
        assert_eq!(line.contains("missing"), !present, "{line}");
    }
}

fn an_unreachable_engine_says_which_socket_and_exits_125() {
    let output = binary()
        .args(["image", "list", "--engine", "docker"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(125));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("unix:///nonexistent/docker.sock"),
        "{stderr}"
    );
    assert!(stderr.contains("start Docker"), "{stderr}");
    assert_eq!(text(&output.stdout), "");
}

fn building_images_that_are_up_to_date_builds_nothing() {
    for language in Language::ALL {
        common::library_image(language);
    }
    let before: Vec<Value> = Language::ALL
        .iter()
        .map(|l| inspect(built_image(*l)).unwrap()["Id"].clone())
        .collect();
    let output = image(&["build", "--base", common::LOCAL_IMAGE]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for (language, id) in Language::ALL.into_iter().zip(before) {
        let name = built_image(language);
        assert!(
            stdout.contains(&format!("{name} is up to date (")),
            "{stdout}"
        );
        assert_eq!(inspect(name).unwrap()["Id"], id, "{name} was kept");
    }
}

fn the_python_image_imports_every_package_it_lists() {
    common::library_image(Language::Python);
    let packages = packages(built_image(Language::Python));
    for expected in [
        "numpy",
        "pandas",
        "matplotlib",
        "sklearn",
        "scipy",
        "requests",
        "PIL",
    ] {
        assert!(packages.iter().any(|p| p == expected), "{packages:?}");
    }
    let mut code: String = packages.iter().map(|p| format!("import {p}\n")).collect();
    // A plot drawn without a display, saved where the run may write.
    code.push_str(
        "import os\n\
         import matplotlib.pyplot as plt\n\
         plt.plot([1, 2, 3], [2, 4, 5])\n\
         plt.savefig('plot.png')\n\
         print('imported')\n\
         print('plot', os.path.getsize('plot.png') > 0)\n\
         print('user', os.getuid())\n",
    );
    let stdout = run_in_library_image("imports.py", &code);
    assert_eq!(stdout, "imported\nplot True\nuser 65534\n");
}

fn the_javascript_image_requires_every_package_it_lists() {
    common::library_image(Language::JavaScript);
    let packages = packages(built_image(Language::JavaScript));
    for expected in ["lodash", "axios", "yaml", "d3"] {
        assert!(packages.iter().any(|p| p == expected), "{packages:?}");
    }
    let code: String = packages
        .iter()
        .map(|p| format!("console.log({p:?}, typeof require({p:?}));\n"))
        .collect();
    let stdout = run_in_library_image("requires.js", &code);
    assert_eq!(stdout.lines().count(), packages.len(), "{stdout}");
    for line in stdout.lines() {
        assert!(
            line.ends_with(" function") || line.ends_with(" object"),
            "{stdout}"
        );
    }

    // ES modules find them too (through the image's /node_modules).
    let stdout = run_in_library_image(
        "imports.mjs",
        "import _ from 'lodash';\nimport YAML from 'yaml';\nimport d3 from 'd3';\n\
         console.log(_.chunk([1, 2, 3], 2).length, YAML.parse('a: 1').a, d3.sum([1, 2]));\n",
    );
    assert_eq!(stdout, "2 1 3\n");
}
