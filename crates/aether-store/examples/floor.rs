//! The store's floor: what a governed call's two durable writes cost with nothing else around
//! them. Each "call" commits an admission receipt and then an audit row, as the pipeline does
//! (alone on the calling thread at concurrency 1, through the writer's group commit above it),
//! on a single-threaded runtime like `aether mcp-serve`'s. No MCP, no tool, no checks.
//!
//! ```sh
//! cargo run --release -p aether-store --example floor -- DIR CONCURRENCY CALLS [bare]
//! ```
//!
//! `bare` drops the audit's four search indexes (by tool, outcome, call id and time; they keep
//! audit search flat at 10 million rows) first, to show what they cost each call.
//!
//! Prints one JSON line: calls per second, p50 and p99 of a call's two commits in µs, and the
//! process's CPU time per call (user + system, all threads) in µs. `scripts/bench.py --only
//! floors` runs it beside the peers whose targets it bounds.

use std::sync::Arc;
use std::time::Instant;

use aether_store::{AdmissionReceipt, AuditEvent, Store};

/// The process's CPU time (user + system, all threads) in µs, from `/proc/self/stat` (whose
/// clock ticks are 10 ms: runs of a second or more keep that under 1 %).
fn cpu_us() -> i64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let ticks: i64 = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|f| f.parse::<i64>().expect("ticks"))
        .sum();
    ticks * 10_000
}

async fn one_call(store: &Store, n: u64, alone: bool) {
    let call_id = format!("floor-{}-{n:012}", std::process::id());
    let at_us = n as i64;
    let receipt = AdmissionReceipt {
        call_id: call_id.clone(),
        at_us,
        session: "floor".into(),
        transport: "stdio".into(),
        agent: "default".into(),
        tool: "read_file".into(),
        definition: format!("sha256:{}", "d".repeat(64)),
        arguments: format!("sha256:{}", "a".repeat(64)),
        decision: "allowed".into(),
    };
    let admitted = if alone {
        store.admit_alone(receipt).await
    } else {
        store.admit(receipt).await
    };
    admitted.expect("receipt");
    // A Standard-tier row of a 4 KiB read: the arguments whole, the result summarized.
    let event = AuditEvent {
        at_us,
        call_id,
        session: "floor".into(),
        transport: "stdio".into(),
        agent: "default".into(),
        team: None,
        project: None,
        tool: "read_file".into(),
        tier: "standard".into(),
        outcome: "ok".into(),
        step: None,
        rule: None,
        reason: None,
        definition: Some(format!("sha256:{}", "d".repeat(64))),
        arguments_digest: format!("sha256:{}", "a".repeat(64)),
        arguments: r#"{"root":"ws","path":"fixed/file_4k.txt"}"#.into(),
        result: "x".repeat(512),
        duration_us: 100,
    };
    let audited = if alone {
        store.audit_alone(event).await
    } else {
        store.audit(event).await
    };
    audited.expect("audit");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, concurrency, calls, bare) = match &args[..] {
        [dir, c, n] => (dir, c, n, false),
        [dir, c, n, bare] if bare == "bare" => (dir, c, n, true),
        _ => {
            eprintln!("usage: floor DIR CONCURRENCY CALLS [bare]");
            std::process::exit(2);
        }
    };
    let concurrency: u64 = concurrency.parse().expect("CONCURRENCY is a number");
    let calls: u64 = calls.parse().expect("CALLS is a number");
    let path = std::path::Path::new(dir).join("floor.db");
    if bare {
        drop(Store::open_sqlite(&path).expect("store"));
        rusqlite::Connection::open(&path)
            .and_then(|c| {
                c.execute_batch(
                    "DROP INDEX IF EXISTS audit_by_tool; DROP INDEX IF EXISTS audit_by_outcome;
                     DROP INDEX IF EXISTS audit_by_call; DROP INDEX IF EXISTS audit_by_time;",
                )
            })
            .expect("drop the search indexes");
    }
    let store = Store::open_sqlite(&path).expect("store");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = Arc::new(store);
    let (wall, cpu, mut times) = runtime.block_on(async {
        // Warm up: the statements prepared, the file grown.
        for n in 0..200 {
            one_call(&store, u64::MAX / 2 + n, concurrency == 1).await;
        }
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (cpu0, start) = (cpu_us(), Instant::now());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (store, next) = (store.clone(), next.clone());
            tasks.spawn(async move {
                let mut times = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= calls {
                        return times;
                    }
                    let t = Instant::now();
                    one_call(&store, n, concurrency == 1).await;
                    times.push(t.elapsed().as_micros() as u64);
                }
            });
        }
        let mut times = Vec::new();
        while let Some(t) = tasks.join_next().await {
            times.extend(t.expect("task"));
        }
        (start.elapsed(), cpu_us() - cpu0, times)
    });
    times.sort_unstable();
    let pick = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{}",
        serde_json::json!({
            "calls": calls,
            "conc": concurrency,
            "bare": bare,
            "calls_per_s": (calls as f64 / wall.as_secs_f64()).round(),
            "p50_us": pick(0.5),
            "p99_us": pick(0.99),
            "cpu_us_per_call": (cpu as f64 / calls as f64).round(),
        })
    );
}
