//! How long the checker takes on a 1,000-line file, per language: parse, resolve and
//! match against the default policy, as the server does for every call.
//! Run with `cargo bench --bench analyze`.

use code_sandbox_mcp::analysis::Language;
use code_sandbox_mcp::policy::{Policy, PolicyEngine};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

/// A block of ordinary Python (with a few calls the policy cares about), renamed per copy.
fn python_block(n: usize) -> String {
    format!(
        r#"
import json, math, os
from collections import defaultdict as dd_{n}
from pathlib import Path


class Account{n}:
    """A bank account with a running balance."""

    def __init__(self, owner, balance=0.0):
        self.owner = owner
        self.balance = balance
        self.history = []

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError(f"invalid amount {{amount}}")
        self.balance += amount
        self.history.append(("deposit", amount))
        return self.balance

    def report(self):
        totals = dd_{n}(float)
        for kind, amount in self.history:
            totals[kind] += amount
        return json.dumps({{"owner": self.owner, "totals": totals}})


def stats_{n}(values):
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return {{"mean": mean, "sd": math.sqrt(var), "max": max(values)}}


def files_{n}(root="data"):
    out = [p.name for p in Path(root).glob("*.csv") if p.stat().st_size > 0]
    size = os.path.getsize(os.path.join(root, "index.json")) if out else 0
    return sorted(out), size


result_{n} = stats_{n}([x * 1.5 for x in range(100)])
print(Account{n}("ann").deposit(10), result_{n}["mean"], files_{n}())
"#
    )
}

/// A block of ordinary JavaScript, renamed per copy.
fn javascript_block(n: usize) -> String {
    format!(
        r#"
const path{n} = require('path');
const {{ readFileSync: read{n} }} = require('fs');

class Cart{n} {{
  constructor(owner) {{
    this.owner = owner;
    this.items = new Map();
  }}

  add(sku, price, qty = 1) {{
    if (price < 0) throw new Error(`bad price ${{price}}`);
    const line = this.items.get(sku) ?? {{ price, qty: 0 }};
    line.qty += qty;
    this.items.set(sku, line);
    return this;
  }}

  total() {{
    let sum = 0;
    for (const [, {{ price, qty }}] of this.items) sum += price * qty;
    return Math.round(sum * 100) / 100;
  }}
}}

function summarize{n}(values) {{
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  const sorted = [...values].sort((a, b) => a - b);
  return {{ mean, median: sorted[Math.floor(sorted.length / 2)], max: sorted.at(-1) }};
}}

async function load{n}(name) {{
  const file = path{n}.join('data', name);
  const text = await Promise.resolve(read{n}(file, 'utf8'));
  return JSON.parse(text).filter((row) => row.active).map((row) => row.id);
}}

const cart{n} = new Cart{n}('ann').add('a', 2.5).add('b', 1, 3);
console.log(cart{n}.total(), summarize{n}([1, 2, 3, 4]), typeof load{n});
"#
    )
}

/// Repeats blocks until the text has at least `lines` lines.
fn thousand_lines(block: fn(usize) -> String) -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.lines().count() < 1_000 {
        text.push_str(&block(n));
        n += 1;
    }
    text
}

fn bench(c: &mut Criterion) {
    let engine = PolicyEngine::new(Policy::preset("default").expect("default preset"));
    let mut group = c.benchmark_group("check_1000_lines");
    for (language, source) in [
        (Language::Python, thousand_lines(python_block)),
        (Language::JavaScript, thousand_lines(javascript_block)),
    ] {
        let report = engine.check(language, &source).expect("within limits");
        assert!(
            !report.denied(),
            "the bench input is ordinary code: {:?}",
            report.findings
        );
        group.throughput(Throughput::Bytes(source.len() as u64));
        group.bench_function(language.name(), |b| {
            b.iter(|| engine.check(language, black_box(&source)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
