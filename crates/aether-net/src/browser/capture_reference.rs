//! `capture_reference` (Elevated, egress-checked): a page screenshotted at a desktop and a
//! phone width into the workspace, with the design facts read from the page as the browser
//! rendered it, not guessed from its CSS text:
//! - **palette**: the colours of the desktop screenshot's pixels, by share of the painted
//!   area;
//! - **type scale**: the computed font sizes of the elements that hold text, by share of the
//!   text, and the ratio between steps;
//! - **measure**: characters per line of the page's running text (paragraphs, list items,
//!   quotes of two lines or more);
//! - **vertical rhythm**: the body's line height and the vertical margins blocks keep, by how
//!   often;
//! - **breakpoints**: the widths the page's media queries switch at (from the stylesheets the
//!   browser parsed).

use std::collections::HashMap;
use std::sync::Arc;

use aether_policy::{AgentProfile, ArgumentKinds, Risk, ToolDef};
use aether_tools_core::{
    CallContext, SaveFile, Tool, ToolError, ToolOutput, parse_args, schema_of,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Chromium, DESKTOP, Gate, PHONE, PageError, Session};
use crate::client::Resolve;

/// Colours reported at most, and the least share of the painted area one must have.
const MAX_COLOURS: usize = 12;
const MIN_SHARE: f64 = 0.005;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The page (http or https). Its host, and the host of everything the page loads, must be
    /// in the agent's allowed domains.
    url: String,
    /// Where to save the screenshots: a workspace path without extension, e.g.
    /// "design/reference/home" saves "home-desktop.png" and "home-phone.png" there.
    output: String,
    /// The root to save in (default: the only writable root).
    #[serde(default)]
    root: Option<String>,
    /// Seconds for the whole capture, the browser's start included (5-300, default 60).
    #[serde(default)]
    #[schemars(range(min = 5, max = 300))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Output {
    /// The page (without its query).
    url: String,
    title: String,
    /// The screenshots saved (`root:path`): desktop (1280 px wide) and phone (390 px).
    screenshots: Vec<String>,
    /// The desktop page's colours by share of its painted area (most first; those under
    /// 0.5 % are left out).
    palette: Vec<Colour>,
    /// The text's font sizes (largest first) by share of its characters.
    type_scale: Vec<TypeStep>,
    /// The median ratio between neighbouring steps of the scale (e.g. 1.25), when it has
    /// two or more.
    scale_ratio: Option<f64>,
    measure: Option<Measure>,
    rhythm: Rhythm,
    /// The widths (px) the page's media queries switch at, smallest first.
    breakpoints: Vec<f64>,
    /// Errors while the page loaded (they can change what was painted).
    load_errors: Vec<PageError>,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug)]
struct Colour {
    /// `#rrggbb`.
    hex: String,
    /// Share of the painted area, 0-1.
    share: f64,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug)]
struct TypeStep {
    /// Font size in CSS pixels.
    px: f64,
    /// Share of the page's text characters at this size, 0-1.
    share: f64,
    /// The elements that use it (e.g. "h1", "p"), at most five.
    elements: Vec<String>,
    /// The font family most of it is set in.
    family: String,
    /// Its most common weight.
    weight: String,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug)]
struct Measure {
    /// The median characters per line of the running text.
    characters_per_line: f64,
    /// The median width (px) of its blocks.
    width_px: f64,
    /// Blocks measured.
    blocks: u64,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug)]
struct Rhythm {
    /// The body's font size and line height (px).
    base_font_px: f64,
    base_line_height_px: f64,
    /// Vertical margins of the page's blocks (px), most used first, with how often.
    spacing: Vec<Spacing>,
}

#[derive(Serialize, Deserialize, JsonSchema, Debug)]
struct Spacing {
    px: f64,
    uses: u64,
    /// The margin over the base line height (1 = one line).
    lines: f64,
}

/// The facts the page itself can give (everything but the palette).
#[derive(Deserialize)]
struct PageFacts {
    title: String,
    type_scale: Vec<TypeStep>,
    measure: Option<Measure>,
    rhythm: Rhythm,
    breakpoints: Vec<f64>,
}

const PAGE_FACTS: &str = r#"(() => {
  const round = (x, n = 2) => Math.round(x * 10 ** n) / 10 ** n;
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity) > 0;
  };
  // Type: each element's own text (its direct text nodes), by computed size.
  const sizes = new Map();
  let chars = 0;
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    if (['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(el.tagName)) continue;
    let own = 0;
    for (const n of el.childNodes) if (n.nodeType === 3) own += n.textContent.trim().length;
    if (!own || !visible(el)) continue;
    const s = getComputedStyle(el);
    const px = round(parseFloat(s.fontSize), 1);
    const e = sizes.get(px) || {chars: 0, elements: new Map(), families: new Map(), weights: new Map()};
    e.chars += own;
    const tag = el.tagName.toLowerCase();
    e.elements.set(tag, (e.elements.get(tag) || 0) + own);
    const fam = s.fontFamily.split(',')[0].trim().replace(/^["']|["']$/g, '');
    e.families.set(fam, (e.families.get(fam) || 0) + own);
    e.weights.set(s.fontWeight, (e.weights.get(s.fontWeight) || 0) + own);
    sizes.set(px, e);
    chars += own;
  }
  const top = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  const type_scale = [...sizes.entries()].sort((a, b) => b[0] - a[0]).map(([px, e]) => ({
    px, share: round(e.chars / Math.max(chars, 1), 4),
    elements: top(e.elements).slice(0, 5).map(x => x[0]),
    family: top(e.families)[0][0], weight: String(top(e.weights)[0][0]),
  }));
  // Measure: running text of two lines or more.
  const perLine = [], widths = [];
  for (const el of document.querySelectorAll('p, li, blockquote, dd')) {
    if (!visible(el)) continue;
    const text = el.innerText.replace(/\s+/g, ' ').trim();
    const s = getComputedStyle(el);
    let lh = parseFloat(s.lineHeight);
    if (!lh) lh = parseFloat(s.fontSize) * 1.2;
    const r = el.getBoundingClientRect();
    const inner = r.height - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom);
    const lines = Math.round(inner / lh);
    if (lines < 2 || text.length < 40) continue;
    perLine.push(text.length / lines);
    widths.push(r.width - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight));
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null; };
  const measure = perLine.length ? {characters_per_line: round(median(perLine), 1), width_px: round(median(widths), 1), blocks: perLine.length} : null;
  // Rhythm: the body's line, and the vertical margins blocks keep.
  const bs = getComputedStyle(document.body || document.documentElement);
  const base_font_px = parseFloat(bs.fontSize);
  let base_line_height_px = parseFloat(bs.lineHeight);
  if (!base_line_height_px) base_line_height_px = round(base_font_px * 1.2, 2);
  const margins = new Map();
  for (const el of document.body ? document.body.querySelectorAll('*') : []) {
    if (!visible(el)) continue;
    const s = getComputedStyle(el);
    if (s.display.startsWith('inline')) continue;
    for (const m of [s.marginTop, s.marginBottom]) {
      const px = round(parseFloat(m), 1);
      if (px > 0) margins.set(px, (margins.get(px) || 0) + 1);
    }
  }
  const spacing = top(margins).slice(0, 8).map(([px, uses]) => ({px, uses, lines: round(px / base_line_height_px, 2)}));
  // Breakpoints: the widths the parsed stylesheets' media queries name.
  const points = new Set();
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const note = (text) => {
    for (const m of String(text).matchAll(/(?:min|max)-width\s*:\s*([\d.]+)\s*(px|em|rem)?/g)) {
      const v = parseFloat(m[1]) * (m[2] === 'em' || m[2] === 'rem' ? rem : 1);
      if (v > 0) points.add(round(v, 1));
    }
    for (const m of String(text).matchAll(/width\s*[<>]=?\s*([\d.]+)\s*(px|em|rem)?/g)) {
      const v = parseFloat(m[1]) * (m[2] === 'em' || m[2] === 'rem' ? rem : 1);
      if (v > 0) points.add(round(v, 1));
    }
  };
  const walk = (rules, depth) => {
    if (depth > 8) return;
    for (const r of rules) {
      if (r.media && r.conditionText !== undefined) note(r.conditionText);
      else if (r.media && r.media.mediaText) note(r.media.mediaText);
      if (r.styleSheet) { try { walk(r.styleSheet.cssRules, depth + 1); } catch (e) {} }
      if (r.cssRules) walk(r.cssRules, depth + 1);
    }
  };
  for (const sheet of document.styleSheets) {
    if (sheet.media && sheet.media.mediaText) note(sheet.media.mediaText);
    try { walk(sheet.cssRules, 0); } catch (e) {}
  }
  return {title: document.title, type_scale, measure,
    rhythm: {base_font_px, base_line_height_px, spacing},
    breakpoints: [...points].sort((a, b) => a - b)};
})()"#;

pub struct CaptureReference {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
    saver: Arc<dyn SaveFile>,
}

impl CaptureReference {
    pub fn new(resolver: Arc<dyn Resolve>, saver: Arc<dyn SaveFile>) -> CaptureReference {
        let def = crate::research_def(
            "capture_reference",
            "Capture a reference page",
            "Screenshot a web page in a real browser (headless Chromium) at a desktop (1280 px) and \
             a phone (390 px) width into the workspace, and return its design facts read from the \
             rendered page: palette by share of painted area, type scale, measure (characters per \
             line), vertical rhythm, and breakpoints. Every request the page makes goes through \
             the egress gate: its hosts must be in the agent's allowed domains.",
            schema_of::<Args>(),
            schema_of::<Output>(),
            Risk::Medium,
            // It writes (and may replace) the screenshots.
            false,
        )
        .declaring(ArgumentKinds::urls(&["url"]).and_paths(&["output"]));
        CaptureReference {
            def,
            resolver,
            saver,
        }
    }
}

#[async_trait]
impl Tool for CaptureReference {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let url = super::page_url(&args.url)?;
        let output = args.output.trim_end_matches(".png");
        if output.is_empty() || output.ends_with('/') {
            return Err(ToolError::InvalidArguments(format!(
                "output {:?}: give a path without extension, e.g. \"design/reference/home\"",
                args.output
            )));
        }
        let chromium = Chromium::detect().map_err(ToolError::failed)?;
        let (deadline, limit) = super::deadline(args.timeout_seconds, 60, 300);
        let gate = Gate::for_call(&cx, &self.resolver, deadline)?;
        let (facts, load_errors, desktop, phone) = super::within(limit, &cx, async {
            let s = Session::open(&chromium, gate, DESKTOP).await?;
            s.guarded(async {
                let mark = s.log.mark();
                s.open_url(url.as_str()).await?;
                let (load_errors, _) = s.log.since(mark);
                let facts: PageFacts = s.eval(PAGE_FACTS).await?;
                let desktop = s.screenshot().await?;
                s.resize(PHONE).await?;
                s.settle().await;
                let phone = s.screenshot().await?;
                Ok((facts, load_errors, desktop, phone))
            })
            .await
        })
        .await?;
        let palette = palette(&desktop)?;
        let mut screenshots = Vec::new();
        for (suffix, bytes) in [("desktop", &desktop), ("phone", &phone)] {
            let saved = self
                .saver
                .save(
                    &cx,
                    "capture_reference",
                    args.root.as_deref(),
                    &format!("{output}-{suffix}.png"),
                    bytes,
                )
                .await?;
            screenshots.push(saved.shown);
        }
        let scale_ratio = ratio(&facts.type_scale);
        let out = Output {
            url: crate::client::shown(&url),
            title: facts.title,
            screenshots,
            palette,
            type_scale: facts.type_scale,
            scale_ratio,
            measure: facts.measure,
            rhythm: facts.rhythm,
            breakpoints: facts.breakpoints,
            load_errors,
        };
        let text = summary(&out);
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(out).map_err(ToolError::failed)?,
        ))
    }
}

/// The median ratio between neighbouring font sizes (largest first).
fn ratio(steps: &[TypeStep]) -> Option<f64> {
    let mut ratios: Vec<f64> = steps
        .windows(2)
        .filter(|w| w[1].px > 0.0)
        .map(|w| w[0].px / w[1].px)
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 {
        ratios[n / 2]
    } else {
        (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0
    };
    Some((median * 1000.0).round() / 1000.0)
}

/// The colours of a PNG's pixels by share (fully transparent pixels are not painted).
fn palette(png_bytes: &[u8]) -> Result<Vec<Colour>, ToolError> {
    let bad =
        |e: png::DecodingError| ToolError::failed(format!("the screenshot did not decode: {e}"));
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(bad)?;
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = reader.next_frame(&mut buf).map_err(bad)?;
    let channels = info.color_type.samples();
    let mut counts: HashMap<[u8; 3], u64> = HashMap::new();
    let mut painted = 0u64;
    for px in buf[..info.buffer_size()].chunks_exact(channels) {
        let (rgb, alpha) = match channels {
            1 => ([px[0]; 3], 255),
            2 => ([px[0]; 3], px[1]),
            3 => ([px[0], px[1], px[2]], 255),
            _ => ([px[0], px[1], px[2]], px[3]),
        };
        if alpha == 0 {
            continue;
        }
        *counts.entry(rgb).or_default() += 1;
        painted += 1;
    }
    let mut colours: Vec<([u8; 3], u64)> = counts.into_iter().collect();
    colours.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(colours
        .into_iter()
        .map(|(rgb, n)| Colour {
            hex: format!("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]),
            share: n as f64 / painted.max(1) as f64,
        })
        .filter(|c| c.share >= MIN_SHARE)
        .take(MAX_COLOURS)
        .map(|c| Colour {
            share: (c.share * 10_000.0).round() / 10_000.0,
            ..c
        })
        .collect())
}

fn summary(o: &Output) -> String {
    let mut text = format!(
        "{} ({:?}); screenshots {}\n",
        o.url,
        o.title,
        o.screenshots.join(", ")
    );
    text.push_str("palette: ");
    text.push_str(
        &o.palette
            .iter()
            .map(|c| format!("{} {:.1}%", c.hex, c.share * 100.0))
            .collect::<Vec<_>>()
            .join(", "),
    );
    text.push_str("\ntype scale: ");
    text.push_str(
        &o.type_scale
            .iter()
            .map(|t| {
                format!(
                    "{}px ({}, {:.0}%)",
                    t.px,
                    t.elements.join("/"),
                    t.share * 100.0
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    );
    if let Some(r) = o.scale_ratio {
        text.push_str(&format!("; ratio {r}"));
    }
    if let Some(m) = &o.measure {
        text.push_str(&format!(
            "\nmeasure: {} characters per line ({} px, {} blocks)",
            m.characters_per_line, m.width_px, m.blocks
        ));
    }
    text.push_str(&format!(
        "\nrhythm: body {}px / {}px line; margins {}",
        o.rhythm.base_font_px,
        o.rhythm.base_line_height_px,
        o.rhythm
            .spacing
            .iter()
            .map(|s| format!("{}px x{}", s.px, s.uses))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    text.push_str(&format!(
        "\nbreakpoints: {}\n",
        if o.breakpoints.is_empty() {
            "none".into()
        } else {
            o.breakpoints
                .iter()
                .map(|b| format!("{b}px"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    if !o.load_errors.is_empty() {
        text.push_str(&format!("{} error(s) while loading\n", o.load_errors.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(px: f64) -> TypeStep {
        TypeStep {
            px,
            share: 0.0,
            elements: vec![],
            family: String::new(),
            weight: String::new(),
        }
    }

    #[test]
    fn the_scale_ratio_is_the_median_step() {
        assert_eq!(ratio(&[step(32.0), step(20.0), step(16.0)]), Some(1.425));
        assert_eq!(ratio(&[step(16.0)]), None);
    }

    #[test]
    fn the_palette_counts_pixels_and_leaves_out_the_transparent_and_the_rare() {
        // 10 x 10: 60 red, 30 white, 9 black, 1 near-black (under 0.5 %? no: 1 % stays),
        // plus a transparent row beyond.
        let (w, h) = (10u32, 11u32);
        let mut data = Vec::new();
        for i in 0..(w * h) {
            let px: [u8; 4] = match i {
                0..60 => [255, 0, 0, 255],
                60..90 => [255, 255, 255, 255],
                90..99 => [0, 0, 0, 255],
                99 => [1, 1, 1, 255],
                _ => [9, 9, 9, 0],
            };
            data.extend(px);
        }
        let mut png_bytes = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut png_bytes, w, h);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            enc.write_header().unwrap().write_image_data(&data).unwrap();
        }
        let p = palette(&png_bytes).unwrap();
        let got: Vec<(&str, f64)> = p.iter().map(|c| (c.hex.as_str(), c.share)).collect();
        assert_eq!(
            got,
            vec![
                ("#ff0000", 0.6),
                ("#ffffff", 0.3),
                ("#000000", 0.09),
                ("#010101", 0.01)
            ]
        );
    }
}
