//! A secret split into pieces: the parts of one call (or of a session's recent calls) read
//! together, whatever their names, their order and their number.
//!
//! Every part of a call is a *source* (a URL's host labels, path segments, query names and
//! values, fragment; each header's name and value; a form's names and values; every string and
//! key of JSON; a text body), and every source is cut into *pieces* at the characters no
//! credential holds (whitespace, quotes, brackets, `,` `;` `&` `=`). A piece that is
//! percent-encoded, escaped, in Unicode compatibility forms, or whole base64 or hex of text is
//! also kept decoded, beside itself.
//!
//! Two searches run over them:
//!
//! - **Assembly**, for pieces in any order. A *head* is where a credential starts: a literal
//!   of a shape (`ghp_`) followed only by characters of that shape's alphabet up to the end of
//!   its piece, or a piece that is only the beginning of a literal (`gh`, `AKI`) continued by
//!   other pieces into the whole literal. Every other piece made only of the shape's alphabet
//!   is a *filler*. The head is completed with fillers: the sums of filler lengths reachable
//!   are worked out (subset sums), and for the shortest few that could complete the shape the
//!   fillers making them up (the most random-looking preferred) are put after the head in the
//!   order the call holds them, and the shape's own regex, checks and placeholder test decide.
//!   Because a shape's body is a class repeated, which fillers complete it matters and their
//!   order does not; for shapes with inner structure (a JWT's dots) the order tried is the
//!   call's.
//! - **Join**, for a value encoded whole (base64, hex, percent) and then cut: all sources end to
//!   end in the call's order, scanned like one text, with base64 and hex also decoded from
//!   each junction.
//!
//! Bounds, so a crafted call costs little: [`MAX_PIECES`] pieces, each at most [`MAX_PIECE`]
//! bytes as a filler, [`MAX_HEADS`] heads, [`MAX_FILLERS`] fillers and [`MAX_LENGTHS`]
//! candidate lengths per head, literal continuations [`MAX_CHAIN`] pieces deep, and assembled
//! candidates of at most [`MAX_ASSEMBLED`] bytes.

use std::borrow::Cow;

use serde_json::Value;

use super::{
    Finding, Layer, Scanner, Step, escape_view, json_place, percent_decode_into, piece_path,
    unicode_view,
};

/// How many pieces a call's assembly looks at (raw and decoded together); later ones are not
/// assembled (they are still scanned one by one, and joined).
pub(super) const MAX_PIECES: usize = 512;
/// The longest piece used as a filler.
pub(super) const MAX_PIECE: usize = 512;
/// How many heads a call's assembly completes.
const MAX_HEADS: usize = 16;
/// How many fillers one head is completed from (the most random-looking).
const MAX_FILLERS: usize = 64;
/// How many lengths one head is tried at.
const MAX_LENGTHS: usize = 12;
/// How many pieces a split literal may be spread over.
const MAX_CHAIN: usize = 4;
/// The shortest filler: one- and two-character fields are everywhere.
const MIN_FILLER: usize = 3;
/// Up to how many fillers every order is tried.
const MAX_PERMUTED: usize = 4;
/// The longest assembled candidate.
const MAX_ASSEMBLED: usize = 2048;
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
    /// assembly uses at most one piece of a source... of a piece's variants.
    pub origin: usize,
    /// Which raw piece this is or was decoded from.
    pub raw: usize,
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
    raws: usize,
}

/// Whether a byte ends a piece.
fn cuts(b: u8) -> bool {
    super::ends_token(b) || matches!(b, b'&' | b';' | b'=')
}

impl<'a> Pieces<'a> {
    /// Adds one value: kept whole for the join and cut into pieces.
    pub fn source(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>) {
        self.add(origin, text, true);
    }

    /// Adds one name (a key, a header or parameter name): cut into pieces, not joined.
    pub fn name(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>) {
        self.add(origin, text, false);
    }

    fn add(&mut self, origin: Origin<'a>, text: Cow<'a, [u8]>, value: bool) {
        if text.is_empty() {
            return;
        }
        let o = self.origins.len();
        self.origins.push(origin);
        match &text {
            Cow::Borrowed(t) => self.cut(o, t),
            Cow::Owned(t) => {
                for piece in t.split(|&b| cuts(b)).filter(|p| !p.is_empty()) {
                    self.piece(o, Cow::Owned(piece.to_vec()));
                }
            }
        }
        self.sources.push((o, text, value));
    }

    fn cut(&mut self, origin: usize, text: &'a [u8]) {
        for piece in text.split(|&b| cuts(b)).filter(|p| !p.is_empty()) {
            self.piece(origin, Cow::Borrowed(piece));
        }
    }

    /// Adds one piece and what it decodes to.
    fn piece(&mut self, origin: usize, text: Cow<'a, [u8]>) {
        if self.pieces.len() >= MAX_PIECES {
            return;
        }
        let raw = self.raws;
        self.raws += 1;
        let variants = if text.len() <= MAX_PIECE {
            decoded_variants(&text)
        } else {
            Vec::new()
        };
        self.pieces.push(Piece {
            text,
            origin,
            raw,
            layer: None,
        });
        for (layer, text) in variants {
            if self.pieces.len() < MAX_PIECES && !text.is_empty() {
                self.pieces.push(Piece {
                    text: Cow::Owned(text),
                    origin,
                    raw,
                    layer: Some(layer),
                });
            }
        }
    }

    /// The place a finding names for a set of pieces.
    pub fn place(&self, scanner: &Scanner, used: &[usize]) -> String {
        let origins: Vec<usize> = used.iter().map(|&p| self.pieces[p].origin).collect();
        let texts: Vec<&[u8]> = used
            .iter()
            .flat_map(|&p| [&*self.pieces[p].text, &*self.pieces[self.raw_of(p)].text])
            .collect();
        self.place_of(scanner, &origins, &texts)
    }

    /// The place a finding names for pieces from `origins`: their names joined, without any of
    /// `texts` (the pieces themselves, which may be names: a JSON key, a header name).
    fn place_of(&self, scanner: &Scanner, origins: &[usize], texts: &[&[u8]]) -> String {
        let mut origins = origins.to_vec();
        origins.dedup();
        let mut names: Vec<String> = Vec::new();
        for o in origins {
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

    fn raw_of(&self, p: usize) -> usize {
        let raw = self.pieces[p].raw;
        self.pieces[..=p]
            .iter()
            .rposition(|q| q.raw == raw && q.layer.is_none())
            .unwrap_or(p)
    }
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
    if let Some(mut decoded) = escape_view(text) {
        decoded.pop();
        out.push((Layer::Escape, decoded));
    }
    if let Some(mut decoded) = unicode_view(text) {
        decoded.pop();
        out.push((Layer::Unicode, decoded));
    }
    let printable = |d: &[u8]| !d.is_empty() && d.iter().all(|b| (0x21..0x7f).contains(b));
    let body = text
        .strip_suffix(b"==")
        .or(text.strip_suffix(b"="))
        .unwrap_or(text);
    if body.len() >= 4
        && body.len() % 4 != 1
        && body
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_'))
    {
        let mut decoded = Vec::new();
        super::base64_into(body, &mut decoded);
        if printable(&decoded) {
            out.push((Layer::Base64, decoded));
        }
    }
    if text.len() >= 4 && text.len().is_multiple_of(2) && text.iter().all(u8::is_ascii_hexdigit) {
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

/// How many times the case or letter/digit class changes along the letters and digits of
/// `s` (other characters skipped: `-` between words is no change).
fn alnum_changes(s: &[u8]) -> usize {
    let classes: Vec<u8> = s
        .iter()
        .filter(|b| b.is_ascii_alphanumeric())
        .map(|&b| match b {
            b'A'..=b'Z' => 0,
            b'a'..=b'z' => 1,
            _ => 2,
        })
        .collect();
    classes.windows(2).filter(|p| p[0] != p[1]).count()
}

/// Whether a filler could be a piece of a generated secret rather than ordinary text: at
/// least [`MIN_FILLER`] characters; not a word or identifier (lower case with few class
/// changes); not a digest of a standard length unless the shape is hex itself.
fn could_be_a_piece(text: &[u8], shape: &super::CompiledShape) -> bool {
    if text.len() < MIN_FILLER {
        return false;
    }
    if text.len() >= 6
        && text.iter().any(u8::is_ascii_lowercase)
        && alnum_changes(text) * 4 < text.len()
    {
        return false;
    }
    let digest = matches!(text.len(), 32 | 40 | 64) && text.iter().all(u8::is_ascii_hexdigit);
    !digest || !shape.body[usize::from(b'z')]
}

/// A head: a shape, the pieces that start it (in order) and their text from the match start.
struct Head {
    shape: usize,
    parts: Vec<usize>,
    text: Vec<u8>,
}

/// The credential the pieces form together, if any.
pub(super) fn find(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    if pieces.sources.len() < 2 {
        return None;
    }
    assemble(scanner, pieces).or_else(|| join(scanner, pieces))
}

fn assemble(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    let heads = heads(scanner, pieces);
    for head in heads {
        if let Some(used) = complete(scanner, pieces, &head) {
            let decoded = used
                .iter()
                .filter_map(|&p| pieces.pieces[p].layer)
                .take(1)
                .collect();
            return Some(Finding {
                rule: scanner.shapes[head.shape].rule,
                place: pieces.place(scanner, &used),
                decoded,
            });
        }
    }
    None
}

/// Where a credential may start in the pieces and go on in others.
fn heads(scanner: &Scanner, pieces: &Pieces) -> Vec<Head> {
    let mut heads = Vec::new();
    // Pieces by first byte, for continuing a split literal.
    let mut by_first: Vec<Vec<usize>> = vec![Vec::new(); 256];
    for (i, p) in pieces.pieces.iter().enumerate() {
        by_first[usize::from(p.text[0])].push(i);
    }
    for (i, piece) in pieces.pieces.iter().enumerate() {
        if heads.len() >= MAX_HEADS {
            break;
        }
        let text: &[u8] = &piece.text;
        // A literal, and only its shape's alphabet after it to the end of the piece.
        let mut at = 0;
        while at < text.len() && heads.len() < MAX_HEADS {
            let Some(found) = scanner
                .starts
                .find(aho_corasick::Input::new(text).range(at..))
            else {
                break;
            };
            let lit = found.pattern().as_usize();
            for &s in &scanner.tries[lit] {
                let shape = &scanner.shapes[s];
                let Some(start) = shape
                    .back
                    .map_or(Some(found.start()), |back| back(text, found.start()))
                else {
                    continue;
                };
                let after = &text[found.end()..];
                if shape.before.allows(text, start)
                    && after.iter().all(|&b| shape.body[usize::from(b)])
                    && text.len() - start < MAX_ASSEMBLED
                    && shape.match_from(text, start).is_none()
                {
                    heads.push(Head {
                        shape: s,
                        parts: vec![i],
                        text: text[start..].to_vec(),
                    });
                    break;
                }
            }
            at = found.start() + 1;
        }
        // A piece that is only the beginning of a literal.
        if let Some(lits) = scanner.partial.get(text) {
            for &lit in lits {
                let literal = scanner.literals[lit].as_bytes();
                continue_literal(
                    scanner,
                    pieces,
                    &by_first,
                    lit,
                    literal,
                    vec![i],
                    text.to_vec(),
                    &mut heads,
                );
            }
        }
    }
    heads
}

/// Continues a literal begun by `parts` (whose text is `have`) with other pieces.
#[allow(clippy::too_many_arguments)]
fn continue_literal(
    scanner: &Scanner,
    pieces: &Pieces,
    by_first: &[Vec<usize>],
    lit: usize,
    literal: &[u8],
    parts: Vec<usize>,
    have: Vec<u8>,
    heads: &mut Vec<Head>,
) {
    let rest = &literal[have.len()..];
    for &q in &by_first[usize::from(rest[0])] {
        if heads.len() >= MAX_HEADS {
            return;
        }
        let origin = pieces.pieces[q].origin;
        if parts.iter().any(|&p| pieces.pieces[p].origin == origin) {
            continue;
        }
        let text: &[u8] = &pieces.pieces[q].text;
        let mut joined = have.clone();
        joined.extend_from_slice(text);
        let mut parts = parts.clone();
        parts.push(q);
        if let Some(after) = text.strip_prefix(rest) {
            for &s in &scanner.tries[lit] {
                let shape = &scanner.shapes[s];
                if shape.back.is_none()
                    && after.iter().all(|&b| shape.body[usize::from(b)])
                    && joined.len() < MAX_ASSEMBLED
                {
                    if shape.match_from(&joined, 0).is_some() {
                        // Complete already: a finding of its own.
                        heads.insert(
                            0,
                            Head {
                                shape: s,
                                parts: parts.clone(),
                                text: joined.clone(),
                            },
                        );
                    } else {
                        heads.push(Head {
                            shape: s,
                            parts: parts.clone(),
                            text: joined.clone(),
                        });
                    }
                    break;
                }
            }
        } else if rest.starts_with(text) && parts.len() < MAX_CHAIN {
            continue_literal(
                scanner, pieces, by_first, lit, literal, parts, joined, heads,
            );
        }
    }
}

/// Completes a head with fillers; the pieces used, if the shape then matches.
fn complete(scanner: &Scanner, pieces: &Pieces, head: &Head) -> Option<Vec<usize>> {
    let shape = &scanner.shapes[head.shape];
    if shape.match_from(&head.text, 0).is_some() {
        return check_split(shape, &head.text).then(|| head.parts.clone());
    }
    let used_origins: Vec<usize> = head
        .parts
        .iter()
        .map(|&p| pieces.pieces[p].origin)
        .collect();
    let mut fillers: Vec<usize> = (0..pieces.pieces.len())
        .filter(|&q| {
            let p = &pieces.pieces[q];
            !head.parts.contains(&q)
                && !used_origins.contains(&p.origin)
                && p.text.len() <= MAX_PIECE
                && p.text.iter().all(|&b| shape.body[usize::from(b)])
                && could_be_a_piece(&p.text, shape)
        })
        .collect();
    if fillers.is_empty() {
        return None;
    }
    // The most random-looking last, where the subset walk below prefers them.
    fillers.sort_by_key(|&q| {
        let t = &pieces.pieces[q].text;
        alnum_changes(t) * 1000 / t.len().max(1)
    });
    if fillers.len() > MAX_FILLERS {
        fillers.drain(..fillers.len() - MAX_FILLERS);
    }
    let cap = MAX_ASSEMBLED
        .saturating_sub(head.text.len())
        .min(shape.len.1 + 64);
    // reach[k][t]: whether some of the first k fillers add up to t bytes.
    let words = cap / 64 + 1;
    let mut reach = vec![vec![0u64; words]; fillers.len() + 1];
    reach[0][0] = 1;
    for (k, &q) in fillers.iter().enumerate() {
        let len = pieces.pieces[q].text.len();
        let (done, rest) = reach.split_at_mut(k + 1);
        let (prev, next) = (&done[k], &mut rest[0]);
        next.copy_from_slice(prev);
        for t in (len..=cap).rev() {
            if prev[(t - len) / 64] >> ((t - len) % 64) & 1 == 1 {
                next[t / 64] |= 1 << (t % 64);
            }
        }
    }
    // First the most random-looking fillers, more and more of them: a secret's own pieces.
    for m in 1..=fillers.len().min(MAX_LENGTHS) {
        let mut chosen: Vec<usize> = fillers[fillers.len() - m..].to_vec();
        chosen.sort_unstable();
        if let Some(used) = try_candidate(shape, pieces, head, &chosen) {
            return Some(used);
        }
    }
    let all = &reach[fillers.len()];
    let lower = shape.len.0.saturating_sub(head.text.len()).max(1);
    let mut tried = 0;
    for total in lower..=cap {
        if all[total / 64] >> (total % 64) & 1 == 0 {
            continue;
        }
        tried += 1;
        if tried > MAX_LENGTHS {
            break;
        }
        // Which fillers make `total`, preferring the later (more random-looking) ones.
        let mut chosen = Vec::new();
        let mut t = total;
        for k in (1..=fillers.len()).rev() {
            let q = fillers[k - 1];
            let len = pieces.pieces[q].text.len();
            if t >= len && reach[k - 1][(t - len) / 64] >> ((t - len) % 64) & 1 == 1 {
                chosen.push(q);
                t -= len;
            }
        }
        if t != 0 {
            continue;
        }
        chosen.sort_unstable();
        if let Some(used) = try_candidate(shape, pieces, head, &chosen) {
            return Some(used);
        }
    }
    None
}

/// The head and `chosen` (in the call's order) as one candidate: the pieces used, if it is
/// the shape's credential.
fn try_candidate(
    shape: &super::CompiledShape,
    pieces: &Pieces,
    head: &Head,
    chosen: &[usize],
) -> Option<Vec<usize>> {
    let mut raws: Vec<usize> = chosen.iter().map(|&q| pieces.pieces[q].raw).collect();
    raws.sort_unstable();
    if raws.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    // In the call's order; then, for a few pieces, in every other (a shape with inner
    // structure, a JWT's segments, needs them in its own).
    let mut order = chosen.to_vec();
    let mut found = false;
    for _ in 0..permutations(order.len()) {
        let mut candidate = head.text.clone();
        for &q in &order {
            candidate.extend_from_slice(&pieces.pieces[q].text);
        }
        if candidate.len() <= MAX_ASSEMBLED && check_split(shape, &candidate) {
            found = true;
            break;
        }
        next_permutation(&mut order);
    }
    if !found {
        return None;
    }
    let mut used = head.parts.clone();
    used.extend_from_slice(chosen);
    used.sort_unstable();
    Some(used)
}

/// How many orders of `n` pieces are tried: all of them up to [`MAX_PERMUTED`] pieces.
fn permutations(n: usize) -> usize {
    if n > MAX_PERMUTED {
        1
    } else {
        (1..=n).product()
    }
}

/// The next lexicographic order of `items` (wrapping to the first).
fn next_permutation(items: &mut [usize]) {
    let Some(i) = items.windows(2).rposition(|w| w[0] < w[1]) else {
        items.reverse();
        return;
    };
    let j = items
        .iter()
        .rposition(|&x| x > items[i])
        .expect("a larger item after i");
    items.swap(i, j);
    items[i + 1..].reverse();
}

/// What an assembled candidate's random part must also look like: pieces of ordinary words
/// glued after a literal a text happened to hold are not a secret. Where the alphabet has
/// lower case (where words are), the character class must change often along it.
fn check_split(shape: &super::CompiledShape, candidate: &[u8]) -> bool {
    let Some(matched) = shape.match_from(candidate, 0) else {
        return false;
    };
    let secret = &candidate[matched.secret];
    if secret.len() < 16 || !shape.body[usize::from(b'z')] {
        return true;
    }
    let lower = secret.iter().any(u8::is_ascii_lowercase);
    let upper = secret.iter().any(u8::is_ascii_uppercase);
    let digit = secret.iter().any(u8::is_ascii_digit);
    if shape.body[usize::from(b'Z')] && lower {
        // Both cases allowed, lower case used: a generated key mixes in upper case or digits
        // and changes class about every other character; words do not.
        (upper || digit) && alnum_changes(secret) * 4 >= secret.len()
    } else {
        alnum_changes(secret) * 7 >= secret.len()
    }
}

/// All sources end to end, for a value encoded whole and then cut.
fn join(scanner: &Scanner, pieces: &Pieces) -> Option<Finding> {
    let windows: Vec<(usize, Vec<u8>)> = pieces
        .sources
        .iter()
        .filter(|(_, _, value)| *value)
        .map(|(o, text, _)| {
            let text: &[u8] = text;
            let clipped = if text.len() > 2 * JOIN_WINDOW {
                [
                    &text[..JOIN_WINDOW],
                    b"\n",
                    &text[text.len() - JOIN_WINDOW..],
                ]
                .concat()
            } else {
                text.to_vec()
            };
            (*o, clipped)
        })
        .collect();
    let joined = |range: std::ops::Range<usize>| {
        let mut text = Vec::new();
        let mut boundaries = Vec::new();
        for (_, w) in &windows[range] {
            boundaries.push(text.len());
            text.extend_from_slice(w);
        }
        (text, boundaries)
    };
    let hit = |range: std::ops::Range<usize>| {
        let (text, boundaries) = joined(range);
        scanner.find_joined(&text, &boundaries)
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
