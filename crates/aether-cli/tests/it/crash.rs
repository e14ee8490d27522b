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
        let receipt = store.receipt(id).await.unwrap();
        assert!(receipt.is_some(), "receipt of {id}");
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
                .any(|r| &r.event.call_id == id && r.event.outcome == "ok"),
            "audit row of {id}"
        );
    }
    assert!(store.verify_audit(None).await.unwrap().is_intact());
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
