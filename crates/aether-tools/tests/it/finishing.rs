//! `check_finishing`: each mark failing on an unfinished project and passing once finished,
//! what does not ship left out, and nothing read from outside the root.

use serde_json::{Value, json};

use crate::common::{SECRET, Tree, call, denied, ok};

/// The marks as (mark, status), and each mark's findings.
fn marks(out: &Value) -> Vec<(String, String, Vec<String>)> {
    out["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mark"].as_str().unwrap().to_string(),
                m["status"].as_str().unwrap().to_string(),
                m["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

fn status(out: &Value, mark: &str) -> (String, Vec<String>) {
    let (_, s, f) = marks(out).into_iter().find(|(m, ..)| m == mark).unwrap();
    (s, f)
}

/// A small web app as a worker might leave it: every mark has something wrong.
fn unfinished() -> Tree {
    let t = Tree::new();
    t.file(
        "app/index.html",
        r#"<!doctype html><html><head><link rel="icon" href="/favicon.ico"><title>Todos</title></head>
<body><div id="root"></div><script type="module" src="/src/main.jsx"></script></body></html>"#,
    );
    t.file("app/favicon.ico", [0u8, 0, 1, 0]);
    t.file(
        "app/about.html",
        "<html><head><title>About</title></head><body>Lorem ipsum dolor sit amet.</body></html>",
    );
    t.file(
        "app/src/Todos.jsx",
        "export function Todos({ items }) {\n  // TODO: sort them\n  return <ul>{items.map((t) => <li key={t.id}>{t.text}</li>)}</ul>;\n}\n",
    );
    t.file(
        "app/README.md",
        "# Todos\n\n![The list](docs/list.png)\n<img src=\"docs/empty.png\" alt=\"empty\">\n![badge](https://img.shields.io/x.svg)\n",
    );
    t.file("app/docs/list.png", [0x89u8, b'P', b'N', b'G', 0]);
    t.file(
        "app/package.json",
        r#"{"name": "todos", "version": "1.3.0"}"#,
    );
    t.file(
        "app/CHANGELOG.md",
        "# Changelog\n\n## [Unreleased]\n- TODO in a changelog is fine\n\n## [1.2.0] - 2026-11-01\n- first\n",
    );
    // What does not ship is not read: dependencies, tests, build output, ignored files.
    t.file("app/node_modules/x/index.js", "// TODO: not ours\n");
    t.file("app/src/Todos.test.jsx", "// FIXME: a test may say so\n");
    t.file("app/dist/index.html", "<html>no icon, lorem ipsum</html>");
    t.file("app/.gitignore", "scratch/\n");
    t.file("app/scratch/notes.html", "<html>TODO</html>");
    t
}

#[tokio::test]
async fn every_mark_fails_on_an_unfinished_project_and_passes_once_it_is_finished() {
    let t = unfinished();
    let cx = t.cx();
    let (text, out) = ok(call(&cx, "check_finishing", json!({"path": "app"})).await);
    assert_eq!(out["passed"], false, "{text}");
    assert_eq!(out["path"], "app");
    let got: Vec<(String, String)> = marks(&out).into_iter().map(|(m, s, _)| (m, s)).collect();
    assert_eq!(
        got,
        [
            ("favicon", "FAIL"),
            ("scaffold_markers", "FAIL"),
            ("readme_screenshots", "FAIL"),
            ("version_changelog", "FAIL"),
            ("empty_states", "FAIL"),
        ]
        .map(|(m, s)| (m.to_string(), s.to_string())),
        "{text}"
    );
    assert_eq!(
        status(&out, "favicon").1,
        ["about.html: links no icon (<link rel=\"icon\" href=…>)"]
    );
    let markers = status(&out, "scaffold_markers").1;
    assert_eq!(markers.len(), 2, "{markers:?}");
    assert!(
        markers[0].starts_with("about.html:1: \"Lorem ipsum\""),
        "{markers:?}"
    );
    assert!(
        markers[1].starts_with("src/Todos.jsx:2: \"TODO\""),
        "{markers:?}"
    );
    assert_eq!(
        status(&out, "readme_screenshots").1,
        ["README.md: the image \"docs/empty.png\" does not ship"]
    );
    assert_eq!(
        status(&out, "version_changelog").1,
        ["package.json says 1.3.0; the newest entry of CHANGELOG.md is 1.2.0"]
    );
    assert_eq!(
        status(&out, "empty_states").1,
        ["src/Todos.jsx:3: renders a list and shows nothing when it is empty"]
    );
    assert!(text.starts_with("FAIL favicon: "), "{text}");

    // Finished: each finding put right.
    t.file(
        "app/about.html",
        "<html><head><link rel=\"icon\" href=\"favicon.ico\"><title>About</title></head><body>About us.</body></html>",
    );
    t.file(
        "app/src/Todos.jsx",
        "export function Todos({ items }) {\n  if (items.length === 0) return <p>Nothing to do yet.</p>;\n  return <ul>{items.map((t) => <li key={t.id}>{t.text}</li>)}</ul>;\n}\n",
    );
    t.file("app/docs/empty.png", [0x89u8, b'P', b'N', b'G', 1]);
    t.file(
        "app/CHANGELOG.md",
        "# Changelog\n\n## [Unreleased]\n\n## [1.3.0] - 2026-12-01\n- sorted\n\n## [1.2.0]\n",
    );
    let (text, out) = ok(call(&cx, "check_finishing", json!({"path": "app"})).await);
    assert_eq!(out["passed"], true, "{text}");
    assert!(
        marks(&out)
            .iter()
            .all(|(_, s, f)| s == "PASS" && f.is_empty()),
        "{text}"
    );
    assert_eq!(out["files"], 9, "{text}");
}

#[tokio::test]
async fn marks_with_nothing_to_look_at_are_skipped_and_a_missing_readme_fails() {
    let t = Tree::new();
    t.file(
        "lib/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let (text, out) = ok(call(&t.cx(), "check_finishing", json!({"path": "lib"})).await);
    let got: Vec<(String, String)> = marks(&out).into_iter().map(|(m, s, _)| (m, s)).collect();
    assert_eq!(
        got,
        [
            ("favicon", "SKIP"),
            ("scaffold_markers", "PASS"),
            ("readme_screenshots", "FAIL"),
            ("version_changelog", "SKIP"),
            ("empty_states", "SKIP"),
        ]
        .map(|(m, s)| (m.to_string(), s.to_string())),
        "{text}"
    );
    // A version with no changelog fails; a Cargo workspace's version is read too.
    t.file("lib/README.md", "# lib\n");
    t.file(
        "lib/Cargo.toml",
        "[workspace.package]\nversion = \"0.4.1\"\n",
    );
    let (text, out) = ok(call(&t.cx(), "check_finishing", json!({"path": "lib"})).await);
    assert_eq!(
        status(&out, "version_changelog"),
        (
            "FAIL".to_string(),
            vec!["Cargo.toml 0.4.1, but no CHANGELOG ships".to_string()]
        ),
        "{text}"
    );
    assert_eq!(out["passed"], false);
}

#[tokio::test]
async fn nothing_outside_the_root_is_read_or_counted() {
    let t = Tree::new();
    // A README and an icon that are links to files outside the root: the walk yields no
    // symlink, so neither ships, and nothing of theirs is read.
    t.link(t.outside.join("secret.txt"), "site/README.md");
    t.link(t.outside.join("secret.txt"), "site/favicon.ico");
    t.file(
        "site/index.html",
        "<html><head><link rel=\"icon\" href=\"../../outside/secret.txt\"></head></html>",
    );
    let (text, out) = ok(call(&t.cx(), "check_finishing", json!({"path": "site"})).await);
    assert!(!text.contains(SECRET));
    assert_eq!(status(&out, "readme_screenshots").0, "FAIL", "{text}");
    assert_eq!(
        status(&out, "favicon").1,
        ["index.html: links the icon \"../../outside/secret.txt\", which does not ship"]
    );
    // The folder itself is confined like any path.
    for path in ["../outside", "/etc", "../ws_evil"] {
        denied(call(&t.cx(), "check_finishing", json!({"path": path})).await);
    }
}
