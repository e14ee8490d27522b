//! A fuzz target for the path cleaner (`paths::clean_relative`) and glob confinement
//! (`paths::confine_glob`), as a proptest: paths and patterns mixed from names, `.`, `..`,
//! empty components, look-alikes of `..`, wildcards, NUL and absolute prefixes. The invariants:
//!
//! - neither panics, and both are functions of their input;
//! - a clean path has no `.`, `..` or empty component and no leading `/`;
//! - it is what a stack of components gives (a `..` takes one away), and a path whose `..`
//!   would climb above the root is refused — never cleaned into something else;
//! - a confined glob's folder is a clean path that the literal part of the pattern leads to
//!   from the folder searched, its pattern has no `..`, and an absolute pattern outside the
//!   root is refused.
//!
//! Bounded for CI: 256 cases by default, `PROPTEST_CASES` raises it.

use aether_screens::paths::{PathRefusal, clean_relative, confine_glob};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const ROOT: &str = "/srv/ws";

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&["a", "b", "src", "x.txt", "..", ".", "", "...", "..a", "a..", ". .", "..\u{200B}", "%2e%2e", "\\..", "~"][..]).prop_map(str::to_string),
        1 => "[a-z.]{0,4}",
        1 => prop::sample::select(&["*", "**", "?", "[a-z]", "{a,b}", "*.rs"][..]).prop_map(str::to_string),
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        prop::sample::select(&["", "/", "/srv/ws/", "/srv/", "/srv/wsx/", "./"][..]),
        prop::collection::vec(component(), 0..8),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(prefix, parts, nul)| {
            let mut p = format!("{prefix}{}", parts.join("/"));
            if nul {
                p.push('\0');
            }
            p
        })
}

/// What `clean_relative` should give: the stack model.
fn model(path: &str) -> Result<String, PathRefusal> {
    if path.contains('\0') {
        return Err(PathRefusal::Nul);
    }
    let mut stack: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                stack.pop().ok_or(PathRefusal::ParentComponent)?;
            }
            p => stack.push(p),
        }
    }
    Ok(stack.join("/"))
}

fn is_clean(p: &str) -> bool {
    !p.starts_with('/')
        && (p.is_empty() || p.split('/').all(|c| !c.is_empty() && c != "." && c != ".."))
}

#[test]
fn the_path_cleaner_keeps_its_invariants() {
    let mut runner = TestRunner::new(config());
    runner
        .run(&path(), |p| {
            let got = clean_relative(&p);
            prop_assert_eq!(&got, &clean_relative(&p));
            prop_assert_eq!(&got, &model(&p), "{:?}", p);
            if let Ok(clean) = &got {
                prop_assert!(is_clean(clean), "{:?} -> {:?}", p, clean);
                // Clean is a fixed point.
                let again = clean_relative(clean);
                prop_assert_eq!(again.as_ref(), Ok(clean));
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn glob_confinement_keeps_its_invariants() {
    let mut runner = TestRunner::new(config());
    let folder = prop::collection::vec(prop::sample::select(&["a", "b", "src"][..]), 0..3)
        .prop_map(|parts| parts.join("/"));
    runner
        .run(&(folder, path()), |(folder, pattern)| {
            let got = confine_glob(&folder, &pattern, ROOT);
            prop_assert_eq!(&got, &confine_glob(&folder, &pattern, ROOT));
            let Ok(place) = got else { return Ok(()) };
            prop_assert!(is_clean(&place.folder), "{:?}", place);
            prop_assert!(!place.pattern.is_empty());
            prop_assert!(
                place
                    .pattern
                    .split('/')
                    .all(|c| c != ".." && c != "." && !c.is_empty()),
                "{:?} from {:?}",
                place,
                pattern
            );
            // An absolute pattern lies under the root; a relative one starts from `folder`.
            if let Some(rest) = pattern.strip_prefix(ROOT) {
                prop_assert!(rest.is_empty() || rest.starts_with('/'));
            } else {
                prop_assert!(!pattern.starts_with('/'), "{:?} accepted", pattern);
            }
            // The folder is where the pattern's literal part leads from where it started.
            let start = if pattern.starts_with('/') {
                ""
            } else {
                folder.as_str()
            };
            let literal: Vec<&str> = pattern
                .strip_prefix(ROOT)
                .unwrap_or(&pattern)
                .split('/')
                .collect();
            if !place.by_name {
                let lead = literal
                    .iter()
                    .take_while(|c| !c.contains(['*', '?', '[', ']', '{', '}', '\\']))
                    .take(literal.len().saturating_sub(1))
                    .copied()
                    .collect::<Vec<_>>()
                    .join("/");
                prop_assert_eq!(
                    &model(&format!("{start}/{lead}")).unwrap_or_default(),
                    &place.folder,
                    "{:?} {:?}",
                    folder,
                    pattern
                );
            }
            Ok(())
        })
        .unwrap();
}
