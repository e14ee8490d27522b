//! `record_style`: the style record of a project, written into the workspace — the approved
//! direction and the rules a later run must not break (prose from the agent), and token
//! tables generated from the stylesheets by a CSS parser (Servo's `cssparser`): colours,
//! custom properties, type, spacing, radii and breakpoints. The prose may not name a colour
//! the stylesheets do not contain, so the record cannot document a palette the code lacks.
//! Written through the journal like any write (`revert_file` undoes it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use aether_policy::ArgumentKinds;
use aether_policy::ToolDef;
use aether_policy::tool::groups;
use async_trait::async_trait;
use cssparser::{
    AtRuleParser, CowRcStr, DeclarationParser, ParseError, Parser, ParserInput, ParserState,
    QualifiedRuleParser, RuleBodyItemParser, RuleBodyParser, StyleSheetParser, Token,
};
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::write;
use crate::{CallContext, Tool, ToolError, ToolOutput, parse_args};

/// How deep nested blocks and at-rules are read: no stylesheet needs more, and an attacker's
/// millions of "(" must not exhaust the stack.
const MAX_DEPTH: usize = 32;

/// Stylesheets read at most, and the most of each.
const MAX_SHEETS: usize = 20;
const MAX_SHEET_BYTES: u64 = 1 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The stylesheets (.css), relative to the root: where the tokens come from.
    #[schemars(length(min = 1, max = 20))]
    stylesheets: Vec<String>,
    /// The approved direction, as prose.
    #[schemars(length(min = 1, max = 20000))]
    direction: String,
    /// The rules a later run must not break, one sentence each.
    #[serde(default)]
    #[schemars(length(max = 100))]
    rules: Vec<String>,
    /// Where the record goes, relative to the root. Default "STYLE.md".
    #[serde(default)]
    output: Option<String>,
    /// Name of the root (see list_roots). Defaults to the first root.
    #[serde(default)]
    root: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    root: String,
    path: String,
    bytes: u64,
    created: bool,
    /// Distinct values found, per table.
    colours: usize,
    custom_properties: usize,
    font_families: usize,
    font_sizes: usize,
    spacing: usize,
    radii: usize,
    breakpoints: usize,
    call_id: String,
}

/// What the stylesheets hold: each value with how often and where it is used.
#[derive(Default)]
struct Tokens {
    /// Colour (normalized) → properties it is used in, and uses.
    colours: BTreeMap<String, (BTreeSet<String>, usize)>,
    custom: BTreeMap<String, String>,
    families: BTreeMap<String, usize>,
    sizes: BTreeMap<String, usize>,
    spacing: BTreeMap<String, usize>,
    radii: BTreeMap<String, usize>,
    breakpoints: BTreeSet<String>,
}

/// The CSS named colours (CSS Color 4), lower case.
const NAMED: &[&str] = &[
    "aliceblue",
    "antiquewhite",
    "aqua",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanchedalmond",
    "blue",
    "blueviolet",
    "brown",
    "burlywood",
    "cadetblue",
    "chartreuse",
    "chocolate",
    "coral",
    "cornflowerblue",
    "cornsilk",
    "crimson",
    "cyan",
    "darkblue",
    "darkcyan",
    "darkgoldenrod",
    "darkgray",
    "darkgreen",
    "darkgrey",
    "darkkhaki",
    "darkmagenta",
    "darkolivegreen",
    "darkorange",
    "darkorchid",
    "darkred",
    "darksalmon",
    "darkseagreen",
    "darkslateblue",
    "darkslategray",
    "darkslategrey",
    "darkturquoise",
    "darkviolet",
    "deeppink",
    "deepskyblue",
    "dimgray",
    "dimgrey",
    "dodgerblue",
    "firebrick",
    "floralwhite",
    "forestgreen",
    "fuchsia",
    "gainsboro",
    "ghostwhite",
    "gold",
    "goldenrod",
    "gray",
    "green",
    "greenyellow",
    "grey",
    "honeydew",
    "hotpink",
    "indianred",
    "indigo",
    "ivory",
    "khaki",
    "lavender",
    "lavenderblush",
    "lawngreen",
    "lemonchiffon",
    "lightblue",
    "lightcoral",
    "lightcyan",
    "lightgoldenrodyellow",
    "lightgray",
    "lightgreen",
    "lightgrey",
    "lightpink",
    "lightsalmon",
    "lightseagreen",
    "lightskyblue",
    "lightslategray",
    "lightslategrey",
    "lightsteelblue",
    "lightyellow",
    "lime",
    "limegreen",
    "linen",
    "magenta",
    "maroon",
    "mediumaquamarine",
    "mediumblue",
    "mediumorchid",
    "mediumpurple",
    "mediumseagreen",
    "mediumslateblue",
    "mediumspringgreen",
    "mediumturquoise",
    "mediumvioletred",
    "midnightblue",
    "mintcream",
    "mistyrose",
    "moccasin",
    "navajowhite",
    "navy",
    "oldlace",
    "olive",
    "olivedrab",
    "orange",
    "orangered",
    "orchid",
    "palegoldenrod",
    "palegreen",
    "paleturquoise",
    "palevioletred",
    "papayawhip",
    "peachpuff",
    "peru",
    "pink",
    "plum",
    "powderblue",
    "purple",
    "rebeccapurple",
    "red",
    "rosybrown",
    "royalblue",
    "saddlebrown",
    "salmon",
    "sandybrown",
    "seagreen",
    "seashell",
    "sienna",
    "silver",
    "skyblue",
    "slateblue",
    "slategray",
    "slategrey",
    "snow",
    "springgreen",
    "steelblue",
    "tan",
    "teal",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "whitesmoke",
    "yellow",
    "yellowgreen",
];

const COLOUR_FUNCTIONS: &[&str] = &[
    "rgb", "rgba", "hsl", "hsla", "hwb", "lab", "lch", "oklab", "oklch", "color",
];

/// A colour as one spelling: hex in lower case with six or eight digits (an `rgb()` of whole
/// numbers becomes hex), other notations lower case with single spaces.
pub fn normalize_colour(text: &str) -> String {
    let t = text.trim().to_ascii_lowercase();
    if let Some(hex) = t.strip_prefix('#') {
        let expanded: String = match hex.len() {
            3 | 4 => hex.chars().flat_map(|c| [c, c]).collect(),
            _ => hex.to_string(),
        };
        let expanded = expanded
            .strip_suffix("ff")
            .filter(|h| h.len() == 6)
            .map_or(expanded.clone(), String::from);
        return format!("#{expanded}");
    }
    static RGB: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^rgba?\(\s*(\d{1,3})\s*[, ]\s*(\d{1,3})\s*[, ]\s*(\d{1,3})\s*(?:[,/]\s*(1|1\.0+|100%)\s*)?\)$")
            .expect("an rgb() colour")
    });
    if let Some(c) = RGB.captures(&t) {
        let part = |i: usize| c[i].parse::<u16>().ok().filter(|v| *v <= 255);
        if let (Some(r), Some(g), Some(b)) = (part(1), part(2), part(3)) {
            return format!("#{r:02x}{g:02x}{b:02x}");
        }
    }
    t.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
}

/// Colour literals in prose: hex and the functional notations (named colours are ordinary
/// words in prose, so they are not read there).
fn prose_colours(text: &str) -> Vec<String> {
    static LITERAL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)#[0-9a-f]{8}\b|#[0-9a-f]{6}\b|#[0-9a-f]{3,4}\b|\b(?:rgba?|hsla?|hwb|oklch|oklab|lab|lch)\([^)]*\)")
            .expect("colour literals")
    });
    LITERAL
        .find_iter(text)
        .map(|m| normalize_colour(m.as_str()))
        .collect()
}

/// Walks a declaration's value, noting every colour in it (inside functions and gradients
/// too) under `property`.
fn scan_colours<'i>(input: &mut Parser<'i, '_>, property: &str, tokens: &mut Tokens, depth: usize) {
    loop {
        let start = input.position();
        let token = match input.next() {
            Ok(t) => t.clone(),
            Err(_) => return,
        };
        let note = |colour: String, tokens: &mut Tokens| {
            let entry = tokens.colours.entry(normalize_colour(&colour)).or_default();
            entry.0.insert(property.to_string());
            entry.1 += 1;
        };
        match token {
            Token::Hash(ref v) | Token::IDHash(ref v)
                if matches!(v.len(), 3 | 4 | 6 | 8) && v.chars().all(|c| c.is_ascii_hexdigit()) =>
            {
                note(format!("#{v}"), tokens);
            }
            Token::Ident(ref name) if NAMED.contains(&name.to_ascii_lowercase().as_str()) => {
                note(name.to_string(), tokens);
            }
            Token::Function(ref name)
                if COLOUR_FUNCTIONS.contains(&name.to_ascii_lowercase().as_str()) =>
            {
                let _ = input.parse_nested_block(|i| -> Result<(), ParseError<'i, ()>> {
                    while i.next().is_ok() {}
                    Ok(())
                });
                note(input.slice_from(start).to_string(), tokens);
            }
            Token::Function(_)
            | Token::ParenthesisBlock
            | Token::SquareBracketBlock
            | Token::CurlyBracketBlock
                if depth < MAX_DEPTH =>
            {
                let _ = input.parse_nested_block(|i| -> Result<(), ParseError<'i, ()>> {
                    scan_colours(i, property, tokens, depth + 1);
                    Ok(())
                });
            }
            _ => {}
        }
    }
}

/// The rules of a stylesheet (and of the at-rules that hold rules: @media, @supports, …).
struct Rules<'a> {
    tokens: &'a mut Tokens,
    /// How deep in at-rules this list is: past [`MAX_DEPTH`], a block is skipped.
    depth: usize,
}

/// The declarations of one rule.
struct Declarations<'a> {
    tokens: &'a mut Tokens,
}

impl<'i> QualifiedRuleParser<'i> for Rules<'_> {
    type Prelude = ();
    type QualifiedRule = ();
    type Error = ();

    fn parse_prelude<'t>(&mut self, input: &mut Parser<'i, 't>) -> Result<(), ParseError<'i, ()>> {
        while input.next().is_ok() {}
        Ok(())
    }

    fn parse_block<'t>(
        &mut self,
        _prelude: (),
        _start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<(), ParseError<'i, ()>> {
        let mut body = Declarations {
            tokens: &mut *self.tokens,
        };
        for _ in RuleBodyParser::new(input, &mut body) {}
        Ok(())
    }
}

impl<'i> AtRuleParser<'i> for Rules<'_> {
    /// The at-rule's name, and its prelude's text.
    type Prelude = (String, String);
    type AtRule = ();
    type Error = ();

    fn parse_prelude<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
    ) -> Result<(String, String), ParseError<'i, ()>> {
        let start = input.position();
        while input.next().is_ok() {}
        Ok((
            name.to_ascii_lowercase(),
            input.slice_from(start).trim().to_string(),
        ))
    }

    fn rule_without_block(
        &mut self,
        _prelude: (String, String),
        _start: &ParserState,
    ) -> Result<(), ()> {
        Ok(())
    }

    fn parse_block<'t>(
        &mut self,
        (name, prelude): (String, String),
        _start: &ParserState,
        input: &mut Parser<'i, 't>,
    ) -> Result<(), ParseError<'i, ()>> {
        if name == "media" && !prelude.is_empty() {
            self.tokens
                .breakpoints
                .insert(prelude.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        match name.as_str() {
            // A block of declarations.
            "font-face" | "page" | "property" => {
                let mut body = Declarations {
                    tokens: &mut *self.tokens,
                };
                for _ in RuleBodyParser::new(input, &mut body) {}
            }
            // A block of rules (@media, @supports, @layer, @container, @keyframes' frames),
            // to a bounded depth: a stylesheet nested deeper is read no further.
            _ if self.depth < MAX_DEPTH => {
                let mut rules = Rules {
                    tokens: &mut *self.tokens,
                    depth: self.depth + 1,
                };
                for _ in StyleSheetParser::new(input, &mut rules) {}
            }
            _ => {}
        }
        Ok(())
    }
}

impl<'i> DeclarationParser<'i> for Declarations<'_> {
    type Declaration = ();
    type Error = ();

    fn parse_value<'t>(
        &mut self,
        name: CowRcStr<'i>,
        input: &mut Parser<'i, 't>,
        _start: &ParserState,
    ) -> Result<(), ParseError<'i, ()>> {
        let property = name.to_ascii_lowercase();
        let start = input.position();
        let state = input.state();
        scan_colours(input, &property, self.tokens, 0);
        let value = input
            .slice_from(start)
            .trim()
            .trim_end_matches("!important")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        input.reset(&state);
        while input.next().is_ok() {}
        let t = &mut *self.tokens;
        if property.starts_with("--") {
            t.custom
                .entry(property.clone())
                .or_insert_with(|| value.clone());
        }
        let count = |map: &mut BTreeMap<String, usize>, v: &str| {
            *map.entry(v.to_string()).or_default() += 1
        };
        match property.as_str() {
            "font-family" => count(&mut t.families, &value),
            "font-size" => count(&mut t.sizes, &value),
            "font" => {
                // The size is the shorthand's first length before the family list.
                if let Some(size) = value
                    .split_whitespace()
                    .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
                {
                    count(&mut t.sizes, size.split('/').next().unwrap_or(size));
                }
            }
            p if p.starts_with("margin") || p.starts_with("padding") || p.ends_with("gap") => {
                for v in value.split_whitespace() {
                    count(&mut t.spacing, v);
                }
            }
            p if p.starts_with("border") && p.ends_with("radius") => count(&mut t.radii, &value),
            _ => {}
        }
        Ok(())
    }
}

impl<'i> AtRuleParser<'i> for Declarations<'_> {
    type Prelude = ();
    type AtRule = ();
    type Error = ();
}

impl<'i> QualifiedRuleParser<'i> for Declarations<'_> {
    type Prelude = ();
    type QualifiedRule = ();
    type Error = ();
}

impl<'i> RuleBodyItemParser<'i, (), ()> for Declarations<'_> {
    fn parse_declarations(&self) -> bool {
        true
    }

    fn parse_qualified(&self) -> bool {
        false
    }
}

/// Reads `css` into `tokens`.
fn read_stylesheet(css: &str, tokens: &mut Tokens) {
    let mut input = ParserInput::new(css);
    let mut parser = Parser::new(&mut input);
    let mut rules = Rules { tokens, depth: 0 };
    for _ in StyleSheetParser::new(&mut parser, &mut rules) {}
}

/// A Markdown table cell: pipes and line breaks escaped.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn table(out: &mut String, title: &str, head: &str, rows: Vec<String>) {
    out.push_str(&format!("\n### {title}\n\n"));
    if rows.is_empty() {
        out.push_str("None in the stylesheets.\n");
        return;
    }
    out.push_str(head);
    out.push('\n');
    for r in rows {
        out.push_str(&r);
        out.push('\n');
    }
}

fn counted(map: &BTreeMap<String, usize>) -> Vec<String> {
    let mut rows: Vec<(&String, &usize)> = map.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    rows.into_iter()
        .map(|(v, n)| format!("| `{}` | {n} |", cell(v)))
        .collect()
}

/// The record as Markdown.
fn record(args: &Args, sheets: &[String], t: &Tokens) -> String {
    let mut out = String::from("# Style record\n\n");
    out.push_str(&format!(
        "Token tables generated by record_style from {} (do not edit them by hand: run it again).\n\n",
        sheets.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
    ));
    out.push_str("## Direction\n\n");
    out.push_str(args.direction.trim());
    out.push_str("\n\n## Rules a later run must not break\n\n");
    if args.rules.is_empty() {
        out.push_str("None recorded.\n");
    }
    for r in &args.rules {
        out.push_str(&format!("- {}\n", r.trim().replace('\n', " ")));
    }
    out.push_str("\n## Tokens\n");
    let mut colours: Vec<(&String, &(BTreeSet<String>, usize))> = t.colours.iter().collect();
    colours.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
    table(
        &mut out,
        "Colours",
        "| colour | uses | in |\n|---|---|---|",
        colours
            .into_iter()
            .map(|(c, (props, n))| {
                let props: Vec<&str> = props.iter().map(String::as_str).take(6).collect();
                format!("| `{}` | {n} | {} |", cell(c), cell(&props.join(", ")))
            })
            .collect(),
    );
    table(
        &mut out,
        "Custom properties",
        "| property | value |\n|---|---|",
        t.custom
            .iter()
            .map(|(k, v)| format!("| `{}` | `{}` |", cell(k), cell(v)))
            .collect(),
    );
    table(
        &mut out,
        "Font families",
        "| family | uses |\n|---|---|",
        counted(&t.families),
    );
    table(
        &mut out,
        "Font sizes",
        "| size | uses |\n|---|---|",
        counted(&t.sizes),
    );
    table(
        &mut out,
        "Spacing (margin, padding, gap)",
        "| value | uses |\n|---|---|",
        counted(&t.spacing),
    );
    table(
        &mut out,
        "Radii",
        "| radius | uses |\n|---|---|",
        counted(&t.radii),
    );
    table(
        &mut out,
        "Breakpoints (@media)",
        "| media query |\n|---|",
        t.breakpoints
            .iter()
            .map(|b| format!("| `{}` |", cell(b)))
            .collect(),
    );
    out
}

pub struct RecordStyle {
    def: ToolDef,
}

impl Default for RecordStyle {
    fn default() -> RecordStyle {
        RecordStyle::new()
    }
}

impl RecordStyle {
    pub fn new() -> RecordStyle {
        let mut def = write::writer::<Args, Output>(
            "record_style",
            "Write the style record",
            "Write the project's style record (default STYLE.md): the approved direction and the rules a later run \
             must not break (your prose), and token tables generated from the stylesheets by a CSS parser — colours \
             with their uses, custom properties, font families and sizes, spacing, radii, @media breakpoints. A colour \
             the prose names that no stylesheet contains is refused, so the record cannot document a palette the code \
             lacks. Journalled: revert_file undoes it.",
            true,
            true,
        )
        .declaring(ArgumentKinds::paths(&["stylesheets", "output"]));
        def.group = groups::QUALITY.into();
        RecordStyle { def }
    }
}

#[async_trait]
impl Tool for RecordStyle {
    fn journals_every_effect(&self) -> bool {
        true
    }

    fn def(&self) -> &ToolDef {
        &self.def
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        if args.stylesheets.is_empty() || args.stylesheets.len() > MAX_SHEETS {
            return Err(ToolError::InvalidArguments(format!(
                "name 1 to {MAX_SHEETS} stylesheets"
            )));
        }
        if args.direction.trim().is_empty() {
            return Err(ToolError::InvalidArguments("the direction is empty".into()));
        }
        let mut sheets = Vec::with_capacity(args.stylesheets.len());
        for sheet in &args.stylesheets {
            sheets.push(
                crate::read_text_file(
                    &cx,
                    args.root.as_deref(),
                    sheet,
                    MAX_SHEET_BYTES,
                    "a stylesheet",
                )?
                .text,
            );
        }
        // Parsed off the async threads: up to 20 MiB of CSS.
        let tokens = crate::blocking(move || {
            let mut tokens = Tokens::default();
            for css in &sheets {
                read_stylesheet(css, &mut tokens);
            }
            tokens
        })
        .await;
        // The prose may name only colours the stylesheets hold.
        let mut unknown: Vec<String> = std::iter::once(&args.direction)
            .chain(&args.rules)
            .flat_map(|t| prose_colours(t))
            .filter(|c| !tokens.colours.contains_key(c))
            .collect();
        unknown.dedup();
        if !unknown.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "the prose names {} that no stylesheet contains: the record may document only the palette the code has \
                 (the stylesheets hold {})",
                unknown.join(", "),
                tokens
                    .colours
                    .keys()
                    .take(20)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let output = args.output.clone().unwrap_or_else(|| "STYLE.md".into());
        let text = record(&args, &args.stylesheets, &tokens);
        let bytes = text.into_bytes();
        let w = write::write_whole(
            &cx,
            "record_style",
            (args.root.as_deref(), &output),
            &bytes,
            true,
        )
        .await?;
        let (created, unchanged, shown) = (w.created, w.unchanged, &w.shown);
        let summary = format!(
            "{} {shown}: {} colour(s), {} custom propert(ies), {} font famil(ies), {} font size(s), {} spacing value(s), {} radi(i), {} breakpoint(s).{}",
            if unchanged {
                "unchanged"
            } else if created {
                "created"
            } else {
                "wrote"
            },
            tokens.colours.len(),
            tokens.custom.len(),
            tokens.families.len(),
            tokens.sizes.len(),
            tokens.spacing.len(),
            tokens.radii.len(),
            tokens.breakpoints.len(),
            if unchanged {
                ""
            } else {
                " revert_file undoes it."
            }
        );
        Ok(ToolOutput::with_structured(
            summary,
            serde_json::to_value(Output {
                root: w.root.clone(),
                path: w.rel.clone(),
                bytes: bytes.len() as u64,
                created,
                colours: tokens.colours.len(),
                custom_properties: tokens.custom.len(),
                font_families: tokens.families.len(),
                font_sizes: tokens.sizes.len(),
                spacing: tokens.spacing.len(),
                radii: tokens.radii.len(),
                breakpoints: tokens.breakpoints.len(),
                call_id: cx.call_id.clone(),
            })
            .map_err(ToolError::failed)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_read_from_the_parsed_stylesheet_not_its_text() {
        let css = r##"
            /* #123456 in a comment is no colour */
            :root { --brand: #0A7; --ink: rgb(17, 34, 51); }
            body { color: var(--ink, #FFFFFF); background: linear-gradient(#0a7 0%, hsl(200 50% 40%)); font: 16px/1.5 "Inter", sans-serif; }
            .card { border: 1px solid SlateGray; border-radius: 8px; padding: 12px 24px; content: "#abcdef"; }
            @media (min-width: 48em) { .card { margin: 0 auto; gap: 2rem; color: #00aa77; } }
            @font-face { font-family: "Inter"; src: url(inter.woff2); }
        "##;
        let mut t = Tokens::default();
        read_stylesheet(css, &mut t);
        let colours: Vec<&str> = t.colours.keys().map(String::as_str).collect();
        assert_eq!(
            colours,
            [
                "#00aa77",
                "#112233",
                "#ffffff",
                "hsl(200 50% 40%)",
                "slategray"
            ]
        );
        assert_eq!(t.colours["#00aa77"].1, 3, "#0A7 twice and #00aa77 once");
        assert_eq!(t.custom["--brand"], "#0A7");
        assert!(t.families.contains_key("\"Inter\"") && t.sizes.contains_key("16px"));
        assert_eq!(t.radii.keys().collect::<Vec<_>>(), ["8px"]);
        assert!(t.spacing.contains_key("12px") && t.spacing.contains_key("2rem"));
        assert_eq!(
            t.breakpoints.iter().collect::<Vec<_>>(),
            ["(min-width: 48em)"]
        );
    }

    #[test]
    fn deep_nesting_is_read_to_a_bound_not_to_a_stack_overflow() {
        let mut css = String::from("a { color: ");
        css.push_str(&"(".repeat(300_000));
        css.push_str("#123456; }\n");
        css.push_str(&"@media x { ".repeat(100_000));
        css.push_str("b { color: #abcdef; }");
        let mut t = Tokens::default();
        // Run on a thread with a small stack, as a worker's: this must return.
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                read_stylesheet(&css, &mut t);
                t.colours.len()
            })
            .unwrap()
            .join()
            .unwrap();
    }

    proptest::proptest! {
        // proptest's default runs 256 cases, or `PROPTEST_CASES`.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any CSS-shaped text, unbalanced and nested: read without panicking, and every
        /// colour found spelled once (normalizing a normalized colour changes nothing).
        #[test]
        fn any_stylesheet_is_read_and_its_colours_are_spelled_once(
            css in "(\\{|\\}|\\(|\\)|;|:|@media x|color|--c|#[0-9a-fA-F]{3,8}|rgb\\(|red|\"|/\\*|\\*/|\\PC{0,4}){0,80}",
        ) {
            let mut t = Tokens::default();
            read_stylesheet(&css, &mut t);
            for c in t.colours.keys() {
                proptest::prop_assert!(!c.is_empty());
                proptest::prop_assert_eq!(&normalize_colour(c), c);
            }
        }
    }

    #[test]
    fn colour_spellings_meet() {
        assert_eq!(normalize_colour("#0A7"), "#00aa77");
        assert_eq!(normalize_colour("#00AA77FF"), "#00aa77");
        assert_eq!(normalize_colour("rgb(0 170 119)"), "#00aa77");
        assert_eq!(normalize_colour("rgba(0, 170, 119, 1)"), "#00aa77");
        assert_eq!(
            normalize_colour("rgba(0, 170, 119, 0.5)"),
            "rgba(0, 170, 119, 0.5)"
        );
        assert_eq!(
            prose_colours("Teal #0A7 on rgb(255,255,255); not issue #12 or a red word"),
            ["#00aa77", "#ffffff"]
        );
    }
}
