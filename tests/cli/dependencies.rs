//! What the dependency tree may contain: licenses that an Apache-2.0 binary can ship
//! under, and no crate whose own minimum Rust is newer than ours (`rust-version`).
//! Read from `cargo metadata --locked`, so it checks the exact tree Cargo.lock builds.

use serde_json::Value;
use std::process::Command;

crate::common::harness::tests! {
    sync every_shipped_crate_has_a_license_an_apache_binary_can_carry;
    sync the_license_expression_reader_refuses_copyleft_only_terms;
    sync no_dependency_needs_a_newer_rust_than_our_rust_version;
}

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata JSON")
}

/// Crates that the binary links (normal dependencies, transitively), by package id.
fn shipped(metadata: &Value) -> Vec<&Value> {
    let resolve = &metadata["resolve"];
    let root = resolve["root"].as_str().expect("a root package");
    let nodes = resolve["nodes"].as_array().expect("resolve nodes");
    let node = |id: &str| nodes.iter().find(|n| n["id"] == id).expect("node");
    let mut seen = vec![root.to_string()];
    let mut queue = vec![root.to_string()];
    while let Some(id) = queue.pop() {
        for dep in node(&id)["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|kind| kind["kind"].is_null());
            let dep_id = dep["pkg"].as_str().expect("pkg id").to_string();
            if normal && !seen.contains(&dep_id) {
                seen.push(dep_id.clone());
                queue.push(dep_id);
            }
        }
    }
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| seen.iter().any(|id| p["id"] == id.as_str()))
        .collect()
}

/// Licenses compatible with shipping inside an Apache-2.0 binary.
const ACCEPTED: &[&str] = &[
    "Apache-2.0",
    "Apache-2.0 WITH LLVM-exception",
    "MIT",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "Unlicense",
    "CC0-1.0",
    "BSL-1.0",
    "Unicode-3.0",
    "Unicode-DFS-2016",
];

/// True when the SPDX expression can be satisfied with accepted licenses. `OR` binds
/// looser than `AND`, parentheses group, and `/` is the old spelling of `OR`.
fn acceptable(expression: &str) -> bool {
    let spaced = expression
        .replace('/', " OR ")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let mut tokens: Vec<String> = spaced.split_whitespace().map(String::from).collect();
    // Glue `X WITH exception` into one token.
    while let Some(i) = tokens.iter().position(|t| *t == "WITH") {
        let glued = format!("{} WITH {}", tokens[i - 1], tokens[i + 1]);
        tokens.splice(i - 1..=i + 1, [glued]);
    }
    let mut at = 0;
    let ok = any_of(&tokens, &mut at);
    ok && at == tokens.len()
}

fn any_of(tokens: &[String], at: &mut usize) -> bool {
    let mut ok = all_of(tokens, at);
    while tokens.get(*at).is_some_and(|t| t == "OR") {
        *at += 1;
        ok |= all_of(tokens, at);
    }
    ok
}

fn all_of(tokens: &[String], at: &mut usize) -> bool {
    let mut ok = license(tokens, at);
    while tokens.get(*at).is_some_and(|t| t == "AND") {
        *at += 1;
        ok &= license(tokens, at);
    }
    ok
}

fn license(tokens: &[String], at: &mut usize) -> bool {
    let token = tokens.get(*at).map(String::as_str).unwrap_or_default();
    *at += 1;
    if token == "(" {
        let ok = any_of(tokens, at);
        let closed = tokens.get(*at).is_some_and(|t| t == ")");
        *at += 1;
        ok && closed
    } else {
        ACCEPTED.contains(&token)
    }
}

fn every_shipped_crate_has_a_license_an_apache_binary_can_carry() {
    let metadata = metadata();
    let packages = shipped(&metadata);
    assert!(packages.len() > 50, "the walk found too few crates");
    let refused: Vec<String> = packages
        .iter()
        .filter(|p| !p["license"].as_str().is_some_and(acceptable))
        .map(|p| format!("{} {}: {}", p["name"], p["version"], p["license"]))
        .collect();
    assert!(refused.is_empty(), "licenses not accepted: {refused:#?}");
    // The one this check was written for: malachite is LGPL-3.0-only.
    assert!(!packages.iter().any(|p| p["name"] == "malachite"));
}

fn the_license_expression_reader_refuses_copyleft_only_terms() {
    assert!(acceptable("MIT OR Apache-2.0"));
    assert!(acceptable("(MIT OR Apache-2.0) AND Unicode-3.0"));
    assert!(acceptable(
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT"
    ));
    assert!(acceptable("MIT/Apache-2.0"));
    assert!(acceptable("MIT OR Apache-2.0 OR LGPL-2.1-or-later"));
    assert!(!acceptable("LGPL-3.0-only"));
    assert!(!acceptable("MIT AND GPL-3.0"));
}

fn version(text: &str) -> (u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn no_dependency_needs_a_newer_rust_than_our_rust_version() {
    let metadata = metadata();
    let ours = version(env!("CARGO_PKG_RUST_VERSION"));
    let newer: Vec<String> = shipped(&metadata)
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, p["rust_version"].as_str()?)))
        .filter(|(_, needed)| version(needed) > ours)
        .map(|(name, needed)| format!("{name} needs {needed}"))
        .collect();
    assert!(
        newer.is_empty(),
        "rust-version {} is below what dependencies need: {newer:?}",
        env!("CARGO_PKG_RUST_VERSION")
    );
}
