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
