//! Tidy checks over the whole workspace: file headers, no ignored tests, the dependency
//! direction written in ARCHITECTURE.md, a well-formed tool catalog, docs that match the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::util::repo_root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "node_modules" {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_comment_saying_what_it_owns() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("crates"), &mut files);
    assert!(files.len() > 20);
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            !std::fs::read_to_string(f)
                .unwrap()
                .trim_start()
                .starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:?}"
    );
}

#[test]
fn no_test_is_ignored() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("crates"), &mut files);
    let marker = ["#[", "ignore]"].concat();
    let ignored: Vec<_> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains(&marker))
        .collect();
    assert!(ignored.is_empty(), "ignored tests in {ignored:?}");
}

/// The `aether-*` crates each crate's Cargo.toml depends on (normal dependencies only).
fn internal_deps() -> BTreeMap<String, BTreeSet<String>> {
    let mut map = BTreeMap::new();
    for entry in std::fs::read_dir(repo_root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let deps_section = manifest.split("\n[dependencies]\n").nth(1).unwrap_or("");
        let deps_section = deps_section.split("\n[").next().unwrap_or("");
        let deps = deps_section
            .lines()
            .filter_map(|l| l.split(['.', ' ', '=']).next())
            .filter(|d| d.starts_with("aether-"))
            .map(String::from)
            .collect();
        map.insert(name, deps);
    }
    map
}

#[test]
fn dependency_direction_matches_architecture_md() {
    let arch = std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap();
    // ARCHITECTURE.md lists, one per line, `crate -> dep, dep` (or `crate -> (nothing)`).
    let mut written: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in arch.lines() {
        let line = line.trim().trim_matches('`');
        if let Some((krate, deps)) = line.split_once(" -> ")
            && krate.starts_with("aether-")
        {
            let deps = deps
                .split(',')
                .map(|d| d.trim().to_string())
                .filter(|d| d.starts_with("aether-"))
                .collect();
            written.insert(krate.trim().to_string(), deps);
        }
    }
    assert_eq!(
        written,
        internal_deps(),
        "ARCHITECTURE.md's dependency lines must match the Cargo.toml files"
    );
}

#[test]
fn only_the_store_knows_sql_and_only_the_server_knows_mcp() {
    let deps_of = |krate: &str| {
        std::fs::read_to_string(repo_root().join("crates").join(krate).join("Cargo.toml")).unwrap()
    };
    for krate in [
        "aether-vocab",
        "aether-screens",
        "aether-policy",
        "aether-tools-core",
        "aether-tools",
        "aether-net",
        "aether-pipeline",
        "aether-upstream",
        "aether-server",
        "aether-runner",
        "aether-cli",
    ] {
        let manifest = deps_of(krate);
        let normal = manifest
            .split("\n[dependencies]\n")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("");
        assert!(
            !["rusqlite", "postgres", "sqlx"]
                .iter()
                .any(|db| normal.contains(db)),
            "{krate} must not know SQL"
        );
    }
    for krate in [
        "aether-vocab",
        "aether-screens",
        "aether-policy",
        "aether-store",
        "aether-tools-core",
        "aether-tools",
        "aether-net",
        "aether-pipeline",
        "aether-cli",
    ] {
        let manifest = deps_of(krate);
        let normal = manifest
            .split("\n[dependencies]\n")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("");
        assert!(
            !normal.contains("rmcp") && !normal.contains("axum"),
            "{krate} must not know MCP or HTTP"
        );
    }
    for krate in ["aether-vocab", "aether-screens", "aether-policy"] {
        assert!(
            !deps_of(krate).contains("tokio"),
            "{krate} has no async runtime"
        );
    }
}

#[test]
fn the_tool_catalog_is_well_formed() {
    let mut tools = aether_tools::builtin_tools();
    tools.extend(aether_net::tools(std::sync::Arc::new(
        aether_net::SystemResolver,
    )));
    tools.extend(aether_net::saving_tools(
        std::sync::Arc::new(aether_net::SystemResolver),
        aether_tools::workspace::saver(),
    ));
    tools.extend(aether_tools::fixtures::tools());
    // Catalog::new checks unique names, a group, a tier, a description, valid input and
    // output schemas (meta-validated), compiled validators.
    let catalog = aether_pipeline::Catalog::new(tools).expect("the catalog is well-formed");
    let builtins: Vec<_> = catalog
        .iter()
        .filter(|e| e.def().group != "conformance")
        .collect();
    assert!(builtins.len() >= 7);
    let mut undeclared = Vec::new();
    for entry in builtins {
        let def = entry.def();
        assert!(
            def.output_schema.get("properties").is_some(),
            "{}: output schema describes its fields",
            def.name
        );
        // Schemas every client reads: no type arrays (nullable values are `anyOf`), no
        // `format` outside JSON Schema's own (a Rust type's `uint64` warns in every client).
        for schema in [&def.input_schema, &def.output_schema] {
            let found = aether_tools::unportable(schema);
            assert!(found.is_empty(), "{}: {found:?}", def.name);
        }
        // Its declaration of which arguments are paths, URLs, hosts and commands agrees with
        // its schema (every argument the names and formats of `aether_policy::arguments` say
        // is one is declared, and nothing else).
        let problems = def.arguments.problems(&def.input_schema);
        undeclared.extend(problems.into_iter().map(|p| format!("{}: {p}", def.name)));
        // Any tool that takes a network destination must say it reaches the network (so the
        // egress gate applies).
        if !def.arguments.urls.is_empty() || !def.arguments.hosts.is_empty() {
            assert!(
                def.meta.reaches_network,
                "{} takes a destination but does not declare reaches_network",
                def.name
            );
        }
        if def.meta.reaches_network {
            assert_ne!(
                def.tier,
                aether_policy::Tier::Standard,
                "{}: network tools are Elevated or higher",
                def.name
            );
        }
        assert_eq!(entry.digest, def.digest(), "{}: cached digest", def.name);
    }
    assert!(
        undeclared.is_empty(),
        "declarations that disagree with their schemas:\n{}",
        undeclared.join("\n")
    );
}

#[test]
fn the_readme_gives_the_two_commands_and_ci_runs_the_test_one() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains("cargo run --release --bin aether -- serve"),
        "README: the run command"
    );
    assert!(
        readme.contains("scripts/test.sh"),
        "README: the test command"
    );
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    assert!(
        ci.contains("scripts/test.sh"),
        ".ci/run calls the README's test command"
    );
}

#[test]
fn docs_tools_md_is_the_catalog_as_generated() {
    let (code, generated, err) = {
        let out = crate::util::aether()
            .args(["tools", "docs"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(0), "{err}");
    let path = repo_root().join("docs/TOOLS.md");
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/TOOLS.md is stale: regenerate it with `cargo run --bin aether -- tools docs > docs/TOOLS.md`"
    );
    // Every shipped tool is on the page.
    let mut shipped = aether_tools::builtin_tools();
    shipped.extend(aether_net::tools(std::sync::Arc::new(
        aether_net::SystemResolver,
    )));
    shipped.extend(aether_net::saving_tools(
        std::sync::Arc::new(aether_net::SystemResolver),
        aether_tools::workspace::saver(),
    ));
    for tool in shipped {
        assert!(
            on_disk.contains(&format!("\n## {}\n", tool.def().name)),
            "{} is missing from docs/TOOLS.md",
            tool.def().name
        );
    }
}
