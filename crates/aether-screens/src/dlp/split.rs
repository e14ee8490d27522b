//! A secret split into pieces: the parts of one call (or of a session's recent calls) read
//! together, whatever their names, their order and their number.
//!
//! Every part of a call is a *source*: a URL's user info, host labels, path segments, query
//! names and values and fragment; each header's name and value; a form's names and values;
//! every string and key of JSON; a text body. Two searches run over them.
//!
//! - **Assembly**, for pieces in any order. A *piece* is a source that is one token and
//!   nothing else (no whitespace, quote, bracket, `,` `;` `&` `=` inside; `=` padding at its
//!   end allowed), at least [`MIN_PIECE`] bytes long: a field holding a piece of a secret holds
//!   only that. A piece that is percent-encoded, escaped, in Unicode compatibility forms, or
//!   whole base64 or hex of text is also taken decoded. Names (keys, header and parameter
//!   names) that read as words (`Content-Type`, `user_id`, `userName`) and pieces that hold a
//!   placeholder word or carry little information are not pieces.
//!
//!   A *head* is a piece holding a shape's literal (`ghp_`, at its start or after a byte the
//!   shape allows before it) or one that is only the beginning of a literal (`gh`, `AKI`); for
//!   a shape whose literal lies inside it (Telegram's `:AA`), any piece that can begin it, once
//!   some piece holds the literal's punctuation. From each head, pieces are appended one at a
//!   time, each only while the result can still become the shape: a lazy DFA of the shape's
//!   *assembly form* (its documented structure and length, stricter than what is matched in
//!   one text: see [`super::shapes::Assemble`]) is fed the piece's bytes and must not die.
//!   Orders that reach the same automaton state with the same pieces are not walked twice
//!   (for a shape whose body is a class repeated, which pieces complete it matters, not their
//!   order); a JWT is pruned instead by its header and payload decoding to JSON as they grow.
//!
//!   Heads are tried the likeliest first (the longest literals), deeper and deeper (two
//!   pieces, then three, …): the fewest pieces that make a credential are found first, and a
//!   call with many pieces that fit is not walked to the bottom of its first branch.
//!
//!   A candidate is accepted only if it is the shape's credential by its own regex and checks
//!   (and not a placeholder), its random part reads as generated for its alphabet (see
//!   [`plausibly_random`]: not hex where letters beyond `f` are expected, not words, not
//!   digits alone), no piece's share of it is a placeholder, ordinary text (words, numbers,
//!   identifiers) makes less than half of it, and it uses at least two pieces, one of them
//!   from the call being scanned. The last piece ends where the secret does, unless the shape
//!   says a piece may go on there (`…/getMe` after a bot token).
//! - **Join**, for a value encoded whole (base64, hex, percent) and then cut, or cut in order
//!   with other text around: all values end to end in the call's order; the literals are
//!   looked for across the whole, and decoded views are made of the places where a junction
//!   glues two encoded-looking fragments ([`glued_tokens`]), with base64 and hex also decoded
//!   from each junction. A match across junctions must end with its last value (or before
//!   another token in it).
//!
//! Bounds, so a crafted call costs little: [`MAX_PIECES`] pieces (later ones are still
//! scanned one by one, and joined), each at most [`MAX_PIECE`] bytes; [`MAX_HEADS`] heads;
//! [`MAX_STEPS`] pieces tried after a beginning for the whole call, [`MAX_HEAD_STEPS`] of them
//! from one head; [`MAX_DEPTH`] pieces in one candidate; the join takes [`JOIN_WINDOW`] bytes
//! from each end of a source.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

use regex_automata::hybrid::LazyStateID;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use serde_json::Value;

use super::{
    CompiledShape, Finding, Layer, Scanner, Step, escape_view, json_place, percent_decode_into,
    piece_path, shapes, unicode_view,
};

/// The shortest piece: one- and two-character fields (`v2`, `id`, `en`) are everywhere, and
/// would fit anywhere.
const MIN_PIECE: usize = 3;
/// The longest piece.
pub(super) const MAX_PIECE: usize = 512;
/// How many pieces (decoded ones included) a call's assembly looks at: one bit each.
const MAX_PIECES: usize = 128;
/// How many heads a call's assembly starts from.
const MAX_HEADS: usize = 32;
/// Where in one piece a shape whose literal is inside it may begin.
const MAX_STARTS_IN_PIECE: usize = 8;
/// How many times, for the whole call, a piece is tried after a beginning.
const MAX_STEPS: usize = 32 * 1024;
/// How many of them one head may take.
const MAX_HEAD_STEPS: usize = 8 * 1024;
/// How many pieces one candidate holds.
const MAX_DEPTH: usize = 12;
/// How much of one source the join takes from each end.
const JOIN_WINDOW: usize = 4096;

/// Where a piece came from: what a finding names.
#[derive(Clone)]
pub(super) enum Origin<'a> {
    /// The URL: host labels, user info, path segments, fragment.
    Url,
    /// A query parameter, by decoded name.
    Query(Vec<u8>),
    Header(&'a str),
    /// A form field, by decoded name.
    Form(&'a [u8]),
    /// A text body.
    Body,
    /// A JSON string or key: its number in visiting order.
    Json {
        prefix: &'a str,
        root: &'a Value,
        ordinal: usize,
    },
    /// A piece an earlier call of the session sent, and where it was then.
    Earlier(&'a str),
}

/// One piece: its text (decoded, for a variant) and the source it came from.
pub(super) struct Piece<'a> {
    pub text: Cow<'a, [u8]>,
    /// Index into [`Pieces::origins`]; a piece and its decoded variants share one, and an
    /// assembly uses at most one of them.
    pub origin: usize,
    pub layer: Option<Layer>,
}

/// A call's pieces and sources.
#[derive(Default)]
pub(super) struct Pieces<'a> {
    pub pieces: Vec<Piece<'a>>,
    pub origins: Vec<Origin<'a>>,
    /// Every source's text, in the call's order, and whether it is a value (not a name):
    /// values are what the join joins.
    pub sources: Vec<(usize, Cow<'a, [u8]>, bool)>,
}

/// Whether a byte ends a token: a piece holds none.
pub(super) fn cuts(b: u8) -> bool {
    super::ends_token(b) || matches!(b, b'&' | b';' | b'=')
}

impl<'a> Pieces<'a> {
    /// Adds one value: kept whole for the join, and a piece if it is one.
    pub fn source(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>) {
        self.add(origin, text, true);
    }

    /// Adds one name (a key, a header or parameter name): a piece if it is one and does not
    /// read as an identifier; not joined.
    pub fn name(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>) {
        self.add(origin, text, false);
    }

    /// Adds a part of a value already added whole (a URL's path segment, say): a piece if it
    /// is one, but not a source of its own (the value is joined as it was sent).
    pub fn part(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>) {
        if text.is_empty() {
            return;
        }
        let o = self.origins.len();
        self.origins.push(origin);
        if let Some((range, body)) = whole_piece(&text) {
            let piece = match &text {
                Cow::Borrowed(t) => Cow::Borrowed(&t[range]),
                Cow::Owned(t) => Cow::Owned(t[range].to_vec()),
            };
            self.piece(o, piece, body);
        }
    }

    fn add(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>, value: bool) {
        if text.is_empty() {
            return;
        }
        let o = self.origins.len();
        self.origins.push(origin);
        if let Some((range, body)) = whole_piece(&text)
            && (value || !reads_as_words(&text[range.start..range.start + body]))
        {
            let piece = match &text {
                Cow::Borrowed(t) => Cow::Borrowed(&t[range]),
                Cow::Owned(t) => Cow::Owned(t[range].to_vec()),
            };
            self.piece(o, piece, body);
        }
        self.sources.push((o, text, value));
    }

    /// Adds a piece (`body` bytes of it before any `=` padding) and what it decodes to.
    fn piece(&mut self, origin: usize, text: Cow<'a, [u8]>, body: usize) {
        if self.pieces.len() >= MAX_PIECES {
            return;
        }
        let variants = decoded_variants(&text[..body]);
        if text.len() >= MIN_PIECE {
            self.pieces.push(Piece {
                text,
                origin,
                layer: None,
            });
        }
        for (layer, text) in variants {
            if self.pieces.len() < MAX_PIECES && text.len() >= MIN_PIECE {
                self.pieces.push(Piece {
                    text: Cow::Owned(text),
                    origin,
                    layer: Some(layer),
                });
            }
        }
    }

    /// Whether a piece was sent by the call being scanned (not kept from an earlier one).
    fn is_current(&self, p: usize) -> bool {
        !matches!(self.origins[self.pieces[p].origin], Origin::Earlier(_))
    }

    /// The place a finding names for a set of pieces.
    fn place(&self, scanner: &Scanner, used: &[usize]) -> String {
        let origins: Vec<usize> = used.iter().map(|&p| self.pieces[p].origin).collect();
        let mut texts: Vec<&[u8]> = used.iter().map(|&p| &*self.pieces[p].text).collect();
        texts.extend(
            self.sources
                .iter()
                .filter(|(o, _, _)| origins.contains(o))
                .map(|(_, t, _)| &**t),
        );
        self.place_of(scanner, &origins, &texts)
    }

    /// The place a finding names for pieces from `origins`: their names joined, without any of
    /// `texts` (the pieces themselves, which may be names: a JSON key, a header name).
    pub(super) fn place_of(&self, scanner: &Scanner, origins: &[usize], texts: &[&[u8]]) -> String {
        let mut names: Vec<String> = Vec::new();
        for &o in origins {
            let name = match &self.origins[o] {
                Origin::Url => "url".to_string(),
                Origin::Query(name) => format!("query:{}", scanner.label(name)),
                Origin::Header(name) => format!("header:{}", scanner.label(name.as_bytes())),
                Origin::Form(name) => format!("body:{}", scanner.label(name)),
                Origin::Body => "body".to_string(),
                Origin::Json {
                    prefix,
                    root,
                    ordinal,
                } => {
                    let mut path: Vec<Step> = Vec::new();
                    piece_path(root, &mut { *ordinal }, &mut path);
                    json_place(scanner, prefix, &path)
                }
                Origin::Earlier(place) => format!("{place} (an earlier call)"),
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let mut place = names.join(" + ");
        for text in texts {
            if text.len() >= 4
                && let Ok(text) = std::str::from_utf8(text)
            {
                place = place.replace(text, "(redacted)");
            }
        }
        place
    }
}

/// Where the one token a source is lies in it (surrounding whitespace left out), and how long
/// it is before any `=` padding; `None` when the source holds more than one token.
fn whole_piece(text: &[u8]) -> Option<(std::ops::Range<usize>, usize)> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let end = text.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    let token = &text[start..end];
    let padding = token.iter().rev().take_while(|&&b| b == b'=').count();
    let body = token.len() - padding;
    let whole = padding <= 2
        && (MIN_PIECE..=MAX_PIECE).contains(&body)
        && !token[..body].iter().any(|&b| cuts(b));
    whole.then_some((start..end, body))
}

/// Whether a text reads as words rather than random characters: no digits, and each part
/// between `_`, `-` and `.` is in one case (`API`, `key`), capitalised (`Id`), or words in
/// camel case (`GitHub`, `userName`: each capital followed by two lower-case letters or
/// more). Random characters seldom do from six on: a lone lower-case letter between capitals
/// (`OFFyTrAA`) or a digit gives them away.
fn reads_as_words(text: &[u8]) -> bool {
    if text.iter().any(u8::is_ascii_digit) || !text.iter().any(u8::is_ascii_alphabetic) {
        return false;
    }
    text.split(|&b| matches!(b, b'_' | b'-' | b'.'))
        .all(|part| {
            if !part.iter().all(u8::is_ascii_alphabetic) {
                return false;
            }
            if part.iter().all(u8::is_ascii_uppercase)
                || part.iter().skip(1).all(u8::is_ascii_lowercase)
            {
                return true;
            }
            // Camel case: a chunk begins at each capital that a lower-case letter follows, and
            // is capitals only, or one capital (or none, first) and two lower-case letters or more.
            let mut from = 0;
            (1..=part.len()).all(|i| {
                let cut = i == part.len()
                    || (part[i].is_ascii_uppercase()
                        && part.get(i + 1).is_some_and(u8::is_ascii_lowercase));
                if !cut {
                    return true;
                }
                let chunk = &part[from..i];
                from = i;
                chunk.iter().all(u8::is_ascii_uppercase)
                    || (chunk.iter().skip(1).all(u8::is_ascii_lowercase)
                        && chunk.iter().filter(|b| b.is_ascii_lowercase()).count() >= 2)
            })
        })
}

/// Whether a share of an assembled secret reads as ordinary text rather than a piece of it:
/// words; and, where the secret's class (`class`) has letters beyond hex and the share is not
/// hex where the shape's random part may be (`hex_ok`), a number, or eight characters or more
/// without a capital where the class has both cases (an identifier, a digest: a random piece
/// that long has one almost always).
fn reads_as_ordinary(share: &[u8], class: Option<&[bool]>, hex_ok: bool) -> bool {
    if reads_as_words(share) {
        return true;
    }
    let Some(class) = class else {
        return false;
    };
    let has = |from: u8, to: u8| (from..=to).any(|b| class[usize::from(b)]);
    let hex = share
        .iter()
        .all(|b| b.is_ascii_hexdigit() || !b.is_ascii_alphanumeric());
    if (hex_ok && hex) || !(has(b'g', b'z') || has(b'G', b'Z')) {
        return false;
    }
    let both_cases = has(b'a', b'z') && has(b'A', b'Z');
    share.iter().all(u8::is_ascii_digit)
        || (both_cases && share.len() >= 8 && !share.iter().any(u8::is_ascii_uppercase))
}

/// Whether a text could be a piece of a secret: long enough, no placeholder word, and (from
/// eight bytes) not one character repeated, a run, or a short pattern.
fn could_be_a_piece(text: &[u8]) -> bool {
    text.len() >= MIN_PIECE && !shapes::holds_placeholder(text)
}

/// What a whole piece decodes to, where it is encoded: percent, escapes, Unicode forms, and
/// base64 or hex of printable text.
fn decoded_variants(text: &[u8]) -> Vec<(Layer, Vec<u8>)> {
    let mut out = Vec::new();
    if text.windows(3).any(super::is_percent_escape) {
        let mut decoded = Vec::with_capacity(text.len());
        percent_decode_into(text, &mut decoded);
        out.push((Layer::Percent, decoded));
    }
    if memchr::memchr2(b'\\', b'&', text).is_some()
        && let Some(mut decoded) = escape_view(text)
    {
        decoded.pop();
        out.push((Layer::Escape, decoded));
    }
    if !text.is_ascii()
        && let Some(mut decoded) = unicode_view(text)
    {
        decoded.pop();
        out.push((Layer::Unicode, decoded));
    }
    let printable = |d: &[u8]| !d.is_empty() && d.iter().all(|b| (0x21..0x7f).contains(b));
    // Base64 of text: its first four characters decode to three printable bytes (which few
    // words and identifiers do), so most pieces are not decoded whole.
    let first_quad = |t: &[u8]| super::base64_quad(&t[..4]).is_some_and(|head| printable(&head));
    if text.len() >= 4
        && text.len() % 4 != 1
        && text
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'))
        && first_quad(text)
    {
        let mut decoded = Vec::new();
        super::base64_into(text, &mut decoded);
        if printable(&decoded) {
            out.push((Layer::Base64, decoded));
        }
    }
    let printable_pair = |t: &[u8]| {
        let byte = super::hex_value(t[0]).unwrap_or(0) << 4 | super::hex_value(t[1]).unwrap_or(0);
        (0x21..0x7f).contains(&byte)
    };
    if text.len() >= 4
        && text.len().is_multiple_of(2)
        && text.iter().all(u8::is_ascii_hexdigit)
        && printable_pair(text)
    {
        let decoded: Vec<u8> = text
            .chunks_exact(2)
            .map(|p| super::hex_value(p[0]).unwrap_or(0) << 4 | super::hex_value(p[1]).unwrap_or(0))
            .collect();
        if printable(&decoded) {
            out.push((Layer::Hex, decoded));
        }
    }
    out
}

/// A URL's parts as pieces of a value added whole (a URL among a call's arguments): user info,
/// path segments, query values and the fragment's — not its host labels, which are the same
/// in every call to a site and would only fill out a guess.
pub(super) fn url_parts<'a>(url: &'a str, pieces: &mut Pieces<'a>) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (before_fragment, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let (authority, path) = before_query
        .find('/')
        .map_or((before_query, ""), |i| before_query.split_at(i));
    let userinfo = authority.rsplit_once('@').map_or("", |(u, _)| u);
    let decoded = |s: &str| {
        let mut out = Vec::with_capacity(s.len());
        percent_decode_into(s.as_bytes(), &mut out);
        out
    };
    for part in userinfo.split(':') {
        pieces.part(Origin::Url, Cow::Owned(decoded(part)));
    }
    for segment in path.split('/') {
        pieces.part(Origin::Url, Cow::Owned(decoded(segment)));
    }
    for (name, value) in super::form_pairs(query.as_bytes()) {
        pieces.part(Origin::Query(name), Cow::Owned(value));
    }
    for (name, value) in super::form_pairs(fragment.as_bytes()) {
        pieces.part(Origin::Url, Cow::Owned(name));
        pieces.part(Origin::Url, Cow::Owned(value));
    }
}

/// A URL's parts as sources: user info, host labels, path segments, query names and values,
/// and the fragment's.
pub(super) fn url_pieces<'a>(url: &'a str, pieces: &mut Pieces<'a>) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (before_fragment, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let (authority, path) = before_query
        .find('/')
        .map_or((before_query, ""), |i| before_query.split_at(i));
    let (userinfo, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    let decoded = |s: &str| {
        let mut out = Vec::with_capacity(s.len());
        percent_decode_into(s.as_bytes(), &mut out);
        out
    };
    for part in userinfo.split(':') {
        pieces.source(Origin::Url, Cow::Owned(decoded(part)));
    }
    for label in host.split(['.', ':']) {
        pieces.source(Origin::Url, Cow::Borrowed(label.as_bytes()));
    }
    for segment in path.split('/') {
        pieces.source(Origin::Url, Cow::Owned(decoded(segment)));
    }
    for (name, value) in super::form_pairs(query.as_bytes()) {
        pieces.name(Origin::Query(name.clone()), Cow::Owned(name.clone()));
        pieces.source(Origin::Query(name), Cow::Owned(value));
    }
    for (name, value) in super::form_pairs(fragment.as_bytes()) {
        pieces.source(Origin::Url, Cow::Owned(name));
        pieces.source(Origin::Url, Cow::Owned(value));
    }
}

/// How many times the character class (upper, lower, digit, other) changes along `s`.
pub(super) fn class_changes(s: &[u8]) -> usize {
    let class = |b: u8| match b {
        b'A'..=b'Z' => 0,
        b'a'..=b'z' => 1,
        b'0'..=b'9' => 2,
        _ => 3,
    };
    s.windows(2).filter(|p| class(p[0]) != class(p[1])).count()
}

/// The lazy DFA of a shape's assembly form, anchored at its start: it tells, byte by byte,
/// whether what has been put together can still become the shape, and whether it is one.
pub(super) fn automaton(pattern: &str) -> DFA {
    DFA::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(DFA::config().match_kind(MatchKind::All))
        .build(pattern)
        .unwrap_or_else(|e| panic!("DLP assembly pattern {pattern:?} does not build: {e}"))
}

/// Whether the random part of an assembled candidate reads as generated for the class it is
/// drawn from (`class`), judged on each run of letters and digits of 16 or more: hex where the
/// class has letters beyond `f` is a digest or an id, not this secret (unless the shape's
/// random part may be hex, `hex_ok`); where the class has both cases, lower case without upper
/// case is words, and a generated run changes between upper case, lower case and digits at
/// least every third character; a run of 24 or more holds letters (not a number) and, where
/// the class is hex, digits too. A run of random characters fails any of these with a
/// probability below one in ten thousand.
fn plausibly_random(secret: &[u8], class: &[bool], hex_ok: bool) -> bool {
    let has = |from: u8, to: u8| (from..=to).any(|b| class[usize::from(b)]);
    let beyond_f = has(b'g', b'z') || has(b'G', b'Z');
    let both_cases = has(b'a', b'z') && has(b'A', b'Z');
    let letters = has(b'a', b'z') || has(b'A', b'Z');
    let digits = has(b'0', b'9');
    secret
        .split(|b| !b.is_ascii_alphanumeric())
        .filter(|run| run.len() >= 16)
        .all(|run| {
            let lower = run.iter().any(u8::is_ascii_lowercase);
            let upper = run.iter().any(u8::is_ascii_uppercase);
            let digit = run.iter().any(u8::is_ascii_digit);
            let hex = run.iter().all(u8::is_ascii_hexdigit) && !(lower && upper);
            if hex && beyond_f && !hex_ok {
                return false;
            }
            if both_cases && !hex && lower && !upper {
                return false;
            }
            if both_cases && !hex && class_changes(run) * 3 < run.len() {
                return false;
            }
            if run.len() >= 24 && letters && !(lower || upper) {
                return false;
            }
            !(run.len() >= 24 && hex && !beyond_f && digits && !digit)
        })
}

/// The credential the pieces form together, if any.
pub(super) fn find(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    if pieces.sources.len() < 2 {
        return None;
    }
    assemble(scanner, pieces).or_else(|| join(scanner, pieces))
}

/// Where a shape may begin: a piece, and where in it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    shape: usize,
    piece: usize,
    from: usize,
}

/// The lazy DFAs' caches for one call, created for a shape when it is first needed.
#[derive(Debug)]
struct Caches(Vec<Option<Cache>>);

/// The lazy DFAs' caches, kept from call to call (a fresh cache builds every state it meets
/// again, which costs far more than following it): a set per call in flight, a few kept.
#[derive(Debug, Default)]
pub(super) struct CachePool(Mutex<Vec<Caches>>);

/// How many sets of caches the pool keeps.
const POOLED: usize = 8;

impl CachePool {
    fn take(&self, scanner: &Scanner) -> Caches {
        let pooled = self.0.lock().ok().and_then(|mut pool| pool.pop());
        pooled.unwrap_or_else(|| Caches(scanner.shapes.iter().map(|_| None).collect()))
    }

    fn give(&self, caches: Caches) {
        if let Ok(mut pool) = self.0.lock()
            && pool.len() < POOLED
        {
            pool.push(caches);
        }
    }
}

impl Caches {
    fn of<'c>(
        &'c mut self,
        scanner: &'c Scanner,
        shape: usize,
    ) -> Option<(&'c DFA, &'c mut Cache)> {
        let dfa = scanner.shapes[shape].split.as_ref()?;
        let cache = self.0[shape].get_or_insert_with(|| dfa.create_cache());
        Some((dfa, cache))
    }
}

/// The heads of a call, the likeliest first: pieces holding a literal where its shape allows
/// it (the longest literals first), pieces that are the beginning of a literal; for shapes
/// whose literal lies inside them, when some piece holds a part of the literal with its
/// punctuation, every place after a byte their shape allows before them from which the
/// shape's automaton does not die. A shape with a fixed marker (OpenAI's `T3BlbkFJ`) is begun
/// only if some piece holds a part of the marker.
fn heads(scanner: &Scanner, pieces: &[Piece], caches: &mut Caches) -> Vec<Head> {
    let mut known: Vec<Option<bool>> = vec![None; scanner.shapes.len()];
    let mut possible = |s: usize| {
        *known[s].get_or_insert_with(|| {
            let shape = &scanner.shapes[s];
            shape.split.is_some()
                && shape.marker.is_none_or(|marker| {
                    pieces
                        .iter()
                        .any(|p| holds_part_of(marker.as_bytes(), &p.text, false))
                })
        })
    };
    // The shapes of exactly this literal: a shorter literal's (`sk-` for `sk-ant-`) would
    // begin the same piece with less to go on.
    let of_literal = |lit: usize| {
        let literal = scanner.literals[lit];
        scanner.tries[lit]
            .iter()
            .copied()
            .filter(move |&s| shapes::SHAPES[s].starts.contains(&literal))
    };
    let mut literal_heads: Vec<(usize, Head)> = Vec::new();
    let mut partial_heads: Vec<Head> = Vec::new();
    // One pass over all the pieces, a line each (no literal holds a line break), rather than
    // one per piece.
    let mut all = Vec::with_capacity(pieces.iter().map(|p| p.text.len() + 1).sum());
    let mut begins = Vec::with_capacity(pieces.len());
    let mut present = [false; 256];
    for piece in pieces {
        begins.push(all.len());
        all.extend_from_slice(&piece.text);
        all.push(b'\n');
        for &b in piece.text.iter() {
            present[usize::from(b)] = true;
        }
    }
    let mut literals = scanner.starts.finder(&all);
    let mut at = 0;
    while let Some(found) = literals.next_from(at) {
        at = found.start + 1;
        let p = begins.partition_point(|&b| b <= found.start) - 1;
        let text: &[u8] = &pieces[p].text;
        let start = found.start - begins[p];
        for s in of_literal(found.id) {
            let shape = &scanner.shapes[s];
            let from = match shape.back {
                Some(back) => back(text, start),
                None => Some(start),
            };
            if let Some(from) = from
                && possible(s)
                && shape.before.allows_in_piece(text, from)
            {
                literal_heads.push((
                    found.end - found.start,
                    Head {
                        shape: s,
                        piece: p,
                        from,
                    },
                ));
            }
        }
    }
    for (p, piece) in pieces.iter().enumerate() {
        let text: &[u8] = &piece.text;
        if let Some(literals) = scanner.partial.get(text) {
            for &lit in literals {
                for s in of_literal(lit) {
                    if scanner.shapes[s].back.is_none() && possible(s) {
                        partial_heads.push(Head {
                            shape: s,
                            piece: p,
                            from: 0,
                        });
                    }
                }
            }
        }
    }
    literal_heads.sort_by_key(|&(len, _)| std::cmp::Reverse(len));
    let mut heads: Vec<Head> = Vec::new();
    let push = |heads: &mut Vec<Head>, head: Head| {
        if heads.len() < MAX_HEADS && !heads.contains(&head) {
            heads.push(head);
        }
    };
    for head in literal_heads
        .into_iter()
        .map(|(_, h)| h)
        .chain(partial_heads)
    {
        push(&mut heads, head);
    }
    for (s, shape) in scanner.shapes.iter().enumerate() {
        if shape.back.is_none() || !possible(s) {
            continue;
        }
        let literals = shapes::SHAPES[s].starts;
        let punctuated = literals
            .iter()
            .flat_map(|lit| lit.bytes())
            .any(|b| !b.is_ascii_alphanumeric() && present[usize::from(b)]);
        let gated = punctuated
            && pieces.iter().any(|p| {
                literals
                    .iter()
                    .any(|lit| holds_part_of(lit.as_bytes(), &p.text, true))
            });
        if !gated {
            continue;
        }
        let Some((dfa, cache)) = caches.of(scanner, s) else {
            continue;
        };
        let Ok(start) = dfa.start_state(cache, &start::Config::new().anchored(Anchored::Yes))
        else {
            continue;
        };
        for (p, piece) in pieces.iter().enumerate() {
            let text: &[u8] = &piece.text;
            let starts = (0..text.len())
                .filter(|&from| shape.before.allows_in_piece(text, from))
                .take(MAX_STARTS_IN_PIECE);
            for from in starts {
                let lives = text[from..].iter().try_fold(start, |state, &b| {
                    dfa.next_state(cache, state, b)
                        .ok()
                        .filter(|next| !next.is_dead())
                });
                if lives.is_some() {
                    push(
                        &mut heads,
                        Head {
                            shape: s,
                            piece: p,
                            from,
                        },
                    );
                }
            }
        }
    }
    heads
}

/// Whether `text` holds a part of `literal`: three bytes of it in a row, or its beginning at
/// the end of `text`, or its end at the beginning of `text` (two bytes at least, or one with
/// punctuation). With `punctuated`, only parts with punctuation count (`:` of Telegram's
/// `:AA`; the letters alone, `AA`, are everywhere).
fn holds_part_of(literal: &[u8], text: &[u8], punctuated: bool) -> bool {
    let counts = |s: &[u8]| {
        let punct = s.iter().any(|b| !b.is_ascii_alphanumeric());
        if punctuated {
            punct
        } else {
            punct || s.len() >= 2
        }
    };
    if punctuated
        && !text
            .iter()
            .any(|b| !b.is_ascii_alphanumeric() && literal.contains(b))
    {
        return false;
    }
    literal
        .windows(literal.len().min(3))
        .any(|w| counts(w) && text.windows(w.len()).any(|t| t == w))
        || (1..literal.len()).any(|k| {
            (counts(&literal[..k]) && text.ends_with(&literal[..k]))
                || (counts(&literal[k..]) && text.starts_with(&literal[k..]))
        })
}

fn assemble(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    if pieces.pieces.len() < 2 {
        return None;
    }
    let mut caches = scanner.split_caches.take(scanner);
    let found = assemble_with(scanner, pieces, &mut caches);
    scanner.split_caches.give(caches);
    found
}

fn assemble_with(scanner: &Scanner, pieces: &Pieces, caches: &mut Caches) -> Option<Finding> {
    let count = pieces.pieces.len().min(MAX_PIECES);
    let candidates = &pieces.pieces[..count];
    let mut heads = heads(scanner, candidates, caches);
    if heads.is_empty() {
        return None;
    }
    // Pieces are judged only when the search reaches them.
    let mut plausible: Vec<Option<bool>> = vec![None; count];
    heads.retain(|h| {
        *plausible[h.piece].get_or_insert_with(|| could_be_a_piece(&candidates[h.piece].text))
    });
    // For each piece, the pieces that share its source (itself and its decodings, added next
    // to it).
    let mut same: Vec<u128> = vec![0; count];
    let mut run = 0;
    while run < count {
        let origin = candidates[run].origin;
        let end = run
            + candidates[run..]
                .iter()
                .take_while(|c| c.origin == origin)
                .count();
        let mask = (run..end).fold(0u128, |mask, j| mask | 1u128 << j);
        same[run..end].fill(mask);
        run = end;
    }
    // The most random-looking first: a secret's own pieces before names and words.
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_cached_key(|&p| {
        let text = &candidates[p].text;
        std::cmp::Reverse(class_changes(text) * 1024 / text.len().max(1))
    });
    let current: Vec<bool> = (0..count).map(|p| pieces.is_current(p)).collect();
    let mut budget = MAX_STEPS;
    let mut seen: HashSet<(LazyStateID, u128)> = HashSet::new();
    for head in heads {
        let shape = &scanner.shapes[head.shape];
        let Some((dfa, cache)) = caches.of(scanner, head.shape) else {
            continue;
        };
        // Each head its share, so that one with many ways to go on does not starve the rest.
        let mut share = budget.min(MAX_HEAD_STEPS);
        let given = share;
        let mut walk = Walk {
            shape,
            dfa,
            cache,
            candidates,
            same: &same,
            order: &order,
            current: &current,
            budget: &mut share,
            plausible: &mut plausible,
            seen: &mut seen,
            limit: 0,
            cut_off: false,
            text: Vec::new(),
            used: Vec::new(),
            at: Vec::new(),
        };
        let found = walk.begun_at(head);
        budget -= given - share;
        if let Some(used) = found {
            let decoded = used
                .iter()
                .filter_map(|&p| candidates[p].layer)
                .take(1)
                .collect();
            return Some(Finding {
                rule: shape.rule,
                place: pieces.place(scanner, &used),
                decoded,
            });
        }
        if budget == 0 {
            break;
        }
    }
    None
}

/// One head's search: pieces appended while the shape's automaton lives.
struct Walk<'w, 'p> {
    shape: &'w CompiledShape,
    dfa: &'w DFA,
    cache: &'w mut Cache,
    candidates: &'w [Piece<'p>],
    same: &'w [u128],
    order: &'w [usize],
    current: &'w [bool],
    budget: &'w mut usize,
    /// Whether each piece could be a secret's, once judged ([`could_be_a_piece`]).
    plausible: &'w mut Vec<Option<bool>>,
    /// Automaton states reached with a set of pieces in this round: another order to the
    /// same is not walked.
    seen: &'w mut HashSet<(LazyStateID, u128)>,
    /// How many pieces a candidate may hold in this round, and whether one that could have
    /// gone on was stopped there.
    limit: usize,
    cut_off: bool,
    /// The candidate so far, the pieces in it, and where each begins in it.
    text: Vec<u8>,
    used: Vec<usize>,
    at: Vec<usize>,
}

/// What feeding a piece to the automaton left.
struct Fed {
    /// The state after the piece, or before the byte where it died.
    state: LazyStateID,
    /// Where in the piece the automaton died, if it did.
    died: Option<usize>,
    /// Where in the piece a match last ended (before that byte), if one did.
    last_end: Option<usize>,
}

/// The automaton gave up (its cache was cleared, which invalidates the states held): the
/// search stops.
struct GaveUp;

impl Walk<'_, '_> {
    /// The pieces of a credential begun at `head`, if any.
    fn begun_at(&mut self, head: Head) -> Option<Vec<usize>> {
        let clears = self.cache.clear_count();
        let anchored = start::Config::new().anchored(Anchored::Yes);
        let start = self.dfa.start_state(self.cache, &anchored).ok()?;
        let text = &self.candidates[head.piece].text[head.from..];
        let state = self.feed(start, text).ok()?;
        if state.died.is_some() {
            return None;
        }
        if self.shape.viable.is_some_and(|viable| !viable(text)) {
            return None;
        }
        // Deeper and deeper: the fewest pieces that make the credential are found first, and
        // a call with many pieces that fit is not walked to the bottom of its first branch.
        for limit in 2..=MAX_DEPTH {
            self.text.clear();
            self.text.extend_from_slice(text);
            self.used = vec![head.piece];
            self.at = vec![0];
            self.seen.clear();
            self.limit = limit;
            self.cut_off = false;
            let found = self.extend(state.state, self.same[head.piece]);
            if self.cache.clear_count() != clears {
                return None;
            }
            match found {
                Ok(true) => return Some(self.used.clone()),
                Ok(false) if self.cut_off && *self.budget > 0 => {}
                _ => return None,
            }
        }
        None
    }

    /// The automaton fed `bytes` from `state`.
    fn feed(&mut self, mut state: LazyStateID, bytes: &[u8]) -> Result<Fed, GaveUp> {
        let mut last_end = None;
        for (i, &b) in bytes.iter().enumerate() {
            let next = self
                .dfa
                .next_state(self.cache, state, b)
                .map_err(|_| GaveUp)?;
            // A lazy DFA reports a match one byte late: this state says one ended before `b`.
            if next.is_match() {
                last_end = Some(i);
            }
            if next.is_dead() {
                return Ok(Fed {
                    state,
                    died: Some(i),
                    last_end,
                });
            }
            state = next;
        }
        Ok(Fed {
            state,
            died: None,
            last_end,
        })
    }

    /// Whether a match of the assembly form ends where `state` is.
    fn ends_here(&mut self, state: LazyStateID) -> Result<bool, GaveUp> {
        let eoi = self
            .dfa
            .next_eoi_state(self.cache, state)
            .map_err(|_| GaveUp)?;
        Ok(eoi.is_match())
    }

    /// Appends each piece not yet used, in turn, while the automaton lives; `true` when a
    /// credential has been put together (then `used` holds its pieces).
    fn extend(&mut self, state: LazyStateID, mask: u128) -> Result<bool, GaveUp> {
        for k in 0..self.order.len() {
            let p = self.order[k];
            if mask & 1u128 << p != 0 {
                continue;
            }
            if *self.budget == 0 {
                return Ok(false);
            }
            *self.budget -= 1;
            let Fed {
                state: next,
                died,
                last_end,
            } = self.feed(state, &self.candidates[p].text)?;
            if died == Some(0) {
                continue;
            }
            let text = &self.candidates[p].text;
            if !*self.plausible[p].get_or_insert_with(|| could_be_a_piece(text)) {
                continue;
            }
            let begin = self.text.len();
            self.text.extend_from_slice(&self.candidates[p].text);
            self.used.push(p);
            self.at.push(begin);
            let found = match died {
                // A match may end inside the last piece, where the shape says a piece may go on.
                Some(_) => last_end.is_some_and(|i| {
                    i > 0
                        && self.shape.goes_on_after.contains(&self.text[begin + i])
                        && self.accept(begin + i)
                }),
                None => {
                    let deeper = self.used.len() < self.limit;
                    self.cut_off |= !deeper;
                    (self.ends_here(next)? && self.accept(self.text.len()))
                        || (deeper
                            && self.shape.viable.is_none_or(|viable| viable(&self.text))
                            && (self.shape.viable.is_some()
                                || self.seen.insert((next, mask | self.same[p])))
                            && self.extend(next, mask | self.same[p])?)
                }
            };
            if found {
                return Ok(true);
            }
            self.text.truncate(begin);
            self.used.pop();
            self.at.pop();
        }
        Ok(false)
    }

    /// Whether the candidate, its assembly form ending at `end`, is the shape's credential.
    fn accept(&self, end: usize) -> bool {
        if self.used.len() < 2 || !self.used.iter().any(|&p| self.current[p]) {
            return false;
        }
        let Some(matched) = self.shape.match_from(&self.text, 0) else {
            return false;
        };
        let last = *self.at.last().unwrap_or(&0);
        if matched.end <= last || matched.secret.end > end {
            return false;
        }
        let secret = &self.text[matched.secret.clone()];
        let class = matched.group.and_then(|g| self.shape.random[g].as_deref());
        if let Some(class) = class
            && !plausibly_random(secret, class, self.shape.hex_ok)
        {
            return false;
        }
        // No piece's share of the random part may be a placeholder on its own, and ordinary
        // text (`GitHub`, `PUBLIC`, `486`, `ssh-ed25519`) may not make half of it.
        let mut ordinary = 0;
        for (i, &from) in self.at.iter().enumerate() {
            let to = self.at.get(i + 1).copied().unwrap_or(self.text.len());
            let lo = from.max(matched.secret.start);
            let hi = to.min(matched.secret.end);
            if hi <= lo {
                continue;
            }
            let share = &self.text[lo..hi];
            if shapes::holds_placeholder(share) {
                return false;
            }
            if share.len() >= MIN_PIECE && reads_as_ordinary(share, class, self.shape.hex_ok) {
                ordinary += share.len();
            }
        }
        ordinary * 2 < secret.len()
    }
}

/// All values end to end, for a value encoded whole and then cut: the literals are looked
/// for across the whole of it, and the decoded views are made of the tokens a junction runs
/// through ([`glued_tokens`]); a token inside one value was decoded in that value's own scan.
fn join(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    let windows: Vec<(usize, Cow<[u8]>)> = pieces
        .sources
        .iter()
        .filter(|(_, _, value)| *value)
        .map(|(o, text, _)| {
            let text: &[u8] = text;
            let clipped = if text.len() > 2 * JOIN_WINDOW {
                Cow::Owned(
                    [
                        &text[..JOIN_WINDOW],
                        b"\n",
                        &text[text.len() - JOIN_WINDOW..],
                    ]
                    .concat(),
                )
            } else {
                Cow::Borrowed(text)
            };
            (*o, clipped)
        })
        .collect();
    let joined = |range: std::ops::Range<usize>| {
        let windows = &windows[range];
        let mut text = Vec::with_capacity(windows.iter().map(|(_, w)| w.len()).sum());
        let mut boundaries = Vec::with_capacity(windows.len());
        for (_, w) in windows {
            boundaries.push(text.len());
            text.extend_from_slice(w);
        }
        (text, boundaries)
    };
    let hit = |range: std::ops::Range<usize>| {
        let (text, boundaries) = joined(range);
        if let Some(rule) = scanner.first_rule(&text, &boundaries) {
            return Some((rule, Vec::new()));
        }
        let (glued, junctions) = glued_tokens(&text, &boundaries);
        scanner.find_joined(&glued, &junctions)
    };
    let n = windows.len();
    if n < 2 {
        return None;
    }
    let (rule, decoded) = hit(0..n)?;
    // The fewest sources that still hold it: from the left, then from the right.
    let (mut lo, mut hi) = (0, n - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if hit(mid..n).is_some() {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let first = lo;
    let (mut lo, mut hi) = (first + 1, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if hit(first..mid).is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let last = lo;
    let origins: Vec<usize> = windows[first..last].iter().map(|(o, _)| *o).collect();
    let texts: Vec<&[u8]> = windows[first..last].iter().map(|(_, t)| &t[..]).collect();
    let place = pieces.place_of(scanner, &origins, &texts);
    Some(Finding {
        rule,
        place,
        decoded,
    })
}

/// The parts of joined text where a junction glues two encoded-looking fragments into one
/// token, a line each, and the junctions inside them: only there can joining make a decoded
/// view that the values' own scans did not see. A side of a junction is the text from the
/// previous token end or junction to it (or from it to the next); it looks encoded when it
/// holds `%` or `\`, is hex, or is base64 with lower case and upper case or digits (not a
/// word), or is too short to tell (seven bytes or fewer). Consecutive gluing junctions make one part.
fn glued_tokens(text: &[u8], junctions: &[usize]) -> (Vec<u8>, Vec<usize>) {
    let ends = |b: u8| super::ends_token(b);
    let encoded = |side: &[u8]| {
        side.len() <= 7
            || side.iter().any(|&b| b == b'%' || b == b'\\')
            || side.iter().all(u8::is_ascii_hexdigit)
            || ((side.iter().any(u8::is_ascii_uppercase) || side.iter().any(u8::is_ascii_digit))
                && side.iter().any(u8::is_ascii_lowercase)
                && side.iter().all(|&b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
                }))
    };
    let mut glued = Vec::with_capacity(text.len());
    let mut inside = Vec::with_capacity(junctions.len());
    // The part being built: where it began in `text`, where it began in `glued`.
    let mut open: Option<(usize, usize)> = None;
    let close = |glued: &mut Vec<u8>, open: &mut Option<(usize, usize)>, end: usize| {
        if let Some((from, _)) = open.take() {
            glued.extend_from_slice(&text[from..end]);
            glued.push(b'\n');
        }
    };
    for (k, &j) in junctions.iter().enumerate() {
        let previous = if k > 0 { junctions[k - 1] } else { 0 };
        let next = junctions.get(k + 1).copied().unwrap_or(text.len());
        let glues = j > 0 && j < text.len() && !ends(text[j - 1]) && !ends(text[j]);
        let left_from = text[previous..j]
            .iter()
            .rposition(|&b| ends(b))
            .map_or(previous, |p| previous + p + 1);
        let right_to = text[j..next]
            .iter()
            .position(|&b| ends(b))
            .map_or(next, |p| j + p);
        if glues && encoded(&text[left_from..j]) && encoded(&text[j..right_to]) {
            match open {
                // Still the same part: the previous junction glued and nothing ended it.
                Some(_) if left_from == previous => {}
                _ => {
                    close(&mut glued, &mut open, previous.max(left_from));
                    open = Some((left_from, glued.len()));
                }
            }
            let (from, line) = open.expect("a part is open");
            inside.push(line + j - from);
            if right_to < next {
                close(&mut glued, &mut open, right_to);
            }
        } else {
            close(&mut glued, &mut open, j);
        }
    }
    close(&mut glued, &mut open, text.len());
    (glued, inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_names_and_random_pieces_are_told_apart() {
        let cases: &[(&str, bool)] = &[
            ("Content-Type", true),
            ("user_id", true),
            ("userName", true),
            ("GitHub", true),
            ("API_KEY", true),
            ("KEY-----", true),
            ("X-Request-Id", true),
            ("OFFyTrAA", false),
            ("X-f5429", false),
            ("ghp_wWPw5k4aXcaT", false),
            ("486", false),
        ];
        for &(text, words) in cases {
            assert_eq!(reads_as_words(text.as_bytes()), words, "{text}");
        }
    }

    #[test]
    fn random_parts_are_judged_against_their_class() {
        let alnum = shapes::class("A-Za-z0-9");
        let hex = shapes::class("a-f0-9");
        let cases: &[(&str, &[bool; 256], bool, bool)] = &[
            // A generated key, and hex where it is expected or allowed.
            ("wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx", &alnum, false, true),
            (
                "e83c5163316f89bfbde7d9ab23ca2e25604af290",
                &hex,
                false,
                true,
            ),
            (
                "e83c5163316f89bfbde7d9ab23ca2e25604af290",
                &alnum,
                true,
                true,
            ),
            // A digest where letters beyond `f` are expected, words, a number.
            (
                "e83c5163316f89bfbde7d9ab23ca2e25604af290",
                &alnum,
                false,
                false,
            ),
            (
                "getuseraccountsettingsfororganization",
                &alnum,
                false,
                false,
            ),
            (
                "GetUserAccountSettingsForOrganization",
                &alnum,
                false,
                false,
            ),
            ("123456789012345678901234567890", &alnum, false, false),
        ];
        for &(secret, class, hex_ok, random) in cases {
            assert_eq!(
                plausibly_random(secret.as_bytes(), class, hex_ok),
                random,
                "{secret}"
            );
        }
    }

    #[test]
    fn only_junctions_between_encoded_looking_fragments_are_glued() {
        let check = |values: &[&str], glued: &str| {
            let mut text = Vec::new();
            let mut junctions = Vec::new();
            for v in values {
                junctions.push(text.len());
                text.extend_from_slice(v.as_bytes());
            }
            let (found, _) = glued_tokens(&text, &junctions);
            assert_eq!(String::from_utf8_lossy(&found), glued, "{values:?}");
        };
        check(
            &["Z2xwYXQtQkIzW", "jFrVG5HV", "jhVeldhWnNJcVQ="],
            "Z2xwYXQtQkIzWjFrVG5HVjhVeldhWnNJcVQ=\n",
        );
        check(&["617773", "5f736563726"], "6177735f736563726\n");
        check(&["created_at", "application/json"], "");
        check(&["see below", "Z2xwYXQtQkIzW"], "belowZ2xwYXQtQkIzW\n");
        check(&["see the reference", "documentation here"], "");
    }
}
