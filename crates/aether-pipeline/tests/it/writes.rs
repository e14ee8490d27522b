//! The workspace write tools (write_file, edit_file, move_file, create_directory, delete_file,
//! revert_file) and the operator's undo, run through the whole pipeline against real folders:
//! what lands on disk, the journal rows and the audit rows; every confinement attack on every
//! write tool refused with nothing changed anywhere; a symlink swapped in mid-write; a root
//! removed while in use; concurrent edits of one file; sealed roots; and list_files.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use aether_pipeline::{CallOutcome, CallResult, Pipeline, SessionContext};
use aether_policy::Step;
use aether_policy::config::{Limits, default_agent_profile};
use aether_policy::journal::content_hash;
use aether_policy::paths::{RootMode, RootSpec};
use aether_store::{SealPin, SealRecord};
use aether_tools::Roots;
use serde_json::{Value, json};

use crate::support::*;

/// What `outside/secret.txt` holds; no write may ever change it.
const SECRET: &str = "TOP SECRET: nobody writes here\n";

// ---------------------------------------------------------------------------------------------
// The world a test runs in
// ---------------------------------------------------------------------------------------------

/// One test's folders, beside (not inside) its store:
/// - `ws`: read-write, deletes allowed; the first root, so relative paths land here;
/// - `ro`: read-only; `sealed`: sealed; `man`: read-write with the write manifest `src/**` and
///   no deletes;
/// - `outside/secret.txt`, in no root; `ws_evil/`, a prefix sibling of `ws`.
struct World {
    h: Harness,
    _tmp: tempfile::TempDir,
    /// The folder holding them all, its real path.
    base: PathBuf,
    p: Arc<Pipeline>,
    /// The default agent's session `s1`.
    ctx: SessionContext,
}

const AGENT: &str = aether_policy::config::DEFAULT_AGENT;

impl World {
    async fn new() -> World {
        World::with_limits(Limits::default()).await
    }

    async fn with_limits(limits: Limits) -> World {
        let tmp = tempfile::Builder::new().prefix("writes").tempdir().unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        for dir in ["ws", "ro", "sealed", "man/src", "outside", "ws_evil"] {
            fs::create_dir_all(base.join(dir)).unwrap();
        }
        fs::write(base.join("outside/secret.txt"), SECRET).unwrap();
        fs::write(base.join("ws_evil/x.txt"), "evil twin\n").unwrap();
        fs::write(base.join("ro/readme.txt"), "read only\n").unwrap();
        fs::write(base.join("sealed/pinned.txt"), "pinned content\n").unwrap();
        fs::write(base.join("man/README.md"), "manifest root\n").unwrap();
        fs::write(base.join("man/src/keep.rs"), "fn keep() {}\n").unwrap();
        let spec = |name: &str, mode: RootMode| RootSpec {
            name: name.into(),
            path: base.join(name).to_string_lossy().into_owned(),
            mode,
            writable: None,
            allow_delete: false,
        };
        let specs = vec![
            RootSpec {
                allow_delete: true,
                ..spec("ws", RootMode::ReadWrite)
            },
            spec("ro", RootMode::ReadOnly),
            spec("sealed", RootMode::Sealed),
            RootSpec {
                writable: Some(vec!["src/**".into()]),
                ..spec("man", RootMode::ReadWrite)
            },
        ];
        let h = Harness::new();
        let roots = Roots::open(&specs).unwrap();
        let p = match h
            .try_pipeline_with_roots(
                vec![default_agent_profile()],
                limits,
                aether_tools::builtin_tools(),
                roots,
            )
            .await
        {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("pipeline did not start: {e}"),
        };
        let ctx = session(&p, AGENT, "s1");
        World {
            h,
            _tmp: tmp,
            base,
            p,
            ctx,
        }
    }

    /// `rel` under the base folder (`ws/a.txt`, `outside/secret.txt`).
    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// The absolute path of `rel`, as text for a tool's arguments.
    fn abs(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    fn put(&self, rel: &str, content: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
    }

    fn exists(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.path(rel)).is_ok()
    }

    fn session(&self, id: &str) -> SessionContext {
        session(&self.p, AGENT, id)
    }

    /// Calls as session `s1`.
    async fn call(&self, tool: &str, args: Value) -> CallResult {
        self.call_as(&self.ctx, tool, args).await
    }

    async fn call_as(&self, ctx: &SessionContext, tool: &str, args: Value) -> CallResult {
        match tokio::time::timeout(
            Duration::from_secs(20),
            call(&self.p, ctx, tool, args.clone()),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => panic!("{tool} {args} hung"),
        }
    }

    /// Calls, asserts the tool succeeded and its audit row says ok; returns the structured
    /// result.
    async fn ok(&self, tool: &str, args: Value) -> (CallResult, Value) {
        let result = self.call(tool, args.clone()).await;
        let structured = match &result.outcome {
            CallOutcome::Ran(out) if !out.is_error => out.structured.clone().unwrap_or(Value::Null),
            other => panic!("{tool} {args} should have worked: {other:?}"),
        };
        assert_eq!(self.outcome(&result.call_id), "ok");
        (result, structured)
    }

    /// The outcome of `call_id`'s audit row.
    fn outcome(&self, call_id: &str) -> String {
        self.h
            .sql()
            .query_row(
                "SELECT outcome FROM audit WHERE call_id = ?1",
                [call_id],
                |r| r.get(0),
            )
            .unwrap_or_else(|e| panic!("no audit row for {call_id}: {e}"))
    }

    /// `call_id`'s journal rows, oldest first: (op, root, path, before_hash, after_hash).
    fn journal(&self, call_id: &str) -> Vec<JournalRow> {
        let conn = self.h.sql();
        let mut stmt = conn
            .prepare(
                "SELECT op, root, path, before_hash, after_hash, dest, undoes, reverted_by
                 FROM journal WHERE call_id = ?1 ORDER BY id",
            )
            .unwrap();
        stmt.query_map([call_id], |r| {
            Ok(JournalRow {
                op: r.get(0)?,
                root: r.get(1)?,
                path: r.get(2)?,
                before: r.get(3)?,
                after: r.get(4)?,
                dest: r.get(5)?,
                undoes: r.get(6)?,
                reverted_by: r.get(7)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }

    fn journal_count(&self) -> i64 {
        self.h
            .sql()
            .query_row("SELECT count(*) FROM journal", [], |r| r.get(0))
            .unwrap()
    }

    /// Everything under the base folder, symlinks not followed: path → what it is (a file's
    /// content and link count, a symlink's target). A FIFO is noted, never opened.
    fn snapshot(&self) -> BTreeMap<String, String> {
        fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
            let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let path = e.path();
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let meta = fs::symlink_metadata(&path).unwrap();
                let ft = meta.file_type();
                let what = if ft.is_symlink() {
                    format!("symlink -> {}", fs::read_link(&path).unwrap().display())
                } else if ft.is_dir() {
                    walk(&path, base, out);
                    "dir".to_string()
                } else if ft.is_file() {
                    format!(
                        "file ({} links, mode {:o}): {}",
                        meta.nlink(),
                        meta.mode() & 0o7777,
                        String::from_utf8_lossy(&fs::read(&path).unwrap())
                    )
                } else {
                    "special".to_string()
                };
                out.insert(rel, what);
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.base, &self.base, &mut out);
        out
    }

    /// Calls `tool` expecting it to be refused: the caller hears an error, the audit row says
    /// `refused` or `tool_error`, and nothing under the base folder changed. Returns the
    /// message and the audit outcome.
    async fn refused(&self, tool: &str, args: Value) -> (String, String) {
        let before = self.snapshot();
        let journal = self.journal_count();
        let result = self.call(tool, args.clone()).await;
        let message = error_of(&result)
            .unwrap_or_else(|| panic!("{tool} {args} should have been refused: {result:?}"));
        let outcome = self.outcome(&result.call_id);
        assert!(
            outcome == "refused" || outcome == "tool_error",
            "{tool} {args}: audited as {outcome}"
        );
        let after = self.snapshot();
        if before != after {
            let changed: Vec<_> = before
                .keys()
                .chain(after.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|k| before.get(*k) != after.get(*k))
                .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
                .collect();
            panic!("{tool} {args} was refused ({message}) but changed files: {changed:#?}");
        }
        assert_eq!(
            self.journal_count(),
            journal,
            "{tool} {args}: a refused write left journal rows"
        );
        assert_eq!(self.read("outside/secret.txt"), SECRET);
        (message, outcome)
    }
}

#[derive(Debug, PartialEq, Eq)]
struct JournalRow {
    op: String,
    root: String,
    path: String,
    before: Option<String>,
    after: Option<String>,
    dest: Option<String>,
    undoes: Option<i64>,
    reverted_by: Option<String>,
}

/// The error the caller heard, if the call did not succeed.
fn error_of(result: &CallResult) -> Option<String> {
    match &result.outcome {
        CallOutcome::Ran(out) if out.is_error => Some(text(result)),
        CallOutcome::Ran(_) => None,
        CallOutcome::Refused(r) => Some(r.reason.clone()),
        other => Some(format!("{other:?}")),
    }
}

/// The error of a call that must have failed.
fn error(result: &CallResult) -> String {
    error_of(result).unwrap_or_else(|| panic!("expected an error, got {result:?}"))
}

fn hash(s: &str) -> Option<String> {
    Some(content_hash(s.as_bytes()))
}

// ---------------------------------------------------------------------------------------------
// write_file
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn write_file_creates_parents_overwrites_and_journals_each_change() {
    let w = World::new().await;

    let (result, out) = w
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "one\n"}),
        )
        .await;
    assert_eq!(w.read("ws/a/b/c.txt"), "one\n");
    assert_eq!(out["call_id"], json!(result.call_id));
    assert_eq!(
        (out["created"].clone(), out["bytes"].clone()),
        (json!(true), json!(4))
    );
    assert_eq!(
        (out["root"].clone(), out["path"].clone()),
        (json!("ws"), json!("a/b/c.txt"))
    );
    let rows = w.journal(&result.call_id);
    let summary: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.op.as_str(),
                r.root.as_str(),
                r.path.as_str(),
                r.before.clone(),
                r.after.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("mkdir", "ws", "a", None, None),
            ("mkdir", "ws", "a/b", None, None),
            ("write", "ws", "a/b/c.txt", None, hash("one\n")),
        ]
    );

    // Overwrite: the journal has the old content's hash, and the old bytes.
    let (result, out) = w
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "two\n"}),
        )
        .await;
    assert_eq!(w.read("ws/a/b/c.txt"), "two\n");
    assert_eq!(out["created"], json!(false));
    let rows = w.journal(&result.call_id);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].op.as_str(),
            rows[0].before.clone(),
            rows[0].after.clone()
        ),
        ("write", hash("one\n"), hash("two\n"))
    );
    let kept: Vec<u8> =
        w.h.sql()
            .query_row(
                "SELECT bytes FROM journal_blobs WHERE hash = ?1",
                [hash("one\n").unwrap()],
                |r| r.get(0),
            )
            .unwrap();
    assert_eq!(kept, b"one\n");

    // The same content again writes nothing and journals nothing.
    let (result, out) = w
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "two\n"}),
        )
        .await;
    assert_eq!(out["unchanged"], json!(true));
    assert!(w.journal(&result.call_id).is_empty());

    // An absolute path inside the root works like a relative one; no temporary file is left.
    w.ok(
        "write_file",
        json!({"path": w.abs("ws/abs.txt"), "content": "absolute\n"}),
    )
    .await;
    assert_eq!(w.read("ws/abs.txt"), "absolute\n");
    let leftovers: Vec<_> = w
        .snapshot()
        .into_keys()
        .filter(|k| k.contains(".aether-tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    // Without create_parents, a missing folder is an error.
    let (message, _) = w
        .refused(
            "write_file",
            json!({"path": "nope/x.txt", "content": "x", "create_parents": false}),
        )
        .await;
    assert!(message.contains("does not exist"), "{message}");
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// edit_file
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn edit_file_replaces_every_exact_occurrence() {
    let w = World::new().await;
    w.put("ws/e.txt", "a = 1\nb = 1\nc = 2\n");
    let (result, out) = w
        .ok(
            "edit_file",
            json!({"path": "e.txt", "search": "= 1", "replace": "= 9"}),
        )
        .await;
    assert_eq!(w.read("ws/e.txt"), "a = 9\nb = 9\nc = 2\n");
    assert_eq!(out["matched"], json!("exact"));
    assert_eq!(out["lines"], json!([1, 2]));
    assert_eq!(out["written"], json!(true));
    assert_eq!(out["call_id"], json!(result.call_id));
    assert!(
        text(&result).contains("replaced 2 occurrences"),
        "{}",
        text(&result)
    );
    let rows = w.journal(&result.call_id);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].op.as_str(),
            rows[0].before.clone(),
            rows[0].after.clone()
        ),
        (
            "write",
            hash("a = 1\nb = 1\nc = 2\n"),
            hash("a = 9\nb = 9\nc = 2\n")
        )
    );
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_tolerates_whitespace_when_the_match_is_unique() {
    let w = World::new().await;
    w.put("ws/m.rs", "fn main() {\n    let x  =   1;\n}\n");
    let (_, out) = w
        .ok(
            "edit_file",
            json!({"path": "m.rs", "search": "let x = 1;", "replace": "let x = 2;"}),
        )
        .await;
    assert_eq!(out["matched"], json!("whitespace-tolerant"));
    assert_eq!(out["lines"], json!([2, 2]));
    // Re-indented to the matched line.
    assert_eq!(w.read("ws/m.rs"), "fn main() {\n    let x = 2;\n}\n");
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_with_an_empty_search_creates_a_missing_file_only() {
    let w = World::new().await;
    let (result, out) = w
        .ok(
            "edit_file",
            json!({"path": "new/dir/f.txt", "search": "", "replace": "hello\n"}),
        )
        .await;
    assert_eq!(w.read("ws/new/dir/f.txt"), "hello\n");
    assert_eq!(out["matched"], json!("created"));
    let ops: Vec<_> = w
        .journal(&result.call_id)
        .into_iter()
        .map(|r| (r.op, r.path))
        .collect();
    assert_eq!(
        ops,
        [
            ("mkdir", "new"),
            ("mkdir", "new/dir"),
            ("write", "new/dir/f.txt")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );

    // On an existing file, an empty search without a range is refused and says how to
    // rewrite the whole file.
    let (message, outcome) = w
        .refused(
            "edit_file",
            json!({"path": "new/dir/f.txt", "search": "", "replace": "clobbered"}),
        )
        .await;
    assert_eq!(outcome, "tool_error");
    assert!(message.contains("start_line 1"), "{message}");
    assert_eq!(w.read("ws/new/dir/f.txt"), "hello\n");
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_replaces_line_ranges_and_the_whole_file() {
    let w = World::new().await;
    w.put("ws/n.txt", "1\n2\n3\n4\n5\n");
    let (_, out) = w
        .ok(
            "edit_file",
            json!({"path": "n.txt", "start_line": 2, "end_line": 3, "replace": "two-three"}),
        )
        .await;
    assert_eq!(w.read("ws/n.txt"), "1\ntwo-three\n4\n5\n");
    assert_eq!(
        (out["matched"].clone(), out["lines"].clone()),
        (json!("lines"), json!([2, 3]))
    );

    // A search confined to a range does not touch the same text outside it.
    w.put("ws/r.txt", "x\nx\nx\n");
    w.ok(
        "edit_file",
        json!({"path": "r.txt", "search": "x", "replace": "y", "start_line": 2, "end_line": 2}),
    )
    .await;
    assert_eq!(w.read("ws/r.txt"), "x\ny\nx\n");

    // 1 to past the end, with an empty search: the whole file.
    let (_, out) = w
        .ok(
            "edit_file",
            json!({"path": "n.txt", "start_line": 1, "end_line": 999, "replace": "all new\n"}),
        )
        .await;
    assert_eq!(w.read("ws/n.txt"), "all new\n");
    assert_eq!(out["lines"], json!([1, 4]));

    // A start past the end and an end before the start are errors.
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "n.txt", "start_line": 5, "replace": "z"}),
        )
        .await;
    assert!(message.contains("past the end"), "{message}");
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "n.txt", "start_line": 3, "end_line": 2, "replace": "z"}),
        )
        .await;
    assert!(message.contains("before start_line"), "{message}");
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_miss_names_the_nearest_line() {
    let w = World::new().await;
    w.put("ws/g.txt", "alpha line\nbeta line here\ngamma line\n");
    let (message, outcome) = w
        .refused(
            "edit_file",
            json!({"path": "g.txt", "search": "betta line her", "replace": "x"}),
        )
        .await;
    assert_eq!(outcome, "tool_error");
    assert!(message.contains("nearest line is 2"), "{message}");
    assert!(message.contains("beta line here"), "{message}");
    assert!(message.contains("unchanged"), "{message}");
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_dry_run_returns_the_diff_and_writes_nothing() {
    let w = World::new().await;
    w.put("ws/d.txt", "keep\nold value\nkeep\n");
    let before = w.journal_count();
    let (result, out) = w
        .ok(
            "edit_file",
            json!({"path": "d.txt", "search": "old value", "replace": "new value", "dry_run": true}),
        )
        .await;
    assert_eq!(w.read("ws/d.txt"), "keep\nold value\nkeep\n");
    assert_eq!(out["written"], json!(false));
    let diff = out["diff"].as_str().unwrap();
    assert!(
        diff.contains("-old value") && diff.contains("+new value"),
        "{diff}"
    );
    assert!(
        diff.contains("a/d.txt") && diff.contains("b/d.txt"),
        "{diff}"
    );
    assert!(text(&result).contains("dry run"), "{}", text(&result));
    assert_eq!(w.journal_count(), before, "a dry run journals nothing");

    // A dry run that would create a file creates nothing either.
    w.ok(
        "edit_file",
        json!({"path": "dry/new.txt", "search": "", "replace": "x\n", "dry_run": true}),
    )
    .await;
    assert!(!w.exists("ws/dry/new.txt"));
    assert!(!w.exists("ws/dry"), "a dry run creates no folders either");

    // An edit that fails creates nothing on the way: not the file, not its folders.
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "missing/sub/x.txt", "search": "abc", "replace": "d"}),
        )
        .await;
    assert!(message.contains("does not exist"), "{message}");
    assert!(!w.exists("ws/missing"));
    w.h.check().await;
}

#[tokio::test]
async fn edit_file_applies_an_edits_array_all_or_nothing() {
    let w = World::new().await;
    let original = "alpha\nbeta\ngamma\n";
    w.put("ws/many.txt", original);
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "many.txt", "edits": [
                {"search": "alpha", "replace": "ALPHA"},
                {"search": "no such text anywhere", "replace": "x"}
            ]}),
        )
        .await;
    assert!(message.contains("edit 2 of 2"), "{message}");
    assert_eq!(
        w.read("ws/many.txt"),
        original,
        "the first edit was not applied"
    );

    // Edits apply in order: the second sees the first's result.
    let (result, _) = w
        .ok(
            "edit_file",
            json!({"path": "many.txt", "edits": [
                {"search": "alpha", "replace": "ALPHA"},
                {"search": "ALPHA\nbeta", "replace": "ALPHA\nBETA"}
            ]}),
        )
        .await;
    assert_eq!(w.read("ws/many.txt"), "ALPHA\nBETA\ngamma\n");
    assert_eq!(
        w.journal(&result.call_id).len(),
        1,
        "one change, one journal row"
    );

    // edits together with search/replace is a usage error.
    w.refused(
        "edit_file",
        json!({"path": "many.txt", "search": "x", "edits": [{"search": "a", "replace": "b"}]}),
    )
    .await;
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// revert_file
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn revert_file_restores_the_original_after_two_edits() {
    let w = World::new().await;
    w.put("ws/v.txt", "original\n");
    let mode_before = fs::metadata(w.path("ws/v.txt")).unwrap().mode() & 0o7777;
    let (first, _) = w
        .ok(
            "edit_file",
            json!({"path": "v.txt", "search": "original", "replace": "first"}),
        )
        .await;
    let (second, _) = w
        .ok(
            "edit_file",
            json!({"path": "v.txt", "search": "first", "replace": "second"}),
        )
        .await;
    assert_eq!(w.read("ws/v.txt"), "second\n");

    let (revert, out) = w.ok("revert_file", json!({"path": "v.txt"})).await;
    assert_eq!(w.read("ws/v.txt"), "original\n");
    assert_eq!(
        fs::metadata(w.path("ws/v.txt")).unwrap().mode() & 0o7777,
        mode_before
    );
    assert_eq!(out["call_id"], json!(revert.call_id));
    // Both edits are marked reverted by the revert, whose own row can be undone in turn.
    for id in [&first.call_id, &second.call_id] {
        assert_eq!(
            w.journal(id)[0].reverted_by.as_deref(),
            Some(revert.call_id.as_str())
        );
    }
    let rows = w.journal(&revert.call_id);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].before.clone(), rows[0].after.clone()),
        (hash("second\n"), hash("original\n"))
    );
    assert!(rows[0].undoes.is_some());

    // Nothing is left to revert.
    let (message, _) = w.refused("revert_file", json!({"path": "v.txt"})).await;
    assert!(message.contains("no change"), "{message}");
    w.h.check().await;
}

#[tokio::test]
async fn revert_file_removes_a_file_the_session_created() {
    let w = World::new().await;
    w.ok(
        "write_file",
        json!({"path": "fresh.txt", "content": "new\n"}),
    )
    .await;
    w.ok(
        "edit_file",
        json!({"path": "fresh.txt", "search": "new", "replace": "newer"}),
    )
    .await;
    let (_, out) = w.ok("revert_file", json!({"path": "fresh.txt"})).await;
    assert!(!w.exists("ws/fresh.txt"), "the created file is gone");
    assert!(
        out["done"][0].as_str().unwrap().contains("removed"),
        "{out}"
    );

    // A deleted file comes back.
    w.put("ws/gone.txt", "bring me back\n");
    w.ok("delete_file", json!({"path": "gone.txt"})).await;
    assert!(!w.exists("ws/gone.txt"));
    w.ok("revert_file", json!({"path": "gone.txt"})).await;
    assert_eq!(w.read("ws/gone.txt"), "bring me back\n");
    w.h.check().await;
}

#[tokio::test]
async fn revert_file_refuses_when_the_file_changed_on_disk_since() {
    let w = World::new().await;
    w.put("ws/c.txt", "original\n");
    w.ok(
        "edit_file",
        json!({"path": "c.txt", "search": "original", "replace": "agent"}),
    )
    .await;
    // Someone else changes it.
    fs::write(w.path("ws/c.txt"), "human edit\n").unwrap();
    let (message, outcome) = w.refused("revert_file", json!({"path": "c.txt"})).await;
    assert_eq!(outcome, "tool_error");
    assert!(message.contains("changed since"), "{message}");
    assert!(message.contains("nothing was undone"), "{message}");
    assert_eq!(w.read("ws/c.txt"), "human edit\n");

    // Removed by someone else: also refused, nothing recreated.
    fs::remove_file(w.path("ws/c.txt")).unwrap();
    let (message, _) = w.refused("revert_file", json!({"path": "c.txt"})).await;
    assert!(message.contains("gone"), "{message}");
    assert!(!w.exists("ws/c.txt"));
    w.h.check().await;
}

#[tokio::test]
async fn a_session_cannot_revert_another_sessions_edit() {
    let w = World::new().await;
    w.put("ws/shared.txt", "original\n");
    w.ok(
        "edit_file",
        json!({"path": "shared.txt", "search": "original", "replace": "mine"}),
    )
    .await;
    let other = w.session("s2");
    let result = w
        .call_as(&other, "revert_file", json!({"path": "shared.txt"}))
        .await;
    let message = error(&result);
    assert!(message.contains("this session has no change"), "{message}");
    assert_eq!(w.outcome(&result.call_id), "tool_error");
    assert_eq!(w.read("ws/shared.txt"), "mine\n");
    // The owning session still can.
    w.ok("revert_file", json!({"path": "shared.txt"})).await;
    assert_eq!(w.read("ws/shared.txt"), "original\n");
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// The operator's undo
// ---------------------------------------------------------------------------------------------

/// Runs the operator's undo of `call_id`, asserting it worked; returns its call id.
async fn undo(w: &World, call_id: &str) -> String {
    let result = w.p.operator_undo("alice", call_id, None).await;
    match &result.outcome {
        CallOutcome::Ran(out) if !out.is_error => {}
        other => panic!("undo of {call_id} failed: {other:?}"),
    }
    let row = row_of(&w.h.store, &result.call_id).await.event;
    assert_eq!(
        (row.outcome.as_str(), row.tool.as_str(), row.agent.as_str()),
        ("ok", "undo_call", "operator:alice")
    );
    assert!(row.arguments.contains(call_id));
    // Every entry of the undone call is now marked as undone by this one.
    for r in w.journal(call_id) {
        assert_eq!(
            r.reverted_by.as_deref(),
            Some(result.call_id.as_str()),
            "{r:?}"
        );
    }
    result.call_id
}

#[tokio::test]
async fn operator_undo_reverses_write_file_and_an_undo_of_the_undo_reapplies_it() {
    let w = World::new().await;
    w.put("ws/w.txt", "before\n");
    let (write, _) = w
        .ok("write_file", json!({"path": "w.txt", "content": "after\n"}))
        .await;
    let undone = undo(&w, &write.call_id).await;
    assert_eq!(w.read("ws/w.txt"), "before\n");
    let rows = w.journal(&undone);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].op.as_str(),
            rows[0].before.clone(),
            rows[0].after.clone()
        ),
        ("write", hash("after\n"), hash("before\n"))
    );

    // The undo is a call like any other: undoing it puts the write back.
    let redone = undo(&w, &undone).await;
    assert_eq!(w.read("ws/w.txt"), "after\n");
    assert_ne!(redone, undone);

    // A call already undone has nothing left to undo; the attempt is audited.
    let again = w.p.operator_undo("alice", &write.call_id, None).await;
    let message = error(&again);
    assert!(message.contains("nothing of call"), "{message}");
    assert_eq!(w.outcome(&again.call_id), "tool_error");
    assert_eq!(w.read("ws/w.txt"), "after\n");

    // A write_file that created a file: the undo removes it.
    let (created, _) = w
        .ok(
            "write_file",
            json!({"path": "made/here.txt", "content": "x"}),
        )
        .await;
    undo(&w, &created.call_id).await;
    assert!(!w.exists("ws/made/here.txt"));
    assert!(
        !w.exists("ws/made"),
        "the folder the write created is removed too"
    );
    w.h.check().await;
}

#[tokio::test]
async fn operator_undo_moves_a_moved_file_back() {
    let w = World::new().await;
    w.put("ws/a.txt", "moving\n");
    let (moved, out) = w
        .ok(
            "move_file",
            json!({"source": "a.txt", "destination": "sub/b.txt"}),
        )
        .await;
    assert_eq!(out["kind"], json!("file"));
    assert!(!w.exists("ws/a.txt"));
    assert_eq!(w.read("ws/sub/b.txt"), "moving\n");
    let rows = w.journal(&moved.call_id);
    assert_eq!(
        rows.iter()
            .map(|r| (r.op.as_str(), r.path.as_str(), r.dest.as_deref()))
            .collect::<Vec<_>>(),
        vec![("mkdir", "sub", None), ("move", "a.txt", Some("sub/b.txt"))]
    );

    let undone = undo(&w, &moved.call_id).await;
    assert_eq!(w.read("ws/a.txt"), "moving\n");
    assert!(!w.exists("ws/sub/b.txt"));
    assert!(
        !w.exists("ws/sub"),
        "the folder the move created is removed"
    );
    // Redo: moved again.
    undo(&w, &undone).await;
    assert_eq!(w.read("ws/sub/b.txt"), "moving\n");
    assert!(!w.exists("ws/a.txt"));

    // A folder moves too, with its content.
    w.put("ws/tree/inner.txt", "inner\n");
    let (moved, out) = w
        .ok(
            "move_file",
            json!({"source": "tree", "destination": "renamed"}),
        )
        .await;
    assert_eq!(out["kind"], json!("dir"));
    assert_eq!(w.read("ws/renamed/inner.txt"), "inner\n");
    undo(&w, &moved.call_id).await;
    assert_eq!(w.read("ws/tree/inner.txt"), "inner\n");
    assert!(!w.exists("ws/renamed"));
    w.h.check().await;
}

#[tokio::test]
async fn operator_undo_removes_created_folders_and_restores_deleted_files() {
    let w = World::new().await;
    let (made, out) = w.ok("create_directory", json!({"path": "x/y"})).await;
    assert_eq!(out["created"], json!(["x", "x/y"]));
    assert!(fs::metadata(w.path("ws/x/y")).unwrap().is_dir());
    // Again: it exists, nothing created, nothing journalled.
    let (again, out) = w.ok("create_directory", json!({"path": "x/y"})).await;
    assert_eq!(out["created"], json!([]));
    assert!(w.journal(&again.call_id).is_empty());

    let undone = undo(&w, &made.call_id).await;
    assert!(!w.exists("ws/x/y") && !w.exists("ws/x"));
    let ops: Vec<_> = w
        .journal(&undone)
        .into_iter()
        .map(|r| (r.op, r.path))
        .collect();
    assert_eq!(
        ops,
        [("rmdir", "x/y"), ("rmdir", "x")].map(|(a, b)| (a.to_string(), b.to_string())),
        "newest first: the inner folder goes before the outer one"
    );
    undo(&w, &undone).await;
    assert!(
        fs::metadata(w.path("ws/x/y")).unwrap().is_dir(),
        "the redo makes them again"
    );

    // delete_file, undone: the file is back with its content and mode.
    w.put("ws/del.txt", "deleted content\n");
    fs::set_permissions(
        w.path("ws/del.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .unwrap();
    let (deleted, out) = w.ok("delete_file", json!({"path": "del.txt"})).await;
    assert_eq!(out["bytes"], json!(16));
    assert!(!w.exists("ws/del.txt"));
    let rows = w.journal(&deleted.call_id);
    assert_eq!(
        (
            rows[0].op.as_str(),
            rows[0].before.clone(),
            rows[0].after.clone()
        ),
        ("delete", hash("deleted content\n"), None)
    );
    undo(&w, &deleted.call_id).await;
    assert_eq!(w.read("ws/del.txt"), "deleted content\n");
    assert_eq!(
        fs::metadata(w.path("ws/del.txt")).unwrap().mode() & 0o7777,
        0o640
    );
    w.h.check().await;
}

#[tokio::test]
async fn operator_undo_works_while_halted() {
    let w = World::new().await;
    w.put("ws/h.txt", "safe\n");
    let (bad, _) = w
        .ok(
            "write_file",
            json!({"path": "h.txt", "content": "damage\n"}),
        )
        .await;
    w.h.store
        .set_halt(true, "ops", "agent went rogue", None)
        .await
        .unwrap();

    // The agent is stopped...
    let result = w
        .call(
            "write_file",
            json!({"path": "h.txt", "content": "more damage\n"}),
        )
        .await;
    refused(&w.h.store, &result, Step::Halt, "halt").await;
    assert_eq!(w.read("ws/h.txt"), "damage\n");

    // ...and the operator repairs what it did.
    let undone = undo(&w, &bad.call_id).await;
    assert_eq!(w.read("ws/h.txt"), "safe\n");
    assert!(
        w.h.store.receipt(&undone).await.unwrap().is_some(),
        "the undo has its receipt"
    );
    assert!(w.h.store.halt_state().await.unwrap().halted, "still halted");
    w.h.check().await;
}

/// The operator's undo of one file of a call: that file's change goes back, the rest of the
/// call stays until it is undone too; a file the call did not change (or whose change is
/// already undone) changes nothing.
#[tokio::test]
async fn operator_undo_of_one_file_leaves_the_rest_of_the_call() {
    let w = World::new().await;
    let (made, _) = w
        .ok(
            "write_file",
            json!({"path": "made/here.txt", "content": "x"}),
        )
        .await;
    let one =
        w.p.operator_undo("alice", &made.call_id, Some(("ws", "made/here.txt")))
            .await;
    assert!(error_of(&one).is_none(), "{:?}", one.outcome);
    assert!(!w.exists("ws/made/here.txt"));
    assert!(
        w.exists("ws/made"),
        "the folder is another change of the call"
    );
    let states: Vec<_> = w
        .journal(&made.call_id)
        .into_iter()
        .map(|r| (r.op, r.path, r.reverted_by))
        .collect();
    assert_eq!(
        states,
        [
            ("mkdir".to_string(), "made".to_string(), None),
            (
                "write".to_string(),
                "made/here.txt".to_string(),
                Some(one.call_id.clone())
            ),
        ]
    );

    for (file, expected) in [
        (Some(("ws", "other.txt")), "nothing of ws:other.txt of call"),
        (Some(("ws", "made/here.txt")), "nothing of ws:made/here.txt"),
    ] {
        let refused = w.p.operator_undo("alice", &made.call_id, file).await;
        let message = error(&refused);
        assert!(message.contains(expected), "{message}");
    }
    assert!(w.exists("ws/made"));

    // The rest of the call: the folder.
    let rest = w.p.operator_undo("alice", &made.call_id, None).await;
    assert!(error_of(&rest).is_none(), "{:?}", rest.outcome);
    assert!(!w.exists("ws/made"));
    w.h.check().await;
}

#[tokio::test]
async fn operator_undo_refuses_when_the_file_changed_since() {
    let w = World::new().await;
    w.put("ws/u.txt", "v1\n");
    let (write, _) = w
        .ok("write_file", json!({"path": "u.txt", "content": "v2\n"}))
        .await;
    fs::write(w.path("ws/u.txt"), "v3 by hand\n").unwrap();
    let result = w.p.operator_undo("alice", &write.call_id, None).await;
    let message = error(&result);
    assert!(message.contains("changed since"), "{message}");
    assert_eq!(w.read("ws/u.txt"), "v3 by hand\n");
    assert_eq!(w.outcome(&result.call_id), "tool_error");
    assert!(w.journal(&result.call_id).is_empty());
    assert_eq!(w.journal(&write.call_id)[0].reverted_by, None);
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// delete_file and move_file rules
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_file_needs_the_roots_opt_in() {
    let w = World::new().await;
    let (message, outcome) = w
        .refused("delete_file", json!({"root": "man", "path": "src/keep.rs"}))
        .await;
    assert_eq!(outcome, "refused");
    assert!(message.contains("does not allow deletes"), "{message}");
    assert_eq!(w.read("man/src/keep.rs"), "fn keep() {}\n");
    let rule: String =
        w.h.sql()
            .query_row(
                "SELECT rule FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap();
    assert_eq!(rule, "delete-opt-in");

    w.put("ws/doomed.txt", "bye\n");
    let (result, _) = w.ok("delete_file", json!({"path": "doomed.txt"})).await;
    assert!(!w.exists("ws/doomed.txt"));
    assert_eq!(w.journal(&result.call_id)[0].op, "delete");

    // Folders are not deleted, nor missing files.
    w.put("ws/folder/f.txt", "f\n");
    w.refused("delete_file", json!({"path": "folder"})).await;
    w.refused("delete_file", json!({"path": "missing.txt"}))
        .await;
    w.h.check().await;
}

#[tokio::test]
async fn move_file_never_replaces_and_stays_in_one_root() {
    let w = World::new().await;
    w.put("ws/from.txt", "from\n");
    w.put("ws/to.txt", "to\n");
    let (message, _) = w
        .refused(
            "move_file",
            json!({"source": "from.txt", "destination": "to.txt"}),
        )
        .await;
    assert!(message.contains("already exists"), "{message}");
    assert_eq!(
        (w.read("ws/from.txt"), w.read("ws/to.txt")),
        ("from\n".into(), "to\n".into())
    );

    // Across roots, by absolute path or by naming the other root: refused.
    w.refused(
        "move_file",
        json!({"source": "from.txt", "destination": w.abs("man/src/from.txt")}),
    )
    .await;
    w.refused(
        "move_file",
        json!({"source": w.abs("ws/from.txt"), "destination": w.abs("man/src/moved.txt")}),
    )
    .await;
    w.refused(
        "move_file",
        json!({"source": w.abs("man/src/keep.rs"), "destination": w.abs("ws/keep.rs")}),
    )
    .await;
    // A missing source, and a folder into itself.
    w.refused(
        "move_file",
        json!({"source": "nope.txt", "destination": "x.txt"}),
    )
    .await;
    w.put("ws/dir/f.txt", "f\n");
    w.refused(
        "move_file",
        json!({"source": "dir", "destination": "dir/sub/dir"}),
    )
    .await;
    assert!(!w.exists("man/src/from.txt") && !w.exists("man/src/moved.txt"));
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// Attacks on every write tool
// ---------------------------------------------------------------------------------------------

/// Every way a write tool can be pointed at `path` (in `root`, if given): write_file, the forms
/// of edit_file (create, change existing text, and a dry run, which must be refused just the
/// same), move_file from it and to it, create_directory and delete_file.
fn every_write(path: &str, root: Option<&str>) -> Vec<(&'static str, Value)> {
    let with_root = |mut v: Value| {
        if let Some(root) = root {
            v["root"] = json!(root);
        }
        v
    };
    vec![
        (
            "write_file",
            with_root(json!({"path": path, "content": "pwned\n"})),
        ),
        (
            "edit_file",
            with_root(json!({"path": path, "search": "", "replace": "pwned\n"})),
        ),
        (
            "edit_file",
            with_root(json!({"path": path, "search": "TOP SECRET", "replace": "pwned"})),
        ),
        (
            "edit_file",
            with_root(json!({"path": path, "search": "", "replace": "pwned\n", "dry_run": true})),
        ),
        (
            "move_file",
            with_root(json!({"source": path, "destination": "moved-here.txt"})),
        ),
        (
            "move_file",
            with_root(json!({"source": "plain.txt", "destination": path})),
        ),
        ("create_directory", with_root(json!({"path": path}))),
        ("delete_file", with_root(json!({"path": path}))),
    ]
}

/// Asserts every write tool is refused on each of `paths` with nothing changed; returns the
/// messages, for the caller to check why.
async fn all_refused(
    w: &World,
    paths: &[String],
    root: Option<&str>,
) -> Vec<(String, String, String)> {
    let mut seen = Vec::new();
    for path in paths {
        for (tool, args) in every_write(path, root) {
            let (message, outcome) = w.refused(tool, args).await;
            seen.push((format!("{tool} {path}"), outcome, message));
        }
    }
    seen
}

/// A world with the traps laid in `ws`: a plain file, symlinks out (a folder and a file), a
/// hard link to the secret, a FIFO, a `.git` with config and hooks (and a symlink to it), an
/// `.aether` folder and credential files.
async fn trapped() -> World {
    let w = World::new().await;
    w.put("ws/plain.txt", "plain\n");
    symlink("../outside", w.path("ws/link")).unwrap();
    symlink("../outside/secret.txt", w.path("ws/l.txt")).unwrap();
    fs::hard_link(w.path("outside/secret.txt"), w.path("ws/hl.txt")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(w.path("ws/fifo"))
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo failed");
    w.put("ws/.git/config", "[core]\n");
    w.put("ws/.git/hooks/pre-commit", "#!/bin/sh\n");
    symlink(".git", w.path("ws/g")).unwrap();
    w.put("ws/.aether/notes.txt", "aether's own\n");
    w.put("ws/.env", "TOKEN=abc\n");
    w.put("ws/id_rsa", "-----BEGIN KEY-----\n");
    w
}

fn owned(paths: &[&str]) -> Vec<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

#[tokio::test]
async fn dot_dot_absolute_and_prefix_sibling_paths_are_refused_by_every_write_tool() {
    let w = trapped().await;
    let mut paths = owned(&[
        "../outside/secret.txt",
        "../outside/new.txt",
        "sub/../../outside/new.txt",
        "../ws_evil/x.txt",
        "..",
    ]);
    paths.extend([
        w.abs("outside/secret.txt"),
        w.abs("outside/new.txt"),
        w.abs("ws_evil/x.txt"),
        w.abs("ws_evil/new.txt"),
        format!("{}/../outside/new.txt", w.abs("ws")),
        "/etc/passwd".to_string(),
    ]);
    for (what, outcome, message) in all_refused(&w, &paths, None).await {
        assert!(!message.is_empty(), "{what}");
        // Each is refused by confinement, not by some accident further on.
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    // The same with the root named.
    let named = [w.abs("outside/new.txt"), w.abs("ws_evil/new.txt")];
    for (what, outcome, message) in all_refused(&w, &named, Some("ws")).await {
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    assert!(!w.exists("outside/new.txt") && !w.exists("ws_evil/new.txt"));
    w.h.check().await;
}

#[tokio::test]
async fn symlinks_out_of_the_root_are_never_written_through() {
    let w = trapped().await;
    // A symlinked folder pointing outside.
    let paths = vec![
        "link/new.txt".to_string(),
        "link/secret.txt".to_string(),
        "link/deeper/new.txt".to_string(),
        w.abs("ws/link/new.txt"),
    ];
    for (what, outcome, message) in all_refused(&w, &paths, None).await {
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    assert!(!w.exists("outside/new.txt") && !w.exists("outside/deeper"));

    // The final component a symlink to the secret: every tool but move_file refuses; moving
    // renames the link itself, inside the root, and leaves the secret alone.
    for (tool, args) in every_write("l.txt", None) {
        if tool == "move_file" && args["source"] == json!("l.txt") {
            continue;
        }
        let (message, _) = w.refused(tool, args.clone()).await;
        assert!(!message.is_empty(), "{tool} {args}");
    }
    let (message, _) = w
        .refused("write_file", json!({"path": "l.txt", "content": "pwned"}))
        .await;
    assert!(message.contains("symlink"), "{message}");
    w.ok(
        "move_file",
        json!({"source": "l.txt", "destination": "l2.txt"}),
    )
    .await;
    assert_eq!(
        fs::read_link(w.path("ws/l2.txt")).unwrap(),
        Path::new("../outside/secret.txt")
    );
    assert_eq!(w.read("outside/secret.txt"), SECRET);
    let outside: Vec<_> = fs::read_dir(w.path("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(outside, ["secret.txt"]);
    w.h.check().await;
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_refused() {
    let w = trapped().await;
    for (what, outcome, message) in all_refused(&w, &owned(&["hl.txt"]), None).await {
        // create_directory and a move onto it fail because something is there; every other
        // tool refuses the hard link itself.
        assert!(
            message.contains("hard link") || message.contains("exists"),
            "{what}: {outcome}: {message}"
        );
    }
    let (message, outcome) = w
        .refused("write_file", json!({"path": "hl.txt", "content": "pwned"}))
        .await;
    assert_eq!(outcome, "refused");
    assert!(message.contains("hard links"), "{message}");
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "hl.txt", "search": "TOP", "replace": "x"}),
        )
        .await;
    assert!(message.contains("hard links"), "{message}");
    let (message, _) = w.refused("delete_file", json!({"path": "hl.txt"})).await;
    assert!(message.contains("hard links"), "{message}");
    let (message, _) = w
        .refused(
            "move_file",
            json!({"source": "hl.txt", "destination": "moved.txt"}),
        )
        .await;
    assert!(message.contains("hard links"), "{message}");
    assert_eq!(
        fs::metadata(w.path("outside/secret.txt")).unwrap().nlink(),
        2
    );
    w.h.check().await;
}

#[tokio::test]
async fn a_fifo_is_refused_at_once_by_every_write_tool() {
    let w = trapped().await;
    let started = std::time::Instant::now();
    // World::call panics if a call hangs; none may.
    for (what, _, message) in all_refused(&w, &owned(&["fifo"]), None).await {
        assert!(!message.is_empty(), "{what}");
    }
    let (message, outcome) = w
        .refused("write_file", json!({"path": "fifo", "content": "x"}))
        .await;
    assert_eq!(outcome, "refused");
    assert!(message.contains("not a regular file"), "{message}");
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "fifo", "search": "a", "replace": "b"}),
        )
        .await;
    assert!(message.contains("not a regular file"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    w.h.check().await;
}

#[tokio::test]
async fn git_and_aether_folders_and_their_look_alikes_are_protected() {
    let w = trapped().await;
    let paths = owned(&[
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/hooks/new-hook",
        ".GIT/hooks/x",
        ".git./x",
        ".Git /x",
        "g/hooks/x",
        "g/config",
        "sub/.git/hooks/x",
        ".git",
        ".aether/notes.txt",
        ".aether/x",
        ".AETHER/x",
    ]);
    for (what, outcome, message) in all_refused(&w, &paths, None).await {
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    let (message, _) = w
        .refused(
            "write_file",
            json!({"path": ".GIT/hooks/x", "content": "x"}),
        )
        .await;
    assert!(message.contains(".git"), "{message}");
    let (message, _) = w
        .refused("write_file", json!({"path": "g/hooks/x", "content": "x"}))
        .await;
    assert!(message.contains(".git"), "{message}");
    assert!(!w.exists("ws/.GIT") && !w.exists("ws/.git.") && !w.exists("ws/sub"));
    // Moving a protected folder away is refused as well.
    w.refused(
        "move_file",
        json!({"source": ".git", "destination": "not-git"}),
    )
    .await;
    w.refused(
        "move_file",
        json!({"source": "plain.txt", "destination": ".git/hooks/post-checkout"}),
    )
    .await;
    w.h.check().await;
}

#[tokio::test]
async fn git_repositories_by_any_name_are_protected_and_none_can_be_planted() {
    let w = trapped().await;
    // A bare repository, and the folder a worktree's `gitdir:` file names: neither is called
    // `.git`, and git runs the hooks and obeys the config of both.
    for repo in ["ws/mirror.git", "ws/gitdata"] {
        w.put(&format!("{repo}/HEAD"), "ref: refs/heads/main\n");
        w.put(&format!("{repo}/config"), "[core]\n");
        w.put(&format!("{repo}/hooks/pre-receive"), "#!/bin/sh\n");
        fs::create_dir_all(w.path(&format!("{repo}/objects"))).unwrap();
        fs::create_dir_all(w.path(&format!("{repo}/refs/heads"))).unwrap();
    }
    w.put("ws/tree/.git", "gitdir: ../gitdata\n");
    let paths = owned(&[
        "mirror.git/hooks/pre-receive",
        "mirror.git/hooks/post-update",
        "mirror.git/config",
        "gitdata/hooks/pre-commit",
        "gitdata/config",
        "gitdata/refs/heads/main",
    ]);
    for (what, outcome, message) in all_refused(&w, &paths, None).await {
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    let (message, _) = w
        .refused(
            "edit_file",
            json!({"path": "mirror.git/hooks/pre-receive", "search": "#!/bin/sh", "replace": "#!/bin/sh\ncurl evil"}),
        )
        .await;
    assert!(message.contains("git repository"), "{message}");
    assert_eq!(w.read("ws/mirror.git/hooks/pre-receive"), "#!/bin/sh\n");
    // Planting one: the last piece that would make a folder a repository is refused,
    // whichever comes last.
    ok_text(
        &w.call(
            "write_file",
            json!({"path": "vendor/x/hooks/post-checkout", "content": "#!/bin/sh\n", "create_parents": true}),
        )
        .await,
    );
    ok_text(
        &w.call("create_directory", json!({"path": "vendor/x/objects"}))
            .await,
    );
    ok_text(
        &w.call("create_directory", json!({"path": "vendor/x/refs"}))
            .await,
    );
    let (message, _) = w
        .refused(
            "write_file",
            json!({"path": "vendor/x/HEAD", "content": "ref: refs/heads/main\n"}),
        )
        .await;
    assert!(message.contains("would make"), "{message}");
    assert!(!w.exists("ws/vendor/x/HEAD"));
    ok_text(&w.call("write_file", json!({"path": "vendor/y/HEAD", "content": "a file called HEAD\n", "create_parents": true})).await);
    ok_text(
        &w.call("create_directory", json!({"path": "vendor/y/objects"}))
            .await,
    );
    w.refused("create_directory", json!({"path": "vendor/y/refs"}))
        .await;
    assert!(!w.exists("ws/vendor/y/refs"));
    // The last two pieces at once: each write, checked alone, would find the other missing.
    for i in 0..20 {
        let dir = format!("vendor/race{i}");
        ok_text(
            &w.call(
                "create_directory",
                json!({"path": format!("{dir}/objects")}),
            )
            .await,
        );
        let (head, refs) = tokio::join!(
            w.call(
                "write_file",
                json!({"path": format!("{dir}/HEAD"), "content": "ref: refs/heads/main\n"})
            ),
            w.call("create_directory", json!({"path": format!("{dir}/refs")})),
        );
        let landed = [head, refs]
            .iter()
            .filter(|r| error_of(r).is_none())
            .count();
        assert!(landed <= 1, "{dir}: both pieces landed");
        assert!(
            !(w.exists(&format!("ws/{dir}/HEAD")) && w.exists(&format!("ws/{dir}/refs"))),
            "{dir} became a repository"
        );
    }
    // Nor by a folder made on the way to a file (`create_parents`).
    ok_text(
        &w.call(
            "write_file",
            json!({"path": "vendor/z/HEAD", "content": "ref: x\n", "create_parents": true}),
        )
        .await,
    );
    ok_text(
        &w.call("create_directory", json!({"path": "vendor/z/objects"}))
            .await,
    );
    let (message, _) = w
        .refused(
            "write_file",
            json!({"path": "vendor/z/refs/heads/main", "content": "x\n", "create_parents": true}),
        )
        .await;
    assert!(message.contains("git repository"), "{message}");
    assert!(!w.exists("ws/vendor/z/refs"));
    w.h.check().await;
}

#[tokio::test]
async fn credential_files_are_never_written() {
    let w = trapped().await;
    let paths = owned(&[
        ".env",
        "id_rsa",
        "conf/.env.local",
        ".ssh/authorized_keys",
        "deploy/id_rsa",
    ]);
    for (what, outcome, message) in all_refused(&w, &paths, None).await {
        assert_eq!(outcome, "refused", "{what}: {message}");
    }
    assert_eq!(w.read("ws/.env"), "TOKEN=abc\n");
    // A harmless name that is a symlink to a credential file.
    symlink(".env", w.path("ws/settings.txt")).unwrap();
    w.refused(
        "write_file",
        json!({"path": "settings.txt", "content": "x"}),
    )
    .await;
    w.refused(
        "edit_file",
        json!({"path": "settings.txt", "search": "TOKEN", "replace": "x"}),
    )
    .await;
    assert_eq!(w.read("ws/.env"), "TOKEN=abc\n");
    w.h.check().await;
}

/// Credential files known by their folder's name (`.kube/config`) cannot be renamed out of
/// being known: the folder that holds them does not move.
#[tokio::test]
async fn a_folder_holding_credentials_is_not_moved_out_of_their_names() {
    let w = World::new().await;
    w.put("ws/.kube/config", "token: abc\n");
    w.put("ws/.config/gh/hosts.yml", "oauth_token: abc\n");
    for (source, destination) in [(".kube", "k"), (".config", "x"), (".config/gh", "gh")] {
        let (message, outcome) = w
            .refused(
                "move_file",
                json!({"source": source, "destination": destination}),
            )
            .await;
        assert_eq!(outcome, "refused", "{source}: {message}");
        assert!(message.contains("credential"), "{source}: {message}");
        assert!(!w.exists(&format!("ws/{destination}")));
    }
    let read = w.call("read_file", json!({"path": ".kube/config"})).await;
    assert!(error_of(&read).is_some(), "the credential stays unreadable");
    // A folder with nothing of the kind moves.
    w.put("ws/notes/a.txt", "a\n");
    ok_text(
        &w.call(
            "move_file",
            json!({"source": "notes", "destination": "notes2"}),
        )
        .await,
    );
    w.h.check().await;
}

#[tokio::test]
async fn read_only_and_sealed_roots_refuse_every_write() {
    let w = World::new().await;
    w.put("ro/plain.txt", "plain\n");
    w.put("sealed/plain.txt", "plain\n");
    for root in ["ro", "sealed"] {
        let paths = owned(&["readme.txt", "pinned.txt", "new.txt", "dir/new.txt"]);
        for (what, outcome, message) in all_refused(&w, &paths, Some(root)).await {
            assert_eq!(outcome, "refused", "{root}: {what}: {message}");
            assert!(
                message.contains(root) && message.contains("can be changed"),
                "{what}: {message}"
            );
        }
        // By absolute path, without naming the root.
        let abs = [
            w.abs(&format!("{root}/plain.txt")),
            w.abs(&format!("{root}/new.txt")),
        ];
        for (what, outcome, message) in all_refused(&w, &abs, None).await {
            assert_eq!(outcome, "refused", "{root}: {what}: {message}");
        }
        let result = w
            .call("revert_file", json!({"root": root, "path": "plain.txt"}))
            .await;
        error(&result);
    }
    w.h.check().await;
}

#[tokio::test]
async fn the_write_manifest_confines_writes_to_its_globs() {
    let w = World::new().await;
    w.put("man/src/plain.txt", "plain\n");
    let paths = owned(&["README.md", "docs/new.md", "srcx/a.rs", "new.txt"]);
    let mut seen = Vec::new();
    for path in &paths {
        for (tool, mut args) in every_write(path, Some("man")) {
            if args.get("source") == Some(&json!("plain.txt")) {
                args["source"] = json!("src/plain.txt");
            }
            seen.push(w.refused(tool, args).await);
        }
    }
    for (message, outcome) in &seen {
        assert_eq!(outcome, "refused", "{message}");
    }
    assert!(seen.iter().any(|(m, _)| m.contains("src/**")), "{seen:?}");
    assert_eq!(w.read("man/README.md"), "manifest root\n");
    // Inside the globs, writes work.
    w.ok(
        "write_file",
        json!({"root": "man", "path": "src/new.rs", "content": "ok\n"}),
    )
    .await;
    w.ok(
        "edit_file",
        json!({"root": "man", "path": "src/new.rs", "search": "ok", "replace": "fine"}),
    )
    .await;
    assert_eq!(w.read("man/src/new.rs"), "fine\n");
    w.ok(
        "create_directory",
        json!({"root": "man", "path": "src/mod"}),
    )
    .await;
    w.ok(
        "move_file",
        json!({"root": "man", "source": "src/new.rs", "destination": "src/mod/new.rs"}),
    )
    .await;
    assert_eq!(w.read("man/src/mod/new.rs"), "fine\n");
    // A folder link inside the globs does not carry a write outside them.
    fs::create_dir_all(w.path("man/deploy")).unwrap();
    symlink("../deploy", w.path("man/src/assets")).unwrap();
    for (tool, args) in [
        (
            "write_file",
            json!({"root": "man", "path": "src/assets/run.sh", "content": "x\n"}),
        ),
        (
            "create_directory",
            json!({"root": "man", "path": "src/assets/bin"}),
        ),
        (
            "move_file",
            json!({"root": "man", "source": "src/mod/new.rs", "destination": "src/assets/new.rs"}),
        ),
    ] {
        let (message, outcome) = w.refused(tool, args).await;
        assert_eq!(outcome, "refused", "{tool}: {message}");
        assert!(message.contains("through a link"), "{tool}: {message}");
    }
    assert!(!w.exists("man/deploy/run.sh"));
    assert!(!w.exists("man/deploy/bin"));
    w.h.check().await;
}

#[tokio::test]
async fn content_over_the_write_limit_is_refused() {
    let w = World::with_limits(Limits {
        write_file_bytes: 1024,
        ..Default::default()
    })
    .await;
    let big = "x".repeat(2000);
    let (message, outcome) = w
        .refused("write_file", json!({"path": "big.txt", "content": big}))
        .await;
    assert_eq!(outcome, "tool_error");
    assert!(
        message.contains("2000 bytes") && message.contains("1024"),
        "{message}"
    );
    assert!(!w.exists("ws/big.txt"));
    // Nor are the folders it would have gone in made.
    w.refused(
        "write_file",
        json!({"path": "deep/er/big.txt", "content": big}),
    )
    .await;
    assert!(!w.exists("ws/deep"));

    // An edit that would grow a file past the limit.
    w.put("ws/small.txt", "small\n");
    w.refused(
        "edit_file",
        json!({"path": "small.txt", "search": "small", "replace": big}),
    )
    .await;
    w.refused(
        "edit_file",
        json!({"path": "grown.txt", "search": "", "replace": big}),
    )
    .await;
    assert_eq!(w.read("ws/small.txt"), "small\n");

    // A file already larger than the limit cannot be edited, overwritten or deleted: its old
    // content would not fit the journal.
    w.put("ws/large.txt", &big);
    w.refused(
        "edit_file",
        json!({"path": "large.txt", "search": "xxx", "replace": "y"}),
    )
    .await;
    w.refused(
        "write_file",
        json!({"path": "large.txt", "content": "short"}),
    )
    .await;
    let (message, _) = w.refused("delete_file", json!({"path": "large.txt"})).await;
    assert!(message.contains("journal"), "{message}");
    // At the limit is fine.
    w.ok(
        "write_file",
        json!({"path": "edge.txt", "content": "y".repeat(1024)}),
    )
    .await;
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// Races and a vanishing root
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_swapped_for_a_symlink_mid_write_never_leads_outside() {
    let w = World::new().await;
    fs::create_dir(w.path("ws/d")).unwrap();
    let (dir, parked, link) = (w.path("ws/d"), w.path("ws/d_parked"), w.path("ws/d_link"));
    symlink("../outside", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps) = (stop.clone(), swaps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // The real folder steps aside and the prepared symlink is renamed over its name;
                // then back.
                fs::rename(&dir, &parked).unwrap();
                fs::rename(&link, &dir).unwrap();
                std::thread::yield_now();
                fs::rename(&dir, &link).unwrap();
                fs::rename(&parked, &dir).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
                std::thread::yield_now();
            }
        })
    };
    let mut written = 0;
    for i in 0..200 {
        // No create_parents: a write that meets the gap must not make a folder of its own.
        let result = w
            .call(
                "write_file",
                json!({"path": "d/f.txt", "content": format!("write {i}\n"), "create_parents": false}),
            )
            .await;
        let outcome = w.outcome(&result.call_id);
        match error_of(&result) {
            None => written += 1,
            Some(_) => assert!(outcome == "refused" || outcome == "tool_error", "{outcome}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("the swapper failed");
    assert!(swaps.load(Ordering::Relaxed) > 0, "the swapper never ran");

    let outside: Vec<_> = fs::read_dir(w.path("outside"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        outside,
        ["secret.txt"],
        "something was written outside the root"
    );
    assert_eq!(w.read("outside/secret.txt"), SECRET);
    if written > 0 {
        assert!(w.read("ws/d/f.txt").starts_with("write "));
    }
    eprintln!(
        "{written} of 200 writes landed, {} swaps",
        swaps.load(Ordering::Relaxed)
    );
    w.h.check().await;
}

#[tokio::test]
async fn a_root_removed_while_in_use_is_reported_and_nothing_is_created() {
    let w = World::new().await;
    w.ok(
        "write_file",
        json!({"path": "before.txt", "content": "ok\n"}),
    )
    .await;
    fs::rename(w.path("ws"), w.path("ws_moved_away")).unwrap();
    let result = w
        .call("write_file", json!({"path": "new.txt", "content": "x\n"}))
        .await;
    let message = error(&result);
    assert!(message.contains("no longer available"), "{message}");
    assert!(message.contains("\"ws\""), "{message}");
    assert!(!w.exists("ws"), "the root folder was not recreated");
    assert!(
        !w.exists("ws_moved_away/new.txt"),
        "the write did not follow the moved folder"
    );

    // Replaced by another, empty folder of the same name: still refused.
    fs::create_dir(w.path("ws")).unwrap();
    for (tool, args) in every_write("new.txt", None) {
        let result = w.call(tool, args).await;
        let message = error(&result);
        assert!(message.contains("no longer available"), "{tool}: {message}");
    }
    assert_eq!(fs::read_dir(w.path("ws")).unwrap().count(), 0);
    assert!(!w.exists("ws_moved_away/new.txt"));
    w.h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_edits_of_one_file_lose_no_update() {
    let w = Arc::new(World::new().await);
    w.put("ws/log.txt", "END\n");
    let mut tasks = Vec::new();
    for i in 0..32 {
        let w = w.clone();
        let ctx = w.session(&format!("s-{}", i % 4));
        tasks.push(tokio::spawn(async move {
            let result = w
                .call_as(
                    &ctx,
                    "edit_file",
                    json!({"path": "log.txt", "search": "END", "replace": format!("line-{i}\nEND")}),
                )
                .await;
            assert!(error_of(&result).is_none(), "edit {i}: {result:?}");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let content = w.read("ws/log.txt");
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 33, "{content}");
    assert_eq!(lines.last(), Some(&"END"));
    let unique: HashSet<&str> = lines[..32].iter().copied().collect();
    let expected: HashSet<String> = (0..32).map(|i| format!("line-{i}")).collect();
    assert_eq!(
        unique,
        expected.iter().map(String::as_str).collect::<HashSet<_>>()
    );
    let writes: i64 =
        w.h.sql()
            .query_row(
                "SELECT count(*) FROM journal WHERE op = 'write' AND path = 'log.txt'",
                [],
                |r| r.get(0),
            )
            .unwrap();
    assert_eq!(writes, 32);
    w.h.check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_edits_each_get_their_own_outcome_and_the_journal_chains() {
    let w = Arc::new(World::new().await);
    w.put("ws/log.txt", "END\n");
    let mut tasks = Vec::new();
    for i in 0..24 {
        let w = w.clone();
        let ctx = w.session(&format!("s-{}", i % 3));
        tasks.push(tokio::spawn(async move {
            // Every third edit searches for text that is not there: it fails alone, and the
            // edits queued with it still land.
            let search = if i % 3 == 0 { format!("NOPE-{i}") } else { "END".into() };
            let result = w
                .call_as(
                    &ctx,
                    "edit_file",
                    json!({"path": "log.txt", "search": search, "replace": format!("line-{i}\nEND")}),
                )
                .await;
            (i, result)
        }));
    }
    let mut failed = Vec::new();
    for t in tasks {
        let (i, result) = t.await.unwrap();
        match error_of(&result) {
            Some(e) => {
                assert_eq!(i % 3, 0, "edit {i} failed: {e}");
                assert!(e.contains("the file is unchanged"), "{e}");
                failed.push(result.call_id.clone());
            }
            None => assert_ne!(i % 3, 0, "edit {i} should have failed: {result:?}"),
        }
    }
    assert_eq!(failed.len(), 8);
    let content = w.read("ws/log.txt");
    assert_eq!(content.lines().count(), 17, "{content}");
    // One entry per edit that landed, none for the failures; each entry's old content is the
    // one before it's new content, from the original file to what is on disk now.
    let sql = w.h.sql();
    let mut stmt = sql
        .prepare("SELECT call_id, before_hash, after_hash FROM journal WHERE path = 'log.txt' ORDER BY id")
        .unwrap();
    let rows: Vec<(String, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|(call, _, _)| !failed.contains(call)));
    assert_eq!(rows[0].1, content_hash(b"END\n"));
    for pair in rows.windows(2) {
        assert_eq!(pair[1].1, pair[0].2, "the journal does not chain");
    }
    assert_eq!(rows[15].2, content_hash(content.as_bytes()));
    // Every old content is kept, so the newest edit undoes to the one before it.
    let blobs: i64 = sql
        .query_row("SELECT count(*) FROM journal_blobs", [], |r| r.get(0))
        .unwrap();
    assert!(blobs >= 16, "{blobs} images kept");
    let undo = w.p.operator_undo("alice", &rows[15].0, None).await;
    assert!(error_of(&undo).is_none(), "{undo:?}");
    assert_eq!(content_hash(w.read("ws/log.txt").as_bytes()), rows[15].1);
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// Sealed roots
// ---------------------------------------------------------------------------------------------

/// Seals the `sealed` root as the operator's `aether roots seal` does.
async fn seal(w: &World) {
    let root = w.p.roots().get("sealed").unwrap();
    let pins = root
        .pins(w.p.roots().credentials())
        .unwrap()
        .into_iter()
        .map(|(path, hash, size)| SealPin {
            path,
            hash,
            size: size as i64,
        })
        .collect();
    w.h.store
        .seal(
            SealRecord {
                root: "sealed".into(),
                root_path: root.path.to_string_lossy().into_owned(),
                at_us: aether_store::now_us(),
                by: "alice".into(),
                why: "release 1.0".into(),
                files: 0,
                generation: 0,
            },
            pins,
        )
        .await
        .unwrap();
    w.p.reload_seals().await.unwrap();
}

#[tokio::test]
async fn a_sealed_root_serves_only_files_unchanged_since_the_seal() {
    let w = World::new().await;
    w.put("sealed/changed.txt", "needle original\n");
    w.put("sealed/other.txt", "needle elsewhere\n");
    w.put("sealed/nested/deep.txt", "deep needle\n");

    // Before any seal, nothing is read.
    let result = w
        .call("read_file", json!({"root": "sealed", "path": "pinned.txt"}))
        .await;
    let message = error(&result);
    assert!(message.contains("no seal is on record"), "{message}");
    assert_eq!(w.outcome(&result.call_id), "refused");

    seal(&w).await;
    let files: i64 =
        w.h.sql()
            .query_row("SELECT files FROM seals WHERE root = 'sealed'", [], |r| {
                r.get(0)
            })
            .unwrap();
    assert_eq!(files, 4);
    let result = w
        .call("read_file", json!({"root": "sealed", "path": "pinned.txt"}))
        .await;
    assert!(ok_text(&result).contains("pinned content"));
    let result = w
        .call(
            "read_file",
            json!({"root": "sealed", "path": "nested/deep.txt"}),
        )
        .await;
    assert!(ok_text(&result).contains("deep needle"));

    // Changed on disk (another length; and the same length, caught by the hash).
    fs::write(w.path("sealed/changed.txt"), "needle CHANGED by someone\n").unwrap();
    fs::write(w.path("sealed/pinned.txt"), "PINNED content\n").unwrap();
    for path in ["changed.txt", "pinned.txt"] {
        let result = w
            .call("read_file", json!({"root": "sealed", "path": path}))
            .await;
        let message = error(&result);
        assert!(
            message.contains("changed on disk since"),
            "{path}: {message}"
        );
        assert!(
            !message.contains("CHANGED") && !message.contains("PINNED"),
            "{message}"
        );
        assert_eq!(w.outcome(&result.call_id), "refused");
    }
    // Added after the seal.
    w.put("sealed/added.txt", "needle added later\n");
    let result = w
        .call("read_file", json!({"root": "sealed", "path": "added.txt"}))
        .await;
    let message = error(&result);
    assert!(message.contains("added after"), "{message}");

    // A search reads only the files still as sealed.
    let result = w
        .call("search_files", json!({"root": "sealed", "query": "needle"}))
        .await;
    let found = ok_text(&result);
    assert!(
        found.contains("needle elsewhere") && found.contains("deep needle"),
        "{found}"
    );
    assert!(
        !found.contains("CHANGED") && !found.contains("added later"),
        "{found}"
    );
    // pinned.txt and changed.txt changed; added.txt is not there for the tools at all (not
    // even counted).
    assert!(found.contains("[2 file(s) not searched"), "{found}");

    // read_multiple_files refuses the changed one too.
    let result = w
        .call(
            "read_multiple_files",
            json!({"root": "sealed", "paths": ["other.txt", "changed.txt"]}),
        )
        .await;
    let both = text(&result);
    assert!(
        both.contains("needle elsewhere") && !both.contains("CHANGED"),
        "{both}"
    );

    // Re-sealed: the new content is what is pinned now.
    seal(&w).await;
    let result = w
        .call(
            "read_file",
            json!({"root": "sealed", "path": "changed.txt"}),
        )
        .await;
    assert!(ok_text(&result).contains("needle CHANGED"));
    w.h.check().await;
}

// ---------------------------------------------------------------------------------------------
// list_files
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn list_files_shows_the_tree_honouring_ignores_depth_and_limits() {
    let w = World::new().await;
    for (path, content) in [
        ("ws/src/main.rs", "fn main() {}\n"),
        ("ws/src/util/mod.rs", "\n"),
        ("ws/src/util/deep/x.rs", "\n"),
        ("ws/docs/a.md", "# a\n"),
        ("ws/.gitignore", "target/\n*.log\n"),
        ("ws/target/out.bin", "bin"),
        ("ws/debug.log", "log"),
        ("ws/.hidden/h.txt", "h"),
        ("ws/.dotfile", "d"),
        ("ws/.env", "SECRET=1"),
    ] {
        w.put(path, content);
    }

    let result = w.call("list_files", json!({})).await;
    let tree = ok_text(&result);
    let lines: Vec<&str> = tree.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "docs/",
            "  a.md",
            "src/",
            "  main.rs",
            "  util/",
            "    deep/",
            "      x.rs",
            "    mod.rs",
        ],
        "{tree}"
    );
    for absent in [
        "target",
        "debug.log",
        ".hidden",
        ".dotfile",
        ".gitignore",
        ".env",
    ] {
        assert!(!tree.contains(absent), "{absent} listed: {tree}");
    }

    // Depth 1: the folders are shown but not opened, and a marker says so.
    let tree = ok_text(&w.call("list_files", json!({"depth": 1})).await);
    assert!(tree.contains("docs/") && tree.contains("src/"), "{tree}");
    assert!(!tree.contains("main.rs"), "{tree}");
    assert!(tree.contains("folders at depth 1 are not opened"), "{tree}");

    // max_entries: a marker with how much was left out.
    let result = w.call("list_files", json!({"max_entries": 3})).await;
    let tree = ok_text(&result);
    assert!(tree.contains("stopped after 3 of 8"), "{tree}");
    match &result.outcome {
        CallOutcome::Ran(out) => {
            let s = out.structured.as_ref().unwrap();
            assert_eq!(
                (s["shown"].clone(), s["truncated"].clone()),
                (json!(3), json!(true))
            );
        }
        other => panic!("{other:?}"),
    }

    // Hidden entries on request (credential files never), ignores off on request.
    let tree = ok_text(&w.call("list_files", json!({"include_hidden": true})).await);
    assert!(
        tree.contains(".dotfile") && tree.contains(".hidden/") && tree.contains(".gitignore"),
        "{tree}"
    );
    assert!(!tree.contains(".env"), "{tree}");
    let tree = ok_text(&w.call("list_files", json!({"respect_ignore": false})).await);
    assert!(
        tree.contains("debug.log") && tree.contains("target/"),
        "{tree}"
    );

    // A sub-folder.
    let tree = ok_text(&w.call("list_files", json!({"path": "src/util"})).await);
    assert!(
        tree.contains("mod.rs") && !tree.contains("main.rs"),
        "{tree}"
    );
    w.h.check().await;
}

#[tokio::test]
async fn list_files_never_leaves_the_root_nor_shows_what_it_guards() {
    let w = World::new().await;
    w.put("ws/src/lib.rs", "\n");
    w.put("ws/src/gen/.gitignore", "*.tmp\n");
    w.put("ws/src/gen/keep.rs", "\n");
    w.put("ws/src/gen/junk.tmp", "\n");
    w.put("ws/.git/config", "[core]\n");
    w.put("ws/.ssh/id_ed25519", "key\n");
    w.put("ws/.aether/x", "\n");
    std::os::unix::fs::symlink(w.path("outside"), w.path("ws/out")).unwrap();
    std::os::unix::fs::symlink("../ws_evil", w.path("ws/evil")).unwrap();

    let tree = ok_text(
        &w.call(
            "list_files",
            json!({"include_hidden": true, "depth": 64, "max_entries": 10000}),
        )
        .await,
    );
    // Symlinks are shown as such and never entered, wherever they point.
    assert!(tree.contains("out@") && tree.contains("evil@"), "{tree}");
    assert!(
        !tree.contains("secret.txt") && !tree.contains("x.txt"),
        "{tree}"
    );
    // A nested ignore file speaks for its own folder.
    assert!(
        tree.contains("keep.rs") && !tree.contains("junk.tmp"),
        "{tree}"
    );
    // .git, .aether and credential folders are never listed, hidden entries asked for or not.
    let names: Vec<&str> = tree.lines().skip(1).map(str::trim).collect();
    for absent in [".git/", ".aether/", ".ssh/", "id_ed25519", "config", "x"] {
        assert!(!names.contains(&absent), "{absent} listed: {tree}");
    }
    // The listing is sorted folder by folder ("src/" before "src.txt" would be by bytes).
    w.put("ws/src.txt", "\n");
    let tree = ok_text(&w.call("list_files", json!({})).await);
    let src = tree.find("src/").unwrap();
    assert!(src < tree.find("  lib.rs").unwrap(), "{tree}");
    assert!(
        tree.find("  lib.rs").unwrap() < tree.find("src.txt").unwrap(),
        "{tree}"
    );
    w.h.check().await;
}

/// The journal as a redo log: a write's receipt rides its journal commit, which holds the new
/// content as well as the old; a write or edit that changes nothing has no receipt, its row
/// being its only record.
#[tokio::test]
async fn a_writes_receipt_rides_its_journal_commit_and_a_no_op_is_one_record() {
    let w = World::new().await;
    let store = w.h.store.clone();
    let row = |call: String| {
        let store = store.clone();
        async move {
            store
                .audit_query(aether_store::AuditQuery {
                    call_id: Some(call),
                    limit: 5,
                    ..Default::default()
                })
                .await
                .unwrap()
                .pop()
                .unwrap()
        }
    };
    let (wrote, _) = w
        .ok("write_file", json!({"path": "r.txt", "content": "one\n"}))
        .await;
    assert!(store.receipt(&wrote.call_id).await.unwrap().is_some());
    assert!(!row(wrote.call_id.clone()).await.event.single);
    assert_eq!(
        store
            .journal_blob(&content_hash(b"one\n"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"one\n"[..]),
        "the journal holds the new content"
    );
    let (same, _) = w
        .ok("write_file", json!({"path": "r.txt", "content": "one\n"}))
        .await;
    assert!(store.receipt(&same.call_id).await.unwrap().is_none());
    assert!(row(same.call_id.clone()).await.event.single);
    let (edited, _) = w
        .ok(
            "edit_file",
            json!({"path": "r.txt", "search": "one", "replace": "two"}),
        )
        .await;
    assert_eq!(w.read("ws/r.txt"), "two\n");
    assert!(store.receipt(&edited.call_id).await.unwrap().is_some());
    assert_eq!(
        store
            .journal_blob(&content_hash(b"two\n"))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"two\n"[..])
    );
    let missed = w
        .call(
            "edit_file",
            json!({"path": "r.txt", "search": "absent", "replace": "x"}),
        )
        .await;
    assert!(store.receipt(&missed.call_id).await.unwrap().is_none());
    let missed_row = row(missed.call_id.clone()).await;
    assert!(missed_row.event.single && missed_row.event.step.is_none());
    // A write into a folder that is not there yet commits its receipt before making it.
    let (deep, _) = w
        .ok(
            "write_file",
            json!({"path": "new/dir/f.txt", "content": "x\n"}),
        )
        .await;
    assert!(store.receipt(&deep.call_id).await.unwrap().is_some());
    w.h.check().await;
}
