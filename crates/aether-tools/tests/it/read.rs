//! `read_file` and `read_multiple_files`: whole files, line ranges, head and tail, and the
//! files they refuse (binary, not UTF-8, too large, folders, missing).

use aether_policy::config::Limits;
use aether_tools::CallContext;
use serde_json::{Value, json};

use crate::common::{Tree, call, failed, invalid, ok};

/// Ten numbered lines: "1\n2\n...10\n".
fn ten_lines() -> String {
    (1..=10).map(|n| format!("{n}\n")).collect()
}

/// Reads with `args`, checks the text block and `content` equal `want`, and returns the
/// structured output for further checks.
async fn check(cx: &CallContext, args: Value, want: &str) -> Value {
    let (text, out) = ok(call(cx, "read_file", args.clone()).await);
    assert_eq!(out["content"], want, "read_file {args}");
    assert_eq!(
        text, want,
        "read_file {args}: the text block differs from content"
    );
    assert_eq!(out["truncated"], false, "read_file {args}");
    out
}

/// `start_line`, `end_line` and `total_lines` of a structured output (absent ones as None).
fn lines(out: &Value) -> (Option<u64>, Option<u64>, Option<u64>) {
    (
        out["start_line"].as_u64(),
        out["end_line"].as_u64(),
        out["total_lines"].as_u64(),
    )
}

#[tokio::test]
async fn a_whole_file_is_read_as_is() {
    let t = Tree::new();
    t.file("sub/ten.txt", ten_lines());
    let out = check(&t.cx(), json!({"path": "sub/ten.txt"}), &ten_lines()).await;
    assert_eq!(lines(&out), (None, None, Some(10)));
    assert_eq!(
        (out["root"].as_str(), out["path"].as_str()),
        (Some("ws"), Some("sub/ten.txt"))
    );
    assert_eq!(out["size"], ten_lines().len());
    // A redundant `./` and doubled slashes are cleaned away.
    let out = check(&t.cx(), json!({"path": "./sub//ten.txt"}), &ten_lines()).await;
    assert_eq!(out["path"], "sub/ten.txt");
}

#[tokio::test]
async fn line_ranges_are_inclusive_and_clamped_at_the_end() {
    let t = Tree::new();
    t.file("ten.txt", ten_lines());
    let cx = t.cx();
    let out = check(
        &cx,
        json!({"path": "ten.txt", "start_line": 3, "end_line": 5}),
        "3\n4\n5\n",
    )
    .await;
    assert_eq!(lines(&out), (Some(3), Some(5), None));
    let out = check(
        &cx,
        json!({"path": "ten.txt", "start_line": 8, "end_line": 100}),
        "8\n9\n10\n",
    )
    .await;
    assert_eq!(lines(&out), (Some(8), Some(10), Some(10)));
    let out = check(&cx, json!({"path": "ten.txt", "start_line": 9}), "9\n10\n").await;
    assert_eq!(lines(&out), (Some(9), Some(10), Some(10)));
    let out = check(&cx, json!({"path": "ten.txt", "end_line": 2}), "1\n2\n").await;
    assert_eq!(lines(&out), (Some(1), Some(2), None));
    check(
        &cx,
        json!({"path": "ten.txt", "start_line": 10, "end_line": 10}),
        "10\n",
    )
    .await;
}

#[tokio::test]
async fn a_start_line_past_the_end_is_an_error() {
    let t = Tree::new();
    t.file("ten.txt", ten_lines());
    let cx = t.cx();
    let message = invalid(
        call(
            &cx,
            "read_file",
            json!({"path": "ten.txt", "start_line": 11}),
        )
        .await,
    );
    assert!(
        message.contains("has 10 lines; start_line 11 is past the end"),
        "{message}"
    );
    let message = invalid(
        call(
            &cx,
            "read_file",
            json!({"path": "ten.txt", "start_line": 5, "end_line": 4}),
        )
        .await,
    );
    assert!(
        message.contains("start_line 5 is after end_line 4"),
        "{message}"
    );
}

#[tokio::test]
async fn head_and_tail() {
    let t = Tree::new();
    t.file("ten.txt", ten_lines());
    let cx = t.cx();
    let out = check(&cx, json!({"path": "ten.txt", "head": 2}), "1\n2\n").await;
    assert_eq!(lines(&out), (Some(1), Some(2), None));
    let out = check(&cx, json!({"path": "ten.txt", "head": 50}), &ten_lines()).await;
    assert_eq!(lines(&out), (Some(1), Some(10), Some(10)));
    let out = check(&cx, json!({"path": "ten.txt", "tail": 3}), "8\n9\n10\n").await;
    assert_eq!(lines(&out), (Some(8), Some(10), Some(10)));
    let out = check(&cx, json!({"path": "ten.txt", "tail": 50}), &ten_lines()).await;
    assert_eq!(lines(&out), (Some(1), Some(10), Some(10)));
}

#[tokio::test]
async fn conflicting_range_arguments_are_refused() {
    let t = Tree::new();
    t.file("ten.txt", ten_lines());
    let cx = t.cx();
    for args in [
        json!({"path": "ten.txt", "head": 1, "tail": 1}),
        json!({"path": "ten.txt", "start_line": 1, "head": 1}),
        json!({"path": "ten.txt", "end_line": 3, "tail": 1}),
        json!({"path": "ten.txt", "start_line": 1, "end_line": 2, "head": 1, "tail": 1}),
    ] {
        let message = invalid(call(&cx, "read_file", args.clone()).await);
        assert!(message.contains("at most one of"), "{args}: {message}");
    }
    // Arguments the tool does not know are refused, not ignored.
    let result = aether_tools::builtin_tools()
        .into_iter()
        .find(|tool| tool.def().name == "read_file")
        .unwrap()
        .call(cx.clone(), json!({"path": "ten.txt", "lines": 3}))
        .await;
    invalid(result);
}

#[tokio::test]
async fn an_empty_file_reads_as_empty() {
    let t = Tree::new();
    t.file("empty.txt", "");
    let cx = t.cx();
    let out = check(&cx, json!({"path": "empty.txt"}), "").await;
    assert_eq!(
        (out["size"].as_u64(), out["total_lines"].as_u64()),
        (Some(0), Some(0))
    );
    check(&cx, json!({"path": "empty.txt", "head": 3}), "").await;
    check(&cx, json!({"path": "empty.txt", "tail": 3}), "").await;
    check(&cx, json!({"path": "empty.txt", "start_line": 1}), "").await;
    invalid(
        call(
            &cx,
            "read_file",
            json!({"path": "empty.txt", "start_line": 2}),
        )
        .await,
    );
}

#[tokio::test]
async fn a_file_without_a_trailing_newline_keeps_its_last_line() {
    let t = Tree::new();
    t.file("open.txt", "a\nb\nc");
    let cx = t.cx();
    let out = check(&cx, json!({"path": "open.txt"}), "a\nb\nc").await;
    assert_eq!(out["total_lines"], 3);
    let out = check(&cx, json!({"path": "open.txt", "tail": 1}), "c").await;
    assert_eq!(lines(&out), (Some(3), Some(3), Some(3)));
    check(
        &cx,
        json!({"path": "open.txt", "start_line": 2, "end_line": 9}),
        "b\nc",
    )
    .await;
    check(&cx, json!({"path": "open.txt", "head": 2}), "a\nb\n").await;
}

#[tokio::test]
async fn a_binary_file_is_described_not_dumped() {
    let t = Tree::new();
    t.file("blob.bin", b"PAYLOAD\x00\x01\x02PAYLOAD\n");
    let cx = t.cx();
    for args in [
        json!({"path": "blob.bin"}),
        json!({"path": "blob.bin", "head": 1}),
        json!({"path": "blob.bin", "tail": 1}),
    ] {
        let message = failed(call(&cx, "read_file", args.clone()).await);
        assert!(
            message.contains("ws:blob.bin is a binary file (18 bytes)"),
            "{args}: {message}"
        );
        assert!(!message.contains("PAYLOAD"), "{args}: {message}");
    }
}

#[tokio::test]
async fn a_nul_after_the_first_line_still_marks_the_file_binary_for_line_reads() {
    // Regression: line reads checked only the first line for NUL bytes, so a binary file with a
    // short text header was dumped by `tail` or a range while a whole read refused it.
    let t = Tree::new();
    let mut bytes = b"#!/bin/sh\n".to_vec();
    bytes.extend_from_slice(b"\x00\x00\x00BINARY-PAYLOAD\n".repeat(20).as_slice());
    t.file("installer.run", &bytes);
    let cx = t.cx();
    for args in [
        json!({"path": "installer.run"}),
        json!({"path": "installer.run", "tail": 2}),
        json!({"path": "installer.run", "start_line": 2, "end_line": 3}),
        json!({"path": "installer.run", "head": 5}),
    ] {
        let message = failed(call(&cx, "read_file", args.clone()).await);
        assert!(message.contains("binary file"), "{args}: {message}");
        assert!(!message.contains("BINARY-PAYLOAD"), "{args}: {message}");
    }
}

#[tokio::test]
async fn invalid_utf8_is_refused() {
    let t = Tree::new();
    t.file("latin1.txt", b"caf\xe9\nsecond line\n");
    let cx = t.cx();
    for args in [
        json!({"path": "latin1.txt"}),
        json!({"path": "latin1.txt", "head": 1}),
    ] {
        let message = failed(call(&cx, "read_file", args.clone()).await);
        assert!(message.contains("not UTF-8"), "{args}: {message}");
    }
}

#[tokio::test]
async fn a_file_over_the_size_limit_is_readable_only_by_range() {
    let t = Tree::new();
    let body: String = (1..=300).map(|n| format!("line {n:03}\n")).collect();
    t.file("big.log", &body);
    let cx = t.cx_with(Limits {
        read_file_bytes: 1024,
        ..Limits::default()
    });
    let message = failed(call(&cx, "read_file", json!({"path": "big.log"})).await);
    assert!(
        message.contains(&format!("{} bytes, over the 1024-byte limit", body.len())),
        "{message}"
    );
    assert!(
        message.contains("start_line/end_line, head or tail"),
        "{message}"
    );
    let (_, out) = ok(call(&cx, "read_multiple_files", json!({"paths": ["big.log"]})).await);
    assert!(
        out["files"][0]["error"]
            .as_str()
            .unwrap()
            .contains("1024-byte limit"),
        "{out}"
    );

    check(
        &cx,
        json!({"path": "big.log", "head": 2}),
        "line 001\nline 002\n",
    )
    .await;
    check(&cx, json!({"path": "big.log", "tail": 1}), "line 300\n").await;
    let out = check(
        &cx,
        json!({"path": "big.log", "start_line": 150, "end_line": 151}),
        "line 150\nline 151\n",
    )
    .await;
    assert_eq!(out["size"], body.len());
}

#[tokio::test]
async fn a_folder_is_not_a_file() {
    let t = Tree::new();
    t.dir("sub");
    let cx = t.cx();
    for path in ["sub", "", ".", &t.abs("")] {
        let message = failed(call(&cx, "read_file", json!({"path": path})).await);
        assert!(
            message.contains("is a folder, not a file"),
            "{path:?}: {message}"
        );
    }
}

#[tokio::test]
async fn a_missing_file_fails_with_its_name() {
    let t = Tree::new();
    let cx = t.cx();
    let message = failed(call(&cx, "read_file", json!({"path": "nope/missing.txt"})).await);
    assert_eq!(message, "ws:nope/missing.txt: no such file or folder");
}

#[tokio::test]
async fn results_are_bounded_to_result_chars() {
    let t = Tree::new();
    let body = "é".repeat(5000);
    t.file("wide.txt", &body);
    // Past MAX_INLINE_READ, so the read goes through the blocking pool.
    let big = "0123456789abcdef\n".repeat(20_000);
    t.file("big.txt", &big);
    let cx = t.cx_with(Limits {
        result_chars: 300,
        ..Limits::default()
    });
    for (path, source) in [("wide.txt", &body), ("big.txt", &big)] {
        let total = source.chars().count();
        for args in [
            json!({"path": path}),
            json!({"path": path, "start_line": 1}),
        ] {
            let (text, out) = ok(call(&cx, "read_file", args.clone()).await);
            let content = out["content"].as_str().unwrap();
            assert_eq!(out["truncated"], true, "{args}");
            assert_eq!(text, content);
            assert!(
                content.chars().count() <= 300,
                "{args}: {} chars",
                content.chars().count()
            );
            if args.get("start_line").is_some() {
                // A ranged read stops once it holds more than any result can show, so it
                // does not know the total and says only that the selection goes on.
                assert!(
                    content.contains("the selection goes on past this"),
                    "{content}"
                );
            } else {
                assert!(
                    content.contains(&format!("truncated by Aether: {total} characters in all")),
                    "{content}"
                );
            }
            let kept = content.split("\n[… truncated").next().unwrap();
            assert!(
                kept.chars().count() > 150 && source.starts_with(kept),
                "{args}: {content}"
            );
        }
    }
    let (_, out) = ok(call(&cx, "read_file", json!({"path": "wide.txt", "head": 1})).await);
    assert_eq!(out["truncated"], true);
    // A file that fits is not marked.
    t.file("short.txt", "short\n");
    check(&cx, json!({"path": "short.txt"}), "short\n").await;
}

#[tokio::test]
async fn read_multiple_files_reports_each_file_on_its_own() {
    let t = Tree::new();
    t.file("a.txt", "alpha\n");
    t.file("b.txt", "beta");
    t.file("blob.bin", b"\x00\x01");
    t.file(".env", "KEY=value\n");
    let cx = t.cx();
    let (text, out) = ok(call(
        &cx,
        "read_multiple_files",
        json!({"paths": ["a.txt", "missing.txt", "../outside/secret.txt", ".env", "blob.bin", "b.txt"]}),
    )
    .await);
    let files = out["files"].as_array().unwrap();
    assert_eq!(files.len(), 6);
    assert_eq!(
        files[0],
        json!({"path": "a.txt", "content": "alpha\n", "truncated": false})
    );
    assert_eq!(
        files[5],
        json!({"path": "b.txt", "content": "beta", "truncated": false})
    );
    let errors: Vec<&str> = files[1..5]
        .iter()
        .map(|f| f["error"].as_str().unwrap())
        .collect();
    assert!(errors[0].contains("no such file"), "{errors:?}");
    assert!(errors[1].contains("climbs out of its root"), "{errors:?}");
    assert!(errors[2].contains("credential"), "{errors:?}");
    assert!(errors[3].contains("binary"), "{errors:?}");
    assert!(files[1..5].iter().all(|f| f.get("content").is_none()));
    assert!(!text.contains("KEY=value"), "{text}");
    assert!(
        text.starts_with("==> a.txt <==\nalpha\n==> missing.txt <==\n[error: "),
        "{text}"
    );
    assert!(text.ends_with("==> b.txt <==\nbeta\n"), "{text}");
}

#[tokio::test]
async fn read_multiple_files_shares_the_result_budget() {
    let t = Tree::new();
    t.file("a.txt", "a".repeat(1000));
    t.file("b.txt", "b".repeat(100));
    let cx = t.cx_with(Limits {
        result_chars: 800,
        ..Limits::default()
    });
    let (_, out) = ok(call(
        &cx,
        "read_multiple_files",
        json!({"paths": ["a.txt", "b.txt"]}),
    )
    .await);
    let a = out["files"][0]["content"].as_str().unwrap();
    assert_eq!(out["files"][0]["truncated"], true);
    assert!(a.chars().count() <= 400, "{a}");
    // One marker, counting the whole file rather than an already-cut copy of it.
    assert_eq!(a.matches("truncated by Aether").count(), 1, "{a}");
    assert!(
        a.contains("truncated by Aether: 1000 characters in all"),
        "{a}"
    );
    assert_eq!(
        out["files"][1],
        json!({"path": "b.txt", "content": "b".repeat(100), "truncated": false})
    );
}

#[tokio::test]
async fn a_fifo_named_like_a_file_is_refused_without_hanging() {
    let t = Tree::new();
    let fifo = t.ws.join("pipe.txt");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let cx = t.cx();
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        call(&cx, "read_file", json!({"path": "pipe.txt"})),
    )
    .await
    .expect("opening a FIFO must not block");
    let message = failed(result);
    assert!(message.contains("not a regular file"), "{message}");
    // And a search over the tree steps over it.
    let found = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        call(
            &cx,
            "search_files",
            json!({"query": "anything", "include_hidden": true}),
        ),
    )
    .await
    .expect("a search must not block on a FIFO");
    assert!(found.is_ok());
}

#[tokio::test]
async fn line_reads_hold_bounded_memory_on_huge_lines_and_files() {
    let t = Tree::new();
    // One 40 MB line: a range, a head and a tail each come back cut, quickly.
    let line = "x".repeat(40 << 20);
    t.file("one_line.log", &line);
    let cx = t.cx_with(Limits {
        result_chars: 1000,
        ..Limits::default()
    });
    for args in [
        json!({"path": "one_line.log", "start_line": 1}),
        json!({"path": "one_line.log", "head": 1}),
        json!({"path": "one_line.log", "tail": 1}),
    ] {
        let started = std::time::Instant::now();
        let (_, out) = ok(call(&cx, "read_file", args.clone()).await);
        assert_eq!(out["truncated"], true, "{args}");
        assert!(
            out["content"].as_str().unwrap().chars().count() <= 1000,
            "{args}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{args}"
        );
    }
    // A tail keeps the end of the file.
    let lines: String = (1..=50_000).map(|i| format!("line {i}\n")).collect();
    t.file("many.log", &lines);
    let (_, out) = ok(call(&cx, "read_file", json!({"path": "many.log", "tail": 10000})).await);
    let content = out["content"].as_str().unwrap();
    assert!(content.ends_with("line 50000\n"), "{content}");
    assert!(content.starts_with("[… earlier lines cut"), "{content}");
    assert_eq!(out["end_line"], 50000);
}
