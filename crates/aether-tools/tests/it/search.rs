//! `glob` and `search_files`: patterns, ignore files, hidden files, caps, ordering, and
//! cancellation.

use std::fs;

use aether_policy::config::Limits;
use aether_tools::{CallContext, ToolError};
use serde_json::{Value, json};

use crate::common::{Tree, call, invalid, ok, paths};

/// Runs glob with `args` and checks the sorted matches.
async fn check_glob(cx: &CallContext, args: Value, want: &[&str]) -> Value {
    let (_, out) = ok(call(cx, "glob", args.clone()).await);
    assert_eq!(paths(&out), want, "glob {args}");
    assert_eq!(out["root"], "ws");
    out
}

/// Runs search_files with `args` and checks the matches as (path, line, text).
async fn check_search(cx: &CallContext, args: Value, want: &[(&str, u64, &str)]) -> Value {
    let (_, out) = ok(call(cx, "search_files", args.clone()).await);
    let got: Vec<(String, u64, String)> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().into(),
                m["line"].as_u64().unwrap(),
                m["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, u64, String)> = want
        .iter()
        .map(|(p, l, t)| (p.to_string(), *l, t.to_string()))
        .collect();
    assert_eq!(got, want, "search_files {args}");
    assert_eq!(out["mode"], "lines");
    out
}

fn source_tree() -> Tree {
    let t = Tree::new();
    t.file("src/main.rs", "fn main() {}\n");
    t.file("src/mod.rs", "");
    t.file("src/a/mod.rs", "");
    t.file("src/a/b/mod.rs", "");
    t.file("src/a/lib.rs", "");
    t.file("other/src/mod.rs", "");
    t.file("README.md", "");
    t
}

#[tokio::test]
async fn glob_by_name_matches_anywhere() {
    let t = source_tree();
    let cx = t.cx();
    check_glob(
        &cx,
        json!({"pattern": "*.rs"}),
        &[
            "other/src/mod.rs",
            "src/a/b/mod.rs",
            "src/a/lib.rs",
            "src/a/mod.rs",
            "src/main.rs",
            "src/mod.rs",
        ],
    )
    .await;
    check_glob(&cx, json!({"pattern": "*.md"}), &["README.md"]).await;
    check_glob(
        &cx,
        json!({"pattern": "lib.rs", "path": "src"}),
        &["src/a/lib.rs"],
    )
    .await;
    let (text, _) = ok(call(&cx, "glob", json!({"pattern": "*.py"})).await);
    assert_eq!(text, "no files match \"*.py\"");
}

#[tokio::test]
async fn glob_by_path_is_anchored_at_the_search_folder() {
    let t = source_tree();
    let cx = t.cx();
    check_glob(
        &cx,
        json!({"pattern": "src/**/mod.rs"}),
        &["src/a/b/mod.rs", "src/a/mod.rs", "src/mod.rs"],
    )
    .await;
    // `*` does not cross a `/`.
    check_glob(
        &cx,
        json!({"pattern": "src/*.rs"}),
        &["src/main.rs", "src/mod.rs"],
    )
    .await;
    // With `path`, patterns are relative to it; results stay relative to the root.
    check_glob(
        &cx,
        json!({"pattern": "a/*.rs", "path": "src"}),
        &["src/a/lib.rs", "src/a/mod.rs"],
    )
    .await;
    let message = invalid(call(&cx, "glob", json!({"pattern": "src/[a"})).await);
    assert!(message.contains("bad glob"), "{message}");
}

fn ignore_tree() -> Tree {
    let t = Tree::new();
    t.file(".gitignore", "*.log\nbuild/\n");
    t.file("app.log", "needle\n");
    t.file("build/out.rs", "needle\n");
    t.file("src/main.rs", "needle\n");
    t.file("src/.ignore", "generated.rs\n");
    t.file("src/generated.rs", "needle\n");
    t
}

#[tokio::test]
async fn gitignore_is_respected_unless_turned_off() {
    let t = ignore_tree();
    let cx = t.cx();
    check_glob(&cx, json!({"pattern": "*"}), &["src/main.rs"]).await;
    check_glob(
        &cx,
        json!({"pattern": "*", "respect_ignore": false}),
        &["app.log", "build/out.rs", "src/generated.rs", "src/main.rs"],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "needle"}),
        &[("src/main.rs", 1, "needle")],
    )
    .await;
    let out = check_search(
        &cx,
        json!({"query": "needle", "respect_ignore": false}),
        &[
            ("app.log", 1, "needle"),
            ("build/out.rs", 1, "needle"),
            ("src/generated.rs", 1, "needle"),
            ("src/main.rs", 1, "needle"),
        ],
    )
    .await;
    assert_eq!(out["files_searched"], 4);
}

#[tokio::test]
async fn a_gitignore_above_the_root_does_not_apply() {
    let t = Tree::new();
    fs::write(t.base.join(".gitignore"), "*.rs\n").unwrap();
    t.file("src/main.rs", "");
    check_glob(&t.cx(), json!({"pattern": "*.rs"}), &["src/main.rs"]).await;
}

#[tokio::test]
async fn hidden_files_only_with_include_hidden() {
    let t = Tree::new();
    t.file(".hidden.rs", "needle\n");
    t.file(".config/x.rs", "needle\n");
    t.file("src/main.rs", "needle\n");
    let cx = t.cx();
    check_glob(&cx, json!({"pattern": "*.rs"}), &["src/main.rs"]).await;
    check_glob(
        &cx,
        json!({"pattern": "*.rs", "include_hidden": true}),
        &[".config/x.rs", ".hidden.rs", "src/main.rs"],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "needle"}),
        &[("src/main.rs", 1, "needle")],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "needle", "include_hidden": true}),
        &[
            (".config/x.rs", 1, "needle"),
            (".hidden.rs", 1, "needle"),
            ("src/main.rs", 1, "needle"),
        ],
    )
    .await;
}

#[tokio::test]
async fn glob_max_results_truncates_and_says_so() {
    let t = Tree::new();
    for i in 0..6 {
        t.file(&format!("d{}/f{i}.rs", i % 3), "");
    }
    let cx = t.cx();
    let (text, out) = ok(call(&cx, "glob", json!({"pattern": "*.rs", "max_results": 4})).await);
    assert_eq!((paths(&out).len(), &out["truncated"]), (4, &json!(true)));
    assert!(
        text.ends_with("[… more files match; showing the first 4. Narrow the pattern or path]"),
        "{text}"
    );
    let mut sorted = paths(&out);
    sorted.sort();
    assert_eq!(paths(&out), sorted);
    // Exactly as many matches as allowed is not truncation.
    let (_, out) = ok(call(&cx, "glob", json!({"pattern": "*.rs", "max_results": 6})).await);
    assert_eq!((paths(&out).len(), &out["truncated"]), (6, &json!(false)));
    // The operator's limit caps what the caller asks for.
    let capped = t.cx_with(Limits {
        search_results: 2,
        ..Limits::default()
    });
    let (_, out) = ok(call(
        &capped,
        "glob",
        json!({"pattern": "*.rs", "max_results": 100}),
    )
    .await);
    assert_eq!((paths(&out).len(), &out["truncated"]), (2, &json!(true)));
}

fn text_tree() -> Tree {
    let t = Tree::new();
    t.file("x.txt", "a.b\naxb\nA.B\n");
    t.file("src/lib.rs", "// Needle\nlet needle = 1;\n");
    t.file("docs/guide.md", "no match here\nneedle in docs\n");
    t
}

#[tokio::test]
async fn search_literal_and_regex() {
    let t = text_tree();
    let cx = t.cx();
    check_search(&cx, json!({"query": "a.b"}), &[("x.txt", 1, "a.b")]).await;
    check_search(
        &cx,
        json!({"query": "a.b", "regex": true}),
        &[("x.txt", 1, "a.b"), ("x.txt", 2, "axb")],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "^let \\w+ = \\d;$", "regex": true}),
        &[("src/lib.rs", 2, "let needle = 1;")],
    )
    .await;
    let (text, out) = ok(call(&cx, "search_files", json!({"query": "absent"})).await);
    assert_eq!(
        (&out["matches"], &out["files_searched"]),
        (&json!([]), &json!(3))
    );
    assert_eq!(text, "no matches for \"absent\" in 3 files\n");
}

#[tokio::test]
async fn search_case_insensitive() {
    let t = text_tree();
    let cx = t.cx();
    check_search(
        &cx,
        json!({"query": "needle"}),
        &[
            ("docs/guide.md", 2, "needle in docs"),
            ("src/lib.rs", 2, "let needle = 1;"),
        ],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "NEEDLE", "case_insensitive": true}),
        &[
            ("docs/guide.md", 2, "needle in docs"),
            ("src/lib.rs", 1, "// Needle"),
            ("src/lib.rs", 2, "let needle = 1;"),
        ],
    )
    .await;
    check_search(
        &cx,
        json!({"query": "a.b", "case_insensitive": true}),
        &[("x.txt", 1, "a.b"), ("x.txt", 3, "A.B")],
    )
    .await;
}

#[tokio::test]
async fn search_glob_filters_files() {
    let t = text_tree();
    let cx = t.cx();
    let out = check_search(
        &cx,
        json!({"query": "needle", "glob": "*.rs"}),
        &[("src/lib.rs", 2, "let needle = 1;")],
    )
    .await;
    assert_eq!(out["files_searched"], 1);
    check_search(
        &cx,
        json!({"query": "needle", "glob": "docs/*"}),
        &[("docs/guide.md", 2, "needle in docs")],
    )
    .await;
    check_search(&cx, json!({"query": "needle", "glob": "*.py"}), &[]).await;
}

#[tokio::test]
async fn search_names_mode_needs_only_a_glob() {
    let t = text_tree();
    let cx = t.cx();
    for args in [
        json!({"glob": "*.md"}),
        json!({"glob": "*.md", "query": ""}),
    ] {
        let (_, out) = ok(call(&cx, "search_files", args).await);
        assert_eq!(out["mode"], "names");
        assert_eq!(out["matches"], json!([{"path": "docs/guide.md"}]));
        assert_eq!(
            (&out["files_searched"], &out["truncated"]),
            (&json!(0), &json!(false))
        );
    }
}

#[tokio::test]
async fn search_without_query_or_glob_is_invalid() {
    let t = text_tree();
    let cx = t.cx();
    for args in [json!({}), json!({"query": ""}), json!({"path": "src"})] {
        let message = invalid(call(&cx, "search_files", args.clone()).await);
        assert!(message.contains("give `query`"), "{args}: {message}");
    }
}

#[tokio::test]
async fn a_bad_regex_is_invalid_with_the_reason() {
    let t = text_tree();
    let cx = t.cx();
    let message = invalid(
        call(
            &cx,
            "search_files",
            json!({"query": "(unclosed", "regex": true}),
        )
        .await,
    );
    assert!(message.starts_with("bad query: "), "{message}");
    assert!(message.to_lowercase().contains("unclosed"), "{message}");
    // The same text as a literal is fine.
    check_search(&cx, json!({"query": "(unclosed"}), &[]).await;
    let message = invalid(call(&cx, "search_files", json!({"query": "x", "glob": "[z"})).await);
    assert!(message.contains("bad glob"), "{message}");
}

#[tokio::test]
async fn search_skips_binary_files() {
    let t = Tree::new();
    t.file("blob.bin", b"needle\x00\x01\x02needle\n");
    t.file(
        "late.bin",
        [b"x\n".repeat(10).as_slice(), b"\x00needle\n"].concat(),
    );
    t.file("text.txt", "needle\n");
    check_search(
        &t.cx(),
        json!({"query": "needle"}),
        &[("text.txt", 1, "needle")],
    )
    .await;
}

#[tokio::test]
async fn search_max_results_truncates_and_says_so() {
    let t = Tree::new();
    t.file("many.txt", "hit\n".repeat(10));
    let cx = t.cx();
    let (text, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": "hit", "max_results": 4}),
    )
    .await);
    let lines: Vec<u64> = out["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 3, 4]);
    assert_eq!(out["truncated"], true);
    assert!(
        text.ends_with(
            "[… more lines match; showing the first 4. Narrow the query, glob or path]\n"
        ),
        "{text}"
    );
    let (_, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": "hit", "max_results": 10}),
    )
    .await);
    assert_eq!(
        (out["matches"].as_array().unwrap().len(), &out["truncated"]),
        (10, &json!(false))
    );
    let capped = t.cx_with(Limits {
        search_results: 3,
        ..Limits::default()
    });
    let (_, out) = ok(call(&capped, "search_files", json!({"query": "hit"})).await);
    assert_eq!(
        (out["matches"].as_array().unwrap().len(), &out["truncated"]),
        (3, &json!(true))
    );
    // Names mode honours the cap too.
    let (_, out) = ok(call(
        &capped,
        "search_files",
        json!({"glob": "*", "max_results": 1}),
    )
    .await);
    assert_eq!(out["truncated"], false);
    t.file("more.txt", "");
    let (_, out) = ok(call(
        &capped,
        "search_files",
        json!({"glob": "*", "max_results": 1}),
    )
    .await);
    assert_eq!(
        (out["matches"].as_array().unwrap().len(), &out["truncated"]),
        (1, &json!(true))
    );
}

#[tokio::test]
async fn search_results_are_sorted_by_path_then_line() {
    let t = Tree::new();
    let mut body = String::new();
    for n in 1..=12 {
        body.push_str(if n == 2 || n == 10 || n == 11 {
            "hit\n"
        } else {
            "miss\n"
        });
    }
    for name in ["b.txt", "a/z.txt", "a.txt", "c/d/e.txt", "a-b.txt"] {
        t.file(name, &body);
    }
    let mut want = Vec::new();
    for name in ["a-b.txt", "a.txt", "a/z.txt", "b.txt", "c/d/e.txt"] {
        for line in [2, 10, 11] {
            want.push((name, line, "hit"));
        }
    }
    let out = check_search(&t.cx(), json!({"query": "hit"}), &want).await;
    assert_eq!(out["files_searched"], 5);
}

#[tokio::test]
async fn long_matching_lines_are_cut() {
    let t = Tree::new();
    t.file("long.txt", format!("needle{}\r\n", "x".repeat(1000)));
    let (_, out) = ok(call(&t.cx(), "search_files", json!({"query": "needle"})).await);
    let text = out["matches"][0]["text"].as_str().unwrap();
    assert_eq!(text.chars().count(), 300);
    assert!(text.starts_with("needlexxx"));
}

#[tokio::test]
async fn a_cancelled_call_stops_with_cancelled() {
    let t = text_tree();
    let cx = t.cx();
    cx.cancel.cancel();
    for (tool, args) in [
        ("search_files", json!({"query": "needle"})),
        ("search_files", json!({"glob": "*"})),
        ("glob", json!({"pattern": "*"})),
        ("read_multiple_files", json!({"paths": ["x.txt"]})),
    ] {
        let result = call(&cx, tool, args).await;
        assert_eq!(result, Err(ToolError::Cancelled), "{tool}");
    }
}

#[tokio::test]
async fn an_ignore_file_symlinked_out_of_the_root_is_not_read() {
    // A cloned repository's `.gitignore` pointing outside the root must not let a file out
    // there decide what the agent sees (nor be read at all: /dev/zero would exhaust memory).
    let t = Tree::new();
    std::fs::write(t.outside.join("outside_rules"), "hidden.rs\n").unwrap();
    t.link(t.outside.join("outside_rules"), ".gitignore");
    t.file("sub/kept.rs", "x\n");
    t.link("/dev/zero", "sub/.ignore");
    t.file("hidden.rs", "x\n");
    let cx = t.cx();
    check_glob(
        &cx,
        json!({"pattern": "*.rs"}),
        &["hidden.rs", "sub/kept.rs"],
    )
    .await;
}

#[tokio::test]
async fn an_ignore_file_that_is_a_fifo_does_not_hang_the_walk() {
    let t = Tree::new();
    t.file("src/main.rs", "needle\n");
    let status = std::process::Command::new("mkfifo")
        .arg(t.ws.join("src/.gitignore"))
        .status()
        .unwrap();
    assert!(status.success());
    let cx = t.cx();
    let found = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        check_search(
            &cx,
            json!({"query": "needle"}),
            &[("src/main.rs", 1, "needle")],
        ),
    )
    .await;
    assert!(
        found.is_ok(),
        "the walk must not block on a FIFO ignore file"
    );
}

#[tokio::test]
async fn a_file_that_is_one_enormous_line_is_skipped_not_loaded() {
    let t = Tree::new();
    t.file("huge.log", "z".repeat(32 << 20));
    t.file("small.txt", "zzz here\n");
    let cx = t.cx();
    check_search(
        &cx,
        json!({"query": "zzz here"}),
        &[("small.txt", 1, "zzz here")],
    )
    .await;
}
