//! How long the shell review takes before a `run_shell` call: a short everyday command, a
//! longer script with a here-document, substitutions and a loop, and a command that asks.
//!
//! `cargo bench -p aether-policy --bench shell -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use aether_screens::shell::review;
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let short = "cargo test --workspace 2>&1 | tail -20";
    let script = "set -e\nfor f in $(git ls-files '*.rs'); do\n  if grep -q 'TODO' \"$f\"; then\n    echo \"$f: $(grep -c TODO \"$f\")\"\n  fi\ndone\ncat > /tmp/notes.md <<'EOF'\n# notes\n$(not run)\nEOF\ntimeout 30 env RUST_LOG=debug cargo build --release && ls -la target/release | head";
    let asks = "find . -name '*.o' -print0 | xargs -0 rm -f";
    assert!(review(short).is_none() && review(script).is_none() && review(asks).is_some());
    c.bench_function("review a short command", |b| {
        b.iter(|| review(black_box(short)))
    });
    c.bench_function("review a 10-line script", |b| {
        b.iter(|| review(black_box(script)))
    });
    c.bench_function("review a command that asks", |b| {
        b.iter(|| review(black_box(asks)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
