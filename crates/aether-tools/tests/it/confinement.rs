//! Confinement: no path, symlink, hard link or race leads a tool outside its root.

use std::fs;
use std::sync::Arc;

use aether_policy::config::Limits;
use aether_tools::{CallContext, Roots, ToolError};
use serde_json::{Value, json};

use crate::common::{
    Outcome, PROBE, SECRET, Swapper, Tree, assert_no_secret, call, context, denied, failed,
    invalid, ok, paths, spec,
};

/// Every tool that takes a path, called on `path`.
async fn each_path_tool(cx: &CallContext, path: &str) -> Vec<(&'static str, Outcome)> {
    let calls = [
        ("read_file", json!({"path": path})),
        ("get_file_info", json!({"path": path})),
        ("list_dir", json!({"path": path})),
        (
            "glob",
            json!({"pattern": "*", "path": path, "include_hidden": true}),
        ),
        ("search_files", json!({"query": PROBE, "path": path})),
        ("check_finishing", json!({"path": path})),
    ];
    let mut results = Vec::new();
    for (tool, args) in calls {
        results.push((tool, call(cx, tool, args).await));
    }
    results
}

/// Every path tool refuses `path` under the confinement rule, with a message containing `why`;
/// read_multiple_files reports the same refusal for that entry and still reads the good one.
async fn check_refused(cx: &CallContext, path: &str, why: &str) {
    for (tool, result) in each_path_tool(cx, path).await {
        let message = denied(result);
        assert!(
            message.contains(why),
            "{tool} on {path:?}: {message:?} does not say {why:?}"
        );
    }
    let (_, out) = ok(call(
        cx,
        "read_multiple_files",
        json!({"paths": [path, "good.txt"]}),
    )
    .await);
    let error = out["files"][0]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{path:?} was read: {out}"));
    assert!(
        error.contains(why),
        "read_multiple_files on {path:?}: {error:?} does not say {why:?}"
    );
    assert_eq!(out["files"][1]["content"], "good");
}

#[tokio::test]
async fn dot_dot_is_refused_where_it_climbs_out_and_folded_where_it_stays_in() {
    let t = Tree::new();
    t.file("good.txt", "good");
    t.file("sub/a.txt", "inside");
    let cx = t.cx();
    let ws = t.abs("");
    for path in [
        "..".to_string(),
        "../".into(),
        "../outside/secret.txt".into(),
        "./../outside/secret.txt".into(),
        "sub/../../outside/secret.txt".into(),
        "sub/../../ws_evil/secret.txt".into(),
        "sub/a.txt/../../../outside/secret.txt".into(),
        "sub/./../sub/../../outside/secret.txt".into(),
        format!("{ws}/../outside/secret.txt"),
        format!("{ws}/.."),
        format!("{ws}/sub/../../outside/secret.txt"),
    ] {
        check_refused(&cx, &path, "climbs out of its root").await;
    }
    // A `..` that stays inside after cleaning names what it cleans to.
    for (path, text) in [
        ("sub/../good.txt".to_string(), "good"),
        ("sub/../sub/a.txt".into(), "inside"),
        ("./sub/x/../a.txt".into(), "inside"),
        (format!("{ws}/sub/../good.txt"), "good"),
        ("sub/a.txt/../a.txt".into(), "inside"),
    ] {
        let (got, out) = ok(call(&cx, "read_file", json!({"path": path})).await);
        assert_eq!(got, text, "{path}");
        assert!(!out["path"].as_str().unwrap().contains(".."), "{out}");
    }
    let (_, out) = ok(call(&cx, "list_dir", json!({"path": "sub/.."})).await);
    assert_eq!(out["path"], "");
}

#[tokio::test]
async fn absolute_paths_outside_every_root_are_refused() {
    let t = Tree::new();
    t.file("good.txt", "good");
    let cx = t.cx();
    let secret = t.outside.join("secret.txt").to_str().unwrap().to_string();
    for path in [
        "/etc/passwd",
        "/",
        secret.as_str(),
        t.outside.to_str().unwrap(),
        t.base.to_str().unwrap(),
    ] {
        check_refused(&cx, path, "outside every root").await;
    }
    // Naming the root does not widen it.
    let message = denied(call(&cx, "read_file", json!({"path": secret, "root": "ws"})).await);
    assert!(message.contains("is not under root \"ws\""), "{message}");
}

#[tokio::test]
async fn a_sibling_folder_sharing_the_root_prefix_is_outside() {
    let t = Tree::new();
    t.file("good.txt", "good");
    let cx = t.cx();
    let evil_secret = t.evil.join("secret.txt").to_str().unwrap().to_string();
    check_refused(&cx, &evil_secret, "outside every root").await;
    check_refused(&cx, t.evil.to_str().unwrap(), "outside every root").await;
    let message = denied(call(&cx, "read_file", json!({"path": evil_secret, "root": "ws"})).await);
    assert!(message.contains("not under root"), "{message}");
}

#[tokio::test]
async fn an_absolute_path_inside_the_root_is_allowed() {
    let t = Tree::new();
    t.file("sub/a.txt", "inside\n");
    let cx = t.cx();
    let (text, out) = ok(call(&cx, "read_file", json!({"path": t.abs("sub/a.txt")})).await);
    assert_eq!(text, "inside\n");
    assert_eq!(
        (out["root"].as_str(), out["path"].as_str()),
        (Some("ws"), Some("sub/a.txt"))
    );
    let (_, out) = ok(call(
        &cx,
        "read_file",
        json!({"path": t.abs("sub/a.txt"), "root": "ws"}),
    )
    .await);
    assert_eq!(out["content"], "inside\n");
    for root in [t.abs(""), format!("{}/", t.abs(""))] {
        let (_, out) = ok(call(&cx, "list_dir", json!({"path": root})).await);
        assert_eq!(out["entries"][0]["name"], "sub");
    }
}

#[tokio::test]
async fn a_symlink_to_an_outside_file_is_refused() {
    let t = Tree::new();
    t.file("good.txt", "good");
    t.link(t.outside.join("secret.txt"), "abs_link.txt");
    t.link("../outside/secret.txt", "rel_link.txt");
    t.link("../../outside/secret.txt", "sub/deep_link.txt");
    let cx = t.cx();
    for path in ["abs_link.txt", "rel_link.txt", "sub/deep_link.txt"] {
        let message = denied(call(&cx, "read_file", json!({"path": path})).await);
        assert!(
            message.contains("leads outside root \"ws\""),
            "{path}: {message}"
        );
        let (_, out) = ok(call(&cx, "read_multiple_files", json!({"paths": [path]})).await);
        assert!(
            out["files"][0]["error"]
                .as_str()
                .unwrap()
                .contains("outside"),
            "{out}"
        );
    }
    // The walk does not follow symlinks: the links are neither searched nor listed as files.
    let (_, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": PROBE, "include_hidden": true}),
    )
    .await);
    assert_eq!(out["matches"], json!([]));
    let (_, out) = ok(call(&cx, "glob", json!({"pattern": "*.txt"})).await);
    assert_eq!(paths(&out), ["good.txt"]);
}

#[tokio::test]
async fn a_symlinked_folder_pointing_outside_is_refused() {
    let t = Tree::new();
    t.file("good.txt", "good");
    t.link(&t.outside, "out");
    t.link("../outside", "rel_out");
    let cx = t.cx();
    for dir in ["out", "rel_out"] {
        for (tool, result) in each_path_tool(&cx, dir).await {
            // get_file_info describes the link itself, which lies inside the root.
            if tool == "get_file_info" {
                let (_, out) = ok(result);
                assert_eq!(out["kind"], "symlink");
                continue;
            }
            let message = denied(result);
            assert!(
                message.contains("outside root"),
                "{tool} on {dir}: {message}"
            );
        }
        let file = format!("{dir}/secret.txt");
        for (tool, result) in each_path_tool(&cx, &file).await {
            let message = denied(result);
            assert!(
                message.contains("outside root"),
                "{tool} on {file}: {message}"
            );
        }
    }
    let (_, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": PROBE, "include_hidden": true, "respect_ignore": false}),
    )
    .await);
    assert_eq!(out["matches"], json!([]));
    let (_, out) = ok(call(
        &cx,
        "glob",
        json!({"pattern": "**/*", "include_hidden": true}),
    )
    .await);
    assert_eq!(paths(&out), ["good.txt"]);
}

#[tokio::test]
async fn a_symlink_chain_leading_outside_is_refused() {
    let t = Tree::new();
    t.file("real.txt", "real");
    t.link("c2", "c1");
    t.link("sub/c3", "c2");
    t.link("../../outside/secret.txt", "sub/c3");
    // A chain that stays inside is fine.
    t.link("i2", "i1");
    t.link("sub/i3", "i2");
    t.link("../real.txt", "sub/i3");
    // A chain of folders: d1 -> d2 -> outside.
    t.link("d2", "d1");
    t.link(&t.outside, "d2");
    let cx = t.cx();
    for path in ["c1", "c2", "sub/c3", "d1/secret.txt"] {
        let message = denied(call(&cx, "read_file", json!({"path": path})).await);
        assert!(message.contains("outside root"), "{path}: {message}");
    }
    denied(call(&cx, "list_dir", json!({"path": "d1"})).await);
    let (_, out) = ok(call(&cx, "read_file", json!({"path": "i1"})).await);
    assert_eq!(
        (out["path"].as_str(), out["content"].as_str()),
        (Some("i1"), Some("real"))
    );
}

#[tokio::test]
async fn a_symlink_that_leaves_the_root_and_comes_back_is_refused() {
    // Resolution may not pass outside the root at any point, even if it would end inside.
    let t = Tree::new();
    t.file("real.txt", "real");
    t.link("../ws/real.txt", "detour.txt");
    t.link(t.ws.join("real.txt"), "absolute.txt");
    let cx = t.cx();
    for path in ["detour.txt", "absolute.txt"] {
        let message = denied(call(&cx, "read_file", json!({"path": path})).await);
        assert!(message.contains("outside root"), "{path}: {message}");
    }
}

#[tokio::test]
async fn a_symlink_loop_fails_without_hanging() {
    let t = Tree::new();
    t.link("loop_b", "loop_a");
    t.link("loop_a", "loop_b");
    let cx = t.cx();
    let result = call(&cx, "read_file", json!({"path": "loop_a"})).await;
    assert!(matches!(result, Err(ToolError::Failed(_))), "{result:?}");
}

#[tokio::test]
async fn a_hard_link_to_an_outside_file_is_refused() {
    let t = Tree::new();
    fs::hard_link(t.outside.join("secret.txt"), t.ws.join("hard.txt")).unwrap();
    let cx = t.cx();
    let message = denied(call(&cx, "read_file", json!({"path": "hard.txt"})).await);
    assert!(message.contains("2 hard links"), "{message}");
    denied(call(&cx, "read_file", json!({"path": "hard.txt", "head": 1})).await);
    let (_, out) = ok(call(&cx, "read_multiple_files", json!({"paths": ["hard.txt"]})).await);
    assert!(
        out["files"][0]["error"]
            .as_str()
            .unwrap()
            .contains("hard links"),
        "{out}"
    );
    // search_files skips it rather than reading it.
    let (_, out) = ok(call(&cx, "search_files", json!({"query": PROBE})).await);
    assert_eq!(out["matches"], json!([]));
    assert_eq!(out["files_searched"], 0);
}

#[tokio::test]
async fn an_unknown_root_is_invalid_arguments() {
    let t = Tree::new();
    t.file("a.txt", "a");
    let cx = t.cx();
    let calls: [(&str, Value); 6] = [
        ("read_file", json!({"path": "a.txt", "root": "nope"})),
        ("get_file_info", json!({"path": "a.txt", "root": "nope"})),
        ("list_dir", json!({"root": "nope"})),
        ("glob", json!({"pattern": "*", "root": "nope"})),
        ("search_files", json!({"query": "a", "root": "nope"})),
        ("search_files", json!({"glob": "*", "root": "nope"})),
    ];
    for (tool, args) in calls {
        let message = invalid(call(&cx, tool, args).await);
        assert!(
            message.contains("no root is named \"nope\"") && message.contains("ws"),
            "{tool}: {message}"
        );
    }
    let (_, out) = ok(call(
        &cx,
        "read_multiple_files",
        json!({"paths": ["a.txt"], "root": "nope"}),
    )
    .await);
    assert!(
        out["files"][0]["error"]
            .as_str()
            .unwrap()
            .contains("no root is named"),
        "{out}"
    );
}

#[tokio::test]
async fn a_second_root_is_reached_by_name_or_by_absolute_path_only() {
    let t = Tree::new();
    t.file("a.txt", "from ws");
    let docs = t.base.join("docs");
    fs::create_dir(&docs).unwrap();
    fs::write(docs.join("a.txt"), "from docs").unwrap();
    let roots = Arc::new(Roots::open(&[spec("ws", &t.ws), spec("docs", &docs)]).unwrap());
    let cx = context(roots, Limits::default());
    let read = |args: Value| {
        let cx = cx.clone();
        async move {
            ok(call(&cx, "read_file", args).await).1["content"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };
    assert_eq!(read(json!({"path": "a.txt"})).await, "from ws");
    assert_eq!(
        read(json!({"path": "a.txt", "root": "docs"})).await,
        "from docs"
    );
    let docs_a = docs.join("a.txt").to_str().unwrap().to_string();
    assert_eq!(read(json!({"path": docs_a})).await, "from docs");
    // Naming the other root refuses an absolute path into this one.
    let message = denied(call(&cx, "read_file", json!({"path": docs_a, "root": "ws"})).await);
    assert!(message.contains("not under root \"ws\""), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_folder_swapped_for_an_outside_symlink_never_leaks_the_outside_file() {
    let t = Tree::new();
    t.file("d/secret.txt", "inside");
    let cx = t.cx();
    let swap = Swapper::start(&t.ws.join("d"), &t.outside);
    let (mut read, mut refused, mut missing) = (0, 0, 0);
    for _ in 0..2000 {
        let result = call(&cx, "read_file", json!({"path": "d/secret.txt"})).await;
        assert_no_secret(&result);
        match result {
            Ok(out) => {
                assert_eq!(out.structured.unwrap()["content"], "inside");
                read += 1;
            }
            Err(ToolError::Denied {
                rule: "confinement",
                ..
            }) => refused += 1,
            Err(ToolError::Failed(m)) if m.contains("no such file") => missing += 1,
            Err(other) => panic!("unexpected error during the swap: {other:?}"),
        }
    }
    swap.stop();
    // The race must actually have been run: some calls met the symlink.
    assert!(
        refused > 0,
        "no call met the symlink (read {read}, missing {missing})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn glob_and_search_never_report_outside_files_while_a_folder_is_swapped() {
    let t = Tree::new();
    t.file("d/inside.txt", "inside");
    fs::write(t.outside.join("outside_only.txt"), SECRET).unwrap();
    let cx = t.cx();
    let swap = Swapper::start(&t.ws.join("d"), &t.outside);
    let mut listed = 0;
    for i in 0..600 {
        let path = if i % 2 == 0 { "" } else { "d" };
        let result = call(&cx, "glob", json!({"pattern": "*.txt", "path": path})).await;
        assert_no_secret(&result);
        if let Ok(out) = result {
            let found = paths(out.structured.as_ref().unwrap());
            assert!(
                found
                    .iter()
                    .all(|p| p == "d/inside.txt" || p == "d_parked/inside.txt"),
                "glob reported a file from outside the root: {found:?}"
            );
            listed += found.len();
        }
        let result = call(&cx, "search_files", json!({"query": PROBE, "path": path})).await;
        assert_no_secret(&result);
        if let Ok(out) = result {
            assert_eq!(out.structured.unwrap()["matches"], json!([]));
        }
    }
    swap.stop();
    assert!(listed > 0, "glob never found the inside file");
}

#[tokio::test]
async fn a_path_through_a_file_is_not_a_folder() {
    let t = Tree::new();
    t.file("a.txt", "a");
    let cx = t.cx();
    let message = failed(call(&cx, "read_file", json!({"path": "a.txt/b"})).await);
    assert!(message.contains("not a folder"), "{message}");
    let message = failed(call(&cx, "list_dir", json!({"path": "a.txt"})).await);
    assert!(message.contains("not a folder"), "{message}");
}

/// Refuses every open that lands under `secrets/`, as an operator's `always_deny` on
/// `secrets/**` does in the pipeline.
struct NoSecrets;

impl aether_tools::PathCheck for NoSecrets {
    fn check(&self, _: &aether_tools::Root, real_rel: &str, _: bool) -> Result<(), ToolError> {
        match real_rel == "secrets" || real_rel.starts_with("secrets/") {
            true => Err(ToolError::denied(
                "rules",
                format!("{real_rel} meets no-secrets"),
            )),
            false => Ok(()),
        }
    }
}

/// The call's path rules are held where each open really lands: a folder that is a link to
/// a ruled one (swapped in after the pipeline judged the name, say) is refused by the read,
/// listing, information and write tools alike, and nothing is written there.
#[tokio::test]
async fn the_path_rules_judge_where_an_open_lands() {
    let t = Tree::new();
    t.file("secrets/key.txt", "s3cret");
    t.file("docs/readme.txt", "fine");
    t.link("secrets", "shortcut");
    let cx = CallContext {
        paths: Arc::new(NoSecrets),
        ..t.cx_writable()
    };
    // What the rules allow still works.
    ok(call(&cx, "read_file", json!({"path": "docs/readme.txt"})).await);
    for (tool, args) in [
        ("read_file", json!({"path": "shortcut/key.txt"})),
        ("get_file_info", json!({"path": "shortcut/key.txt"})),
        ("list_dir", json!({"path": "shortcut"})),
        ("glob", json!({"pattern": "*", "path": "shortcut"})),
        (
            "search_files",
            json!({"query": "s3cret", "path": "shortcut"}),
        ),
        (
            "write_file",
            json!({"path": "shortcut/new.txt", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "shortcut/key.txt", "search": "s3cret", "replace": "x"}),
        ),
    ] {
        match call(&cx, tool, args).await {
            Err(ToolError::Denied {
                rule: "rules",
                message,
            }) => {
                assert!(message.contains("no-secrets"), "{tool}: {message}")
            }
            other => panic!("{tool}: expected the rules' refusal, got {other:?}"),
        }
    }
    assert!(!std::path::Path::new(&t.abs("secrets/new.txt")).exists());
    assert_eq!(
        fs::read_to_string(t.abs("secrets/key.txt")).unwrap(),
        "s3cret"
    );
}
