//! A small MCP 2026-07-28 load driver that sends a bearer token with every request, for
//! measuring what checking it costs (`scripts/bench.py --only oauth`): static agent tokens
//! against OAuth access tokens (JWTs) on the same server, side by side.
//!
//! usage: authload URL TOKEN TOOL JSON_ARGS CALLS CONCURRENCY [SERVER_PID]
//! Prints one JSON line: calls, errors, seconds, calls_per_s, p50_us, p95_us, and, given the
//! server's pid, server_cpu_us_per_call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, token, tool, arguments, calls, concurrency, rest @ ..] = args.as_slice() else {
        eprintln!("usage: authload URL TOKEN TOOL JSON_ARGS CALLS CONCURRENCY [SERVER_PID]");
        std::process::exit(2);
    };
    let arguments: Value = serde_json::from_str(arguments).expect("JSON_ARGS is JSON");
    let calls: u64 = calls.parse().expect("CALLS is a number");
    let concurrency: u64 = concurrency.parse().expect("CONCURRENCY is a number");
    let server_pid: Option<u32> = rest.first().map(|p| p.parse().expect("SERVER_PID"));
    let http = aether_net::outbound(Duration::from_secs(10))
        .pool_max_idle_per_host(concurrency as usize)
        .build()
        .expect("an HTTP client");
    let body = Arc::new(
        json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": tool, "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        })
        .to_string(),
    );
    let send = {
        let (http, url, token, tool) = (http.clone(), url.clone(), token.clone(), tool.clone());
        move || {
            let request = http
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", &tool)
                .header("authorization", format!("Bearer {token}"))
                .body(body.as_str().to_string());
            async move {
                let response = request.send().await.ok()?;
                let ok = response.status().is_success();
                let text = response.text().await.ok()?;
                (ok && text.contains("\"result\"") && !text.contains("\"isError\":true"))
                    .then_some(())
            }
        }
    };
    // Warm-up: connections open, keys read, caches filled.
    for _ in 0..concurrency.max(20) {
        send().await;
    }
    let cpu_before = server_pid.map(cpu_us);
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (next, errors, send) = (next.clone(), errors.clone(), send.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                let t = Instant::now();
                if send().await.is_none() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                latencies.push(t.elapsed().as_micros() as u64);
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for w in workers {
        latencies.extend(w.await.expect("a worker"));
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let mut report = json!({
        "calls": latencies.len(),
        "errors": errors.load(Ordering::Relaxed),
        "seconds": seconds,
        "calls_per_s": latencies.len() as f64 / seconds,
        "p50_us": at(0.5),
        "p95_us": at(0.95),
    });
    if let (Some(pid), Some(before)) = (server_pid, cpu_before) {
        report["server_cpu_us_per_call"] =
            json!((cpu_us(pid) - before) as f64 / latencies.len() as f64);
    }
    println!("{report}");
}

/// A process's CPU time so far (user + system), in microseconds.
fn cpu_us(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // The kernel counts in clock ticks of 1/100 s on Linux.
    ticks * 10_000
}
