//! What a tool's arguments are: which of its top-level arguments name paths, URLs, hosts or
//! commands (each a string, or a list of strings). A tool declares them in its definition
//! ([`crate::ToolDef::arguments`]): a built-in in code, an upstream's from its schema
//! ([`ArgumentKinds::from_schema`]: `format: uri`, and the names below) with the operator's
//! additions. The rules, egress and replay read a call through the declaration, never by
//! guessing from names at the time of the call.
//!
//! Deny by default: a string anywhere in the arguments that is a URL by itself
//! (`https://host/…`, any scheme with an authority) is treated as one whatever its name, so a
//! tool that names its URL `target` does not walk past egress or a host rule undeclared.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Argument names that, in a schema, are taken to name paths.
pub const PATH_NAMES: [&str; 9] = [
    "path",
    "paths",
    "source",
    "destination",
    "file",
    "files",
    "cwd",
    "dir",
    "directory",
];

/// Argument names that, in a schema, are taken to hold URLs.
pub const URL_NAMES: [&str; 6] = ["url", "urls", "uri", "endpoint", "base_url", "href"];

/// Argument names that, in a schema, are taken to name hosts.
pub const HOST_NAMES: [&str; 3] = ["host", "hostname", "domain"];

/// Argument names that, in a schema, are taken to hold a command to run.
pub const COMMAND_NAMES: [&str; 3] = ["command", "cmd", "argv"];

/// The `format`s of a JSON Schema string that say it holds a URL.
const URL_FORMATS: [&str; 4] = ["uri", "url", "iri", "uri-reference"];

/// Which top-level arguments of a tool are what.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentKinds {
    /// Paths under a root (the root itself by name in a `root` argument, where the tool takes
    /// one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

impl ArgumentKinds {
    /// No path, URL, host or command arguments.
    pub fn none() -> ArgumentKinds {
        ArgumentKinds::default()
    }

    /// These arguments name paths.
    pub fn paths(names: &[&str]) -> ArgumentKinds {
        ArgumentKinds {
            paths: owned(names),
            ..ArgumentKinds::default()
        }
    }

    /// These arguments hold URLs.
    pub fn urls(names: &[&str]) -> ArgumentKinds {
        ArgumentKinds {
            urls: owned(names),
            ..ArgumentKinds::default()
        }
    }

    /// These too hold commands.
    pub fn and_commands(mut self, names: &[&str]) -> ArgumentKinds {
        self.commands.extend(owned(names));
        self
    }

    /// These too hold URLs.
    pub fn and_urls(mut self, names: &[&str]) -> ArgumentKinds {
        self.urls.extend(owned(names));
        self
    }

    /// These too name paths.
    pub fn and_paths(mut self, names: &[&str]) -> ArgumentKinds {
        self.paths.extend(owned(names));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
            && self.urls.is_empty()
            && self.hosts.is_empty()
            && self.commands.is_empty()
    }

    /// What an input schema says of its top-level properties: a string (or a list of
    /// strings) whose `format` is a URL's, or whose name is one of [`URL_NAMES`], holds URLs;
    /// the names in [`PATH_NAMES`], [`HOST_NAMES`] and [`COMMAND_NAMES`] the rest. How an
    /// upstream's tools are declared (the operator may add to it), and what a built-in's
    /// declaration is checked against.
    pub fn from_schema(schema: &Value) -> ArgumentKinds {
        let mut kinds = ArgumentKinds::default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return kinds;
        };
        for (name, property) in properties {
            if !holds_strings(property) {
                continue;
            }
            let lower = name.to_ascii_lowercase();
            let is = |names: &[&str]| names.contains(&lower.as_str());
            if is(&URL_NAMES) || has_url_format(property) {
                kinds.urls.push(name.clone());
            } else if is(&PATH_NAMES) {
                kinds.paths.push(name.clone());
            } else if is(&HOST_NAMES) {
                kinds.hosts.push(name.clone());
            } else if is(&COMMAND_NAMES) {
                kinds.commands.push(name.clone());
            }
        }
        kinds
    }

    /// This declaration with `more`'s names added (an operator's override of an upstream's).
    pub fn merged(mut self, more: &ArgumentKinds) -> ArgumentKinds {
        for (mine, theirs) in [
            (&mut self.paths, &more.paths),
            (&mut self.urls, &more.urls),
            (&mut self.hosts, &more.hosts),
            (&mut self.commands, &more.commands),
        ] {
            for name in theirs {
                if !mine.contains(name) {
                    mine.push(name.clone());
                }
            }
        }
        self
    }

    /// This declaration without the names `schema` does not have (an operator's addition for
    /// an argument a tool no longer takes); the names left out.
    pub fn within(mut self, schema: &Value) -> (ArgumentKinds, Vec<String>) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let mut dropped = Vec::new();
        for names in [
            &mut self.paths,
            &mut self.urls,
            &mut self.hosts,
            &mut self.commands,
        ] {
            names.retain(|n| {
                let kept = properties.is_some_and(|p| p.contains_key(n));
                if !kept {
                    dropped.push(n.clone());
                }
                kept
            });
        }
        (self, dropped)
    }

    /// Every way this declaration disagrees with `schema`: a declared argument the schema
    /// does not have, or that is not a string or a list of strings; an argument the schema
    /// says is a path, URL, host or command ([`ArgumentKinds::from_schema`]) that is not
    /// declared as one. Empty when they agree.
    pub fn problems(&self, schema: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let properties = schema.get("properties").and_then(Value::as_object);
        for (kind, names) in self.by_kind() {
            for name in names {
                match properties.and_then(|p| p.get(name)) {
                    None => problems.push(format!(
                        "{kind} argument {name:?} is declared but not in the input schema"
                    )),
                    Some(p) if !holds_strings(p) => problems.push(format!(
                        "{kind} argument {name:?} is not a string or a list of strings"
                    )),
                    Some(_) => {}
                }
            }
        }
        let implied = ArgumentKinds::from_schema(schema);
        for ((kind, implied), (_, declared)) in implied.by_kind().into_iter().zip(self.by_kind()) {
            for name in implied {
                if !declared.contains(name) {
                    problems.push(format!(
                        "argument {name:?} looks like a {kind} (by its name or format) and is not declared as one"
                    ));
                }
            }
        }
        problems
    }

    fn by_kind(&self) -> [(&'static str, &Vec<String>); 4] {
        [
            ("path", &self.paths),
            ("URL", &self.urls),
            ("host", &self.hosts),
            ("command", &self.commands),
        ]
    }

    /// The path arguments of a call as written, and its `root` argument (a root's name).
    pub fn paths_in<'a>(&self, args: &'a Value) -> (Option<&'a str>, Vec<&'a str>) {
        let root = args.get("root").and_then(Value::as_str);
        (root, self.strings_named(&self.paths, args))
    }

    /// The URLs a call holds: its declared URL arguments, and every string anywhere in it
    /// that is a URL by itself ([`is_url`]), once each, in that order.
    pub fn urls_in<'a>(&self, args: &'a Value) -> Vec<&'a str> {
        let mut urls = self.strings_named(&self.urls, args);
        let mut found = Vec::new();
        url_strings(args, &mut found);
        for url in found {
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
        urls
    }

    /// The hosts a call would reach, as a client would connect ([`url_host`]):
    /// those of [`ArgumentKinds::urls_in`] and its declared host arguments; sorted, once
    /// each.
    pub fn hosts_in(&self, args: &Value) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .urls_in(args)
            .into_iter()
            .chain(self.strings_named(&self.hosts, args))
            .filter_map(url_host)
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The declared command arguments of a call.
    pub fn commands_in<'a>(&self, args: &'a Value) -> Vec<&'a str> {
        self.strings_named(&self.commands, args)
    }

    /// The strings of the arguments `names` in a call (a string, or a list of strings each).
    pub fn strings_named<'a>(&self, names: &[String], args: &'a Value) -> Vec<&'a str> {
        names
            .iter()
            .filter_map(|k| args.get(k))
            .flat_map(strings)
            .collect()
    }
}

/// The host a URL reaches, as a client would connect: parsed by the WHATWG rules
/// (`http://good.example@evil.test/` reaches `evil.test`), IDNA applied, lower-cased, trailing
/// dots removed, IPv6 in brackets (`[::1]`). A URL without a scheme (`evil.test/x`) is read as
/// `http://` would read it, since lenient clients do; `None` when it still does not parse, or
/// has no host.
pub fn url_host(text: &str) -> Option<String> {
    let url = match url::Url::parse(text.trim()) {
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            url::Url::parse(&format!("http://{}", text.trim())).ok()?
        }
        other => other.ok()?,
    };
    let host = url.host_str()?.trim_end_matches('.');
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether `text` is, by itself, a URL a client could fetch: a scheme, `://`, a host, no
/// whitespace.
pub fn is_url(text: &str) -> bool {
    let text = text.trim();
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme.len() <= 32
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !text.contains(char::is_whitespace)
        && url::Url::parse(text).is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()))
}

/// Every string in `value` (keys aside), however deep, that is a URL by itself.
fn url_strings<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::String(s) if is_url(s) => found.push(s),
        Value::Array(items) => items.iter().for_each(|v| url_strings(v, found)),
        Value::Object(map) => map.values().for_each(|v| url_strings(v, found)),
        _ => {}
    }
}

/// A string, or the strings of an array.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether a schema property holds a string, or a list of strings (or says nothing of its
/// type, which lets a string through).
/// `property` and, within it, every alternative (`anyOf`, `oneOf`, `allOf`, nested): a
/// nullable string is `anyOf` a string and `null`, and an argument hidden in an alternative is
/// still the argument.
fn alternatives(property: &Value) -> Vec<&Value> {
    let mut all = vec![property];
    let mut i = 0;
    while i < all.len() {
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = all[i].get(key) {
                all.extend(branches.iter());
            }
        }
        i += 1;
    }
    all
}

fn holds_strings(property: &Value) -> bool {
    let is = |p: &Value, t: &str| match p.get("type") {
        None => true,
        Some(Value::String(s)) => s == t,
        Some(Value::Array(ts)) => ts.iter().any(|x| x == t),
        _ => false,
    };
    alternatives(property).into_iter().any(|p| {
        is(p, "string")
            || (is(p, "array")
                && p.get("type").is_some()
                && p.get("items").is_none_or(|i| is(i, "string")))
    })
}

fn has_url_format(property: &Value) -> bool {
    let format = |p: &Value| {
        p.get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| URL_FORMATS.contains(&f))
    };
    alternatives(property).into_iter().any(|p| {
        format(p)
            || p.get("items")
                .is_some_and(|i| alternatives(i).into_iter().any(format))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_argument_in_an_alternative_is_still_the_argument() {
        let schema = json!({"type": "object", "properties": {
            "target": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
            "mirrors": {"anyOf": [
                {"type": "array", "items": {"oneOf": [{"type": "string", "format": "iri"}]}},
                {"type": "null"}
            ]},
            "path": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "count": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
        }});
        let kinds = ArgumentKinds::from_schema(&schema);
        assert_eq!(kinds.urls, ["mirrors", "target"]);
        assert_eq!(kinds.paths, ["path"]);
    }

    #[test]
    fn a_schema_says_which_arguments_are_urls_paths_hosts_and_commands() {
        let schema = json!({"type": "object", "properties": {
            "target": {"type": "string", "format": "uri"},
            "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
            "URL": {"type": "string"},
            "path": {"type": "string"},
            "host": {"type": "string"},
            "command": {"type": "string"},
            "count": {"type": "integer"},
            "url_count": {"type": "integer", "format": "uri"},
        }});
        let kinds = ArgumentKinds::from_schema(&schema);
        let mut urls = kinds.urls.clone();
        urls.sort();
        assert_eq!(urls, ["URL", "links", "target"]);
        assert_eq!(kinds.paths, ["path"]);
        assert_eq!(kinds.hosts, ["host"]);
        assert_eq!(kinds.commands, ["command"]);
        assert!(
            kinds.problems(&schema).is_empty(),
            "{:?}",
            kinds.problems(&schema)
        );
    }

    #[test]
    fn a_declaration_that_leaves_out_or_invents_an_argument_is_named() {
        let schema = json!({"type": "object", "properties": {
            "target": {"type": "string", "format": "uri"},
            "n": {"type": "integer"}
        }});
        let problems = ArgumentKinds::paths(&["n", "missing"]).problems(&schema);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("\"missing\" is declared but not"))
        );
        assert!(problems.iter().any(|p| p.contains("\"n\" is not a string")));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("\"target\" looks like a URL"))
        );
    }

    #[test]
    fn a_url_is_found_whatever_its_name_and_depth() {
        let kinds = ArgumentKinds::urls(&["url"]);
        let args = json!({
            "url": "https://a.test/x",
            "target": "https://b.test/y",
            "nested": {"deep": ["ftp://c.test/z", "not a url https://d.test"]},
            "relative": "/path/only",
            "mail": "mailto:x@e.test",
        });
        assert_eq!(
            kinds.urls_in(&args),
            ["https://a.test/x", "ftp://c.test/z", "https://b.test/y"]
        );
        assert_eq!(kinds.hosts_in(&args), ["a.test", "b.test", "c.test"]);
        // A declared URL argument counts however it is written (a client may add the scheme).
        assert_eq!(
            kinds.hosts_in(&json!({"url": "evil.test/x"})),
            ["evil.test"]
        );
    }

    #[test]
    fn is_url_needs_a_scheme_an_authority_and_a_host() {
        for yes in [
            "http://a.test",
            "https://a.test:8443/p?q#f",
            "ws://[::1]/",
            "HTTPS://A.TEST",
        ] {
            assert!(is_url(yes), "{yes}");
        }
        for no in [
            "a.test",
            "/x",
            "http://",
            "mailto:a@b.test",
            "https://a.test b",
            "://a.test",
            "1http://a.test",
        ] {
            assert!(!is_url(no), "{no}");
        }
    }
}
