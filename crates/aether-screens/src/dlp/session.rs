//! A session's recent pieces, so that a secret sent a piece per call is found when its last
//! piece is about to leave.
//!
//! [`SessionFragments`] is a plain value, one per session (the caller keys them by session
//! id): no clock, no IO. Each scan is given `now`; pieces older than the window are dropped
//! first, then the call is scanned on its own (as [`Scanner::scan_json`] or
//! [`Scanner::scan_request`] would) and together with the pieces kept from the session's
//! earlier calls, a candidate needing at least one piece of this call (the others were
//! judged when they were sent). A call that is let through leaves its pieces behind (fields
//! that are one token of at most 256 bytes, see [`super::split`]): at most
//! [`SessionFragments::MAX_PIECES`] of them and [`SessionFragments::MAX_BYTES`] bytes, the
//! oldest going first, a piece sent again refreshed rather than kept twice. A refused call
//! leaves nothing (its pieces did not leave).
//!
//! The pieces are secrets' material: they are kept only in this value, only as long as the
//! window, and never shown: its `Debug` prints counts, and a finding names places, never
//! text.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::split::{self, Origin, Pieces};
use super::{Finding, Gathered, Scanner, parse_body};

/// The longest piece kept.
const KEEP_PIECE: usize = 256;

/// The most pieces one call leaves behind.
const MAX_PER_CALL: usize = 16;

/// One session's recent pieces. See the module documentation.
pub struct SessionFragments {
    window: Duration,
    max_pieces: usize,
    max_bytes: usize,
    kept: VecDeque<Kept>,
    bytes: usize,
}

struct Kept {
    at: Instant,
    /// Where it was sent (`/a/b`, `query:x`).
    place: String,
    text: Vec<u8>,
}

impl fmt::Debug for SessionFragments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionFragments")
            .field("window", &self.window)
            .field("kept", &self.kept.len())
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Default for SessionFragments {
    fn default() -> SessionFragments {
        SessionFragments::new()
    }
}

impl SessionFragments {
    /// How long a piece is kept: ten minutes.
    pub const WINDOW: Duration = Duration::from_secs(600);
    /// How many pieces are kept at most.
    pub const MAX_PIECES: usize = 128;
    /// How many bytes of pieces are kept at most.
    pub const MAX_BYTES: usize = 8 * 1024;

    pub fn new() -> SessionFragments {
        SessionFragments::with_limits(Self::WINDOW, Self::MAX_PIECES, Self::MAX_BYTES)
    }

    pub fn with_limits(window: Duration, max_pieces: usize, max_bytes: usize) -> SessionFragments {
        SessionFragments {
            window,
            max_pieces,
            max_bytes,
            kept: VecDeque::new(),
            bytes: 0,
        }
    }

    /// How many pieces are kept now.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Forgets every piece (the session ended).
    pub fn clear(&mut self) {
        self.kept.clear();
        self.bytes = 0;
    }

    /// [`Scanner::scan_json`] for a call of this session at `now`, together with the pieces
    /// its earlier calls sent within the window; keeps this call's pieces if it is let through.
    pub fn scan_json(&mut self, scanner: &Scanner, now: Instant, args: &Value) -> Option<Finding> {
        self.expire(now);
        let mut gathered = Gathered::default();
        if let Some(found) = scanner.scan_json_in("", args, &mut gathered) {
            return Some(found);
        }
        self.scan_with_earlier(scanner, now, gathered)
    }

    /// [`Scanner::scan_request`] for a request of this session at `now`, together with the
    /// pieces its earlier calls sent within the window; keeps this request's pieces if it is
    /// let through.
    pub fn scan_request(
        &mut self,
        scanner: &Scanner,
        now: Instant,
        url: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Option<Finding> {
        self.expire(now);
        let parsed = parse_body(headers, body);
        let mut gathered = Gathered::default();
        if let Some(found) = scanner.scan_request_in(url, headers, body, &parsed, &mut gathered) {
            return Some(found);
        }
        self.scan_with_earlier(scanner, now, gathered)
    }

    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.kept.front() {
            if now.saturating_duration_since(oldest.at) < self.window {
                break;
            }
            self.bytes -= oldest.text.len();
            self.kept.pop_front();
        }
    }

    fn scan_with_earlier(
        &mut self,
        scanner: &Scanner,
        now: Instant,
        gathered: Gathered,
    ) -> Option<Finding> {
        let current = &gathered.pieces;
        let mut all = Pieces::default();
        for kept in &self.kept {
            all.source(Origin::Earlier(&kept.place), Cow::Borrowed(&kept.text));
        }
        for (o, text, value) in &current.sources {
            if *value {
                all.source(current.origins[*o].clone(), text.clone());
            } else {
                all.name(current.origins[*o].clone(), text.clone());
            }
        }
        // Parts of a value (a URL's path segments and query values) are pieces without being
        // sources of their own.
        for p in current.pieces.iter().filter(|p| p.layer.is_none()) {
            if !current.sources.iter().any(|(o, _, _)| *o == p.origin) {
                all.part(current.origins[p.origin].clone(), p.text.clone());
            }
        }
        if let Some(found) = gathered.settled(split::find(scanner, &all)) {
            return Some(found);
        }
        // At most [`MAX_PER_CALL`] pieces of one call are kept, those likeliest to be part of a
        // secret first (a credential's literal or the start of one, then the most random): a
        // call of many junk tokens cannot push an earlier call's piece out of the window.
        let mut kept: Vec<&split::Piece> = current
            .pieces
            .iter()
            .filter(|p| p.layer.is_none() && p.text.len() <= KEEP_PIECE)
            .filter(|p| p.text.iter().all(|&b| could_be_secret(b)))
            .collect();
        let score = |text: &[u8]| {
            let literal = scanner.starts.finder(text).next_from(0).is_some()
                || (1..text.len().min(12)).any(|k| scanner.partial.contains_key(&text[..k]));
            (usize::from(literal) * 1000) + split::class_changes(text).min(999)
        };
        kept.sort_by_key(|p| std::cmp::Reverse(score(&p.text)));
        let keep: Vec<(String, Vec<u8>)> = kept
            .into_iter()
            .take(MAX_PER_CALL.min(self.max_pieces))
            .map(|p| {
                (
                    current.place_of(scanner, &[p.origin], &[&p.text]),
                    p.text.to_vec(),
                )
            })
            .collect();
        drop(all);
        for (place, text) in keep {
            self.keep(now, place, text);
        }
        None
    }

    fn keep(&mut self, now: Instant, place: String, text: Vec<u8>) {
        if let Some(i) = self.kept.iter().position(|k| k.text == text) {
            let old = self.kept.remove(i).expect("the position was just found");
            self.bytes -= old.text.len();
        }
        self.bytes += text.len();
        self.kept.push_back(Kept {
            at: now,
            place,
            text,
        });
        while self.kept.len() > self.max_pieces || self.bytes > self.max_bytes {
            let Some(oldest) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= oldest.text.len();
        }
    }
}

/// A byte a credential or an encoding of one may hold.
fn could_be_secret(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~' | b':' | b'%' | b'\\'
        )
}
