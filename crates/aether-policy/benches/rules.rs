//! How long the operator's rules take to judge one call: 200 varied rules, most of them about
//! other tools, agents, paths and hosts, against a `read_file` and a `run_shell` call.
//!
//! `cargo bench -p aether-policy --bench rules -- --quick`

use std::fmt::Write;
use std::hint::black_box;

use aether_policy::ArgumentKinds;
use aether_policy::rules::{CallFacts, RuleSet};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// 200 rules of eight kinds, then the two that decide the benchmarked calls: every deny above
/// them is tried (and fails) first, which is the slow path.
fn rule_file() -> String {
    let mut text = String::from("rules:\n");
    for i in 0..200 {
        let rule = match i % 8 {
            0 => format!("match: {{ tool: 'upstream{i}__*' }}\n    action: always_deny"),
            1 => format!(
                "match: {{ tool: [tool_{i}, 'other_{i}_*'], agent: [agent_{i}] }}\n    action: ask_user"
            ),
            2 => format!("match: {{ tool: '*_file', team: team_{i} }}\n    action: always_deny"),
            3 => format!(
                "match: {{ tool: run_shell, arg_pattern: 'forbidden_{i}|secret_token_{i}' }}\n    action: always_deny"
            ),
            4 => format!("match: {{ path: 'private_{i}/**' }}\n    action: always_deny"),
            5 => format!(
                "match: {{ tool: fetch, url_host: '*.blocked{i}.example' }}\n    action: always_deny"
            ),
            6 => format!(
                "match: {{ tool: run_shell, args: {{ command: '^danger_{i}\\b' }} }}\n    action: ask_user"
            ),
            _ => format!(
                "match: {{ tool: 'read_*', agent: [agent_x{i}], path: 'docs_{i}/**' }}\n    action: always_allow"
            ),
        };
        writeln!(text, "  - name: rule-{i}\n    {rule}").unwrap();
    }
    text.push_str(
        "  - name: allow-source-reads\n    match: { tool: read_file, path: 'src/**' }\n    action: always_allow\n",
    );
    text.push_str("  - name: ask-shell\n    match: { tool: run_shell }\n    action: ask_user\n");
    text
}

fn bench(c: &mut Criterion) {
    let text = rule_file();
    c.bench_function("parse 202 rules", |b| {
        b.iter(|| RuleSet::parse(black_box(&text)).unwrap())
    });
    let rules = RuleSet::parse(&text).unwrap();

    let read = json!({"root": "ws", "path": "src/rules.rs", "offset": 0, "limit": 400});
    let reads = ArgumentKinds::paths(&["path"]);
    let read_paths: Vec<String> = reads
        .paths_in(&read)
        .1
        .iter()
        .map(|p| p.to_string())
        .collect();
    let read_facts = CallFacts {
        tool: "read_file",
        agent: "coder",
        team: Some("core"),
        arguments: &read,
        paths: &read_paths,
        dirs: &[],
        hosts: &reads.hosts_in(&read),
    };
    assert_eq!(
        rules.evaluate(&read_facts).unwrap().rule,
        "allow-source-reads"
    );
    c.bench_function("evaluate read_file", |b| {
        b.iter(|| rules.evaluate(black_box(&read_facts)).map(|v| v.action))
    });

    let shell = json!({
        "command": "cargo test -p aether-policy -- --nocapture",
        "cwd": "crates/aether-policy",
        "env": {"RUST_LOG": "debug", "CARGO_TERM_COLOR": "never"},
        "timeout_seconds": 120,
    });
    let shell_paths: Vec<String> = ArgumentKinds::paths(&["cwd"])
        .paths_in(&shell)
        .1
        .iter()
        .map(|p| p.to_string())
        .collect();
    let shell_facts = CallFacts {
        tool: "run_shell",
        agent: "coder",
        team: Some("core"),
        arguments: &shell,
        paths: &shell_paths,
        dirs: &[],
        hosts: &[],
    };
    assert_eq!(rules.evaluate(&shell_facts).unwrap().rule, "ask-shell");
    c.bench_function("evaluate run_shell", |b| {
        b.iter(|| rules.evaluate(black_box(&shell_facts)).map(|v| v.action))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
