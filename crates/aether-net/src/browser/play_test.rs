//! `play_test`: a page played the way a visitor plays it. It opens in headless Chromium, each
//! visible control is clicked once (scrolled to and pressed with the mouse, as a person
//! would), and every error the page's script throws is reported against what caused it: the
//! load, or the control. A control that leaves the page (a link, a form) is followed, and the
//! page opened again before the next. A screenshot of the page as it loaded is saved into the
//! workspace.

use std::sync::Arc;

use aether_policy::{AgentProfile, ArgumentKinds, Risk, ToolDef};
use aether_tools_core::{
    CallContext, SaveFile, Tool, ToolError, ToolOutput, parse_args, schema_of,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Chromium, DESKTOP, Gate, PageError, PageRequest, Session, shown_str};
use crate::client::Resolve;

/// Controls clicked at most (the default, and the bound).
const DEFAULT_CONTROLS: usize = 30;
const MAX_CONTROLS: usize = 100;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The page to play (http or https). Its host, and the host of everything the page loads,
    /// must be in the agent's allowed domains.
    url: String,
    /// The workspace file to save the page's screenshot in (PNG), e.g. "qa/home.png".
    screenshot: String,
    /// The root to save in (default: the only writable root).
    #[serde(default)]
    root: Option<String>,
    /// Controls clicked at most, in the page's order (1-100, default 30).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    max_controls: Option<u64>,
    /// Seconds for the whole play, the browser's start included (5-300, default 90).
    #[serde(default)]
    #[schemars(range(min = 5, max = 300))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// The page played (without its query).
    url: String,
    /// Its title once loaded.
    title: String,
    /// Errors while the page loaded.
    load_errors: Vec<PageError>,
    /// Each control clicked, in the page's order, with the errors the click caused.
    controls: Vec<Control>,
    /// Visible controls beyond `max_controls`, not clicked.
    not_clicked: usize,
    /// Errors in all (load and controls).
    errors: usize,
    /// Every request the page made that the egress gate or a rule refused.
    blocked_requests: Vec<PageRequest>,
    /// Where the screenshot was saved (`root:path`).
    screenshot: String,
}

#[derive(Serialize, JsonSchema)]
struct Control {
    /// Its place among the page's visible controls (0-based).
    index: usize,
    /// Its element ("button", "a", "input", ...).
    element: String,
    /// Its text, value or label, as a visitor sees it (at most 80 characters).
    label: String,
    /// Errors the click caused.
    errors: Vec<PageError>,
    /// Where the click took the page, when it left it (without the query).
    #[serde(skip_serializing_if = "Option::is_none")]
    navigated_to: Option<String>,
    /// Why it could not be clicked, when it could not (it went away, or is covered).
    #[serde(skip_serializing_if = "Option::is_none")]
    not_clicked: Option<String>,
}

/// What the page-side script says about a control.
#[derive(Deserialize)]
struct Found {
    index: usize,
    element: String,
    label: String,
}

/// Marks the page's visible controls, in document order, with `data-aether-control`, and
/// describes them; the same page marks the same controls the same way each time.
const MARK_CONTROLS: &str = r#"(() => {
  const selector = 'button, a[href], input[type=button], input[type=submit], input[type=reset], input[type=checkbox], input[type=radio], input[type=image], [role=button], [role=link], [role=tab], [role=menuitem], [onclick], summary, select';
  const out = [];
  for (const el of document.querySelectorAll(selector)) {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    if (r.width <= 0 || r.height <= 0 || s.visibility === 'hidden' || s.display === 'none' || el.disabled || el.closest('[inert]')) continue;
    const index = out.length;
    el.setAttribute('data-aether-control', String(index));
    const label = (el.innerText || el.value || el.getAttribute('aria-label') || el.title || el.getAttribute('alt') || '').replace(/\s+/g, ' ').trim().slice(0, 80);
    out.push({index, element: el.tagName.toLowerCase(), label});
  }
  return out;
})()"#;

pub struct PlayTest {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
    saver: Arc<dyn SaveFile>,
}

impl PlayTest {
    pub fn new(resolver: Arc<dyn Resolve>, saver: Arc<dyn SaveFile>) -> PlayTest {
        let mut def = crate::research_def(
            "play_test",
            "Play a web page",
            "Open a web page in a real browser (headless Chromium) the way a visitor does, click \
             each visible control once, and report every error its script throws (uncaught \
             exceptions, console errors, failed or refused requests), per control and on load. \
             Saves a screenshot of the page into the workspace (revert_file undoes it). Every \
             request the page makes goes through the egress gate: its hosts must be in the \
             agent's allowed domains.",
            schema_of::<Args>(),
            schema_of::<Output>(),
            Risk::Medium,
            // It writes (and may replace) the screenshot, and clicks what it finds.
            false,
        )
        .declaring(ArgumentKinds::urls(&["url"]).and_paths(&["screenshot"]));
        def.group = aether_policy::tool::groups::QUALITY.into();
        PlayTest {
            def,
            resolver,
            saver,
        }
    }
}

#[async_trait]
impl Tool for PlayTest {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let url = super::page_url(&args.url)?;
        let max = args.max_controls.map_or(DEFAULT_CONTROLS, |n| {
            n.clamp(1, MAX_CONTROLS as u64) as usize
        });
        let chromium = Chromium::detect().map_err(ToolError::failed)?;
        let (deadline, limit) = super::deadline(args.timeout_seconds, 90, 300);
        let gate = Gate::for_call(&cx, &self.resolver, deadline)?;
        let (output, shot) = super::within(limit, &cx, async {
            let s = Session::open(&chromium, gate, DESKTOP).await?;
            s.guarded(play(&s, &url, max)).await
        })
        .await?;
        let saved = self
            .saver
            .save(
                &cx,
                "play_test",
                args.root.as_deref(),
                &args.screenshot,
                &shot,
            )
            .await?;
        let output = Output {
            screenshot: saved.shown.clone(),
            ..output
        };
        let text = summary(&output);
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).map_err(ToolError::failed)?,
        ))
    }
}

async fn play(s: &Session, url: &url::Url, max: usize) -> Result<(Output, Vec<u8>), ToolError> {
    let load = s.log.mark();
    s.open_url(url.as_str()).await?;
    let title = s
        .page
        .get_title()
        .await
        .map_err(super::cdp)?
        .unwrap_or_default();
    let shot = s.screenshot().await?;
    let (load_errors, _) = s.log.since(load);
    let mut found: Vec<Found> = s.eval(MARK_CONTROLS).await?;
    let not_clicked = found.len().saturating_sub(max);
    found.truncate(max);
    let here = s.page.url().await.map_err(super::cdp)?.unwrap_or_default();
    let mut controls = Vec::new();
    for f in &found {
        // Back on the page, as loaded, if the last control left it.
        let now = s.page.url().await.map_err(super::cdp)?.unwrap_or_default();
        if !same_page(&now, &here) {
            s.open_url(url.as_str()).await?;
            let _: Vec<Found> = s.eval(MARK_CONTROLS).await?;
        }
        let mark = s.log.mark();
        let selector = format!("[data-aether-control=\"{}\"]", f.index);
        let clicked = match s.page.find_element(selector).await {
            Ok(el) => el.click().await.map(|_| ()).map_err(|e| e.to_string()),
            Err(_) => Err("it was not on the page when its turn came".into()),
        };
        s.settle().await;
        let after = s.page.url().await.map_err(super::cdp)?.unwrap_or_default();
        let (errors, _) = s.log.since(mark);
        controls.push(Control {
            index: f.index,
            element: f.element.clone(),
            label: f.label.clone(),
            errors,
            navigated_to: (!same_page(&after, &here)).then(|| shown_str(&after)),
            not_clicked: clicked.err(),
        });
    }
    let (_, requests) = s.log.since((0, 0));
    let errors = load_errors.len() + controls.iter().map(|c| c.errors.len()).sum::<usize>();
    Ok((
        Output {
            url: crate::client::shown(url),
            title,
            load_errors,
            controls,
            not_clicked,
            errors,
            blocked_requests: requests.into_iter().filter(|r| r.blocked).collect(),
            screenshot: String::new(),
        },
        shot,
    ))
}

/// Whether two URLs are the same page (a fragment is a place on it, not another page).
fn same_page(a: &str, b: &str) -> bool {
    let page = |u: &str| u.split('#').next().unwrap_or_default().to_string();
    page(a) == page(b)
}

fn summary(o: &Output) -> String {
    let mut text = format!(
        "{}: {} control(s) clicked, {} error(s){}; screenshot {}\n",
        o.url,
        o.controls.len(),
        o.errors,
        if o.not_clicked > 0 {
            format!(", {} more control(s) not clicked", o.not_clicked)
        } else {
            String::new()
        },
        o.screenshot
    );
    let line = |e: &PageError| {
        format!(
            "    [{}] {}{}\n",
            e.kind,
            e.message,
            e.source
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        )
    };
    if !o.load_errors.is_empty() {
        text.push_str("on load:\n");
        o.load_errors.iter().for_each(|e| text.push_str(&line(e)));
    }
    for c in &o.controls {
        let status = match (&c.not_clicked, c.errors.len()) {
            (Some(why), _) => format!("not clicked: {why}"),
            (None, 0) => "ok".into(),
            (None, n) => format!("{n} error(s)"),
        };
        text.push_str(&format!(
            "#{} <{}> {:?}: {status}{}\n",
            c.index,
            c.element,
            c.label,
            c.navigated_to
                .as_ref()
                .map(|u| format!(", went to {u}"))
                .unwrap_or_default()
        ));
        c.errors.iter().for_each(|e| text.push_str(&line(e)));
    }
    text
}
