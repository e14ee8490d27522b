//! `check_finishing`: the deterministic marks of a finished project, one PASS/FAIL row each
//! (SKIP where a mark has nothing to look at), read only from the files that ship: what the
//! walk yields (`.gitignore` honoured, no hidden files, no credential files, no symlinks)
//! less dependencies, tests and build output.
//!
//! The marks, as the engine's seed lists them:
//! - `favicon`: every HTML page links an icon (`<link rel="icon">`, read with html5ever's
//!   tokenizer) and the icon it links ships (a `data:` URL counts; an external one is named
//!   and not fetched);
//! - `scaffold_markers`: no `TODO`/`FIXME`/`XXX`, no lorem ipsum, none of the starter
//!   templates' own lines ("Edit src/App", "Vite + React", "Get started by editing", …);
//! - `readme_screenshots`: a README at the project's top whose local images all ship;
//! - `version_changelog`: the version in `package.json`, `Cargo.toml` and `pyproject.toml` is
//!   the newest version the changelog names (an "Unreleased" heading is passed over);
//! - `empty_states`: every screen that renders a list (JSX `.map(… => <…`, `v-for`,
//!   `{#each`, `*ngFor`/`@for`) also says what shows when it is empty (a length compared
//!   with 0 or negated, `{:else}`, `v-else`, `@empty`, an "empty" state or class).

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::LazyLock;

use aether_policy::ArgumentKinds;
use aether_policy::tool::groups;
use aether_policy::{Tier, ToolDef, ToolMeta};
use async_trait::async_trait;
use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, StartTag, TagToken, Token, TokenSink, TokenSinkResult, Tokenizer,
};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::walk::{self, Walk, WalkOptions};
use crate::{CallContext, Tool, ToolError, ToolOutput, blocking, parse_args, schema_of};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    pub root: Option<String>,
    /// The project's folder, relative to the root. Defaults to the whole root.
    #[serde(default)]
    pub path: String,
}

/// How a mark came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub(super) enum Status {
    Pass,
    Fail,
    /// Nothing in the project for this mark to look at (no pages, no lists, no version).
    Skip,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct Mark {
    /// favicon, scaffold_markers, readme_screenshots, version_changelog or empty_states.
    pub mark: &'static str,
    pub status: Status,
    /// What was found, in a sentence.
    pub detail: String,
    /// Each place that fails the mark (at most 50), as "path: what".
    pub findings: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub(super) struct Output {
    pub root: String,
    /// The project's folder, relative to the root ("" for the whole root).
    pub path: String,
    /// Files that ship, read.
    pub files: usize,
    /// Whether more ships than was read: over 20,000 files, or over 64 MiB of text in all.
    pub truncated: bool,
    /// Whether no mark failed.
    pub passed: bool,
    pub marks: Vec<Mark>,
}

/// Files read at most, and the most of each read (a larger one is known to exist, not read).
const MAX_FILES: usize = 20_000;
const MAX_FILE_BYTES: u64 = 1 << 20;
/// The text of all files read together, at most.
const MAX_TEXT_BYTES: u64 = 64 << 20;
/// Findings listed per mark.
const MAX_FINDINGS: usize = 50;

/// Folders whose files do not ship: dependencies, tests, build output.
const NOT_SHIPPED: &[&str] = &[
    "node_modules",
    "bower_components",
    "vendor",
    "test",
    "tests",
    "__tests__",
    "__mocks__",
    "spec",
    "e2e",
    "cypress",
    "fixtures",
    "coverage",
    "dist",
    "build",
    "out",
    "target",
    "__pycache__",
    ".venv",
    "venv",
];

/// Whether a file at `rel` (relative to the project) ships.
fn ships(rel: &str) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let Some(name) = parts.pop() else {
        return false;
    };
    if parts.iter().any(|p| NOT_SHIPPED.contains(p)) {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    !(lower.contains(".test.")
        || lower.contains(".spec.")
        || lower.starts_with("test_")
        || lower.ends_with("_test.go")
        || lower.ends_with("_test.py"))
}

/// A file that ships: its path relative to the project, and its text (`None`: binary or
/// larger than [`MAX_FILE_BYTES`]).
struct Shipped {
    rel: String,
    text: Option<String>,
}

pub struct CheckFinishing {
    def: ToolDef,
}

impl Default for CheckFinishing {
    fn default() -> CheckFinishing {
        CheckFinishing::new()
    }
}

impl CheckFinishing {
    pub fn new() -> CheckFinishing {
        CheckFinishing {
            def: ToolDef {
                name: "check_finishing".into(),
                title: "Check the deterministic marks of a finished project".into(),
                group: groups::QUALITY.into(),
                tier: Tier::Standard,
                description: "PASS/FAIL per deterministic mark of a finished project, reading only the files that ship \
                     (.gitignore honoured; no dependencies, tests or build output): favicon (every HTML page links an \
                     icon that ships), scaffold_markers (no TODO/FIXME/XXX, lorem ipsum or starter-template lines), \
                     readme_screenshots (a README whose local images ship), version_changelog (the version in \
                     package.json/Cargo.toml/pyproject.toml is the changelog's newest), empty_states (every screen that \
                     renders a list says what shows when it is empty). SKIP where a mark has nothing to look at."
                    .into(),
                input_schema: schema_of::<Args>(),
                output_schema: schema_of::<Output>(),
                arguments: ArgumentKinds::paths(&["path"]),
                meta: ToolMeta::read_only(),
            },
        }
    }
}

#[async_trait]
impl Tool for CheckFinishing {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        // Folders that do not ship are not walked at all (a node_modules can hold more than
        // the project).
        let opts = WalkOptions {
            include_hidden: false,
            respect_ignore: true,
            skip_folders: NOT_SHIPPED,
        };
        let walk = Walk::prepare(&cx, args.root.as_deref(), &args.path, opts, None)?;
        let roots = cx.roots.clone();
        let cancel = cx.cancel.clone();
        let _turn = walk::turn(&cx).await?;
        let root_name = walk.root_name.clone();
        let (files, truncated) = blocking(move || read_shipped(&roots, &walk, &cancel)).await;
        if cx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let marks = vec![
            favicon(&files),
            scaffold_markers(&files),
            readme_screenshots(&files),
            version_changelog(&files),
            empty_states(&files),
        ];
        let passed = marks.iter().all(|m| m.status != Status::Fail);
        let mut text = String::new();
        for m in &marks {
            let status = match m.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            text.push_str(&format!("{status} {}: {}\n", m.mark, m.detail));
            for f in &m.findings {
                text.push_str(&format!("  - {f}\n"));
            }
        }
        if truncated {
            text.push_str(&format!(
                "[not everything that ships was read (at most {MAX_FILES} files, 64 MiB of text): check a narrower folder]\n"
            ));
        }
        let output = Output {
            root: root_name,
            path: args.path.trim_matches('/').to_string(),
            files: files.len(),
            truncated,
            passed,
            marks,
        };
        Ok(ToolOutput::with_structured(
            text.trim_end().to_string(),
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

/// Every file that ships under the walked folder, read beneath the root (a file swapped for a
/// symlink since the walk saw it is not followed), in path order.
fn read_shipped(
    roots: &crate::Roots,
    walk: &Walk,
    cancel: &tokio_util::sync::CancellationToken,
) -> (Vec<Shipped>, bool) {
    let root = roots
        .get(&walk.root_name)
        .expect("the located root is among the roots");
    let mut open = crate::roots::read_options();
    open.follow(FollowSymlinks::No);
    let mut files = Vec::new();
    let mut truncated = false;
    let mut text_left = MAX_TEXT_BYTES;
    for entry in walk.builder().build() {
        if cancel.is_cancelled() {
            break;
        }
        let Some((abs, rel)) = walk::regular_file(entry, walk) else {
            continue;
        };
        let Ok(in_project) = abs.strip_prefix(&walk.base) else {
            continue;
        };
        let in_project = in_project.to_string_lossy().into_owned();
        if !ships(&in_project) {
            continue;
        }
        if files.len() >= MAX_FILES {
            truncated = true;
            break;
        }
        let Ok(rel_path) = abs.strip_prefix(&walk.root_path) else {
            continue;
        };
        let opening = crate::Opening {
            credentials: &walk.credentials,
            paths: &*walk.paths,
        };
        let found = (rel_path, abs.as_path(), rel.as_str());
        // Texts are kept to a total: past it, files still count as shipped, unread.
        let text = match text_left {
            0 => {
                truncated = true;
                None
            }
            _ => super::search_files::open_found(root, &walk.root_dir, &open, opening, found)
                .and_then(|(file, _)| read_text(file)),
        };
        text_left = text_left.saturating_sub(text.as_ref().map_or(0, |t| t.len() as u64));
        files.push(Shipped {
            rel: in_project,
            text,
        });
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    (files, truncated)
}

/// A file's text, if it is text and not over [`MAX_FILE_BYTES`].
fn read_text(file: std::fs::File) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_FILE_BYTES || bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

fn extension(rel: &str) -> String {
    Path::new(rel)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

fn mark(name: &'static str, findings: Vec<String>, pass: String, fail: String) -> Mark {
    let status = if findings.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    let detail = if findings.is_empty() { pass } else { fail };
    Mark {
        mark: name,
        status,
        detail,
        findings: findings.into_iter().take(MAX_FINDINGS).collect(),
    }
}

/// A mark failed for one reason.
fn fail(name: &'static str, finding: String, detail: &str) -> Mark {
    Mark {
        mark: name,
        status: Status::Fail,
        detail: detail.into(),
        findings: vec![finding],
    }
}

fn skip(name: &'static str, detail: &str) -> Mark {
    Mark {
        mark: name,
        status: Status::Skip,
        detail: detail.into(),
        findings: Vec::new(),
    }
}

/// Where a local reference `href` from the file `from` (both relative to the project) leads,
/// within the project: `None` for a reference that leaves it. A leading "/" is the project's
/// top; a query or fragment is dropped.
fn resolve(from: &str, href: &str) -> Option<String> {
    let href = href.split(['?', '#']).next().unwrap_or("");
    let href = percent_decode(href);
    let mut parts: Vec<&str> = match href.strip_prefix('/') {
        Some(_) => Vec::new(),
        None => from.split('/').collect::<Vec<_>>().split_last()?.1.to_vec(),
    };
    for part in href.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

fn percent_decode(text: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| text.to_string())
}

/// Whether `href` is a URL of its own (a scheme, or scheme-relative), not a file of the project.
fn external(href: &str) -> bool {
    href.starts_with("//")
        || href.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
}

/// The `href`s of a page's `<link rel="… icon …">` tags.
fn icon_links(html: &str) -> Vec<String> {
    struct Icons(RefCell<Vec<String>>);
    impl TokenSink for Icons {
        type Handle = ();
        fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
            if let TagToken(tag) = token
                && tag.kind == StartTag
                && &*tag.name == "link"
            {
                let attr = |name: &str| {
                    tag.attrs
                        .iter()
                        .find(|a| &*a.name.local == name)
                        .map(|a| a.value.to_string())
                };
                let is_icon = attr("rel").is_some_and(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("icon"))
                });
                if is_icon && let Some(href) = attr("href") {
                    self.0.borrow_mut().push(href.trim().to_string());
                }
            }
            TokenSinkResult::Continue
        }
    }
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let tokenizer = Tokenizer::new(Icons(RefCell::new(Vec::new())), Default::default());
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.0.take()
}

fn favicon(files: &[Shipped]) -> Mark {
    const NAME: &str = "favicon";
    let all: BTreeSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    let pages: Vec<&Shipped> = files
        .iter()
        .filter(|f| matches!(extension(&f.rel).as_str(), "html" | "htm"))
        .collect();
    if pages.is_empty() {
        return skip(NAME, "no HTML page ships");
    }
    let mut findings = Vec::new();
    let mut linked = BTreeSet::new();
    for page in &pages {
        let Some(html) = &page.text else {
            findings.push(format!("{}: not readable as text", page.rel));
            continue;
        };
        let links = icon_links(html);
        if links.is_empty() {
            findings.push(format!(
                "{}: links no icon (<link rel=\"icon\" href=…>)",
                page.rel
            ));
        }
        for href in links {
            if href.starts_with("data:") {
                linked.insert("a data: URL".to_string());
            } else if external(&href) {
                linked.insert(format!("{href} (external, not fetched)"));
            } else {
                match resolve(&page.rel, &href).filter(|p| all.contains(p.as_str())) {
                    Some(icon) => {
                        linked.insert(icon);
                    }
                    None => findings.push(format!(
                        "{}: links the icon {href:?}, which does not ship",
                        page.rel
                    )),
                }
            }
        }
    }
    let icons = linked.into_iter().collect::<Vec<_>>().join(", ");
    mark(
        NAME,
        findings,
        format!(
            "{} page(s), each linking an icon that ships: {icons}",
            pages.len()
        ),
        format!(
            "{} page(s); some link no icon, or one that does not ship",
            pages.len()
        ),
    )
}

static SCAFFOLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(TODO|FIXME|XXX)\b|(?i:lorem ipsum|get started by editing|edit <code>src/|edit src/app\.|vite \+ (react|vue|svelte|preact|lit)|welcome to react|learn react|create next app|welcome to your vue\.js app|your-project-name|project-name-here)",
    )
    .expect("the scaffold markers are a regex")
});

/// Lock files and changelogs: their lines are not the project's own words.
fn scaffold_exempt(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel).to_ascii_lowercase();
    name.starts_with("changelog")
        || name.ends_with(".lock")
        || matches!(
            name.as_str(),
            "package-lock.json" | "pnpm-lock.yaml" | "npm-shrinkwrap.json"
        )
}

fn scaffold_markers(files: &[Shipped]) -> Mark {
    let mut findings = Vec::new();
    let mut count = 0;
    let mut read = 0;
    for f in files.iter().filter(|f| !scaffold_exempt(&f.rel)) {
        let Some(text) = &f.text else { continue };
        read += 1;
        for (n, line) in text.lines().enumerate() {
            if let Some(m) = SCAFFOLD.find(line) {
                count += 1;
                if findings.len() < MAX_FINDINGS {
                    let shown: String = line.trim().chars().take(120).collect();
                    findings.push(format!(
                        "{}:{}: {:?} in {shown:?}",
                        f.rel,
                        n + 1,
                        m.as_str()
                    ));
                }
            }
        }
    }
    mark(
        "scaffold_markers",
        findings,
        format!("none in {read} text file(s)"),
        format!("{count} left in the files that ship"),
    )
}

static MD_IMAGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|<img\b[^>]*\bsrc\s*=\s*["']([^"']+)["']"#)
        .expect("image references are a regex")
});

fn readme_screenshots(files: &[Shipped]) -> Mark {
    const NAME: &str = "readme_screenshots";
    let all: BTreeSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    let Some(readme) = files
        .iter()
        .find(|f| !f.rel.contains('/') && f.rel.to_ascii_lowercase().starts_with("readme"))
    else {
        return fail(
            NAME,
            "no README at the project's top".into(),
            "no README ships",
        );
    };
    let Some(text) = &readme.text else {
        return fail(
            NAME,
            format!("{}: not readable as text", readme.rel),
            "the README is not text",
        );
    };
    let mut images = Vec::new();
    for c in MD_IMAGE.captures_iter(text) {
        if let Some(src) = c.get(1).or_else(|| c.get(2)) {
            images.push(src.as_str().to_string());
        }
    }
    let local: Vec<&String> = images.iter().filter(|s| !external(s)).collect();
    let findings: Vec<String> = local
        .iter()
        .filter(|src| resolve(&readme.rel, src).is_none_or(|p| !all.contains(p.as_str())))
        .map(|src| format!("{}: the image {src:?} does not ship", readme.rel))
        .collect();
    let pass = match local.len() {
        0 => format!("{} references no local image", readme.rel),
        n => format!("{} references {n} local image(s), all shipped", readme.rel),
    };
    let fail = format!(
        "{} of the README's {} local image(s) do not ship",
        findings.len(),
        local.len()
    );
    mark(NAME, findings, pass, fail)
}

static VERSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bv?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)")
        .expect("a version is a regex")
});

/// The versions the project's manifests state, as (file, version).
fn manifest_versions(files: &[Shipped]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for f in files.iter().filter(|f| !f.rel.contains('/')) {
        let Some(text) = &f.text else { continue };
        let version = match f.rel.as_str() {
            "package.json" => serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v["version"].as_str().map(String::from)),
            "Cargo.toml" => toml::from_str::<toml::Table>(text).ok().and_then(|t| {
                let at = |table: &str| {
                    t.get(table)
                        .and_then(|p| p.get("version"))
                        .and_then(|v| v.as_str())
                        .map(String::from)
                };
                at("package").or_else(|| {
                    t.get("workspace")
                        .and_then(|w| w.get("package"))
                        .and_then(|p| p.get("version"))
                        .and_then(|v| v.as_str())
                        .map(String::from)
                })
            }),
            "pyproject.toml" => toml::from_str::<toml::Table>(text).ok().and_then(|t| {
                t.get("project")
                    .and_then(|p| p.get("version"))
                    .or_else(|| {
                        t.get("tool")
                            .and_then(|t| t.get("poetry"))
                            .and_then(|p| p.get("version"))
                    })
                    .and_then(|v| v.as_str())
                    .map(String::from)
            }),
            _ => None,
        };
        if let Some(v) = version {
            found.push((f.rel.clone(), v));
        }
    }
    found
}

/// The newest version a changelog names: the first heading holding a version, passing over
/// "Unreleased".
fn changelog_head(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .filter(|l| !l.to_ascii_lowercase().contains("unreleased"))
        .find_map(|l| VERSION.captures(l).map(|c| c[1].to_string()))
}

fn version_changelog(files: &[Shipped]) -> Mark {
    const NAME: &str = "version_changelog";
    let versions = manifest_versions(files);
    if versions.is_empty() {
        return skip(
            NAME,
            "no package.json, Cargo.toml or pyproject.toml at the project's top states a version",
        );
    }
    let stated = versions
        .iter()
        .map(|(file, v)| format!("{file} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let changelog = files.iter().find(|f| {
        let name = f.rel.to_ascii_lowercase();
        !name.contains('/')
            && ["changelog", "changes", "history"]
                .iter()
                .any(|c| name == *c || name.starts_with(&format!("{c}.")))
    });
    let Some(changelog) = changelog else {
        return fail(
            NAME,
            format!("{stated}, but no CHANGELOG ships"),
            "no changelog",
        );
    };
    let Some(head) = changelog.text.as_deref().and_then(changelog_head) else {
        return fail(
            NAME,
            format!("{} names no version in a heading", changelog.rel),
            "the changelog names no version",
        );
    };
    let findings: Vec<String> = versions
        .iter()
        .filter(|(_, v)| *v != head)
        .map(|(file, v)| {
            format!(
                "{file} says {v}; the newest entry of {} is {head}",
                changelog.rel
            )
        })
        .collect();
    mark(
        NAME,
        findings,
        format!("{stated}: the newest entry of {}", changelog.rel),
        format!("the version is not the newest entry of {}", changelog.rel),
    )
}

static LIST_RENDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\.map\(\s*(?:\([^)]*\)|[\w$]+)\s*=>\s*\(?\s*<|\bv-for\s*=|\{#each\b|\*ngFor\s*=|@for\s*\(")
        .expect("list rendering is a regex")
});

static EMPTY_STATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\.length\s*(?:===?|<=?)\s*[01]\b|!\s*[\w$.?]+\.length\b|\.length\s*\?|\{:else\}|\bv-else\b|@empty\b|empty[-_ ]?state|\bis_?empty\b|class(?:name)?\s*=\s*[{]?\s*[\x22'`][^\x22'`]*\bempty\b")
        .expect("empty states are a regex")
});

fn empty_states(files: &[Shipped]) -> Mark {
    const NAME: &str = "empty_states";
    let mut screens = 0;
    let mut findings = Vec::new();
    for f in files {
        if !matches!(
            extension(&f.rel).as_str(),
            "jsx" | "tsx" | "js" | "ts" | "mjs" | "vue" | "svelte" | "html" | "htm"
        ) {
            continue;
        }
        let Some(text) = &f.text else { continue };
        let Some(list) = LIST_RENDER.find(text) else {
            continue;
        };
        screens += 1;
        if !EMPTY_STATE.is_match(text) {
            let line = text[..list.start()].lines().count().max(1);
            findings.push(format!(
                "{}:{line}: renders a list and shows nothing when it is empty",
                f.rel
            ));
        }
    }
    if screens == 0 {
        return skip(NAME, "no screen renders a list");
    }
    mark(
        NAME,
        findings,
        format!("{screens} screen(s) render lists, each with an empty state"),
        format!("some of the {screens} screen(s) that render lists have no empty state"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_within_the_project_only() {
        assert_eq!(
            resolve("index.html", "favicon.ico").as_deref(),
            Some("favicon.ico")
        );
        assert_eq!(
            resolve("pages/a.html", "../img/i.png?v=2").as_deref(),
            Some("img/i.png")
        );
        assert_eq!(
            resolve("pages/a.html", "/favicon.ico#x").as_deref(),
            Some("favicon.ico")
        );
        assert_eq!(resolve("a.html", "../../etc/passwd"), None);
        assert_eq!(
            resolve("README.md", "docs/my%20shot.png").as_deref(),
            Some("docs/my shot.png")
        );
        assert!(external("https://example.org/i.png") && external("//cdn/x.ico"));
        assert!(external("data:image/png;base64,AAAA") && !external("img/i.png"));
    }

    #[test]
    fn icons_are_read_from_link_tags_not_text() {
        let html = r#"<html><head><LINK REL="shortcut Icon" href=" /f.ico "><link rel="stylesheet" href="s.css">
            <!-- <link rel="icon" href="commented.ico"> --></head><body>&lt;link rel="icon" href="text.ico"&gt;</body></html>"#;
        assert_eq!(icon_links(html), ["/f.ico"]);
    }

    #[test]
    fn what_ships() {
        assert!(ships("src/App.jsx") && ships("index.html") && ships("public/favicon.ico"));
        for not in [
            "node_modules/x/index.js",
            "tests/a.py",
            "src/App.test.jsx",
            "dist/index.html",
            "pkg/x_test.go",
        ] {
            assert!(!ships(not), "{not}");
        }
    }

    #[test]
    fn the_changelogs_head_passes_over_unreleased() {
        let text =
            "# Changelog\n\n## [Unreleased]\n- next\n\n## [1.4.0] - 2026-11-30\n## [1.3.2]\n";
        assert_eq!(changelog_head(text).as_deref(), Some("1.4.0"));
        assert_eq!(
            changelog_head("# Changes\n\n## v2.0.0-rc.1\n").as_deref(),
            Some("2.0.0-rc.1")
        );
        assert_eq!(changelog_head("no headings 1.2.3\n"), None);
    }
}
