//! Credential files: refused by name, through symlinks and hard links, and never found by a walk.

use std::fs;

use serde_json::json;

use crate::common::{Swapper, Tree, call, denied, ok, paths};

/// What every credential file in these tests contains. No result may ever carry it.
const TOKEN: &str = "CREDENTIAL-TOKEN-91be";

const CREDENTIALS: [&str; 12] = [
    ".env",
    ".env.production",
    "app/.env",
    ".ssh/id_rsa",
    ".ssh/known_hosts",
    ".aws/credentials",
    ".git/config",
    "server.pem",
    "certs/SERVER.PEM",
    ".aether/aether.db",
    ".aether/anything/else.txt",
    "deploy/prod.env",
];

const LOOK_ALIKES: [&str; 4] = [
    ".env.example",
    "id_rsa.pub",
    ".ssh/id_rsa.pub",
    "docs/environment.md",
];

/// A tree holding every credential file and every look-alike, each containing `TOKEN`.
fn tree() -> Tree {
    let t = Tree::new();
    for rel in CREDENTIALS.iter().chain(&LOOK_ALIKES) {
        t.file(rel, format!("{TOKEN} in {rel}\n"));
    }
    t.file(".git/HEAD", format!("{TOKEN} in .git/HEAD\n"));
    t.file("src/app.rs", format!("// {TOKEN} in src/app.rs\n"));
    t
}

/// The confinement refusal carries the credential wording and none of the file's content.
fn check_refused(result: crate::common::Outcome, what: &str) {
    let shown = format!("{result:?}");
    assert!(
        !shown.contains(TOKEN),
        "{what}: credential content leaked: {shown}"
    );
    let message = denied(result);
    assert!(message.contains("credential"), "{what}: {message}");
}

#[tokio::test]
async fn credential_files_are_refused_by_name() {
    let t = tree();
    let cx = t.cx();
    for rel in CREDENTIALS {
        for args in [
            json!({"path": rel}),
            json!({"path": rel, "tail": 1}),
            json!({"path": t.abs(rel)}),
            json!({"path": format!("./{rel}")}),
        ] {
            check_refused(
                call(&cx, "read_file", args.clone()).await,
                &format!("read_file {args}"),
            );
        }
        check_refused(
            call(&cx, "get_file_info", json!({"path": rel})).await,
            &format!("get_file_info {rel}"),
        );
        let (_, out) = ok(call(
            &cx,
            "read_multiple_files",
            json!({"paths": [rel, "src/app.rs"]}),
        )
        .await);
        assert!(
            !out.to_string().contains(&format!("{TOKEN} in {rel}")),
            "{out}"
        );
        assert!(
            out["files"][0]["error"]
                .as_str()
                .unwrap()
                .contains("credential"),
            "{out}"
        );
        assert!(
            out["files"][1]["content"]
                .as_str()
                .unwrap()
                .contains("src/app.rs"),
            "{out}"
        );
    }
    // Credential folders cannot be listed or searched either.
    for dir in [".ssh", ".aether", "app/.aether"] {
        t.dir(dir);
        check_refused(
            call(&cx, "list_dir", json!({"path": dir})).await,
            &format!("list_dir {dir}"),
        );
        check_refused(
            call(&cx, "glob", json!({"pattern": "*", "path": dir})).await,
            &format!("glob in {dir}"),
        );
        check_refused(
            call(&cx, "search_files", json!({"query": TOKEN, "path": dir})).await,
            &format!("search_files in {dir}"),
        );
    }
}

#[tokio::test]
async fn look_alikes_of_credential_files_are_readable() {
    let t = tree();
    let cx = t.cx();
    for rel in LOOK_ALIKES {
        let (_, out) = ok(call(&cx, "read_file", json!({"path": rel})).await);
        assert_eq!(out["content"], format!("{TOKEN} in {rel}\n"), "{rel}");
    }
}

#[tokio::test]
async fn a_symlink_to_a_credential_file_is_refused() {
    let t = tree();
    t.link(".env", "notes.txt");
    t.link("../.ssh/id_rsa", "docs/readme.txt");
    t.link("notes.txt", "chained.txt");
    t.link(".ssh", "keys");
    t.link(".aether", "store");
    let cx = t.cx();
    for path in [
        "notes.txt",
        "docs/readme.txt",
        "chained.txt",
        "keys/known_hosts",
        "store/aether.db",
    ] {
        check_refused(
            call(&cx, "read_file", json!({"path": path})).await,
            &format!("read_file {path}"),
        );
        let (_, out) = ok(call(&cx, "read_multiple_files", json!({"paths": [path]})).await);
        assert!(!out.to_string().contains(TOKEN), "{out}");
        assert!(
            out["files"][0]["error"]
                .as_str()
                .unwrap()
                .contains("credential"),
            "{out}"
        );
    }
    // get_file_info does not read, but a credential file's size and times are not for
    // agents either, whatever folder symlink leads to it.
    for path in ["keys/known_hosts", "store/aether.db"] {
        check_refused(
            call(&cx, "get_file_info", json!({"path": path})).await,
            &format!("get_file_info {path}"),
        );
    }
    for dir in ["keys", "store"] {
        check_refused(
            call(&cx, "list_dir", json!({"path": dir})).await,
            &format!("list_dir {dir}"),
        );
        check_refused(
            call(&cx, "glob", json!({"pattern": "*", "path": dir})).await,
            &format!("glob in {dir}"),
        );
        check_refused(
            call(&cx, "search_files", json!({"query": TOKEN, "path": dir})).await,
            &format!("search_files in {dir}"),
        );
    }
}

#[tokio::test]
async fn a_hard_link_to_a_credential_file_is_refused() {
    let t = tree();
    fs::hard_link(t.ws.join(".env"), t.ws.join("copy.txt")).unwrap();
    let cx = t.cx();
    let result = call(&cx, "read_file", json!({"path": "copy.txt"})).await;
    assert!(!format!("{result:?}").contains(TOKEN), "{result:?}");
    assert!(denied(result).contains("hard links"));
}

#[tokio::test]
async fn search_and_glob_never_return_credential_files_or_their_content() {
    let t = tree();
    let cx = t.cx();
    let wide = json!({"include_hidden": true, "respect_ignore": false});
    let with = |extra: serde_json::Value| {
        let mut args = wide.clone();
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    // `.ssh/id_rsa.pub` is readable by name, but the walk does not enter credential folders.
    let allowed = [
        ".env.example",
        "docs/environment.md",
        "id_rsa.pub",
        "src/app.rs",
    ];

    let (text, out) = ok(call(&cx, "search_files", with(json!({"query": TOKEN}))).await);
    assert_eq!(paths(&out), allowed);
    for rel in CREDENTIALS.iter().chain(&[".git/HEAD"]) {
        assert!(
            !text.contains(&format!("{TOKEN} in {rel}\n")),
            "{rel} content in {text}"
        );
    }

    // A pattern that leads into a credential folder or one no walk enters is refused.
    for pattern in [".aether/**", ".git/*", ".ssh/*", "app/../.aws/*"] {
        denied(call(&cx, "glob", with(json!({"pattern": pattern}))).await);
        denied(call(&cx, "search_files", with(json!({"glob": pattern}))).await);
    }
    for pattern in ["*", "**/*", "**", "**/.env", "*.pem"] {
        let (_, out) = ok(call(&cx, "glob", with(json!({"pattern": pattern}))).await);
        let found = paths(&out);
        for rel in &found {
            assert!(
                allowed.contains(&rel.as_str()),
                "glob {pattern:?} returned {rel}"
            );
        }
        let (_, out) = ok(call(&cx, "search_files", with(json!({"glob": pattern}))).await);
        assert_eq!(
            paths(&out),
            found,
            "search_files names mode for {pattern:?}"
        );
    }
    let (_, out) = ok(call(&cx, "glob", with(json!({"pattern": "*"}))).await);
    assert_eq!(paths(&out), allowed);
}

#[tokio::test]
async fn the_walk_never_enters_git_or_aether() {
    let t = Tree::new();
    t.file(".git/HEAD", "ref: needle\n");
    t.file(".git/objects/ab/cdef", "needle\n");
    t.file(".aether/logs/today.txt", "needle\n");
    t.file("sub/.git/HEAD", "needle\n");
    t.file("sub/.aether/x.txt", "needle\n");
    t.file("src/lib.rs", "needle\n");
    let cx = t.cx();
    let (_, out) = ok(call(
        &cx,
        "glob",
        json!({"pattern": "**/*", "include_hidden": true, "respect_ignore": false}),
    )
    .await);
    assert_eq!(paths(&out), ["src/lib.rs"]);
    let (_, out) = ok(call(
        &cx,
        "search_files",
        json!({"query": "needle", "include_hidden": true, "respect_ignore": false}),
    )
    .await);
    assert_eq!(paths(&out), ["src/lib.rs"]);
    assert_eq!(out["files_searched"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_folder_swapped_for_a_symlink_to_a_credential_folder_never_leaks_it() {
    let t = Tree::new();
    t.file(".ssh/known_hosts", format!("{TOKEN} in .ssh/known_hosts\n"));
    t.file("d/known_hosts", "CREDENTIAL-TOKEN look-alike, harmless\n");
    let cx = t.cx();
    let swap = Swapper::start(&t.ws.join("d"), std::path::Path::new(".ssh"));
    let mut found = 0;
    for i in 0..1000 {
        let path = if i % 2 == 0 { "" } else { "d" };
        let result = call(
            &cx,
            "search_files",
            json!({"query": "CREDENTIAL-TOKEN", "path": path}),
        )
        .await;
        assert!(
            !format!("{result:?}").contains(TOKEN),
            "credential content leaked: {result:?}"
        );
        if let Ok(out) = &result {
            found += out.structured.as_ref().unwrap()["matches"]
                .as_array()
                .unwrap()
                .len();
        }
        let result = call(&cx, "read_file", json!({"path": "d/known_hosts"})).await;
        assert!(
            !format!("{result:?}").contains(TOKEN),
            "credential content leaked: {result:?}"
        );
    }
    swap.stop();
    assert!(found > 0, "search never found the harmless file");
}

#[tokio::test]
async fn a_root_opened_at_a_credential_folder_serves_none_of_it() {
    let home = tempfile::tempdir().unwrap();
    let aws = home.path().join(".aws");
    fs::create_dir_all(&aws).unwrap();
    fs::write(aws.join("credentials"), format!("aws_secret = {TOKEN}\n")).unwrap();
    let roots = std::sync::Arc::new(
        aether_tools::Roots::open(&[crate::common::spec("aws", &aws)]).unwrap(),
    );
    let t = Tree::new();
    let cx = aether_tools::CallContext { roots, ..t.cx() };
    check_refused(
        call(&cx, "read_file", json!({"path": "credentials"})).await,
        "read_file in ~/.aws",
    );
    check_refused(
        call(
            &cx,
            "search_files",
            json!({"query": TOKEN, "include_hidden": true}),
        )
        .await,
        "search_files over ~/.aws",
    );
}

#[tokio::test]
async fn submodule_configs_and_other_credential_shapes_are_refused() {
    let t = tree();
    for path in [
        ".git/modules/lib/config",
        ".envrc",
        ".cargo/credentials.toml",
        ".vault-token",
        "keys/deploy.ppk",
    ] {
        t.file(path, format!("secret {TOKEN}\n"));
        check_refused(
            call(&t.cx(), "read_file", json!({"path": path})).await,
            path,
        );
    }
}
