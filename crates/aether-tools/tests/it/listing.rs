//! Roots and what is in them: `list_roots`, `list_dir`, `get_file_info`, a root that vanishes,
//! and names that are not UTF-8.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use aether_policy::config::Limits;
use aether_policy::paths::{RootMode, RootSpec};
use aether_tools::{CallContext, RootError, Roots};
use serde_json::{Value, json};

use crate::common::{Tree, call, context, denied, failed, ok, paths, spec};

/// Lists `path` and returns the entries as (name, kind, size).
async fn check_listing(cx: &CallContext, path: &str) -> Vec<(String, String, Option<u64>)> {
    let (_, out) = ok(call(cx, "list_dir", json!({"path": path})).await);
    out["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().into(),
                e["kind"].as_str().unwrap().into(),
                e["size"].as_u64(),
            )
        })
        .collect()
}

fn entry(name: &str, kind: &str, size: Option<u64>) -> (String, String, Option<u64>) {
    (name.into(), kind.into(), size)
}

#[tokio::test]
async fn list_dir_puts_folders_first_with_sizes_and_hides_aether() {
    let t = Tree::new();
    t.file("b.txt", "12345");
    t.file("a.txt", "");
    t.file("zdir/x", "x");
    t.dir("adir");
    t.file(".aether/aether.db", "store");
    t.file(".hidden", "h");
    t.link("a.txt", "link");
    let cx = t.cx();
    assert_eq!(
        check_listing(&cx, "").await,
        [
            entry("adir", "dir", None),
            entry("zdir", "dir", None),
            entry(".hidden", "file", Some(1)),
            entry("a.txt", "file", Some(0)),
            entry("b.txt", "file", Some(5)),
            entry("link", "symlink", None),
        ]
    );
    let (text, out) = ok(call(&cx, "list_dir", json!({})).await);
    assert_eq!(
        text,
        "adir/\nzdir/\n.hidden  (1 bytes)\na.txt  (0 bytes)\nb.txt  (5 bytes)\nlink@\n"
    );
    assert_eq!(
        (
            out["root"].as_str(),
            out["path"].as_str(),
            out["omitted"].as_u64()
        ),
        (Some("ws"), Some(""), Some(0))
    );
    assert_eq!(
        check_listing(&cx, "zdir").await,
        [entry("x", "file", Some(1))]
    );
    let (text, out) = ok(call(&cx, "list_dir", json!({"path": "adir"})).await);
    assert_eq!(
        (text.as_str(), &out["entries"]),
        ("ws:adir is empty\n", &json!([]))
    );
}

#[tokio::test]
async fn list_dir_caps_the_listing_and_counts_the_rest() {
    let t = Tree::new();
    for i in 0..2003 {
        t.file(&format!("f{i:04}"), "");
    }
    let cx = t.cx();
    let (text, out) = ok(call(&cx, "list_dir", json!({"path": "."})).await);
    let listed = out["entries"].as_array().unwrap().len();
    let omitted = out["omitted"].as_u64().unwrap() as usize;
    assert_eq!(listed + omitted, 2003);
    assert!(
        omitted > 0 && listed > 100,
        "{listed} listed, {omitted} omitted"
    );
    // The structured listing is held to the result budget too, not only the text.
    let structured = out.to_string().len();
    assert!(
        structured <= 2 * 24_000,
        "{structured} bytes of structured output"
    );
    assert!(
        text.ends_with(&format!("[… {omitted} more entries not listed]\n")),
        "{}",
        &text[text.len() - 80..]
    );
}

#[tokio::test]
async fn get_file_info_describes_files_folders_and_symlinks() {
    let t = Tree::new();
    let file = t.file("sub/a.txt", "hello");
    fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    t.link("sub/a.txt", "alias");
    t.link(t.outside.join("secret.txt"), "out_link");
    let cx = t.cx();
    let info = |path: &str| {
        let cx = cx.clone();
        let path = path.to_string();
        async move { ok(call(&cx, "get_file_info", json!({"path": path})).await) }
    };

    let (text, out) = info("sub/a.txt").await;
    assert_eq!(
        (
            out["kind"].as_str(),
            out["size"].as_u64(),
            out["permissions"].as_str(),
            out["hard_links"].as_u64()
        ),
        (Some("file"), Some(5), Some("640"), Some(1))
    );
    assert_eq!(
        (
            out["root"].as_str(),
            out["path"].as_str(),
            out["read_only"].as_bool()
        ),
        (Some("ws"), Some("sub/a.txt"), Some(false))
    );
    assert!(out["modified"].as_str().unwrap().contains('T'), "{out}");
    assert!(out.get("symlink_target").is_none(), "{out}");
    assert!(
        text.starts_with("ws:sub/a.txt: file, 5 bytes, permissions 640"),
        "{text}"
    );

    let (_, out) = info("sub").await;
    assert_eq!(out["kind"], "dir");
    let (_, out) = info("").await;
    assert_eq!(
        (out["kind"].as_str(), out["path"].as_str()),
        (Some("dir"), Some(""))
    );

    let (text, out) = info("alias").await;
    assert_eq!(
        (out["kind"].as_str(), out["symlink_target"].as_str()),
        (Some("symlink"), Some("sub/a.txt"))
    );
    assert!(text.ends_with(", points to sub/a.txt"), "{text}");
    // A link pointing out is described (its text lies inside the root), never followed.
    let (_, out) = info("out_link").await;
    assert_eq!(out["kind"], "symlink");
    assert_eq!(
        out["symlink_target"],
        t.outside.join("secret.txt").to_str().unwrap()
    );
    assert_eq!(
        out["size"],
        t.outside.join("secret.txt").to_str().unwrap().len()
    );

    let message = failed(call(&cx, "get_file_info", json!({"path": "missing"})).await);
    assert!(message.contains("no such file"), "{message}");
}

#[tokio::test]
async fn list_roots_reports_every_root() {
    let t = Tree::new();
    let docs = t.base.join("docs");
    fs::create_dir(&docs).unwrap();
    let mut docs_spec = spec("docs", &docs);
    docs_spec.mode = aether_policy::paths::RootMode::Sealed;
    let cx = context(
        Arc::new(Roots::open(&[spec("ws", &t.ws), docs_spec]).unwrap()),
        Limits::default(),
    );
    let (text, out) = ok(call(&cx, "list_roots", json!({})).await);
    assert_eq!(
        out["roots"],
        json!([
            {"name": "ws", "path": t.ws.to_str().unwrap(), "mode": "ro", "available": true},
            {"name": "docs", "path": docs.to_str().unwrap(), "mode": "sealed", "available": true},
        ])
    );
    assert_eq!(
        text,
        format!(
            "ws (ro) {}\ndocs (sealed) {}",
            t.ws.display(),
            docs.display()
        )
    );
    let none = context(Arc::new(Roots::open(&[]).unwrap()), Limits::default());
    let (text, out) = ok(call(&none, "list_roots", json!({})).await);
    assert_eq!(
        (text.as_str(), &out["roots"]),
        ("No roots are configured.", &json!([]))
    );
    let message = failed(call(&none, "read_file", json!({"path": "a.txt"})).await);
    assert!(message.contains("no roots are configured"), "{message}");
}

#[tokio::test]
async fn roots_that_cannot_be_opened_are_reported() {
    let t = Tree::new();
    let file = t.file("a.txt", "a");
    assert!(matches!(
        Roots::open(&[spec("x", &t.base.join("missing"))]),
        Err(RootError::Open { .. })
    ));
    assert!(matches!(
        Roots::open(&[spec("x", &file)]),
        Err(RootError::NotAFolder { .. })
    ));
    assert!(
        matches!(Roots::open(&[spec("x", &t.ws), spec("x", &t.outside)]), Err(RootError::Duplicate(n)) if n == "x")
    );
    // A stricter root inside a laxer one (or the same folder twice, laxer under one name)
    // would be open through the laxer one: refused, naming both.
    let inner = t.ws.join("spec");
    std::fs::create_dir_all(&inner).unwrap();
    let with = |name: &str, path: &std::path::Path, mode: RootMode| RootSpec {
        mode,
        ..spec(name, path)
    };
    for (outer, inner_spec) in [
        (
            with("ws", &t.ws, RootMode::ReadWrite),
            with("spec", &inner, RootMode::Sealed),
        ),
        (
            with("ws", &t.ws, RootMode::ReadOnly),
            with("spec", &inner, RootMode::Sealed),
        ),
        (
            with("ws", &t.ws, RootMode::ReadWrite),
            with("spec", &inner, RootMode::ReadOnly),
        ),
        (
            with("ws", &t.ws, RootMode::ReadWrite),
            RootSpec {
                writable: Some(vec!["docs/**".into()]),
                ..with("spec", &inner, RootMode::ReadWrite)
            },
        ),
        (
            RootSpec {
                allow_delete: true,
                ..with("ws", &t.ws, RootMode::ReadWrite)
            },
            with("spec", &inner, RootMode::ReadWrite),
        ),
        (
            with("ws", &t.ws, RootMode::ReadWrite),
            with("spec", &t.ws, RootMode::Sealed),
        ),
    ] {
        for order in [
            [outer.clone(), inner_spec.clone()],
            [inner_spec.clone(), outer.clone()],
        ] {
            match Roots::open(&order) {
                Err(e @ RootError::Nested { .. }) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("\"spec\"") && text.contains("\"ws\""),
                        "{text}"
                    );
                }
                other => panic!("{outer:?} around {inner_spec:?}: {other:?}"),
            }
        }
    }
    // A root inside another that is no stricter, or side by side, is fine.
    assert!(
        Roots::open(&[
            with("ws", &t.ws, RootMode::ReadOnly),
            with("spec", &inner, RootMode::ReadWrite)
        ])
        .is_ok()
    );
    assert!(Roots::open(&[spec("ws", &t.ws), spec("spec", &inner)]).is_ok());
    assert!(
        Roots::open(&[
            with("ws", &t.ws, RootMode::Sealed),
            with("out", &t.outside, RootMode::ReadWrite)
        ])
        .is_ok()
    );
    // A root given through a symlink is served under its canonical path.
    let alias = t.base.join("alias");
    std::os::unix::fs::symlink(&t.ws, &alias).unwrap();
    let roots = Roots::open(&[spec("ws", &alias)]).unwrap();
    assert_eq!(roots.get("ws").unwrap().path, t.ws);
}

/// Every tool fails on the vanished root with the "no longer available" message.
async fn check_gone(cx: &CallContext, root: &str) {
    let calls: [(&str, Value); 6] = [
        ("read_file", json!({"path": "a.txt", "root": root})),
        (
            "read_file",
            json!({"path": "a.txt", "root": root, "head": 1}),
        ),
        ("list_dir", json!({"root": root})),
        ("get_file_info", json!({"path": "a.txt", "root": root})),
        ("glob", json!({"pattern": "*", "root": root})),
        ("search_files", json!({"query": "a", "root": root})),
    ];
    for (tool, args) in calls {
        let message = failed(call(cx, tool, args).await);
        assert!(
            message.contains(&format!("root {root:?}"))
                && message.contains("is no longer available"),
            "{tool}: {message}"
        );
    }
}

fn available(out: &Value) -> Vec<bool> {
    out["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["available"].as_bool().unwrap())
        .collect()
}

#[tokio::test]
async fn a_root_renamed_away_is_reported_gone_and_back_when_restored() {
    let t = Tree::new();
    t.file("a.txt", "a");
    let docs = t.base.join("docs");
    fs::create_dir(&docs).unwrap();
    fs::write(docs.join("d.txt"), "docs").unwrap();
    let cx = context(
        Arc::new(Roots::open(&[spec("ws", &t.ws), spec("docs", &docs)]).unwrap()),
        Limits::default(),
    );
    let moved = t.base.join("ws_moved");
    fs::rename(&t.ws, &moved).unwrap();

    check_gone(&cx, "ws").await;
    let (text, out) = ok(call(&cx, "list_roots", json!({})).await);
    assert_eq!(available(&out), [false, true]);
    assert!(
        text.contains(&format!("ws (ro) {} (unavailable)", t.ws.display())),
        "{text}"
    );
    // The other root still works.
    let (_, out) = ok(call(&cx, "read_file", json!({"path": "d.txt", "root": "docs"})).await);
    assert_eq!(out["content"], "docs");

    fs::rename(&moved, &t.ws).unwrap();
    let (_, out) = ok(call(&cx, "list_roots", json!({})).await);
    assert_eq!(available(&out), [true, true]);
    ok(call(&cx, "read_file", json!({"path": "a.txt"})).await);
}

#[tokio::test]
async fn a_root_removed_or_replaced_is_reported_gone() {
    let t = Tree::new();
    t.file("a.txt", "a");
    let cx = t.cx();
    // Replaced: a new folder of the same name is not the root that was opened.
    fs::rename(&t.ws, t.base.join("ws_old")).unwrap();
    fs::create_dir(&t.ws).unwrap();
    fs::write(t.ws.join("a.txt"), "impostor").unwrap();
    check_gone(&cx, "ws").await;
    let (_, out) = ok(call(&cx, "list_roots", json!({})).await);
    assert_eq!(available(&out), [false]);
    // Removed outright.
    fs::remove_dir_all(&t.ws).unwrap();
    check_gone(&cx, "ws").await;
    let (_, out) = ok(call(&cx, "list_roots", json!({})).await);
    assert_eq!(available(&out), [false]);
}

#[tokio::test]
async fn names_that_are_not_utf8_are_shown_lossily() {
    let t = Tree::new();
    let odd = OsStr::from_bytes(b"caf\xe9.txt");
    fs::write(t.ws.join(odd), "needle in an odd name\n").unwrap();
    let odd_dir = t.ws.join(OsStr::from_bytes(b"dir\xff"));
    fs::create_dir(&odd_dir).unwrap();
    fs::write(odd_dir.join("inner.txt"), "needle inside\n").unwrap();
    t.file("plain.txt", "needle\n");
    let cx = t.cx();

    let (_, out) = ok(call(&cx, "list_dir", json!({})).await);
    assert_eq!(
        out["entries"],
        json!([
            {"name": "dir\u{fffd}", "kind": "dir", "lossy_name": true},
            {"name": "caf\u{fffd}.txt", "kind": "file", "size": 22, "lossy_name": true},
            {"name": "plain.txt", "kind": "file", "size": 7},
        ])
    );
    let (_, out) = ok(call(&cx, "glob", json!({"pattern": "*.txt"})).await);
    assert_eq!(
        paths(&out),
        ["caf\u{fffd}.txt", "dir\u{fffd}/inner.txt", "plain.txt"]
    );
    let (_, out) = ok(call(&cx, "search_files", json!({"query": "needle"})).await);
    assert_eq!(
        paths(&out),
        ["caf\u{fffd}.txt", "dir\u{fffd}/inner.txt", "plain.txt"]
    );
    assert_eq!(out["files_searched"], 3);
    // The lossy name is for reading by eye; it does not name the file.
    failed(call(&cx, "read_file", json!({"path": "caf\u{fffd}.txt"})).await);
}

#[tokio::test]
async fn a_sealed_file_is_served_as_it_was_checked_whatever_happens_on_disk_after() {
    use std::io::Read;
    let t = Tree::new();
    let docs = t.base.join("docs");
    fs::create_dir(&docs).unwrap();
    fs::write(docs.join("spec.md"), "the pinned text\n").unwrap();
    let roots = Roots::open(&[RootSpec {
        mode: RootMode::Sealed,
        ..spec("docs", &docs)
    }])
    .unwrap();
    let root = roots.get("docs").unwrap();
    let pins = root.pins(roots.credentials()).unwrap();
    root.set_seal(Some(aether_tools::SealManifest {
        generation: 1,
        root_path: root.path.to_string_lossy().into_owned(),
        at_us: 0,
        pins: pins
            .into_iter()
            .map(|(path, hash, size)| (path, (hash, size)))
            .collect(),
        folders: Default::default(),
    }));
    let (mut file, _) = root
        .open_file(
            "spec.md",
            aether_tools::Opening::unruled(roots.credentials()),
        )
        .unwrap();
    // Rewritten in place (same length, same inode) between the check and the read: what is
    // read is still what was checked.
    fs::OpenOptions::new()
        .write(true)
        .open(docs.join("spec.md"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"THE SWAPPED TEXT"))
        .unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    assert_eq!(text, "the pinned text\n");
    // The next open sees the change and refuses it.
    let refusal = root
        .open_file(
            "spec.md",
            aether_tools::Opening::unruled(roots.credentials()),
        )
        .unwrap_err();
    assert!(refusal.to_string().contains("changed on disk"), "{refusal}");
}

/// Glob patterns (glob, search_files in both modes) are confined like paths: `..` that climbs
/// out, an absolute pattern outside the root and `..` after a wildcard are refused with a
/// clear error; a `..` that stays inside, or an absolute pattern inside, finds what it names.
#[tokio::test]
async fn glob_patterns_are_confined_like_paths() {
    let t = Tree::new();
    t.file("src/a.rs", "fn a() {}\n");
    t.file("src/b/c.rs", "fn c() {}\n");
    t.file("docs/x.md", "needle\n");
    let cx = t.cx();
    let outside = format!("{}/*", t.outside.display());
    let evil = format!("{}/*", t.evil.display());
    for (path, pattern, why) in [
        ("", "../*", "climbs out"),
        ("", "../**/*.rs", "climbs out"),
        ("src", "../../*", "climbs out"),
        ("src/b", "../../../ws/*", "climbs out"),
        ("", "./../*.md", "climbs out"),
        ("", "/etc/*", "outside the root"),
        ("", "/*", "outside the root"),
        ("", outside.as_str(), "outside the root"),
        ("", evil.as_str(), "outside the root"),
        ("", "*/../../x", "after a wildcard"),
        ("", "**/../../*", "after a wildcard"),
        ("", "src/..", "names a folder"),
    ] {
        for (tool, args) in [
            ("glob", json!({"pattern": pattern, "path": path})),
            ("search_files", json!({"glob": pattern, "path": path})),
            (
                "search_files",
                json!({"glob": pattern, "path": path, "query": "needle"}),
            ),
        ] {
            let message = denied(call(&cx, tool, args.clone()).await);
            assert!(message.contains(why), "{tool} {args}: {message}");
        }
    }
    let docs = format!("{}/*.md", t.abs("docs"));
    for (path, pattern, want) in [
        ("src", "../docs/*.md", vec!["docs/x.md"]),
        ("", docs.as_str(), vec!["docs/x.md"]),
        ("src", "/**/*.md", vec![]),
        ("", "src/../src/**/*.rs", vec!["src/a.rs", "src/b/c.rs"]),
        ("src/b", "../*.rs", vec!["src/a.rs"]),
        ("", "*.rs", vec!["src/a.rs", "src/b/c.rs"]),
    ] {
        // An absolute pattern outside names nothing ("/**/*.md" is the machine's root).
        if pattern == "/**/*.md" {
            denied(call(&cx, "glob", json!({"pattern": pattern, "path": path})).await);
            continue;
        }
        let (_, out) = ok(call(&cx, "glob", json!({"pattern": pattern, "path": path})).await);
        assert_eq!(paths(&out), want, "{path:?} {pattern:?}");
    }
    let (_, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": "needle", "glob": "../docs/*.md", "path": "src"}),
    )
    .await);
    assert_eq!(paths(&out), ["docs/x.md"]);
}

/// A sealed root with no seal on record serves nothing — no names, sizes, times, globs or
/// search counts; with a seal, only what it pinned is there (a file added since is not even
/// named), and a pinned file changed since is refused everywhere it would be described.
#[tokio::test]
async fn a_sealed_root_serves_only_what_its_seal_pinned() {
    let t = Tree::new();
    let docs = t.base.join("sealed");
    fs::create_dir_all(docs.join("guide")).unwrap();
    fs::write(docs.join("spec.md"), "the pinned text\n").unwrap();
    fs::write(docs.join("guide/intro.md"), "pinned intro\n").unwrap();
    let roots = Arc::new(
        Roots::open(&[RootSpec {
            mode: RootMode::Sealed,
            ..spec("docs", &docs)
        }])
        .unwrap(),
    );
    let cx = context(roots.clone(), Limits::default());
    let every = |path: &'static str| {
        [
            ("read_file", json!({"root": "docs", "path": "spec.md"})),
            ("get_file_info", json!({"root": "docs", "path": path})),
            ("list_dir", json!({"root": "docs", "path": path})),
            ("list_files", json!({"root": "docs", "path": path})),
            ("glob", json!({"root": "docs", "pattern": "**/*"})),
            ("search_files", json!({"root": "docs", "glob": "*.md"})),
            ("search_files", json!({"root": "docs", "query": "pinned"})),
            (
                "read_multiple_files",
                json!({"paths": ["docs:spec.md"], "root": "docs"}),
            ),
        ]
    };
    for (tool, args) in every("") {
        let result = call(&cx, tool, args.clone()).await;
        let shown = format!("{result:?}");
        assert!(
            !shown.contains("spec.md") || tool == "read_multiple_files",
            "{tool} {args}: {shown}"
        );
        match result {
            Err(aether_tools::ToolError::Denied { rule, message }) => {
                assert_eq!(rule, "sealed", "{tool}");
                assert!(
                    message.contains("no seal is on record"),
                    "{tool}: {message}"
                );
            }
            Ok(out) if tool == "read_multiple_files" => {
                let files = out.structured.unwrap();
                assert!(files["files"][0]["content"].is_null(), "{files}");
            }
            other => panic!("{tool} {args}: served without a seal: {other:?}"),
        }
    }
    // Sealed now; then a file is added and a pinned one changed.
    let root = roots.get("docs").unwrap();
    let pins = root.pins(roots.credentials()).unwrap();
    root.set_seal(Some(aether_tools::SealManifest {
        generation: 1,
        root_path: root.path.to_string_lossy().into_owned(),
        at_us: 0,
        pins: pins
            .into_iter()
            .map(|(path, hash, size)| (path, (hash, size)))
            .collect(),
        folders: Default::default(),
    }));
    fs::write(docs.join("added-later.md"), "pinned? no, added\n").unwrap();
    fs::create_dir_all(docs.join("new-folder")).unwrap();
    fs::write(docs.join("new-folder/x.md"), "pinned x\n").unwrap();
    fs::write(docs.join("guide/intro.md"), "pinned intro, changed!\n").unwrap();
    let (text, _) = ok(call(&cx, "list_dir", json!({"root": "docs"})).await);
    assert!(
        text.contains("spec.md") && text.contains("guide/"),
        "{text}"
    );
    assert!(
        !text.contains("added-later") && !text.contains("new-folder"),
        "{text}"
    );
    let (text, _) = ok(call(&cx, "list_files", json!({"root": "docs"})).await);
    assert!(
        !text.contains("added-later") && !text.contains("new-folder"),
        "{text}"
    );
    let (_, out) = ok(call(&cx, "glob", json!({"root": "docs", "pattern": "**/*.md"})).await);
    assert_eq!(paths(&out), ["guide/intro.md", "spec.md"]);
    let (text, out) = ok(call(
        &cx,
        "search_files",
        json!({"root": "docs", "query": "pinned"}),
    )
    .await);
    assert_eq!(paths(&out), ["spec.md"], "{text}");
    assert!(text.contains("[1 file(s) not searched"), "{text}");
    for path in [
        "added-later.md",
        "new-folder",
        "new-folder/x.md",
        "guide/intro.md",
    ] {
        let result = call(&cx, "get_file_info", json!({"root": "docs", "path": path})).await;
        assert!(
            matches!(
                &result,
                Err(aether_tools::ToolError::Denied { rule: "sealed", .. })
            ),
            "{path}: {result:?}"
        );
    }
    ok(call(
        &cx,
        "get_file_info",
        json!({"root": "docs", "path": "spec.md"}),
    )
    .await);
    ok(call(
        &cx,
        "get_file_info",
        json!({"root": "docs", "path": "guide"}),
    )
    .await);
}
