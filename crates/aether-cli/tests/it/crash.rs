//! A crash loses nothing that was reported done: kill -9 right after a success is reported,
//! and the call's receipt and audit row are on disk.

use aether_store::Store;
use serde_json::json;

use crate::util::{StdioServer, Ws};

#[tokio::test]
async fn a_kill_right_after_a_reported_success_loses_neither_receipt_nor_audit_row() {
    let ws = Ws::new();
    let mut call_ids = Vec::new();
    for round in 0..5 {
        let mut s = StdioServer::start(&ws, &[]);
        let r = s.call(1, "read_file", json!({"path": "src/hello.txt"}));
        assert_eq!(r["result"]["isError"], false, "{r}");
        call_ids.push(
            r["result"]["_meta"]["aether/callId"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        // SIGKILL: no shutdown path runs.
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        let _ = round;
    }
    let store = Store::open_sqlite(&ws.path().join(".aether/aether.db")).unwrap();
    for id in &call_ids {
        // A read changes nothing: its audit row is its only record.
        let receipt = store.receipt(id).await.unwrap();
        assert!(receipt.is_none(), "receipt of {id}");
    }
    let rows = store
        .audit_query(aether_store::AuditQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    for id in &call_ids {
        assert!(
            rows.iter()
                .any(|r| &r.event.call_id == id && r.event.outcome == "ok" && r.event.single),
            "audit row of {id}"
        );
    }
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{out}");
}

/// The temporary file of a write a crash interrupted is removed at start (one a minute old:
/// a write another process is making keeps its own), and no tool lists or reads one.
#[test]
fn temporary_files_of_interrupted_writes_are_removed_at_start_and_never_served() {
    let ws = Ws::new();
    let old = ws.path().join("src/.aether-tmp-0123456789abcdef");
    let fresh = ws.path().join(".aether-tmp-fedcba9876543210");
    std::fs::write(&old, "half of a write").unwrap();
    std::fs::write(&fresh, "a write in progress").unwrap();
    let status = std::process::Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(&old)
        .status()
        .unwrap();
    assert!(status.success());
    let mut s = StdioServer::start_rw(&ws);
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (id, tool, args) in [
        (1, "list_dir", json!({"path": "src"})),
        (2, "list_dir", json!({})),
        (
            3,
            "glob",
            json!({"pattern": "**/*", "include_hidden": true}),
        ),
        (4, "list_files", json!({"include_hidden": true})),
        (
            5,
            "search_files",
            json!({"query": "write", "include_hidden": true}),
        ),
    ] {
        let r = s.call(id, tool, args);
        assert!(!r.to_string().contains(".aether-tmp-"), "{tool}: {r}");
    }
    let r = s.call(
        6,
        "read_file",
        json!({"path": ".aether-tmp-fedcba9876543210"}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while old.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the leftover was not removed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        fresh.exists(),
        "a write in progress keeps its temporary file"
    );
}

/// kill -9 at random instants while reads and writes are in flight, 20 rounds: every call
/// the client heard succeed has its record (a write its receipt and row, a read its single
/// row) and every acknowledged write is on disk after the next start; `verify` passes at once;
/// undo takes back a write from before the crashes.
fn kill_nine_rounds(store: Option<&str>) {
    let ws = Ws::new();
    let root = format!("{}:rw", ws.root_arg());
    let mut extra: Vec<&str> = Vec::new();
    if let Some(url) = store {
        extra.extend(["--store", url]);
    }
    let mut seed = aether_store::now_us() as u64 | 1;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    // (call id, the file a write made and its content)
    let mut acked: Vec<(String, Option<(String, String)>)> = Vec::new();
    let mut interrupted_rounds = 0;
    for round in 0..20 {
        let mut s = StdioServer::spawn_root(&ws, &root, &extra);
        s.initialize("2025-11-25");
        s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let mut sent = std::collections::HashMap::new();
        for i in 0..120 {
            let id = round * 1000 + i;
            let (tool, args, wrote) = if i % 2 == 0 {
                let path = format!("crash/r{round}_{i}.txt");
                let text = format!("round {round} call {i}\n");
                (
                    "write_file",
                    json!({"path": path, "content": text}),
                    Some((path, text)),
                )
            } else {
                ("read_file", json!({"path": "src/hello.txt"}), None)
            };
            sent.insert(id, wrote);
            s.send_raw(
                &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {"name": tool, "arguments": args}})
                .to_string(),
            );
        }
        // Killed once a random number of the calls have been answered: mid-load.
        let wait_for = (next() % sent.len() as u64) as usize;
        let mut replies = Vec::new();
        while replies.len() < wait_for {
            let m = s.next_message();
            if m.get("id").is_some() {
                replies.push(m);
            }
        }
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        replies.extend(s.received());
        let answered = replies.iter().filter(|r| r.get("id").is_some()).count();
        if answered < sent.len() {
            interrupted_rounds += 1;
        }
        for r in replies {
            let Some(id) = r["id"].as_i64() else { continue };
            if r["result"]["isError"] != false {
                continue;
            }
            let call = r["result"]["_meta"]["aether/callId"]
                .as_str()
                .unwrap()
                .to_string();
            acked.push((call, sent.remove(&id).flatten()));
        }
    }
    assert!(
        interrupted_rounds >= 10,
        "most rounds must be killed mid-load ({interrupted_rounds} of 20 were)"
    );
    // The next start records what the crashes interrupted, before it serves.
    let mut s = StdioServer::spawn_root(&ws, &root, &extra);
    s.initialize("2025-11-25");
    s.close_stdin();
    assert!(s.wait_exit(std::time::Duration::from_secs(20)).is_some());
    let url = store.map(String::from).unwrap_or_else(|| ws.store_url());
    let (code, out, err) = ws.run(&["audit", "verify", "--store", &url]);
    assert_eq!(code, 0, "verify after the crashes: {out}{err}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let check = Store::open(&url, aether_store::Access::ReadOnly).unwrap();
    let rows = runtime
        .block_on(check.audit_query(aether_store::AuditQuery {
            limit: 10_000,
            ..Default::default()
        }))
        .unwrap();
    assert!(
        acked.len() > 20,
        "too few calls acknowledged: {}",
        acked.len()
    );
    for (call, wrote) in &acked {
        let row = rows
            .iter()
            .find(|r| &r.event.call_id == call)
            .unwrap_or_else(|| panic!("acknowledged call {call} has no audit row"));
        assert_eq!(row.event.outcome, "ok", "{call}");
        let receipt = runtime.block_on(check.receipt(call)).unwrap();
        match wrote {
            Some((path, text)) => {
                assert!(
                    receipt.is_some(),
                    "acknowledged write {call} has no receipt"
                );
                assert!(!row.event.single);
                assert_eq!(
                    std::fs::read_to_string(ws.path().join(path))
                        .ok()
                        .as_deref(),
                    Some(text.as_str()),
                    "acknowledged write {call} of {path}"
                );
            }
            None => assert!(row.event.single && receipt.is_none(), "read {call}"),
        }
    }
    // Every receipt has its row: interrupted calls were recorded as such.
    let interrupted = rows
        .iter()
        .filter(|r| r.event.outcome == "interrupted")
        .count();
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &url]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("interrupted by a crash"), "{out}");
    // The overview's counts: every call's row counted once, though processes were killed
    // while they counted (the mark moves in the counting transaction).
    let counter = Store::open_url(&url).unwrap();
    runtime.block_on(counter.count_calls()).unwrap();
    let hour = 3_600_000_000;
    let until = (aether_store::now_us() / hour + 1) * hour;
    let overview = runtime
        .block_on(counter.call_overview(0, until, until))
        .unwrap();
    let counted: i64 = overview
        .spans
        .iter()
        .flat_map(|s| s.by_outcome.values())
        .sum();
    let calls = rows
        .iter()
        .filter(|r| r.event.transport != "operator")
        .count();
    assert_eq!(counted as usize, calls, "{overview:?}");
    drop((check, counter));
    // Undo still takes back a write from before the crashes.
    let (call, wrote) = acked.iter().find(|(_, w)| w.is_some()).unwrap();
    let (path, _) = wrote.as_ref().unwrap();
    let (code, out, err) = ws.run(&["undo", call, "--root", &root, "--store", &url]);
    assert_eq!(code, 0, "undo after the crashes: {out}{err}");
    assert!(!ws.path().join(path).exists(), "undo removed {path}");
    eprintln!(
        "{} calls acknowledged, {interrupted} recorded as interrupted",
        acked.len()
    );
}

#[test]
fn kill_nine_under_load_loses_nothing_acknowledged_sqlite() {
    kill_nine_rounds(None);
}

#[test]
fn kill_nine_under_load_loses_nothing_acknowledged_postgres() {
    let pg = crate::replicas::PgSchema::new("crash");
    kill_nine_rounds(Some(&pg.url));
}

/// A write is made durable by the journal, not by fsyncs of its own: a crash that loses the
/// rename (simulated here by putting the old content back after kill -9, as a power cut
/// would leave it) is put right at the next start, before anything is served; a file someone
/// else changed since is left alone and named.
#[test]
fn a_write_a_crash_lost_is_written_again_at_the_next_start() {
    let ws = Ws::new();
    ws.write("notes/a.txt", "old a\n");
    ws.write("notes/b.txt", "old b\n");
    let mut s = StdioServer::start_rw(&ws);
    s.send_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    for (id, file, text) in [(1, "notes/a.txt", "new a\n"), (2, "notes/b.txt", "new b\n")] {
        let r = s.call(id, "write_file", json!({"path": file, "content": text}));
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    let r = s.call(
        3,
        "edit_file",
        json!({"path": "notes/a.txt", "search": "new a", "replace": "newer a"}),
    );
    assert_eq!(r["result"]["isError"], false, "{r}");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // What a lost rename leaves: a.txt back at its first content (two journalled writes
    // behind); b.txt changed by someone else meanwhile.
    ws.write("notes/a.txt", "old a\n");
    ws.write("notes/b.txt", "someone else's\n");
    let mut cmd = crate::util::aether();
    cmd.arg("mcp-serve")
        .arg("--root")
        .arg(format!("{}:rw", ws.root_arg()))
        .current_dir(ws.path())
        .stderr(std::process::Stdio::piped());
    let mut s = StdioServer::from_command(cmd);
    s.initialize("2025-11-25");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/a.txt")).unwrap(),
        "newer a\n",
        "the newest journalled content, before the first request is answered"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/b.txt")).unwrap(),
        "someone else's\n",
        "a file changed since is left alone"
    );
    s.close_stdin();
    assert!(s.wait_exit(std::time::Duration::from_secs(20)).is_some());
    let mut stderr = String::new();
    std::io::Read::read_to_string(s.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains("ws:notes/a.txt had lost its last journalled write")
            && stderr.contains("ws:notes/b.txt: changed by someone else"),
        "{stderr}"
    );
    let (code, out, _) = ws.run(&["audit", "verify", "--store", &ws.store_url()]);
    assert_eq!(code, 0, "{out}");
}
