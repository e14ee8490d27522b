//! Credential detection for outgoing requests: does a URL, a header, a body or a tool call's
//! arguments carry a secret?
//!
//! An agent that has read a token (from a file, an environment dump, a tool's output) can send
//! it anywhere it can reach. Before a request leaves, the host asks the [`Scanner`]; a request
//! that carries a credential is refused with a [`Finding`], which names the rule
//! (`dlp:github-token`) and the place (`header:Authorization`), never the secret: the refusal
//! is shown to the agent and written to the journal, and neither may hold the thing refused.
//!
//! **What is looked at.** The URL as written, each query parameter (percent-decoded), each
//! header (`Name: value`), the body (JSON-aware when it parses, form-aware when it says it is a
//! form, otherwise as text or bytes), or every string and key of a tool call's arguments.
//! Then all of a call's parts together, for a secret split into pieces ([`split`]): its
//! values joined in order (a value encoded whole and then cut), and fields that are each one
//! token put together in any order and any number to a shape's documented structure and
//! length, whether they sit in the URL's path, its query, the headers or the body; with
//! [`SessionFragments`], also with the pieces a session's calls sent in the last ten minutes.
//!
//! **Decoded views.** Each text is scanned as written, then through decoding layers, each
//! applied only where there is something to decode and only to the pieces that need it:
//!
//! | layer | runs on | decodes |
//! | --- | --- | --- |
//! | `unicode` | tokens with a non-ASCII byte (spaces do not end them) | drops invisible characters (zero-width, word joiner, soft hyphen, BOM, bidi controls, variation selectors), maps tag characters to the ASCII they hide, and replaces each character whose NFKC form is ASCII by that form (fullwidth `ＡＫＩＡ` is `AKIA`, `ﬁ` is `fi`) |
//! | `escape` | tokens with `\u`, `\x`, `\/` or `&#` | `\uXXXX` (with surrogate pairs), `\u{…}`, `\UXXXXXXXX`, `\xXX`, `\\ \/ \" \' \n \r \t`, `&#NN;`, `&#xHH;` |
//! | `percent` | tokens with a valid `%XX` | `%XX` (not `+`) |
//! | `base64` | runs of ≥ 16 base64 characters with both cases, also joined across a line break that wraps one (MIME, PEM) | standard and URL-safe, padded or not, from the start of the run and after each `/` that ends a path-like prefix (`com/upload/Z2hw…`), so the value is decoded in step |
//! | `hex` | runs of ≥ 32 hex digits | pairs to bytes (both alignments when the run is odd) |
//!
//! A token is what lies between whitespace, quotes, brackets and commas: a decoded view holds
//! the decoded tokens that changed, one a line, so a 1 MiB body with one `%20` in it is not
//! copied. Base64 and hex runs are found in one pass that tests eight bytes at a time.
//! Layers nest, up to four deep (`percent`, then `base64`, then `unicode`, …), `percent` at most
//! three times. Decoded bytes are kept only if they could hold a secret (a run of printable
//! ASCII as long as the shortest credential, or valid UTF-8 that is not ASCII), so a digest or
//! a random blob goes no deeper; UTF-16LE is narrowed first. All the views of one text together
//! may be at most 16 times its size.
//!
//! **Matching.** Every credential shape is a named rule ([`Scanner::rules`]) that starts with one
//! of a few literals (`AKIA`, `ghp_`, `xox`, `-----BEGIN `, `eyJ`, …). One Aho–Corasick
//! automaton over all of them finds, in one pass per view, the places a credential could
//! start; only there is the rule's own regex tried, anchored, then any check a regex cannot
//! express (a JWT's first two segments must decode to JSON objects, the header with an `alg`).
//! Rules are anchored at a word start (the byte before is not a letter or digit), so `task-list`
//! is not an `sk-` key, and shapes of fixed length must end at a word end, so a longer
//! identifier is not an AWS key id. Hex digests, UUIDs and base64 of ordinary text decode to
//! nothing that matches. The rules are the shaped families of gitleaks' default rule set
//! ([`shapes`], listed in `docs/SHELL_AND_NETWORK.md`), and a bare 40-character cloud secret
//! key (`dlp:cloud-secret-key`), found by its run rather than a literal and reported only when
//! nothing more specific is.
//!
//! **Placeholders.** Documentation's stand-ins are not secrets: a match whose random part,
//! once placeholder words (`EXAMPLE`, `your`, `here`, `changeme`, …) are taken out, is too
//! short, or whose first characters carry little information (one character repeated, a run
//! like `1234567890abcdef`, a short pattern over and over) is let through; around a fixed
//! marker (OpenAI's `T3BlbkFJ`) each side is judged.
//!
//! **Known limits.** This stops the careless and the naive, not a determined exfiltrator:
//! - encrypted, compressed or otherwise transformed payloads (gzip, zip, ROT13, reversed,
//!   XOR, a custom alphabet) are opaque; so is any encoding not in the table above (base32,
//!   octal escapes, quoted-printable, hex with separators like `41:4b`, DNS labels split by
//!   dots);
//! - a secret split into pieces shorter than three characters, or whose pieces share their
//!   fields with other text (`token: gh` + `p_…`), is not put together in any order (only
//!   joined in the call's order, and then its last piece must end its field); nor are private
//!   keys, Azure keys, AWS and Datadog keys found by their name, Mailchimp and Terraform
//!   tokens (their literal holds a space or `=`, or lies inside after a run any field could
//!   begin, or there is none); a call with more than 128 pieces, or so
//!   many that fit a shape that the search's budget runs out, may hide one; a session's
//!   pieces are kept ten minutes, 128 of them, 8 KiB in all, at most 16 from one call (a
//!   credential's literal or its start first, then the most random), and in one process (the
//!   pipeline keeps them per agent; replicas do not share them);
//! - a literal alone in one field (`glpat-`) beside a random-looking field of the length its
//!   shape allows is taken for a secret, and a prefix of a token of variable length that is
//!   one already (two of three pieces of a Vault token) is refused when it is sent;
//! - a base64 value glued to a preceding run of base64 characters other than by a `/` after a
//!   lower-case prefix (`token_Z2hw…`, `Docs/Z2hw…`) may be decoded out of step;
//! - look-alike letters that NFKC does not fold (Cyrillic `А` for Latin `A`);
//! - credentials without a distinctive shape (passwords, generic API keys, cookies), and
//!   shapes not listed; an AWS secret key without its name is found only as a 40-character
//!   run that reads as random (not one glued to other base64, nor one with `-` or `_`, more
//!   than three `/`, or a run of one character class about ten long, which a few random keys
//!   in a thousand have);
//! - an AWS access key id is refused wherever it is, including in a presigned URL;
//! - past the decoding budget (views totalling 16 times the text) deeper layers are skipped.

mod session;
mod shapes;
mod split;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;

pub use session::SessionFragments;
use shapes::{Before, SHAPES};
use split::{Origin, Pieces};

/// The shortest credential any rule matches (`xoxb-` and ten characters): a shorter ASCII text
/// cannot hold one, and decoded bytes without a printable run this long are dropped.
const MIN_SECRET: usize = 15;

/// How many layers of decoding nest, and how many of them may be percent-decoding.
const MAX_LAYERS: usize = 4;
const PERCENT_ROUNDS: usize = 3;

/// A base64 run shorter than this is not decoded (12 bytes of secret at most).
const MIN_BASE64: usize = 16;

/// A hex run shorter than this is not decoded (16 bytes at most).
const MIN_HEX: usize = 32;

/// What the views of one text may total, as a multiple of its length (plus a constant for
/// small texts): NFKC can expand and layers nest, and a crafted text must not make the scan
/// unbounded.
const VIEW_BUDGET_FACTOR: usize = 16;
const VIEW_BUDGET_BASE: usize = 64 * 1024;

/// A decoding a secret was found through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    Unicode,
    /// NUL bytes between the characters (UTF-16LE of ASCII, raw or percent-encoded).
    Wide,
    Escape,
    Percent,
    Base64,
    Hex,
}

impl Layer {
    /// In the order they are tried on each view.
    pub const ALL: [Layer; 6] = [
        Layer::Unicode,
        Layer::Wide,
        Layer::Escape,
        Layer::Percent,
        Layer::Base64,
        Layer::Hex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Unicode => "unicode",
            Layer::Wide => "utf16",
            Layer::Escape => "escape",
            Layer::Percent => "percent",
            Layer::Base64 => "base64",
            Layer::Hex => "hex",
        }
    }

    /// How a finding's place reads after it: "base64-decoded".
    fn done(self) -> &'static str {
        match self {
            Layer::Unicode => "Unicode-normalized",
            Layer::Wide => "narrowed from UTF-16",
            Layer::Escape => "unescaped",
            Layer::Percent => "percent-decoded",
            Layer::Base64 => "base64-decoded",
            Layer::Hex => "hex-decoded",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A credential found in a request. Holds where and how, never the secret itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule that matched: `dlp:github-token`.
    pub rule: &'static str,
    /// Where: `url`, `query:NAME`, `header:NAME`, `body`, `body:/a/0` (a JSON pointer into the
    /// body), `body:NAME` (a form field), a JSON pointer into tool arguments (`/a/b`, or
    /// `arguments` for a bare string), or two of these joined by ` + ` for a secret split
    /// between neighbours. A name that itself holds a credential reads `(redacted)`.
    pub place: String,
    /// The decodings it was found through, outermost first; empty when found as written.
    pub decoded: Vec<Layer>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a credential ({}) in {}", self.rule, self.place)?;
        for (i, layer) in self.decoded.iter().enumerate() {
            f.write_str(if i == 0 { " (" } else { ", then " })?;
            f.write_str(layer.done())?;
        }
        if !self.decoded.is_empty() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The credential rules, compiled. Build once ([`Scanner::shared`]); scanning does not mutate
/// it, so one is shared by every thread.
#[derive(Debug)]
pub struct Scanner {
    shapes: Vec<CompiledShape>,
    /// Every literal of every shape: where a credential could start.
    starts: Starts,
    /// The literals, by pattern id.
    literals: Vec<&'static str>,
    /// For each literal of `starts`, the shapes to try where it is found, in priority order:
    /// those with this literal or a shorter one it begins with (the automaton reports the
    /// longest literal at a place, `sk-ant-` rather than `sk-`).
    tries: Vec<Vec<usize>>,
    /// Every proper prefix of a literal that starts its shape's match, with the literals it
    /// begins: a piece that is only the start of a literal (`gh`, `AKI`) may go on in another.
    partial: HashMap<&'static [u8], Vec<usize>, BuildHasherDefault<Fnv>>,
    /// Only in [`Scanner::regex_loop`]: each shape's regex, unanchored, tried in turn.
    regex_loop: Option<Vec<Regex>>,
    /// The assembly automata's caches, kept between calls.
    split_caches: split::CachePool,
}

#[derive(Debug)]
struct CompiledShape {
    rule: &'static str,
    anchored: Regex,
    before: Before,
    check: Option<fn(&[u8]) -> bool>,
    back: Option<shapes::Back>,
    len: (usize, usize),
    marker: Option<&'static str>,
    viable: Option<fn(&[u8]) -> bool>,
    hex_ok: bool,
    goes_on_after: &'static [u8],
    /// The class of each named random part (`s`, `t`, `u`), as written first in it.
    random: Vec<Option<Vec<bool>>>,
    /// What pieces are put together to, in any order ([`split`]); `None`: only in order.
    split: Option<regex_automata::hybrid::dfa::DFA>,
}

/// A match of a shape: where it ends, and where its random part lies.
#[derive(Debug)]
struct Matched {
    /// The whole match, with the byte after it when the shape reads one to end a word.
    end: usize,
    secret: std::ops::Range<usize>,
    /// Which named random part matched (`s`, `t`, `u`), if the shape has them.
    group: Option<usize>,
}

impl CompiledShape {
    /// The shape's match at `start`, unless it is a placeholder.
    fn match_from(&self, hay: &[u8], start: usize) -> Option<Matched> {
        self.match_joined(hay, start, &[])
    }

    /// [`CompiledShape::match_from`] in pieces joined at `junctions`: a match may start at a
    /// junction whatever the byte before it.
    fn match_joined(&self, hay: &[u8], start: usize, junctions: &[usize]) -> Option<Matched> {
        if !self.before.allows(hay, start) && junctions.binary_search(&start).is_err() {
            return None;
        }
        let caps = self.anchored.captures(&hay[start..])?;
        let whole = caps.get(0)?;
        let matched = &hay[start..start + whole.end()];
        if self.check.is_some_and(|check| !check(matched)) {
            return None;
        }
        // The random part: `s`, or `t` or `u` in a shape whose branches name it apart.
        let group = RANDOM_GROUPS.iter().position(|n| caps.name(n).is_some());
        let secret = group
            .and_then(|g| caps.name(RANDOM_GROUPS[g]))
            .map_or(0..whole.end(), |s| s.range());
        if self.is_placeholder(&matched[secret.clone()]) {
            return None;
        }
        // Joined pieces: the last one ends with the match (a field holding more after it,
        // `https` of `https://…`, is not a secret's piece), unless the shape says a piece may
        // go on; none may bring a placeholder's share (`…_YOUR_TOKEN_XX` glued to the next
        // field's text is not a secret).
        let end = start + whole.end();
        if !inner_boundaries(junctions, start, end).is_empty() {
            let next = junctions[junctions.partition_point(|&j| j < end)..]
                .first()
                .copied()
                .unwrap_or(hay.len());
            let rest = &hay[end..next.max(end)];
            // What comes after it in the field must be another token (a PEM body after its
            // header line), or the shape says a piece may go on there.
            let apart = |b: &u8| split::cuts(*b) || self.goes_on_after.contains(b);
            let goes_on = apart(&hay[end - 1]) || rest.first().is_some_and(apart);
            if !goes_on && rest.iter().any(u8::is_ascii_alphanumeric) {
                return None;
            }
        }
        let (lo, hi) = (start + secret.start, start + secret.end);
        let inner = inner_boundaries(junctions, lo, hi);
        if !inner.is_empty() {
            let cuts: Vec<usize> = [lo]
                .into_iter()
                .chain(inner.iter().copied())
                .chain([hi])
                .collect();
            if cuts
                .windows(2)
                .any(|w| shapes::holds_placeholder(&hay[w[0]..w[1]]))
            {
                return None;
            }
        }
        Some(Matched {
            end: start + whole.end(),
            secret: start + secret.start..start + secret.end,
            group,
        })
    }

    /// Whether a random part is a documented placeholder; around the shape's fixed marker,
    /// either side being one is enough (a real key is random on both).
    fn is_placeholder(&self, secret: &[u8]) -> bool {
        let judge = |part: &[u8]| shapes::is_placeholder(part, self.len.0.min(part.len()));
        match self
            .marker
            .and_then(|m| memchr::memmem::find(secret, m.as_bytes()))
        {
            Some(at) => {
                let after = at + self.marker.map_or(0, str::len);
                judge(&secret[..at]) || judge(&secret[after..])
            }
            None => judge(secret),
        }
    }

    /// The shape's match around the literal found at `at`.
    fn match_at_literal(&self, hay: &[u8], at: usize, junctions: &[usize]) -> Option<Matched> {
        let start = match self.back {
            Some(back) => back(hay, at)?,
            None => at,
        };
        self.match_joined(hay, start, junctions)
    }
}

impl Default for Scanner {
    fn default() -> Scanner {
        Scanner::new()
    }
}

impl Scanner {
    pub fn new() -> Scanner {
        let shapes = SHAPES
            .iter()
            .map(|s| CompiledShape {
                rule: s.rule,
                anchored: compile(&format!("^(?:{})", s.pattern)),
                before: s.before,
                check: s.check,
                back: s.back,
                len: s.len,
                marker: s.marker,
                viable: s.viable,
                hex_ok: s.hex_ok,
                goes_on_after: s.goes_on_after,
                random: RANDOM_GROUPS
                    .iter()
                    .map(|g| random_class(s.pattern, g))
                    .collect(),
                split: match s.assemble {
                    shapes::Assemble::AsMatched => {
                        Some(split::automaton(without_word_end(s.pattern)))
                    }
                    shapes::Assemble::Strict(pattern) => Some(split::automaton(pattern)),
                    shapes::Assemble::InOrder => None,
                },
            })
            .collect();
        let mut literals: Vec<&'static str> = Vec::new();
        for s in SHAPES {
            for lit in s.starts {
                if !literals.contains(lit) {
                    literals.push(lit);
                }
            }
        }
        let tries = literals
            .iter()
            .map(|lit| {
                (0..SHAPES.len())
                    .filter(|&i| SHAPES[i].starts.iter().any(|s| lit.starts_with(s)))
                    .collect()
            })
            .collect();
        let mut partial: HashMap<&'static [u8], Vec<usize>, BuildHasherDefault<Fnv>> =
            HashMap::default();
        for (i, lit) in literals.iter().enumerate() {
            let at_start = SHAPES
                .iter()
                .any(|s| s.back.is_none() && s.starts.contains(lit));
            for k in 1..lit.len() {
                if at_start {
                    partial.entry(&lit.as_bytes()[..k]).or_default().push(i);
                }
            }
        }
        let starts = Starts::new(&literals);
        Scanner {
            shapes,
            starts,
            literals,
            tries,
            partial,
            regex_loop: None,
            split_caches: split::CachePool::default(),
        }
    }

    /// The scanner every caller shares, built on first use.
    pub fn shared() -> &'static Scanner {
        static SHARED: OnceLock<Scanner> = OnceLock::new();
        SHARED.get_or_init(Scanner::new)
    }

    /// Every rule's name, once each: the shaped rules in priority order, then
    /// `dlp:cloud-secret-key` (a bare secret key, found by its run rather than a literal).
    pub fn rules() -> impl Iterator<Item = &'static str> {
        let mut seen = Vec::new();
        SHAPES
            .iter()
            .map(|s| s.rule)
            .chain([BARE_SECRET_RULE])
            .filter(move |r| {
                let new = !seen.contains(r);
                seen.push(*r);
                new
            })
    }

    /// The same scanner with its matcher replaced by every rule's regex, unanchored, with the
    /// word start it requires written before it (as a rule set such as gitleaks' writes it,
    /// `(?:^|[^A-Za-z0-9])`), tried in turn on each view (`is_match`, then each match
    /// verified as the scanner verifies it): the reference the benchmark measures the
    /// prefilter against. Not for use.
    #[doc(hidden)]
    pub fn regex_loop() -> Scanner {
        let regexes = SHAPES
            .iter()
            .map(|s| match s.before {
                Before::Any => compile(s.pattern),
                Before::Word => compile(&format!("(?:^|[^A-Za-z0-9])(?:{})", s.pattern)),
                Before::WordOr(text) => compile(&format!(
                    "(?:^|[^A-Za-z0-9]|{})(?:{})",
                    regex::escape(text),
                    s.pattern
                )),
            })
            .collect();
        Scanner {
            regex_loop: Some(regexes),
            ..Scanner::new()
        }
    }

    /// Scans one text, as written and decoded. `place` is what the finding will say.
    pub fn scan_text(&self, place: &str, text: &str) -> Option<Finding> {
        self.scan_bytes(place, text.as_bytes())
    }

    /// Scans every string and key of a tool call's arguments, each named by its JSON pointer,
    /// and then all of them together for a secret split into pieces ([`split`]).
    pub fn scan_json(&self, value: &Value) -> Option<Finding> {
        let mut gathered = Gathered::default();
        self.scan_json_in("", value, &mut gathered)
            .or_else(|| gathered.settled(split::find(self, &gathered.pieces)))
    }

    /// Scans an outgoing HTTP request: each query parameter, the URL, each header, the body;
    /// and then all their parts together for a secret split into pieces ([`split`]).
    pub fn scan_request(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Option<Finding> {
        let parsed = parse_body(headers, body);
        let mut gathered = Gathered::default();
        self.scan_request_in(url, headers, body, &parsed, &mut gathered)
            .or_else(|| gathered.settled(split::find(self, &gathered.pieces)))
    }

    /// The per-part scans of a request, gathering its pieces.
    fn scan_request_in<'a>(
        &self,
        url: &'a str,
        headers: &'a [(String, String)],
        body: &'a [u8],
        parsed: &'a Body,
        gathered: &mut Gathered<'a>,
    ) -> Option<Finding> {
        self.scan_url(url, gathered)
            .or_else(|| self.scan_headers(headers, gathered))
            .or_else(|| self.scan_body(body, parsed, gathered))
    }

    fn scan_bytes(&self, place: &str, hay: &[u8]) -> Option<Finding> {
        self.find(hay).map(|(rule, decoded)| Finding {
            rule,
            place: place.to_string(),
            decoded,
        })
    }

    /// The rule matching `hay` or one of its decoded views, and the decodings that led there.
    fn find(&self, hay: &[u8]) -> Option<(&'static str, Vec<Layer>)> {
        self.find_joined(hay, &[])
    }

    /// [`Scanner::find`] on pieces joined end to end: base64 and hex runs are also decoded
    /// from each junction (`boundaries`), so a value encoded whole and then cut into pieces is
    /// decoded in step whatever came before it.
    fn find_joined(&self, hay: &[u8], boundaries: &[usize]) -> Option<(&'static str, Vec<Layer>)> {
        if hay.len() < MIN_SECRET && hay.is_ascii() {
            // Every layer shrinks ASCII; only NFKC can grow a text.
            return None;
        }
        let mut walk = Walk {
            scanner: self,
            budget: hay
                .len()
                .saturating_mul(VIEW_BUDGET_FACTOR)
                .saturating_add(VIEW_BUDGET_BASE),
            chain: Vec::new(),
            boundaries,
        };
        walk.view(hay).map(|rule| (rule, walk.chain))
    }

    /// The first rule, in text order, that matches `hay` as it is (pieces joined at
    /// `junctions`).
    fn first_rule(&self, hay: &[u8], junctions: &[usize]) -> Option<&'static str> {
        if let Some(regexes) = &self.regex_loop {
            return regexes
                .iter()
                .zip(&self.shapes)
                .find(|(re, shape)| {
                    re.is_match(hay)
                        && re.find_iter(hay).any(|m| {
                            // Past the word start the regex matched first.
                            let at = m.start();
                            let start = match shape.before {
                                Before::Any => at,
                                Before::WordOr(text) if hay[at..].starts_with(text.as_bytes()) => {
                                    at + text.len()
                                }
                                _ if !hay[at].is_ascii_alphanumeric() => at + 1,
                                _ => at,
                            };
                            shape.match_joined(hay, start, junctions).is_some()
                        })
                })
                .map(|(_, shape)| shape.rule);
        }
        let mut found = self.starts.finder(hay);
        let mut at = 0;
        while let Some(literal) = found.next_from(at) {
            let start = literal.start;
            let shape = self.tries[literal.id]
                .iter()
                .map(|&i| &self.shapes[i])
                .find(|s| s.match_at_literal(hay, start, junctions).is_some());
            if let Some(shape) = shape {
                return Some(shape.rule);
            }
            // Not the literal's end: another literal may start inside this one.
            at = start + 1;
        }
        None
    }

    /// `name` for a place, unless it holds a credential itself.
    fn label(&self, name: &[u8]) -> String {
        if self.find(name).is_some() {
            "(redacted)".to_string()
        } else {
            String::from_utf8_lossy(name).into_owned()
        }
    }

    fn scan_url<'a>(&self, url: &'a str, gathered: &mut Gathered<'a>) -> Option<Finding> {
        let before_fragment = url.split('#').next().unwrap_or(url);
        if let Some((_, query)) = before_fragment.split_once('?') {
            let params = form_pairs(query.as_bytes());
            if let Some(found) = self.scan_pairs("query", &params, gathered) {
                return Some(found);
            }
        }
        split::url_pieces(url, &mut gathered.pieces);
        // The path, user info, host and fragment; the query again, undivided.
        gathered.settle(self.scan_text("url", url))
    }

    fn scan_headers<'a>(
        &self,
        headers: &'a [(String, String)],
        gathered: &mut Gathered<'a>,
    ) -> Option<Finding> {
        for (name, value) in headers {
            let line = format!("{name}: {value}");
            let found = self.find(line.as_bytes()).map(|(rule, decoded)| Finding {
                rule,
                place: format!("header:{}", self.label(name.as_bytes())),
                decoded,
            });
            if let Some(found) = gathered.settle(found) {
                return Some(found);
            }
            let pieces = &mut gathered.pieces;
            pieces.name(Origin::Header(name), Cow::Borrowed(name.as_bytes()));
            pieces.source(Origin::Header(name), Cow::Borrowed(value.as_bytes()));
        }
        None
    }

    fn scan_body<'a>(
        &self,
        body: &'a [u8],
        parsed: &'a Body,
        gathered: &mut Gathered<'a>,
    ) -> Option<Finding> {
        match parsed {
            Body::Empty => None,
            Body::Form(params) => {
                for (name, value) in params {
                    let pieces = &mut gathered.pieces;
                    pieces.name(Origin::Form(name), Cow::Borrowed(name));
                    pieces.source(Origin::Form(name), Cow::Borrowed(value));
                }
                self.scan_pairs("body", params, gathered)
            }
            Body::Json(value) => self.scan_json_in("body", value, gathered),
            Body::Bytes => {
                gathered.pieces.source(Origin::Body, Cow::Borrowed(body));
                gathered.settle(self.scan_bytes("body", body))
            }
        }
    }

    /// Query or form parameters: each `name=value`.
    fn scan_pairs(
        &self,
        kind: &str,
        params: &[(Vec<u8>, Vec<u8>)],
        gathered: &mut Gathered,
    ) -> Option<Finding> {
        for (name, value) in params {
            let mut text = Vec::with_capacity(name.len() + 1 + value.len());
            text.extend_from_slice(name);
            text.push(b'=');
            text.extend_from_slice(value);
            let found = self.find(&text).map(|(rule, decoded)| Finding {
                rule,
                place: format!("{kind}:{}", self.label(name)),
                decoded,
            });
            if let Some(found) = gathered.settle(found) {
                return Some(found);
            }
        }
        None
    }

    fn scan_json_in<'v>(
        &self,
        prefix: &'v str,
        value: &'v Value,
        gathered: &mut Gathered<'v>,
    ) -> Option<Finding> {
        let mut scan = JsonScan {
            scanner: self,
            prefix,
            root: value,
            path: Vec::new(),
            ordinal: 0,
            gathered,
        };
        scan.visit(value)
    }
}

/// What the per-part scans of one call gather: its pieces, for a secret split between them,
/// and the first bare secret key seen, which is reported only if nothing more specific is
/// found (a fragment of a longer secret's encoding can look like one).
#[derive(Default)]
struct Gathered<'a> {
    pieces: Pieces<'a>,
    bare: Option<Finding>,
}

impl Gathered<'_> {
    /// The split search's finding, unless it is a bare secret key and one was found in a
    /// single part already (which names its place better); or that one.
    fn settled(&self, split: Option<Finding>) -> Option<Finding> {
        match split {
            Some(f) if f.rule == BARE_SECRET_RULE && self.bare.is_some() => self.bare.clone(),
            Some(f) => Some(f),
            None => self.bare.clone(),
        }
    }

    /// `found`, unless it is a bare secret key: that is kept aside.
    fn settle(&mut self, found: Option<Finding>) -> Option<Finding> {
        match found {
            Some(f) if f.rule == BARE_SECRET_RULE => {
                self.bare.get_or_insert(f);
                None
            }
            other => other,
        }
    }
}

/// The literals, in Aho–Corasick automata of at most [`Starts::GROUP`] each: past that,
/// an automaton has no vectorised prefilter (Teddy) and walks every byte, so a few automata
/// that each skip most of a text cost less than one that reads all of it.
///
/// A short text is read by one DFA of all the literals instead: a prefilter's setup costs
/// more than walking a few dozen bytes.
#[derive(Debug)]
struct Starts {
    /// Each automaton, and the literal (its index in [`Scanner::literals`]) of each of its
    /// patterns.
    groups: Vec<(AhoCorasick, Vec<usize>)>,
    /// All the literals, as a DFA without a prefilter, for texts shorter than
    /// [`Starts::SHORT`].
    whole: (AhoCorasick, Vec<usize>),
}

/// A literal found in a text.
#[derive(Clone, Copy, Debug)]
struct Literal {
    start: usize,
    end: usize,
    /// Its index in [`Scanner::literals`].
    id: usize,
}

impl Starts {
    const GROUP: usize = 64;
    const MAX_GROUPS: usize = 4;
    const SHORT: usize = 256;

    /// The literals grouped by length, the longest together (a group's prefilter reads as
    /// many bytes as its shortest literal has, up to four).
    fn new(literals: &[&str]) -> Starts {
        let mut ids: Vec<usize> = (0..literals.len()).collect();
        ids.sort_by_key(|&i| std::cmp::Reverse(literals[i].len()));
        let groups: Vec<(AhoCorasick, Vec<usize>)> = ids
            .chunks(Starts::GROUP)
            .map(|ids| {
                let automaton = AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(ids.iter().map(|&i| literals[i]))
                    .expect("the DLP literals build an automaton");
                (automaton, ids.to_vec())
            })
            .collect();
        assert!(groups.len() <= Starts::MAX_GROUPS, "too many DLP literals");
        let whole = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .prefilter(false)
            .build(literals)
            .expect("the DLP literals build a DFA");
        Starts {
            groups,
            whole: (whole, (0..literals.len()).collect()),
        }
    }

    fn finder<'s, 'h>(&'s self, hay: &'h [u8]) -> LiteralFinder<'s, 'h> {
        let groups = if hay.len() < Starts::SHORT {
            std::slice::from_ref(&self.whole)
        } else {
            &self.groups[..]
        };
        LiteralFinder {
            groups,
            hay,
            next: [None; Starts::MAX_GROUPS],
        }
    }
}

/// The literals of one text in order, across the automata.
struct LiteralFinder<'s, 'h> {
    groups: &'s [(AhoCorasick, Vec<usize>)],
    hay: &'h [u8],
    /// Each automaton's next literal, once looked for: `Some(None)` when it has no more.
    next: [Option<Option<Literal>>; Starts::MAX_GROUPS],
}

impl LiteralFinder<'_, '_> {
    /// The leftmost literal starting at `at` or after (the longest of those starting there).
    fn next_from(&mut self, at: usize) -> Option<Literal> {
        if at > self.hay.len() {
            return None;
        }
        let mut best: Option<Literal> = None;
        for (g, (automaton, ids)) in self.groups.iter().enumerate() {
            let stale = match self.next[g] {
                None => true,
                Some(Some(found)) => found.start < at,
                Some(None) => false,
            };
            if stale {
                self.next[g] =
                    Some(
                        automaton
                            .find(Input::new(self.hay).range(at..))
                            .map(|m| Literal {
                                start: m.start(),
                                end: m.end(),
                                id: ids[m.pattern().as_usize()],
                            }),
                    );
            }
            if let Some(Some(found)) = self.next[g] {
                let better = best.is_none_or(|b| {
                    found.start < b.start || (found.start == b.start && found.end > b.end)
                });
                if better {
                    best = Some(found);
                }
            }
        }
        best
    }
}

/// FNV-1a: the literal prefixes are a few bytes each, looked up once a piece; SipHash's setup
/// would cost more than the lookup (and they are not chosen by whoever sends the request).
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = hash;
    }
}

/// A request body as the scan reads it.
enum Body {
    Empty,
    /// `application/x-www-form-urlencoded`: its parameters, decoded.
    Form(Vec<(Vec<u8>, Vec<u8>)>),
    Json(Value),
    /// Anything else: text or bytes.
    Bytes,
}

fn parse_body(headers: &[(String, String)], body: &[u8]) -> Body {
    if body.is_empty() {
        return Body::Empty;
    }
    let is_form = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("content-type")
            && value
                .to_ascii_lowercase()
                .contains("application/x-www-form-urlencoded")
    });
    if is_form {
        return Body::Form(form_pairs(body));
    }
    let looks_json = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'{' || b == b'[');
    if looks_json && let Ok(value) = serde_json::from_slice::<Value>(body) {
        return Body::Json(value);
    }
    Body::Bytes
}

/// The names of a shape's random parts, in the order its branches use them.
const RANDOM_GROUPS: [&str; 3] = ["s", "t", "u"];

/// The class first written in the named group `name` of `pattern` (`(?P<s>[A-Za-z0-9]{36})`
/// gives `A-Za-z0-9`): what that random part is drawn from.
fn random_class(pattern: &str, name: &str) -> Option<Vec<bool>> {
    let at = pattern.find(&format!("(?P<{name}>"))?;
    let open = at + pattern[at..].find('[')?;
    let close = open + pattern[open..].find(']')?;
    Some(shapes::class(&pattern[open + 1..close]).to_vec())
}

/// A pattern without the class that ends it at a word end (`(?:[^A-Za-z0-9]|$)`), which
/// reads one byte past the match.
fn without_word_end(pattern: &str) -> &str {
    match pattern.rfind("(?:[^") {
        Some(at) if pattern.ends_with("|$)") => &pattern[..at],
        _ => pattern,
    }
}

fn compile(pattern: &str) -> Regex {
    // `(?-u)`: credentials are ASCII, and classes match bytes, so decoded binary is scanned too.
    RegexBuilder::new(&format!("(?-u){pattern}"))
        .build()
        .unwrap_or_else(|e| panic!("DLP pattern {pattern:?} does not compile: {e}"))
}

/// One text's scan through its decoded views, depth first.
struct Walk<'s> {
    scanner: &'s Scanner,
    /// How many more decoded bytes may be scanned.
    budget: usize,
    /// The layers of the view being scanned, outermost first.
    chain: Vec<Layer>,
    /// Where pieces were joined, in the text as given (see [`Scanner::find_joined`]).
    boundaries: &'s [usize],
}

impl Walk<'_> {
    fn view(&mut self, hay: &[u8]) -> Option<&'static str> {
        let junctions = if self.chain.is_empty() {
            self.boundaries
        } else {
            &[]
        };
        if let Some(rule) = self.scanner.first_rule(hay, junctions) {
            return Some(rule);
        }
        if self.chain.len() >= MAX_LAYERS {
            return None;
        }
        if let Some(rule) = self.descend(Layer::Unicode, unicode_view(hay)) {
            return Some(rule);
        }
        if !self.chain.contains(&Layer::Wide)
            && let Some(rule) = self.descend(Layer::Wide, wide_view(hay))
        {
            return Some(rule);
        }
        if let Some(rule) = self.descend(Layer::Escape, escape_view(hay)) {
            return Some(rule);
        }
        let percent_rounds = self.chain.iter().filter(|&&l| l == Layer::Percent).count();
        if percent_rounds < PERCENT_ROUNDS
            && let Some(rule) = self.descend(Layer::Percent, percent_view(hay))
        {
            return Some(rule);
        }
        let encoded = encoded_views(hay, junctions);
        // A more specific rule first: a piece of a longer secret's base64 can look like a bare
        // key.
        self.descend(Layer::Base64, encoded.base64)
            .or_else(|| self.descend(Layer::Hex, encoded.hex))
            .or(encoded.bare_secret.then_some(BARE_SECRET_RULE))
    }

    fn descend(&mut self, layer: Layer, decoded: Option<Vec<u8>>) -> Option<&'static str> {
        let decoded = decoded?;
        self.budget = self.budget.checked_sub(decoded.len())?;
        self.chain.push(layer);
        let found = self.view(&decoded);
        if found.is_none() {
            self.chain.pop();
        }
        found
    }
}

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}

struct JsonScan<'s, 'v, 'p> {
    scanner: &'s Scanner,
    prefix: &'v str,
    root: &'v Value,
    path: Vec<Step<'v>>,
    /// How many strings and keys have been visited: each is a piece, named by this number.
    ordinal: usize,
    gathered: &'p mut Gathered<'v>,
}

impl<'v> JsonScan<'_, 'v, '_> {
    fn visit(&mut self, value: &'v Value) -> Option<Finding> {
        match value {
            Value::String(s) => {
                self.piece(s, false);
                self.hit(s.as_bytes())
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                self.path.push(Step::Index(i));
                let found = self.visit(item);
                self.path.pop();
                found
            }),
            Value::Object(members) => members.iter().find_map(|(key, item)| {
                self.path.push(Step::Key(key));
                self.piece(key, true);
                let found = self.hit(key.as_bytes()).or_else(|| match item {
                    // A name that may give a value its meaning (`aws_secret_access_key`) is
                    // read together with the value, as in an env file.
                    Value::String(s)
                        if self
                            .scanner
                            .starts
                            .finder(key.as_bytes())
                            .next_from(0)
                            .is_some() =>
                    {
                        self.hit(format!("{key}={s}").as_bytes())
                    }
                    _ => None,
                });
                let found = found.or_else(|| self.visit(item));
                self.path.pop();
                found
            }),
            Value::Null | Value::Bool(_) | Value::Number(_) => None,
        }
    }

    fn piece(&mut self, text: &'v str, key: bool) {
        let origin = Origin::Json {
            prefix: self.prefix,
            root: self.root,
            ordinal: self.ordinal,
        };
        self.ordinal += 1;
        let pieces = &mut self.gathered.pieces;
        if key {
            pieces.name(origin, Cow::Borrowed(text.as_bytes()));
        } else {
            pieces.source(origin, Cow::Borrowed(text.as_bytes()));
            // A URL in the arguments is cut into its parts as a request's is: a piece may sit
            // in its path, its query or its user info.
            let head = text.get(..8).unwrap_or(text).to_ascii_lowercase();
            if (head.starts_with("http://") || head.starts_with("https://"))
                && !text.contains(char::is_whitespace)
            {
                split::url_parts(text, pieces);
            }
        }
    }

    fn hit(&mut self, text: &[u8]) -> Option<Finding> {
        let found = self.scanner.find(text).map(|(rule, decoded)| Finding {
            rule,
            place: json_place(self.scanner, self.prefix, &self.path),
            decoded,
        });
        self.gathered.settle(found)
    }
}

/// A JSON pointer as a finding's place: `body:/a/0`, `/a/0`, or `arguments` for the root.
fn json_place(scanner: &Scanner, prefix: &str, path: &[Step]) -> String {
    if path.is_empty() {
        return if prefix.is_empty() {
            "arguments".to_string()
        } else {
            prefix.to_string()
        };
    }
    let mut place = prefix.to_string();
    if !place.is_empty() {
        place.push(':');
    }
    for step in path {
        place.push('/');
        match step {
            Step::Key(key) => {
                let label = scanner.label(key.as_bytes());
                place.push_str(&label.replace('~', "~0").replace('/', "~1"));
            }
            Step::Index(i) => place.push_str(&i.to_string()),
        }
    }
    place
}

/// The path of the `n`th string or key (in [`JsonScan::visit`]'s order; a key's path is its
/// member's); `false` while it has not been reached.
fn piece_path<'v>(value: &'v Value, n: &mut usize, path: &mut Vec<Step<'v>>) -> bool {
    match value {
        Value::String(_) if *n == 0 => true,
        Value::String(_) => {
            *n -= 1;
            false
        }
        Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            path.push(Step::Index(i));
            let found = piece_path(item, n, path);
            if !found {
                path.pop();
            }
            found
        }),
        Value::Object(members) => members.iter().any(|(key, item)| {
            path.push(Step::Key(key));
            if *n == 0 {
                return true;
            }
            *n -= 1;
            let found = piece_path(item, n, path);
            if !found {
                path.pop();
            }
            found
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `a=1&b=2` as decoded pairs. `+` is kept: it is a space only in forms, and in base64 it is
/// itself.
fn form_pairs(query: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    query
        .split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = match pair.iter().position(|&b| b == b'=') {
                Some(i) => (&pair[..i], &pair[i + 1..]),
                None => (pair, &[][..]),
            };
            let decode = |s: &[u8]| {
                let mut out = Vec::with_capacity(s.len());
                percent_decode_into(s, &mut out);
                out
            };
            (decode(name), decode(value))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Decoding layers.

/// Whether a byte ends a token: a secret (or an encoded one) holds none of these. Not `;`,
/// which ends an HTML entity.
const fn ends_token(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\n'
            | b'\r'
            | 0x0b
            | 0x0c
            | 0
            | b'"'
            | b'\''
            | b'`'
            | b'<'
            | b'>'
            | b'('
            | b')'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b','
    )
}

/// Decodes each token of `hay` that holds a trigger (`next_trigger(hay, from)` finds the next
/// one at or after `from`) and collects those that changed, each followed by a newline. A
/// token ends at a byte whose class has `ends` (`TOKEN_END`, or `UNICODE_TOKEN_END`).
fn decode_tokens(
    hay: &[u8],
    ends: u8,
    next_trigger: impl Fn(&[u8], usize) -> Option<usize>,
    decode: impl Fn(&[u8], &mut Vec<u8>),
) -> Option<Vec<u8>> {
    let is_end = |b: &u8| CLASSES[usize::from(*b)] & ends != 0;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = next_trigger(hay, from) {
        let start = hay[from..at]
            .iter()
            .rposition(is_end)
            .map_or(from, |i| from + i + 1);
        let end = hay[at..]
            .iter()
            .position(is_end)
            .map_or(hay.len(), |i| at + i);
        let token = &hay[start..end];
        let before = out.len();
        decode(token, &mut out);
        if out[before..] == *token {
            out.truncate(before);
        } else {
            out.push(b'\n');
        }
        from = end;
    }
    (!out.is_empty()).then_some(out)
}

fn unicode_view(hay: &[u8]) -> Option<Vec<u8>> {
    if hay.is_ascii() {
        return None;
    }
    decode_tokens(
        hay,
        UNICODE_TOKEN_END,
        |hay, from| {
            hay[from..]
                .iter()
                .position(|&b| b >= 0x80)
                .map(|i| from + i)
        },
        |token, out| {
            let text = String::from_utf8_lossy(token);
            let mut rest = text.as_ref();
            let mut folded = String::new();
            while !rest.is_empty() {
                let ascii = rest
                    .bytes()
                    .position(|b| !b.is_ascii())
                    .unwrap_or(rest.len());
                out.extend_from_slice(&rest.as_bytes()[..ascii]);
                rest = &rest[ascii..];
                let Some(c) = rest.chars().next() else {
                    break;
                };
                rest = &rest[c.len_utf8()..];
                let Some(c) = unhide(c) else {
                    continue;
                };
                // NFKC of one character is ASCII exactly when its compatibility decomposition
                // is (composition only ever makes non-ASCII), and only ASCII matters to a
                // credential: so `Ａ` is `A`, `ﬁ` is `fi`, `é` stays.
                folded.clear();
                unicode_normalization::char::decompose_compatible(c, |d| folded.push(d));
                if folded.is_ascii() {
                    out.extend_from_slice(folded.as_bytes());
                } else {
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
            }
        },
    )
}

/// Drops a character that renders as nothing and maps a tag character to the ASCII it hides.
fn unhide(c: char) -> Option<char> {
    match c {
        '\u{00AD}'
        | '\u{034F}'
        | '\u{061C}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FEFF}'
        | '\u{E0001}'
        | '\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}' => None,
        '\u{E0020}'..='\u{E007E}' => char::from_u32(c as u32 - 0xE0000),
        _ => Some(c),
    }
}

fn escape_view(hay: &[u8]) -> Option<Vec<u8>> {
    decode_tokens(
        hay,
        TOKEN_END,
        |hay, mut from| {
            while let Some(i) = memchr::memchr2(b'\\', b'&', &hay[from..]) {
                let at = from + i;
                let next = hay.get(at + 1).copied();
                let is_escape = match hay[at] {
                    b'\\' => matches!(next, Some(b'u' | b'U' | b'x' | b'X' | b'/')),
                    _ => next == Some(b'#'),
                };
                if is_escape {
                    return Some(at);
                }
                from = at + 1;
            }
            None
        },
        unescape_into,
    )
}

fn unescape_into(token: &[u8], out: &mut Vec<u8>) {
    let push_char = |out: &mut Vec<u8>, code: u32| {
        let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    };
    let mut i = 0;
    while i < token.len() {
        let rest = &token[i..];
        if rest[0] == b'\\' && rest.len() > 1 {
            match rest[1] {
                b'u' if rest.get(2) == Some(&b'{') => {
                    if let Some(close) = rest.iter().position(|&b| b == b'}')
                        && let Some(code) = hex_number(&rest[3..close], 6)
                    {
                        push_char(out, code);
                        i += close + 1;
                        continue;
                    }
                }
                b'u' => {
                    if let Some(code) = rest.get(2..6).and_then(|h| hex_number(h, 4)) {
                        i += 6;
                        let low = token[i..]
                            .strip_prefix(b"\\u")
                            .and_then(|r| r.get(..4))
                            .and_then(|h| hex_number(h, 4))
                            .filter(|low| (0xDC00..0xE000).contains(low));
                        match low {
                            Some(low) if (0xD800..0xDC00).contains(&code) => {
                                push_char(out, 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00));
                                i += 6;
                            }
                            _ => push_char(out, code),
                        }
                        continue;
                    }
                }
                b'U' => {
                    if let Some(code) = rest.get(2..10).and_then(|h| hex_number(h, 8)) {
                        push_char(out, code);
                        i += 10;
                        continue;
                    }
                }
                b'x' | b'X' => {
                    if let Some(byte) = rest.get(2..4).and_then(|h| hex_number(h, 2)) {
                        out.push(byte as u8);
                        i += 4;
                        continue;
                    }
                }
                c @ (b'\\' | b'/' | b'"' | b'\'') => {
                    out.push(c);
                    i += 2;
                    continue;
                }
                c @ (b'n' | b'r' | b't') => {
                    out.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        _ => b'\t',
                    });
                    i += 2;
                    continue;
                }
                _ => {}
            }
        } else if rest.starts_with(b"&#") {
            let (digits, radix) = match rest.get(2) {
                Some(b'x' | b'X') => (&rest[3..], 16),
                _ => (&rest[2..], 10),
            };
            let len = digits
                .iter()
                .take(8)
                .take_while(|&&b| char::from(b).is_digit(radix))
                .count();
            let code = std::str::from_utf8(&digits[..len])
                .ok()
                .and_then(|d| u32::from_str_radix(d, radix).ok());
            if len > 0
                && let Some(code) = code
            {
                push_char(out, code);
                i += rest.len() - digits.len() + len;
                if token.get(i) == Some(&b';') {
                    i += 1;
                }
                continue;
            }
        }
        out.push(rest[0]);
        i += 1;
    }
}

/// `digits` as a hex number, if all of them (one to `max`) are hex digits.
fn hex_number(digits: &[u8], max: usize) -> Option<u32> {
    if digits.is_empty() || digits.len() > max {
        return None;
    }
    digits
        .iter()
        .try_fold(0u32, |n, &d| Some(n << 4 | u32::from(hex_value(d)?)))
}

const fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The text without its NUL bytes, where it has any: UTF-16LE of ASCII (`g\0h\0p\0_\0…`)
/// read as the ASCII, whether it came raw or percent-encoded (`g%00h%00…`, decoded first).
/// A NUL ends a token, so the characters would otherwise be scanned one by one.
fn wide_view(hay: &[u8]) -> Option<Vec<u8>> {
    memchr::memchr(0, hay)?;
    let narrowed: Vec<u8> = hay.iter().copied().filter(|&b| b != 0).collect();
    (narrowed.len() >= MIN_SECRET).then_some(narrowed)
}

fn percent_view(hay: &[u8]) -> Option<Vec<u8>> {
    decode_tokens(
        hay,
        TOKEN_END,
        |hay, mut from| {
            while let Some(i) = memchr::memchr(b'%', &hay[from..]) {
                let at = from + i;
                if is_percent_escape(&hay[at..]) {
                    return Some(at);
                }
                from = at + 1;
            }
            None
        },
        percent_decode_into,
    )
}

fn is_percent_escape(s: &[u8]) -> bool {
    s.len() >= 3 && s[0] == b'%' && s[1].is_ascii_hexdigit() && s[2].is_ascii_hexdigit()
}

fn percent_decode_into(s: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < s.len() {
        if is_percent_escape(&s[i..]) {
            out.push(hex_value(s[i + 1]).unwrap_or(0) << 4 | hex_value(s[i + 2]).unwrap_or(0));
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
}

/// What a byte is, for the scans for tokens and for base64 and hex runs.
const BASE64_CHAR: u8 = 1;
const HEX_DIGIT: u8 = 2;
const UPPER: u8 = 4;
const LOWER: u8 = 8;
const PRINTABLE: u8 = 16;
const TOKEN_END: u8 = 32;
/// Unicode tokens run across spaces: a fullwidth private-key header has ASCII spaces in it.
const UNICODE_TOKEN_END: u8 = 64;

static CLASSES: [u8; 256] = {
    let mut table = [0; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_') {
            table[i] |= BASE64_CHAR;
        }
        if b.is_ascii_hexdigit() {
            table[i] |= HEX_DIGIT;
        }
        if b.is_ascii_uppercase() {
            table[i] |= UPPER;
        }
        if b.is_ascii_lowercase() {
            table[i] |= LOWER;
        }
        if matches!(b, 0x20..=0x7e | b'\t' | b'\n' | b'\r') {
            table[i] |= PRINTABLE;
        }
        if ends_token(b) {
            table[i] |= TOKEN_END;
            if b != b' ' {
                table[i] |= UNICODE_TOKEN_END;
            }
        }
        i += 1;
    }
    table
};

/// A hex digit's value (the scan has checked that it is one).
static HEX_VALUES: [u8; 256] = {
    let mut table = [0; 256];
    let mut i = 0;
    while i < 256 {
        if let Some(v) = hex_value(i as u8) {
            table[i] = v;
        }
        i += 1;
    }
    table
};

/// A base64 character's six bits (either alphabet), or `0xFF`.
static BASE64_VALUES: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut i = 0;
    while i < 26 {
        table[b'A' as usize + i] = i as u8;
        table[b'a' as usize + i] = 26 + i as u8;
        if i < 10 {
            table[b'0' as usize + i] = 52 + i as u8;
        }
        i += 1;
    }
    table[b'+' as usize] = 62;
    table[b'-' as usize] = 62;
    table[b'/' as usize] = 63;
    table[b'_' as usize] = 63;
    table
};

/// What one pass over a view's base64 and hex runs found.
#[derive(Default)]
struct Encoded {
    base64: Option<Vec<u8>>,
    hex: Option<Vec<u8>>,
    /// A run that is an AWS-style secret key on its own ([`is_bare_secret`]).
    bare_secret: bool,
}

/// The rule a bare secret key is found under.
const BARE_SECRET_RULE: &str = "dlp:cloud-secret-key";

/// The base64 and hex views of `hay`, found in one pass over it: hex runs are parts of
/// base64 runs. `boundaries` are where pieces were joined: runs are also decoded from there.
///
/// A run long enough to decode holds an aligned block of eight base64 characters, so the pass
/// tests blocks of eight without a branch and looks closer only around a full one: words and
/// punctuation cost a fraction of a byte-by-byte walk.
fn encoded_views(hay: &[u8], boundaries: &[usize]) -> Encoded {
    let mut encoded = encoded_runs(hay, boundaries);
    // Base64 wrapped across lines (MIME, PEM) is decoded whole too: a secret broken at a line
    // end decodes to two halves that match nothing, line by line.
    if let Some(joined) = unwrapped(hay) {
        let whole = encoded_runs(&joined, &[]);
        if let Some(whole) = whole.base64 {
            let view = encoded.base64.get_or_insert_with(Vec::new);
            if !view.is_empty() {
                view.push(b'\n');
            }
            view.extend_from_slice(&whole);
        }
    }
    encoded
}

/// `hay` without the line breaks (`\n`, `\r\n`) that wrap base64: one that ends a line of at
/// least [`MIN_BASE64`] base64 characters and is followed by another; `None` when there is
/// none.
fn unwrapped(hay: &[u8]) -> Option<Vec<u8>> {
    let is_b64 = |b: u8| CLASSES[usize::from(b)] & BASE64_CHAR != 0;
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(offset) = hay[at..].iter().position(|&b| b == b'\n') {
        let nl = at + offset;
        at = nl + 1;
        let line_end = if nl > 0 && hay[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        let wraps = line_end >= MIN_BASE64
            && hay[line_end - MIN_BASE64..line_end]
                .iter()
                .all(|&b| is_b64(b))
            && hay.get(nl + 1).is_some_and(|&b| is_b64(b));
        if wraps {
            let joined = out.get_or_insert_with(|| Vec::with_capacity(hay.len()));
            joined.extend_from_slice(&hay[copied..line_end]);
            copied = nl + 1;
        }
    }
    let mut joined = out?;
    joined.extend_from_slice(&hay[copied..]);
    Some(joined)
}

/// The base64 and hex views of `hay`'s runs (see [`encoded_views`]).
fn encoded_runs(hay: &[u8], boundaries: &[usize]) -> Encoded {
    const BLOCK: usize = 8;
    const _: () = assert!(MIN_BASE64 >= 2 * BLOCK - 1 && MIN_HEX >= 2 * BLOCK - 1);
    let mut views = EncodedViews {
        boundaries,
        ..EncodedViews::default()
    };
    let mut block = 0;
    while block + BLOCK <= hay.len() {
        let full = hay[block..block + BLOCK]
            .iter()
            .fold(BASE64_CHAR, |all, &b| all & CLASSES[usize::from(b)]);
        if full == 0 {
            block += BLOCK;
            continue;
        }
        let start = hay[..block]
            .iter()
            .rposition(|&b| CLASSES[usize::from(b)] & BASE64_CHAR == 0)
            .map_or(0, |i| i + 1);
        let end = views.run(hay, start);
        block = (end / BLOCK + 1) * BLOCK;
    }
    let view = |v: Vec<u8>| (!v.is_empty()).then_some(v);
    Encoded {
        base64: view(views.base64),
        hex: view(views.hex),
        bare_secret: views.bare_secret,
    }
}

#[derive(Default)]
struct EncodedViews<'b> {
    base64: Vec<u8>,
    hex: Vec<u8>,
    bare_secret: bool,
    boundaries: &'b [usize],
    /// Scratch space for one decoding.
    decoded: Vec<u8>,
}

impl EncodedViews<'_> {
    /// Decodes the base64 run that starts at `start`, and the hex runs in it; returns its end.
    fn run(&mut self, hay: &[u8], start: usize) -> usize {
        let mut i = start;
        let mut seen = 0;
        let mut hex_start = start;
        // Where to decode from, one per alignment: the start, after a `/` that ends a
        // path-like prefix (`com/upload/Z2hw…`; no upper case yet, so not inside base64), and
        // where two pieces were joined.
        let mut from = [None; 4];
        from[0] = Some(start);
        while i < hay.len() {
            let class = CLASSES[usize::from(hay[i])];
            if class & BASE64_CHAR == 0 {
                break;
            }
            if class & HEX_DIGIT == 0 {
                self.hex_run(&hay[hex_start..i], false);
                hex_start = i + 1;
            }
            if hay[i] == b'/' && seen & UPPER == 0 {
                from[(i + 1 - start) % 4].get_or_insert(i + 1);
            }
            seen |= class;
            i += 1;
        }
        let inner = inner_boundaries(self.boundaries, start, i);
        for &b in inner {
            from[(b - start) % 4].get_or_insert(b);
        }
        let joined = !inner.is_empty();
        self.hex_run(&hay[hex_start.min(i)..i], joined);
        if i - start >= BARE_SECRET_LEN && !self.bare_secret {
            self.bare_secret = bare_secret_in(hay, start, i, inner);
        }
        // Base64 of anything mixes cases; identifiers, paths, words and hex mostly do not.
        if seen & (UPPER | LOWER) == UPPER | LOWER {
            for from in from.into_iter().flatten() {
                if i - from >= MIN_BASE64 {
                    self.decoded.clear();
                    base64_into(&hay[from..i], &mut self.decoded);
                    keep_decoded(&mut self.base64, &mut self.decoded);
                }
            }
        }
        i
    }

    /// Decodes a hex run; at both alignments when it is odd or holds a junction.
    fn hex_run(&mut self, run: &[u8], joined: bool) {
        if run.len() < MIN_HEX {
            return;
        }
        let starts: &[usize] = if run.len().is_multiple_of(2) && !joined {
            &[0]
        } else {
            &[0, 1]
        };
        for &start in starts {
            self.decoded.clear();
            self.decoded
                .extend(run[start..].chunks_exact(2).map(|pair| {
                    HEX_VALUES[usize::from(pair[0])] << 4 | HEX_VALUES[usize::from(pair[1])]
                }));
            keep_decoded(&mut self.hex, &mut self.decoded);
        }
    }
}

/// The junctions strictly inside `start..end`.
fn inner_boundaries(boundaries: &[usize], start: usize, end: usize) -> &[usize] {
    let lo = boundaries.partition_point(|&b| b <= start);
    let hi = boundaries.partition_point(|&b| b < end);
    &boundaries[lo..hi.max(lo)]
}

/// How long an AWS secret access key is: 30 random bytes in base64.
const BARE_SECRET_LEN: usize = 40;

/// Whether the base64 run `hay[start..end]` is an AWS-style secret key on its own, or holds
/// one as a URL path segment: between two `/` (or a `/` and the run's end), with nothing but
/// path-like text (no upper case) on either side in the run, so that forty characters between
/// two slashes inside a base64 blob are not taken for one; or between junctions of joined
/// pieces (`junctions`).
fn bare_secret_in(hay: &[u8], start: usize, end: usize, junctions: &[usize]) -> bool {
    if end - start == BARE_SECRET_LEN {
        return is_bare_secret(hay, start, end);
    }
    let path_like = |s: &[u8]| !s.iter().any(u8::is_ascii_uppercase);
    let mut starts = vec![start];
    starts.extend(
        (start..end)
            .filter(|&i| hay[i] == b'/' && path_like(&hay[start..i]))
            .map(|i| i + 1)
            .take(32),
    );
    starts.extend(junctions.iter().take(64));
    starts.iter().any(|&a| {
        let b = a + BARE_SECRET_LEN;
        let ends = b == end
            || (b < end && hay[b] == b'/' && path_like(&hay[b..end]))
            || junctions.contains(&b);
        ends && is_bare_secret(hay, a, b)
    })
}

/// Whether the run `hay[start..end]` (forty base64 characters, alone between characters that
/// are not base64) is an AWS-style secret key without its name: only the standard alphabet,
/// not followed by padding or glued to a dotted name; upper case, lower case and digits, at
/// least 20 distinct characters and 16 changes of character class (random base64 has about
/// 30 and 25; an identifier or a path has far fewer); decoding to bytes that are not text
/// (base64 of text is not a key); at most three `/` (not a path); and no placeholder.
fn is_bare_secret(hay: &[u8], start: usize, end: usize) -> bool {
    let run = &hay[start..end];
    if run.iter().any(|&b| b == b'-' || b == b'_') {
        return false;
    }
    if start > 0
        && matches!(
            hay[start - 1],
            b'.' | b'%' | b'\\' | b'$' | b'&' | b'~' | b'-' | b'_'
        )
    {
        return false;
    }
    if hay.get(end) == Some(&b'.') && hay.get(end + 1).is_some_and(u8::is_ascii_alphanumeric) {
        return false;
    }
    // The end of a longer padded base64 value (a window of a run, `=` after it), not a key
    // (after which `=` is an assignment).
    let inside_a_run = start > 0 && CLASSES[usize::from(hay[start - 1])] & BASE64_CHAR != 0;
    if inside_a_run && hay.get(end) == Some(&b'=') {
        return false;
    }
    if !shapes::looks_generated(run) || !run.iter().any(|b| matches!(b, b'g'..=b'z' | b'G'..=b'Z'))
    {
        return false;
    }
    if run.iter().filter(|&&b| b == b'/').count() > 3 {
        return false;
    }
    let mut seen = [false; 256];
    let distinct = run
        .iter()
        .filter(|&&b| !std::mem::replace(&mut seen[usize::from(b)], true))
        .count();
    if distinct < 20 || split::class_changes(run) < 16 {
        return false;
    }
    let mut decoded = Vec::with_capacity(30);
    base64_into(run, &mut decoded);
    let text = decoded
        .iter()
        .filter(|&&b| CLASSES[usize::from(b)] & PRINTABLE != 0)
        .count();
    if text * 5 >= decoded.len() * 4 {
        return false;
    }
    !shapes::is_placeholder(run, BARE_SECRET_LEN)
}

/// Decodes base64 of either alphabet, skipping anything else (padding) and dropping a
/// trailing partial byte.
pub(super) fn base64_into(s: &[u8], out: &mut Vec<u8>) {
    out.reserve(s.len() / 4 * 3 + 3);
    // Bits decoded and not yet a whole byte: `bits` of them, at the bottom of `acc`.
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut quads = s.chunks_exact(4);
    for quad in &mut quads {
        let v = [0, 1, 2, 3].map(|j| BASE64_VALUES[usize::from(quad[j])]);
        if bits == 0 && v.iter().all(|&v| v != 0xFF) {
            // The common case: four characters, three bytes.
            let n = v.iter().fold(0u32, |n, &v| n << 6 | u32::from(v));
            out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
        } else {
            for v in v {
                push_sextet(v, &mut acc, &mut bits, out);
            }
        }
    }
    for &c in quads.remainder() {
        push_sextet(BASE64_VALUES[usize::from(c)], &mut acc, &mut bits, out);
    }
}

/// Four base64 characters (either alphabet) as their three bytes.
pub(super) fn base64_quad(quad: &[u8]) -> Option<[u8; 3]> {
    let v = [0, 1, 2, 3].map(|j| BASE64_VALUES[usize::from(quad[j])]);
    if v.contains(&0xFF) {
        return None;
    }
    let n = v.iter().fold(0u32, |n, &v| n << 6 | u32::from(v));
    Some([(n >> 16) as u8, (n >> 8) as u8, n as u8])
}

fn push_sextet(v: u8, acc: &mut u32, bits: &mut u32, out: &mut Vec<u8>) {
    if v != 0xFF {
        *acc = *acc << 6 | u32::from(v);
        *bits += 6;
        if *bits >= 8 {
            *bits -= 8;
            out.push((*acc >> *bits) as u8);
        }
    }
}

/// Appends decoded bytes to a view if they could hold a secret: a run of printable ASCII as
/// long as the shortest one, or UTF-8 text beyond ASCII (a fullwidth secret). A digest or
/// a blob of random bytes is left out, and no layer below it runs.
fn keep_decoded(out: &mut Vec<u8>, decoded: &mut Vec<u8>) {
    narrow_utf16(decoded);
    let mut run = 0;
    let printable = decoded.iter().any(|&b| {
        // Without a branch: random bytes would mispredict one.
        run = (run + 1) * usize::from(CLASSES[usize::from(b)] & PRINTABLE != 0);
        run >= MIN_SECRET
    });
    if printable || (!decoded.is_ascii() && std::str::from_utf8(decoded).is_ok()) {
        out.extend_from_slice(decoded);
        out.push(b'\n');
    }
}

/// UTF-16LE of ASCII (PowerShell's `-EncodedCommand`, Windows tools) as the ASCII itself.
fn narrow_utf16(bytes: &mut Vec<u8>) {
    let body = bytes.strip_prefix(&[0xFF, 0xFE]).unwrap_or(bytes);
    if body.len() >= 2 * MIN_SECRET && body.iter().skip(1).step_by(2).all(|&b| b == 0) {
        *bytes = body.iter().step_by(2).copied().collect();
    }
}

#[cfg(test)]
mod tests;
