//! How long credential detection takes: a 1 MiB mixed body with no secret, scanned by the
//! [`Scanner`] (one prefilter pass per decoded view) and by the reference that tries every
//! rule's regex in turn on the same views; a typical tool call's arguments (~1 KiB); and a
//! 1 KiB request (URL, headers, JSON body) through `scan_request`, every part scanned, decoded
//! and then assembled and joined for split secrets, by both.
//!
//! `cargo bench -p aether-policy --bench dlp -- --warm-up-time 1 --measurement-time 3`

use std::fmt::Write;
use std::hint::black_box;

use aether_screens::dlp::Scanner;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A deterministic stream of numbers, so every run scans the same body.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[(self.next() % 16) as usize]))
            .collect()
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
        }
        out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
    }
    out
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "failed",
    "because",
    "scheduler",
    "task-list",
    "desk-lamp",
    "request",
    "timeout",
    "retry",
    "café",
    "naïve",
    "risk-assessment",
    "internationalization",
    "token",
    "secret",
    "rotation",
    "policy",
    "upload",
    "getUserAccountSettings",
    "SKU-4411",
    "AKIAlower",
    "flask-sqlalchemy",
    "quarterly",
    "report",
    "merged",
    "into",
    "main",
    "50%",
    "done",
];

/// JSON-ish log lines (one object per line, so the whole is not one JSON document) with URLs,
/// base64 blobs, hex digests, UUIDs, prose and look-alikes, and no credential.
fn mixed_body(size: usize) -> String {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut body = String::with_capacity(size + 4096);
    let mut line = 0u64;
    while body.len() < size {
        line += 1;
        let prose: Vec<&str> = (0..12).map(|_| rng.pick(WORDS)).collect();
        let blob_len = 48 + (rng.next() % 160) as usize;
        let blob = base64(&rng.bytes(blob_len));
        let text_b64 = base64(prose.join(" ").as_bytes());
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            rng.hex(8),
            rng.hex(4),
            rng.hex(4),
            rng.hex(4),
            rng.hex(12)
        );
        writeln!(
            body,
            r#"{{"seq": {line}, "id": "{uuid}", "commit": "{}", "digest": "sha256:{}", "url": "https://api.example.com/v2/items/{}?page={}&sort=desc&q=rust%20async%20runtime", "msg": "{}", "blob": "{blob}", "text": "{text_b64}", "jwtish": "eyJub3QiOiJqd3Qi.eyJhbm90aGVyIjoidGhpbmcifQ.c2ln", "path": "/usr/local/lib/python3.12/site-packages/pkg_{}/module.py", "pem": "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTAN\n-----END CERTIFICATE-----"}}"#,
            rng.hex(40),
            rng.hex(64),
            rng.hex(12),
            line % 17,
            prose.join(" "),
            line % 100,
        )
        .unwrap();
    }
    body
}

/// The arguments of a typical `http_request` call, about 1 KiB.
fn typical_call() -> serde_json::Value {
    json!({
        "method": "POST",
        "url": "https://api.example.com/v1/repos/acme/widgets/issues?state=open&per_page=50",
        "headers": {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": "aether/0.1",
            "X-Request-Id": "550e8400-e29b-41d4-a716-446655440000"
        },
        "body": {
            "title": "Scheduler drops tasks when the queue is full",
            "labels": ["bug", "scheduler", "needs-triage"],
            "assignees": ["octocat"],
            "milestone": 4,
            "body": "When more than 512 tasks are queued, the scheduler silently drops the newest ones instead of applying back-pressure. Steps to reproduce: start the worker with --max-queue 512, enqueue 600 jobs with the bench script, and watch the task-list endpoint: only 512 appear. Expected: the enqueue call blocks or returns 429. Seen on commit e83c5163316f89bfbde7d9ab23ca2e25604af290 with rustc 1.95; logs attached at https://logs.example.com/runs/8f14e45fceea167a5a36dedd4bea2543?view=raw&lines=200."
        },
        "timeout_ms": 10000,
        "follow_redirects": true
    })
}

/// A 1 KiB outgoing request with no secret: a URL with a query, headers, a JSON body.
fn typical_request() -> (String, Vec<(String, String)>, Vec<u8>) {
    let url = "https://api.example.com/v2/projects/acme-widgets/pipelines/4417/jobs?status=failed&per_page=50&sort=created_at&cursor=eyJpZCI6NDQxN30".to_string();
    let headers = [
        ("Accept", "application/json"),
        ("Content-Type", "application/json"),
        ("User-Agent", "aether/0.1 (+https://example.com/bot)"),
        ("X-Request-Id", "550e8400-e29b-41d4-a716-446655440000"),
        (
            "If-None-Match",
            "W/\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        ),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    let body = json!({
        "title": "Retry the flaky integration job",
        "ref": "main",
        "sha": "e83c5163316f89bfbde7d9ab23ca2e25604af290",
        "variables": [
            {"key": "RUST_LOG", "value": "info,aether=debug"},
            {"key": "CARGO_TERM_COLOR", "value": "always"},
            {"key": "DEPLOY_ENV", "value": "staging"}
        ],
        "labels": ["ci", "flaky", "needs-triage", "scheduler"],
        "description": "The job failed on the third retry with a timeout while the runner pulled the image; the cache key was 4f2a9c1e and the mirror answered 503 twice. Re-run with a longer timeout and the task-list endpoint checked.",
        "assignee": "octocat",
        "due": "2026-12-01"
    })
    .to_string()
    .into_bytes();
    (url, headers, body)
}

fn bench(c: &mut Criterion) {
    let scanner = Scanner::shared();
    let reference = Scanner::regex_loop();

    let body = mixed_body(1 << 20);
    assert_eq!(scanner.scan_text("body", &body), None);
    assert_eq!(reference.scan_text("body", &body), None);
    let mut group = c.benchmark_group("dlp 1 MiB body");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.sample_size(20);
    group.bench_function("scanner", |b| {
        b.iter(|| scanner.scan_text("body", black_box(&body)))
    });
    group.bench_function("regex loop", |b| {
        b.iter(|| reference.scan_text("body", black_box(&body)))
    });
    group.finish();

    let call = typical_call();
    assert!(call.to_string().len() > 900, "{}", call.to_string().len());
    assert_eq!(scanner.scan_json(&call), None);
    assert_eq!(reference.scan_json(&call), None);
    let mut group = c.benchmark_group("dlp 1 KiB call");
    group.bench_function("scanner", |b| {
        b.iter(|| scanner.scan_json(black_box(&call)))
    });
    group.bench_function("regex loop", |b| {
        b.iter(|| reference.scan_json(black_box(&call)))
    });
    group.finish();

    let (url, headers, body) = typical_request();
    let size = url.len()
        + headers
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum::<usize>()
        + body.len();
    assert!((900..1300).contains(&size), "{size}");
    assert_eq!(scanner.scan_request(&url, &headers, &body), None);
    assert_eq!(reference.scan_request(&url, &headers, &body), None);
    let mut group = c.benchmark_group("dlp 1 KiB request");
    group.bench_function("scanner", |b| {
        b.iter(|| scanner.scan_request(black_box(&url), black_box(&headers), black_box(&body)))
    });
    group.bench_function("regex loop", |b| {
        b.iter(|| reference.scan_request(black_box(&url), black_box(&headers), black_box(&body)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
