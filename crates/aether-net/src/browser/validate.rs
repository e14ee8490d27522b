//! `validate_web_app`: a running web app checked against a list of checks, one PASS/FAIL row
//! each. What the server answers (status, headers) is asked directly through the egress
//! gate; what a visitor sees (the text, the links, errors on load) is read from the page as
//! headless Chromium renders it, every request of the page through the same gate.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aether_policy::{AgentProfile, ArgumentKinds, Risk, ToolDef};
use aether_tools_core::{CallContext, Tool, ToolError, ToolOutput, parse_args, schema_of};
use async_trait::async_trait;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Chromium, DESKTOP, Gate, PageError, Session};
use crate::client::Resolve;

/// Checks in one call at most.
const MAX_CHECKS: usize = 50;
/// Links of one page checked at most.
const MAX_LINKS: usize = 100;
/// Links checked at once.
const LINKS_AT_ONCE: usize = 4;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The app's base URL (http or https); its host must be in the agent's allowed domains.
    url: String,
    /// The checks, each one row of the answer (at most 50).
    checks: Vec<Check>,
    /// Seconds for all the checks, the browser's start included (5-300, default 90).
    #[serde(default)]
    #[schemars(range(min = 5, max = 300))]
    timeout_seconds: Option<u64>,
}

/// One check. `path` is on the app's own origin (default "/").
#[derive(Deserialize, JsonSchema, Debug)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
enum Check {
    /// The path answers with `expect` (default 200), after redirects.
    Status {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        #[schemars(range(min = 100, max = 599))]
        expect: Option<u16>,
    },
    /// The page, as the browser renders it, shows `text` (case-sensitive).
    Contains {
        #[serde(default)]
        path: Option<String>,
        text: String,
    },
    /// The answer carries the header `name`, and with `contains`, a value containing it.
    Header {
        #[serde(default)]
        path: Option<String>,
        name: String,
        #[serde(default)]
        contains: Option<String>,
    },
    /// Every link on the rendered page (http and https, at most 100) answers below 400.
    Links {
        #[serde(default)]
        path: Option<String>,
    },
    /// The page loads with no uncaught exception, console error, or failed request.
    NoConsoleErrors {
        #[serde(default)]
        path: Option<String>,
    },
}

impl Check {
    fn path(&self) -> &str {
        let p = match self {
            Check::Status { path, .. }
            | Check::Contains { path, .. }
            | Check::Header { path, .. }
            | Check::Links { path }
            | Check::NoConsoleErrors { path } => path,
        };
        p.as_deref().unwrap_or("/")
    }

    fn in_browser(&self) -> bool {
        matches!(
            self,
            Check::Contains { .. } | Check::Links { .. } | Check::NoConsoleErrors { .. }
        )
    }

    /// Whether the check reads the server's own answer (asked directly, not in the browser).
    fn asks_the_server(&self) -> bool {
        matches!(self, Check::Status { .. } | Check::Header { .. })
    }

    fn name(&self) -> String {
        let path = self.path();
        match self {
            Check::Status { expect, .. } => format!("status {path} is {}", expect.unwrap_or(200)),
            Check::Contains { text, .. } => format!("{path} shows {text:?}"),
            Check::Header { name, contains, .. } => match contains {
                Some(c) => format!("{path} header {name} contains {c:?}"),
                None => format!("{path} header {name} present"),
            },
            Check::Links { .. } => format!("links on {path} resolve"),
            Check::NoConsoleErrors { .. } => format!("{path} loads without errors"),
        }
    }
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The app (without its query).
    url: String,
    rows: Vec<Row>,
    passed: usize,
    failed: usize,
}

#[derive(Serialize, JsonSchema)]
struct Row {
    /// What was checked.
    check: String,
    /// "PASS" or "FAIL".
    result: String,
    /// What was found.
    detail: String,
}

/// A page as the browser rendered it.
struct Rendered {
    loaded: Result<(), String>,
    text: String,
    links: Vec<String>,
    errors: Vec<PageError>,
}

const PAGE_READ: &str = r#"(() => ({
  text: document.body ? document.body.innerText : '',
  links: [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => /^https?:/i.test(h)),
}))()"#;

pub struct ValidateWebApp {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
}

impl ValidateWebApp {
    pub fn new(resolver: Arc<dyn Resolve>) -> ValidateWebApp {
        let mut def = crate::research_def(
            "validate_web_app",
            "Validate a running web app",
            "Check a running web app against a list of checks, one PASS/FAIL row each: `status` \
             (the answer's status), `header` (a header present, or containing a value), \
             `contains` (the page as a real browser renders it shows a text), `links` (every \
             link on the rendered page resolves), `no_console_errors` (the page loads without an \
             uncaught exception, console error or failed request). Every request, the page's \
             own included, goes through the egress gate: the app's host must be in the agent's \
             allowed domains.",
            schema_of::<Args>(),
            schema_of::<Output>(),
            Risk::Low,
            true,
        )
        .declaring(ArgumentKinds::urls(&["url"]));
        def.group = aether_policy::tool::groups::QUALITY.into();
        ValidateWebApp { def, resolver }
    }
}

#[async_trait]
impl Tool for ValidateWebApp {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let base = super::page_url(&args.url)?;
        if args.checks.is_empty() || args.checks.len() > MAX_CHECKS {
            return Err(ToolError::InvalidArguments(format!(
                "give 1 to {MAX_CHECKS} checks ({} given)",
                args.checks.len()
            )));
        }
        let targets = args
            .checks
            .iter()
            .map(|c| super::same_origin(&base, c.path()))
            .collect::<Result<Vec<_>, _>>()?;
        let (deadline, limit) = super::deadline(args.timeout_seconds, 90, 300);
        let gate = Gate::for_call(&cx, &self.resolver, deadline)?;
        let needs_browser = args.checks.iter().any(Check::in_browser);
        let chromium = if needs_browser {
            Some(Chromium::detect().map_err(ToolError::failed)?)
        } else {
            None
        };
        let rows = super::within(limit, &cx, async {
            // The server's answers a check reads, each asked once; a refusal stops the call,
            // as for every network tool.
            let mut answers: BTreeMap<String, Result<crate::Response, String>> = BTreeMap::new();
            let asked: BTreeSet<&url::Url> = args
                .checks
                .iter()
                .zip(&targets)
                .filter(|(c, _)| c.asks_the_server())
                .map(|(_, t)| t)
                .collect();
            for target in asked {
                let answer = match gate
                    .get(reqwest::Method::GET, target.as_str(), 64 << 10)
                    .await
                {
                    Err(e @ ToolError::Denied { .. }) => return Err(e),
                    answer => answer.map_err(|e| e.to_string()),
                };
                answers.insert(target.to_string(), answer);
            }
            // The pages a check reads in the browser, each rendered once.
            let mut rendered: BTreeMap<String, Rendered> = BTreeMap::new();
            if let Some(chromium) = &chromium {
                let s = Session::open(chromium, gate.clone(), DESKTOP).await?;
                let wanted: BTreeSet<&url::Url> = args
                    .checks
                    .iter()
                    .zip(&targets)
                    .filter(|(c, _)| c.in_browser())
                    .map(|(_, t)| t)
                    .collect();
                for target in wanted {
                    rendered.insert(target.to_string(), s.guarded(render(&s, target)).await?);
                }
            }
            let mut rows = Vec::new();
            for (check, target) in args.checks.iter().zip(&targets) {
                let (pass, detail) = run(
                    check,
                    target,
                    &gate,
                    answers.get(target.as_str()),
                    rendered.get(target.as_str()),
                )
                .await;
                rows.push(Row {
                    check: check.name(),
                    result: if pass { "PASS" } else { "FAIL" }.into(),
                    detail,
                });
            }
            Ok(rows)
        })
        .await?;
        let passed = rows.iter().filter(|r| r.result == "PASS").count();
        let out = Output {
            url: crate::client::shown(&base),
            failed: rows.len() - passed,
            passed,
            rows,
        };
        let mut text = format!(
            "{}: {} passed, {} failed\n",
            out.url, out.passed, out.failed
        );
        for r in &out.rows {
            text.push_str(&format!("{}  {}: {}\n", r.result, r.check, r.detail));
        }
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(out).map_err(ToolError::failed)?,
        ))
    }
}

async fn render(s: &Session, target: &url::Url) -> Result<Rendered, ToolError> {
    let mark = s.log.mark();
    let loaded = match s.open_url(target.as_str()).await {
        Ok(()) => Ok(()),
        // Refused by the gate: the whole call stops, as for every network tool.
        Err(e @ ToolError::Denied { .. }) => return Err(e),
        Err(e) => Err(e.to_string()),
    };
    let (errors, _) = s.log.since(mark);
    if loaded.is_err() {
        return Ok(Rendered {
            loaded,
            text: String::new(),
            links: Vec::new(),
            errors,
        });
    }
    #[derive(Deserialize)]
    struct Read {
        text: String,
        links: Vec<String>,
    }
    let read: Read = s.eval(PAGE_READ).await?;
    Ok(Rendered {
        loaded,
        text: read.text,
        links: read.links,
        errors,
    })
}

/// One check's row: whether it passed, and what was found. `answer` is the server's answer
/// for a check that asks the server; `page`, the rendered page for one that reads it.
async fn run(
    check: &Check,
    target: &url::Url,
    gate: &Gate,
    answer: Option<&Result<crate::Response, String>>,
    page: Option<&Rendered>,
) -> (bool, String) {
    let shown = crate::client::shown(target);
    let answer = || answer.expect("every server check's answer was asked for");
    let page = || -> Result<&Rendered, (bool, String)> {
        let p = page.expect("every browser check's page was rendered");
        match &p.loaded {
            Ok(()) => Ok(p),
            Err(e) => Err((false, format!("the page did not load: {e}"))),
        }
    };
    match check {
        Check::Status { expect, .. } => {
            let expect = expect.unwrap_or(200);
            match answer() {
                Ok(r) => (r.status == expect, format!("{shown} answered {}", r.status)),
                Err(e) => (false, e.clone()),
            }
        }
        Check::Header { name, contains, .. } => match answer() {
            Ok(r) => {
                let values: Vec<&str> = r
                    .headers
                    .iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.as_str())
                    .collect();
                match (values.is_empty(), contains) {
                    (true, _) => (false, format!("no {name} header")),
                    (false, Some(c)) => (
                        values.iter().any(|v| v.contains(c.as_str())),
                        format!("{name}: {}", values.join(", ")),
                    ),
                    (false, None) => (true, format!("{name}: {}", values.join(", "))),
                }
            }
            Err(e) => (false, e.clone()),
        },
        Check::Contains { text, .. } => match page() {
            Ok(p) if p.text.contains(text.as_str()) => (true, "shown".into()),
            Ok(p) => (
                false,
                format!(
                    "not shown; the page's text begins {:?}",
                    p.text.chars().take(120).collect::<String>()
                ),
            ),
            Err(row) => row,
        },
        Check::NoConsoleErrors { .. } => match page() {
            Ok(p) if p.errors.is_empty() => (true, "no errors".into()),
            Ok(p) => (
                false,
                p.errors
                    .iter()
                    .map(|e| format!("[{}] {}", e.kind, e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Err(row) => row,
        },
        Check::Links { .. } => match page() {
            Ok(p) => {
                let mut links: Vec<url::Url> = Vec::new();
                for l in &p.links {
                    if let Ok(mut u) = url::Url::parse(l) {
                        u.set_fragment(None);
                        if !links.contains(&u) {
                            links.push(u);
                        }
                    }
                }
                let skipped = links.len().saturating_sub(MAX_LINKS);
                links.truncate(MAX_LINKS);
                let results: Vec<(String, Result<u16, String>)> =
                    futures::stream::iter(links.into_iter().map(|l| {
                        let gate = gate.clone();
                        async move { (crate::client::shown(&l), resolve(&gate, &l).await) }
                    }))
                    .buffered(LINKS_AT_ONCE)
                    .collect()
                    .await;
                let broken: Vec<String> = results
                    .iter()
                    .filter_map(|(l, r)| match r {
                        Ok(s) if *s < 400 => None,
                        Ok(s) => Some(format!("{l} answered {s}")),
                        Err(e) => Some(format!("{l}: {e}")),
                    })
                    .collect();
                let mut detail = if broken.is_empty() {
                    format!("{} link(s), all resolve", results.len())
                } else {
                    format!(
                        "{} of {} link(s) broken: {}",
                        broken.len(),
                        results.len(),
                        broken.join("; ")
                    )
                };
                if skipped > 0 {
                    detail.push_str(&format!(" ({skipped} more not checked)"));
                }
                (broken.is_empty(), detail)
            }
            Err(row) => row,
        },
    }
}

/// A link's status: HEAD, or GET where the server does not take HEAD.
async fn resolve(gate: &Gate, link: &url::Url) -> Result<u16, String> {
    let head = gate.get(reqwest::Method::HEAD, link.as_str(), 0).await;
    match head {
        Ok(r) if r.status != 405 && r.status != 501 => Ok(r.status),
        _ => gate
            .get(reqwest::Method::GET, link.as_str(), 64 << 10)
            .await
            .map(|r| r.status)
            .map_err(|e| match e {
                ToolError::Denied { message, .. } => format!("refused: {message}"),
                e => e.to_string(),
            }),
    }
}
