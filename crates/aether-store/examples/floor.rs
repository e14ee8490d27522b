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
//! `edit` replaces the receipt with the durable steps an `edit_file` of a 4 KiB file takes, as
//! Aether takes them: the edits queued for the file handed to a batcher thread, which commits
//! their journal entries with their calls' receipts and the old and new contents (one flush),
//! writes the new content to a temporary file and renames it over the file (no fsyncs: the
//! journal is the redo log); then the audit row. No MCP, no edit algorithm, no diff, no
//! checks: the least a journalled, receipted edit costs here.
//!
//! `single` commits only the audit row, marked as the call's only record: a side-effect-free
//! call's one durable write (the issue-25 ledger).
//!
//! `edit-ride` is `edit` with the audit row riding the next group commit (not waited for):
//! the floor of letting an effectful call's outcome row ride, as issue 25 allows.
//!
//! The store is keyed as Aether keys it (rows HMAC'd under an audit key).
//!
//! `floor DIR ROUNDS fsyncs` instead times one fsync, two in turn and two at once (whether
//! the storage overlaps them; see [`two_fsyncs`]).
//!
//! Prints one JSON line: calls per second, p50 and p99 of a call (its commits and, for `edit`,
//! its file steps) in µs, and the process's CPU time per call (user + system, all threads) in
//! µs. `scripts/bench.py --only floors` runs it beside the peers whose targets it bounds.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use aether_store::{
    AdmissionReceipt, AuditEvent, JournalEntry, JournalOp, JournalWrite, Store, content_hash,
};

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

async fn one_call(
    store: &Store,
    n: u64,
    alone: bool,
    edits: Option<&std::sync::mpsc::Sender<Queued>>,
    single: bool,
) {
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
    if let Some(edits) = edits {
        // The receipt rides the edit's journal commit.
        let (done, edited) = tokio::sync::oneshot::channel();
        edits
            .send((call_id.clone(), n, receipt, done))
            .expect("the batcher");
        edited.await.expect("the edit");
    } else if !single {
        let admitted = if alone {
            store.admit_alone(receipt).await
        } else {
            store.admit(receipt).await
        };
        admitted.expect("receipt");
    }
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
        single,
        trace: None,
        subject: None,
    };
    if RIDE.load(std::sync::atomic::Ordering::Relaxed) {
        // The row rides the next group commit: the call does not wait for it.
        let store = store.clone();
        tokio::spawn(async move { store.audit_call(event).await.expect("audit") });
        return;
    }
    let audited = if alone {
        store.audit_alone(event).await
    } else {
        store.audit_call(event).await
    };
    audited.expect("audit");
}

/// `edit-ride`: an edit's audit row rides the next group commit instead of being waited for,
/// and the journal write joins the writer's batch (with the rows waiting there).
static RIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this machine's storage overlaps two fsyncs: the p50 of one 4 KiB overwrite and
/// fsync, of two (in two files) in turn, and of the same two on two threads at once. Where two
/// at once take as long as two in turn, a call's durable writes cost their number, however
/// they are spread over threads.
fn two_fsyncs(dir: &std::path::Path, rounds: usize) {
    use std::os::unix::fs::FileExt;
    let open = |name: &str| {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join(name))
            .expect("a test file");
        f.write_all_at(&[b'x'; 65536], 0).expect("write");
        f.sync_all().expect("fsync");
        f
    };
    let (a, b) = (Arc::new(open("fsync-a")), Arc::new(open("fsync-b")));
    let one = |f: &std::fs::File, i: usize| {
        f.write_all_at(&[b'y'; 4096], (i % 16) as u64 * 4096)
            .expect("write");
        f.sync_all().expect("fsync");
    };
    let p50 = |run: &dyn Fn(usize)| {
        let mut times: Vec<u128> = (0..rounds)
            .map(|i| {
                let t = Instant::now();
                run(i);
                t.elapsed().as_micros()
            })
            .collect();
        times.sort_unstable();
        times[times.len() / 2]
    };
    let single = p50(&|i| one(&a, i));
    let in_turn = p50(&|i| {
        one(&a, i);
        one(&b, i);
    });
    let at_once = p50(&|i| {
        std::thread::scope(|s| {
            s.spawn(|| one(&b, i));
            one(&a, i);
        })
    });
    println!(
        "{}",
        serde_json::json!({"one_us": single, "two_in_turn_us": in_turn, "two_at_once_us": at_once})
    );
}

/// An edit waiting for the batcher: its call and number, and where to say it is done.
type Queued = (
    String,
    u64,
    AdmissionReceipt,
    tokio::sync::oneshot::Sender<()>,
);

/// The edit batcher, as Aether's: a thread of its own takes every edit queued for the file
/// and makes them durable together (module docs): one journal commit (each edit's entry, its
/// call's receipt, the old content and the new), one temporary file and one rename, neither
/// fsynced (the journal is the redo log).
fn edit_batcher(store: Arc<Store>, dir: std::path::PathBuf) -> std::sync::mpsc::Sender<Queued> {
    let (tx, rx) = std::sync::mpsc::channel::<Queued>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("the batcher's runtime");
        let file = dir.join("e.txt");
        while let Ok(first) = rx.recv() {
            let batch: Vec<Queued> = std::iter::once(first).chain(rx.try_iter()).collect();
            let mut text = std::fs::read(&file).expect("the edited file");
            let (mut entries, mut blobs, mut receipts) = (Vec::new(), Vec::new(), Vec::new());
            for (call_id, n, receipt, _) in &batch {
                receipts.push(receipt.clone());
                let before = content_hash(&text);
                let old = text.clone();
                // Each edit adds a line and keeps the file about 4 KiB.
                text.drain(..text.len().saturating_sub(4096));
                text.extend_from_slice(format!("{n}\n").as_bytes());
                entries.push(JournalEntry {
                    id: 0,
                    at_us: *n as i64,
                    call_id: call_id.clone(),
                    session: "floor".into(),
                    agent: "default".into(),
                    tool: "edit_file".into(),
                    op: JournalOp::Write,
                    root: "ed".into(),
                    path: "e.txt".into(),
                    dest: None,
                    before_hash: Some(before.clone()),
                    before_mode: Some(0o644),
                    after_hash: Some(content_hash(&text)),
                    undoes: None,
                    reverted_by: None,
                });
                blobs.push((before, old));
            }
            blobs.push((content_hash(&text), text.clone()));
            let write = JournalWrite {
                entries,
                blobs,
                reverts: Vec::new(),
                receipts,
            };
            runtime
                .block_on(async {
                    match RIDE.load(std::sync::atomic::Ordering::Relaxed) {
                        true => store.journal(write).await,
                        false => store.journal_alone(write).await,
                    }
                })
                .expect("journal");
            let tmp = dir.join(".floor-tmp");
            let mut f = std::fs::File::create(&tmp).expect("temporary file");
            f.write_all(&text).expect("write");
            std::fs::rename(&tmp, &file).expect("rename");
            for (_, _, _, done) in batch {
                let _ = done.send(());
            }
        }
    });
    tx
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, concurrency, calls, mode) = match &args[..] {
        [dir, n, fsyncs] if fsyncs == "fsyncs" => {
            two_fsyncs(
                std::path::Path::new(dir),
                n.parse().expect("ROUNDS is a number"),
            );
            return;
        }
        [dir, c, n] => (dir, c, n, ""),
        [dir, c, n, mode] if ["bare", "edit", "edit-ride", "single"].contains(&mode.as_str()) => {
            (dir, c, n, mode.as_str())
        }
        _ => {
            eprintln!(
                "usage: floor DIR CONCURRENCY CALLS [bare|edit|single]  |  floor DIR ROUNDS fsyncs"
            );
            std::process::exit(2);
        }
    };
    let (bare, edit, single) = (
        mode == "bare",
        mode == "edit" || mode == "edit-ride",
        mode == "single",
    );
    RIDE.store(mode == "edit-ride", std::sync::atomic::Ordering::Relaxed);
    let concurrency: u64 = concurrency.parse().expect("CONCURRENCY is a number");
    let edit_dir = std::path::Path::new(dir).join("edit");
    if edit {
        std::fs::create_dir_all(&edit_dir).expect("the edit folder");
        std::fs::write(edit_dir.join("e.txt"), "x".repeat(4096)).expect("the edited file");
    }
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
    let key = aether_store::AuditKey::from_bytes(&[1; 32]);
    let store =
        Store::open_sqlite_with(&path, aether_store::Access::Write(Some(key))).expect("store");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = Arc::new(store);
    let edits = edit.then(|| edit_batcher(store.clone(), edit_dir));
    let (wall, cpu, mut times) = runtime.block_on(async {
        // Warm up: the statements prepared, the file grown.
        for n in 0..200 {
            one_call(
                &store,
                u64::MAX / 2 + n,
                concurrency == 1,
                edits.as_ref(),
                single,
            )
            .await;
        }
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (cpu0, start) = (cpu_us(), Instant::now());
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (store, next) = (store.clone(), next.clone());
            let edits = edits.clone();
            tasks.spawn(async move {
                let mut times = Vec::new();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n >= calls {
                        return times;
                    }
                    let t = Instant::now();
                    one_call(&store, n, concurrency == 1, edits.as_ref(), single).await;
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
            "edit": edit,
            "single": single,
            "calls_per_s": (calls as f64 / wall.as_secs_f64()).round(),
            "p50_us": pick(0.5),
            "p99_us": pick(0.99),
            "cpu_us_per_call": (cpu as f64 / calls as f64).round(),
        })
    );
}
