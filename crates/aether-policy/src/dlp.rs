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
//! A secret split in two is looked for in the concatenation of neighbours: consecutive string
//! leaves of JSON (in the order `serde_json` keeps them), adjacent query parameter values,
//! adjacent header values.
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
//! nothing that matches.
//!
//! **Known limits.** This stops the careless and the naive, not a determined exfiltrator:
//! - encrypted, compressed or otherwise transformed payloads (gzip, zip, ROT13, reversed,
//!   XOR, a custom alphabet) are opaque; so is any encoding not in the table above (base32,
//!   octal escapes, quoted-printable, hex with separators like `41:4b`, DNS labels split by
//!   dots);
//! - a secret split over more than two fields, over two fields that are not neighbours (JSON
//!   objects are visited in key order), or whose parts lie farther than 4 KiB from the junction;
//! - a base64 value glued to a preceding run of base64 characters other than by a `/` after a
//!   lower-case prefix (`token_Z2hw…`, `Docs/Z2hw…`) may be decoded out of step;
//! - look-alike letters that NFKC does not fold (Cyrillic `А` for Latin `A`);
//! - credentials without a distinctive shape (passwords, generic API keys, cookies), and
//!   shapes not listed; an AWS secret key is found only next to its name;
//! - an AWS access key id is refused wherever it is, including in a presigned URL;
//! - past the decoding budget (views totalling 16 times the text) deeper layers are skipped.

use std::fmt;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use serde_json::Value;

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

/// How much of each neighbour a split secret is looked for in, on either side of the junction.
const JOIN_WINDOW: usize = 4096;

/// What the views of one text may total, as a multiple of its length (plus a constant for
/// small texts): NFKC can expand and layers nest, and a crafted text must not make the scan
/// unbounded.
const VIEW_BUDGET_FACTOR: usize = 16;
const VIEW_BUDGET_BASE: usize = 64 * 1024;

/// One credential shape.
struct Shape {
    rule: &'static str,
    /// Literals a match starts with: the prefilter's patterns.
    starts: &'static [&'static str],
    /// The shape from its start, matched anchored where one of `starts` was found. A shape of
    /// fixed length ends with a word-end class, which consumes a byte; checks allow for it.
    pattern: &'static str,
    /// Whether the byte before the match must not be an ASCII letter or digit.
    word_start: bool,
    /// What the matched bytes must also satisfy.
    check: Option<fn(&[u8]) -> bool>,
}

/// The AWS secret key's names as they are spelt in env files, config, JSON and headers. The
/// regex accepts any case; these literals decide where it is tried.
const AWS_SECRET_NAMES: &[&str] = &[
    "aws_secret",
    "AWS_SECRET",
    "Aws_Secret",
    "aws-secret",
    "AWS-SECRET",
    "Aws-Secret",
    "awsSecret",
    "AwsSecret",
    "secret_access_key",
    "SECRET_ACCESS_KEY",
    "Secret_Access_Key",
    "secret-access-key",
    "SECRET-ACCESS-KEY",
    "Secret-Access-Key",
    "secretAccessKey",
    "SecretAccessKey",
];

/// `SK` and a lower-case hex digit: three bytes, so that the prefilter is not woken by every
/// `SK` in upper-case text.
const TWILIO_STARTS: &[&str] = &[
    "SK0", "SK1", "SK2", "SK3", "SK4", "SK5", "SK6", "SK7", "SK8", "SK9", "SKa", "SKb", "SKc",
    "SKd", "SKe", "SKf",
];

/// Every shape, most specific first: where two can match at one place (`sk-ant-` and `sk-`),
/// the first one names the finding.
const SHAPES: &[Shape] = &[
    Shape {
        rule: "dlp:private-key",
        starts: &["-----BEGIN "],
        pattern: r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----",
        word_start: false,
        check: None,
    },
    Shape {
        rule: "dlp:aws-access-key",
        starts: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?:[^A-Za-z0-9]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:aws-secret-key",
        starts: AWS_SECRET_NAMES,
        pattern: r#"(?i:aws[_-]?secret(?:[_-]?access)?(?:[_-]?key)?|secret[_-]?access[_-]?key)[ \t\r\n"':=>]{0,8}[A-Za-z0-9/+]{40}(?:[^A-Za-z0-9/+]|$)"#,
        word_start: false,
        check: None,
    },
    Shape {
        rule: "dlp:google-api-key",
        starts: &["AIza"],
        pattern: r"AIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:google-oauth-token",
        starts: &["ya29."],
        pattern: r"ya29\.[0-9A-Za-z_-]{20,}",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:github-token",
        starts: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{36,255}(?:[^A-Za-z0-9]|$)|github_pat_[A-Za-z0-9_]{22,255}(?:[^A-Za-z0-9_]|$))",
        word_start: true,
        check: None,
    },
    Shape {
        // Aether's own bearer tokens (agents' and operators'): 32 random bytes, base64url.
        rule: "dlp:aether-token",
        starts: &["aether_"],
        pattern: r"aether_[A-Za-z0-9_-]{43}(?:[^A-Za-z0-9_-]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:gitlab-token",
        starts: &["glpat-"],
        pattern: r"glpat-[A-Za-z0-9_-]{20,}",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:slack-webhook",
        starts: &["hooks.slack.com/services/"],
        pattern: r"hooks\.slack\.com/services/T[A-Za-z0-9_]{6,}/B[A-Za-z0-9_]{6,}/[A-Za-z0-9]{16,}",
        word_start: false,
        check: None,
    },
    Shape {
        rule: "dlp:slack-token",
        starts: &["xox"],
        pattern: r"xox[baprs]-[0-9A-Za-z-]{10,}",
        word_start: true,
        // Slack tokens carry numeric team and user ids; `xoxs-and-hugs-forever` does not.
        check: Some(|m| m[5..].iter().any(u8::is_ascii_digit)),
    },
    Shape {
        rule: "dlp:anthropic-key",
        starts: &["sk-ant-"],
        pattern: r"sk-ant-[A-Za-z0-9_-]{20,}",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:openai-key",
        starts: &["sk-"],
        pattern: r"sk-[A-Za-z0-9_-]{20,}",
        word_start: true,
        // A generated key mixes cases and digits; a kebab-case name after `sk-` does not.
        check: Some(|m| {
            let body = &m[3..];
            let body = ["proj-", "svcacct-", "admin-"]
                .iter()
                .find_map(|p| body.strip_prefix(p.as_bytes()))
                .unwrap_or(body);
            looks_generated(body)
        }),
    },
    Shape {
        rule: "dlp:stripe-key",
        starts: &["sk_live_", "rk_live_"],
        pattern: r"[sr]k_live_[0-9A-Za-z]{20,}",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:npm-token",
        starts: &["npm_"],
        pattern: r"npm_[A-Za-z0-9]{36}(?:[^A-Za-z0-9]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:huggingface-token",
        starts: &["hf_"],
        pattern: r"hf_[A-Za-z]{30,}",
        word_start: true,
        // Tokens mix cases; a long snake-case word after `hf_` is all lower case.
        check: Some(|m| {
            m[3..].iter().any(u8::is_ascii_uppercase) && m[3..].iter().any(u8::is_ascii_lowercase)
        }),
    },
    Shape {
        rule: "dlp:sendgrid-key",
        starts: &["SG."],
        pattern: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}(?:[^A-Za-z0-9_-]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:twilio-key",
        starts: TWILIO_STARTS,
        pattern: r"SK[0-9a-f]{32}(?:[^A-Za-z0-9]|$)",
        word_start: true,
        check: None,
    },
    Shape {
        rule: "dlp:jwt",
        starts: &["eyJ"],
        pattern: r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*",
        word_start: true,
        check: Some(is_jwt),
    },
];

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
    starts: AhoCorasick,
    /// For each literal of `starts`, the shapes to try where it is found, in priority order:
    /// those with this literal or a shorter one it begins with (the automaton reports the
    /// longest literal at a place, `sk-ant-` rather than `sk-`).
    tries: Vec<Vec<usize>>,
    /// Only in [`Scanner::regex_loop`]: each shape's regex, unanchored, tried in turn.
    regex_loop: Option<Vec<Regex>>,
}

#[derive(Debug)]
struct CompiledShape {
    rule: &'static str,
    anchored: Regex,
    word_start: bool,
    check: Option<fn(&[u8]) -> bool>,
}

impl CompiledShape {
    fn matches_at(&self, hay: &[u8], at: usize) -> bool {
        if self.word_start && at > 0 && hay[at - 1].is_ascii_alphanumeric() {
            return false;
        }
        self.anchored
            .find(&hay[at..])
            .is_some_and(|m| self.check.is_none_or(|check| check(&hay[at..at + m.end()])))
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
                word_start: s.word_start,
                check: s.check,
            })
            .collect();
        let literals: Vec<&str> = SHAPES
            .iter()
            .flat_map(|s| s.starts.iter().copied())
            .collect();
        let tries = literals
            .iter()
            .map(|lit| {
                (0..SHAPES.len())
                    .filter(|&i| SHAPES[i].starts.iter().any(|s| lit.starts_with(s)))
                    .collect()
            })
            .collect();
        let starts = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&literals)
            .expect("the DLP literals build an automaton");
        Scanner {
            shapes,
            starts,
            tries,
            regex_loop: None,
        }
    }

    /// The scanner every caller shares, built on first use.
    pub fn shared() -> &'static Scanner {
        static SHARED: OnceLock<Scanner> = OnceLock::new();
        SHARED.get_or_init(Scanner::new)
    }

    /// Every rule's name, in priority order.
    pub fn rules() -> impl Iterator<Item = &'static str> {
        SHAPES.iter().map(|s| s.rule)
    }

    /// The same scanner with its matcher replaced by every rule's regex, unanchored, tried in
    /// turn on each view (`is_match`, then the rule's check on each match for the rules that
    /// have one): the reference the benchmark measures the prefilter against. Not for use.
    #[doc(hidden)]
    pub fn regex_loop() -> Scanner {
        let regexes = SHAPES
            .iter()
            .map(|s| {
                if s.word_start {
                    compile(&format!("(?:^|[^A-Za-z0-9])(?:{})", s.pattern))
                } else {
                    compile(s.pattern)
                }
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
    /// and the concatenation of each two consecutive strings.
    pub fn scan_json(&self, value: &Value) -> Option<Finding> {
        self.scan_json_in("", value)
    }

    /// Scans an outgoing HTTP request: each query parameter, the URL, each header, the body.
    pub fn scan_request(
        &self,
        url: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Option<Finding> {
        self.scan_url(url)
            .or_else(|| self.scan_headers(headers))
            .or_else(|| self.scan_body(headers, body))
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
        };
        walk.view(hay).map(|rule| (rule, walk.chain))
    }

    /// The first rule, in text order, that matches `hay` as it is.
    fn first_rule(&self, hay: &[u8]) -> Option<&'static str> {
        if let Some(regexes) = &self.regex_loop {
            return regexes
                .iter()
                .zip(&self.shapes)
                .find(|(re, shape)| {
                    re.is_match(hay)
                        && (shape.check.is_none()
                            || re.find_iter(hay).any(|m| {
                                // Past the word-start byte the unanchored regex matched first.
                                let skip = !hay[m.start()].is_ascii_alphanumeric();
                                shape.matches_at(hay, m.start() + usize::from(skip))
                            }))
                })
                .map(|(_, shape)| shape.rule);
        }
        let mut at = 0;
        while at < hay.len() {
            let found = self.starts.find(Input::new(hay).range(at..))?;
            let start = found.start();
            let shape = self.tries[found.pattern().as_usize()]
                .iter()
                .map(|&i| &self.shapes[i])
                .find(|s| s.matches_at(hay, start));
            if let Some(shape) = shape {
                return Some(shape.rule);
            }
            // Not `found.end()`: another literal may start inside this one.
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

    fn scan_url(&self, url: &str) -> Option<Finding> {
        let before_fragment = url.split('#').next().unwrap_or(url);
        if let Some((_, query)) = before_fragment.split_once('?') {
            let params = form_pairs(query.as_bytes());
            if let Some(found) = self.scan_pairs("query", &params) {
                return Some(found);
            }
        }
        // The path, user info, host and fragment; the query again, undivided.
        self.scan_text("url", url)
    }

    fn scan_headers(&self, headers: &[(String, String)]) -> Option<Finding> {
        for (name, value) in headers {
            let line = format!("{name}: {value}");
            if let Some((rule, decoded)) = self.find(line.as_bytes()) {
                return Some(Finding {
                    rule,
                    place: format!("header:{}", self.label(name.as_bytes())),
                    decoded,
                });
            }
        }
        headers.windows(2).find_map(|pair| {
            let joined = join_window(pair[0].1.as_bytes(), pair[1].1.as_bytes())?;
            self.find(&joined).map(|(rule, decoded)| Finding {
                rule,
                place: format!(
                    "header:{} + header:{}",
                    self.label(pair[0].0.as_bytes()),
                    self.label(pair[1].0.as_bytes())
                ),
                decoded,
            })
        })
    }

    fn scan_body(&self, headers: &[(String, String)], body: &[u8]) -> Option<Finding> {
        if body.is_empty() {
            return None;
        }
        let is_form = headers.iter().any(|(name, value)| {
            name.eq_ignore_ascii_case("content-type")
                && value
                    .to_ascii_lowercase()
                    .contains("application/x-www-form-urlencoded")
        });
        if is_form {
            return self.scan_pairs("body", &form_pairs(body));
        }
        let looks_json = body
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{' || b == b'[');
        if looks_json && let Ok(value) = serde_json::from_slice::<Value>(body) {
            return self.scan_json_in("body", &value);
        }
        self.scan_bytes("body", body)
    }

    /// Query or form parameters: each `name=value`, then each two adjacent values joined.
    fn scan_pairs(&self, kind: &str, params: &[(Vec<u8>, Vec<u8>)]) -> Option<Finding> {
        let place = |name: &[u8]| format!("{kind}:{}", self.label(name));
        for (name, value) in params {
            let mut text = Vec::with_capacity(name.len() + 1 + value.len());
            text.extend_from_slice(name);
            text.push(b'=');
            text.extend_from_slice(value);
            if let Some((rule, decoded)) = self.find(&text) {
                return Some(Finding {
                    rule,
                    place: place(name),
                    decoded,
                });
            }
        }
        params.windows(2).find_map(|pair| {
            let joined = join_window(&pair[0].1, &pair[1].1)?;
            self.find(&joined).map(|(rule, decoded)| Finding {
                rule,
                place: format!("{} + {}", place(&pair[0].0), place(&pair[1].0)),
                decoded,
            })
        })
    }

    fn scan_json_in(&self, prefix: &str, value: &Value) -> Option<Finding> {
        let mut scan = JsonScan {
            scanner: self,
            prefix,
            path: Vec::new(),
            leaves: Vec::new(),
        };
        if let Some(found) = scan.visit(value) {
            return Some(found);
        }
        let leaves = std::mem::take(&mut scan.leaves);
        for i in 1..leaves.len() {
            let Some(joined) = join_window(leaves[i - 1].as_bytes(), leaves[i].as_bytes()) else {
                continue;
            };
            if let Some((rule, decoded)) = self.find(&joined) {
                // Found rarely, so the two paths are looked up again rather than kept.
                let place = |n| {
                    let mut path = Vec::new();
                    leaf_path(value, &mut { n }, &mut path);
                    scan.place(&path)
                };
                return Some(Finding {
                    rule,
                    place: format!("{} + {}", place(i - 1), place(i)),
                    decoded,
                });
            }
        }
        None
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
}

impl Walk<'_> {
    fn view(&mut self, hay: &[u8]) -> Option<&'static str> {
        if let Some(rule) = self.scanner.first_rule(hay) {
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
        let (base64, hex) = encoded_views(hay);
        self.descend(Layer::Base64, base64)
            .or_else(|| self.descend(Layer::Hex, hex))
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

struct JsonScan<'s, 'v> {
    scanner: &'s Scanner,
    prefix: &'s str,
    path: Vec<Step<'v>>,
    /// Every string value, in visiting order, for the split-secret pass.
    leaves: Vec<&'v str>,
}

impl<'v> JsonScan<'_, 'v> {
    fn visit(&mut self, value: &'v Value) -> Option<Finding> {
        match value {
            Value::String(s) => {
                self.leaves.push(s);
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
                let found = self.hit(key.as_bytes()).or_else(|| match item {
                    // A name that may give a value its meaning (`aws_secret_access_key`) is
                    // read together with the value, as in an env file.
                    Value::String(s) if self.scanner.starts.is_match(key) => {
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

    fn hit(&self, text: &[u8]) -> Option<Finding> {
        self.scanner.find(text).map(|(rule, decoded)| Finding {
            rule,
            place: self.place(&self.path),
            decoded,
        })
    }

    fn place(&self, path: &[Step]) -> String {
        if path.is_empty() {
            return if self.prefix.is_empty() {
                "arguments".to_string()
            } else {
                self.prefix.to_string()
            };
        }
        let mut place = self.prefix.to_string();
        if !place.is_empty() {
            place.push(':');
        }
        for step in path {
            place.push('/');
            match step {
                Step::Key(key) => {
                    let label = self.scanner.label(key.as_bytes());
                    place.push_str(&label.replace('~', "~0").replace('/', "~1"));
                }
                Step::Index(i) => place.push_str(&i.to_string()),
            }
        }
        place
    }
}

/// Finds the path of the `n`th string value (in [`JsonScan::visit`]'s order); `false` while
/// it has not been reached.
fn leaf_path<'v>(value: &'v Value, n: &mut usize, path: &mut Vec<Step<'v>>) -> bool {
    let children: Box<dyn Iterator<Item = (Step<'v>, &'v Value)>> = match value {
        Value::String(_) if *n == 0 => return true,
        Value::String(_) => {
            *n -= 1;
            return false;
        }
        Value::Array(items) => Box::new(items.iter().enumerate().map(|(i, v)| (Step::Index(i), v))),
        Value::Object(members) => Box::new(members.iter().map(|(k, v)| (Step::Key(k), v))),
        Value::Null | Value::Bool(_) | Value::Number(_) => return false,
    };
    for (step, item) in children {
        path.push(step);
        if leaf_path(item, n, path) {
            return true;
        }
        path.pop();
    }
    false
}

/// The end of `a` and the start of `b` together, where a secret split between them would be;
/// `None` when either is empty (the other alone has been scanned).
fn join_window(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a = &a[a.len().saturating_sub(JOIN_WINDOW)..];
    let b = &b[..b.len().min(JOIN_WINDOW)];
    Some([a, b].concat())
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
// Matching checks.

/// Mixed case and a digit: what a generated key has and a name does not.
fn looks_generated(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_uppercase)
        && s.iter().any(u8::is_ascii_lowercase)
        && s.iter().any(u8::is_ascii_digit)
}

/// A JWS: a header that decodes to a JSON object with `alg`, a payload that decodes to a JSON
/// object. `eyJ` is only `{"` in base64, which many things start with.
fn is_jwt(token: &[u8]) -> bool {
    let mut segments = token.split(|&b| b == b'.');
    let (Some(header), Some(payload)) = (segments.next(), segments.next()) else {
        return false;
    };
    let object = |segment: &[u8]| {
        let mut json = Vec::with_capacity(segment.len());
        base64_into(segment, &mut json);
        match serde_json::from_slice::<Value>(&json) {
            Ok(Value::Object(members)) => Some(members),
            _ => None,
        }
    };
    object(header).is_some_and(|h| h.contains_key("alg")) && object(payload).is_some()
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

/// The base64 and hex views of `hay`, found in one pass over it: hex runs are parts of
/// base64 runs.
///
/// A run long enough to decode holds an aligned block of eight base64 characters, so the pass
/// tests blocks of eight without a branch and looks closer only around a full one: words and
/// punctuation cost a fraction of a byte-by-byte walk.
fn encoded_views(hay: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let (mut base64, hex) = encoded_runs(hay);
    // Base64 wrapped across lines (MIME, PEM) is decoded whole too: a secret broken at a line
    // end decodes to two halves that match nothing, line by line.
    if let Some(joined) = unwrapped(hay) {
        let (whole, _) = encoded_runs(&joined);
        if let Some(whole) = whole {
            let view = base64.get_or_insert_with(Vec::new);
            if !view.is_empty() {
                view.push(b'\n');
            }
            view.extend_from_slice(&whole);
        }
    }
    (base64, hex)
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
fn encoded_runs(hay: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    const BLOCK: usize = 8;
    const _: () = assert!(MIN_BASE64 >= 2 * BLOCK - 1 && MIN_HEX >= 2 * BLOCK - 1);
    let mut views = EncodedViews::default();
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
    (view(views.base64), view(views.hex))
}

#[derive(Default)]
struct EncodedViews {
    base64: Vec<u8>,
    hex: Vec<u8>,
    /// Scratch space for one decoding.
    decoded: Vec<u8>,
}

impl EncodedViews {
    /// Decodes the base64 run that starts at `start`, and the hex runs in it; returns its end.
    fn run(&mut self, hay: &[u8], start: usize) -> usize {
        let mut i = start;
        let mut seen = 0;
        let mut hex_start = start;
        // Where to decode from, one per alignment: the start, and after a `/` that ends a
        // path-like prefix (`com/upload/Z2hw…`; no upper case yet, so not inside base64).
        let mut from = [None; 4];
        from[0] = Some(start);
        while i < hay.len() {
            let class = CLASSES[usize::from(hay[i])];
            if class & BASE64_CHAR == 0 {
                break;
            }
            if class & HEX_DIGIT == 0 {
                self.hex_run(&hay[hex_start..i]);
                hex_start = i + 1;
            }
            if hay[i] == b'/' && seen & UPPER == 0 {
                from[(i + 1 - start) % 4].get_or_insert(i + 1);
            }
            seen |= class;
            i += 1;
        }
        self.hex_run(&hay[hex_start.min(i)..i]);
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

    fn hex_run(&mut self, run: &[u8]) {
        if run.len() < MIN_HEX {
            return;
        }
        let starts: &[usize] = if run.len().is_multiple_of(2) {
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

/// Decodes base64 of either alphabet, skipping anything else (padding) and dropping a
/// trailing partial byte.
fn base64_into(s: &[u8], out: &mut Vec<u8>) {
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
mod tests {
    use super::*;
    use serde_json::json;

    /// One sample of each rule, as it would be leaked.
    fn samples() -> Vec<(&'static str, String)> {
        let google_key = format!("AIza{}", "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q");
        let sendgrid = format!(
            "SG.{}.{}",
            "aB3dE5gH7jK9mN1pQ3sT5v", "wX7zA9cD1fG3iJ5lM7oP9rS1uV3xY5aB7dE9gH1jK3m"
        );
        vec![
            (
                "dlp:private-key",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq".to_string(),
            ),
            ("dlp:private-key", "-----BEGIN PRIVATE KEY-----".to_string()),
            (
                "dlp:private-key",
                "-----BEGIN OPENSSH PRIVATE KEY-----".to_string(),
            ),
            ("dlp:aws-access-key", "AKIAIOSFODNN7EXAMPLE".to_string()),
            ("dlp:aws-access-key", "ASIAY34FZKBOKMUTVV7A".to_string()),
            (
                "dlp:aws-secret-key",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_string(),
            ),
            (
                "dlp:aws-secret-key",
                "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".to_string(),
            ),
            ("dlp:google-api-key", google_key),
            (
                "dlp:google-oauth-token",
                "ya29.a0AfH6SMBx3kQ9Zt7LmNpQrStUvWxYz012345".to_string(),
            ),
            (
                "dlp:github-token",
                "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".to_string(),
            ),
            (
                "dlp:github-token",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH".to_string(),
            ),
            ("dlp:gitlab-token", "glpat-xXw9yZ2aB4cD6eF8gH0j".to_string()),
            (
                "dlp:aether-token",
                "aether_kQ3zR7wX1cV5bN9mL2jH6gF4dS8aP0oI3uY7tE1rW5q".to_string(),
            ),
            (
                "dlp:slack-token",
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".to_string(),
            ),
            (
                "dlp:slack-webhook",
                "https://hooks.slack.com/services/T0A1B2C3D/B0E1F2G3H/XXXXXXXXXXXXXXXXXXXXXXXX"
                    .to_string(),
            ),
            (
                "dlp:anthropic-key",
                "sk-ant-api03-AbCdEfGh1234567890_-XyZaBcDeFgH".to_string(),
            ),
            (
                "dlp:openai-key",
                "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56".to_string(),
            ),
            (
                "dlp:openai-key",
                "sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34".to_string(),
            ),
            (
                "dlp:stripe-key",
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc".to_string(),
            ),
            (
                "dlp:npm-token",
                "npm_abcdefghijklmnopqrstuvwxyz0123456789".to_string(),
            ),
            (
                "dlp:huggingface-token",
                "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh".to_string(),
            ),
            ("dlp:sendgrid-key", sendgrid),
            (
                "dlp:twilio-key",
                "SK0123456789abcdef0123456789abcdef".to_string(),
            ),
            (
                "dlp:jwt",
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
                    .to_string(),
            ),
        ]
    }

    /// The ways a secret is disguised, each with the layers it should be found through.
    /// How a disguise is applied to a secret.
    type Encode = fn(&str) -> String;

    fn encodings() -> Vec<(&'static str, Encode)> {
        vec![
            ("raw", |s| s.to_string()),
            ("percent", percent),
            ("double percent", |s| percent(&percent(s))),
            ("triple percent", |s| percent(&percent(&percent(s)))),
            ("base64", |s| b64(s.as_bytes(), STD, true)),
            ("base64 url-safe", |s| b64(s.as_bytes(), URL, false)),
            ("hex", |s| {
                s.bytes().map(|b| format!("{b:02x}")).collect::<String>()
            }),
            ("upper hex", |s| {
                s.bytes().map(|b| format!("{b:02X}")).collect::<String>()
            }),
            ("\\u escapes", |s| {
                s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
            }),
            ("\\x escapes", |s| {
                s.bytes().map(|b| format!("\\x{b:02x}")).collect()
            }),
            ("fullwidth", |s| s.chars().map(fullwidth).collect()),
            ("zero-width", |s| {
                s.chars().flat_map(|c| [c, '\u{200B}']).collect()
            }),
            ("soft hyphens and BOMs", |s| {
                s.chars()
                    .enumerate()
                    .flat_map(|(i, c)| [c, if i % 2 == 0 { '\u{00AD}' } else { '\u{FEFF}' }])
                    .collect()
            }),
            ("tag characters", |s| {
                s.chars()
                    .map(|c| match c {
                        ' '..='~' => char::from_u32(c as u32 + 0xE0000).unwrap(),
                        _ => c,
                    })
                    .collect()
            }),
            ("base64 of percent", |s| {
                b64(percent(s).as_bytes(), STD, true)
            }),
            ("percent of base64", |s| {
                percent(&b64(s.as_bytes(), STD, true))
            }),
            ("raw UTF-16LE", |s| {
                s.chars().flat_map(|c| [c, '\0']).collect()
            }),
            ("percent of UTF-16LE", |s| {
                s.encode_utf16()
                    .flat_map(u16::to_le_bytes)
                    .map(|b| format!("%{b:02X}"))
                    .collect()
            }),
            ("base64 of UTF-16LE", |s| {
                let wide: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
                b64(&wide, STD, true)
            }),
            ("JSON-escaped \\u", |s| {
                s.chars()
                    .map(|c| format!("\\\\u{:04x}", c as u32))
                    .collect()
            }),
        ]
    }

    const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    fn b64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
            if pad {
                out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
            }
        }
        out
    }

    fn percent(s: &str) -> String {
        s.bytes().map(|b| format!("%{b:02X}")).collect()
    }

    fn fullwidth(c: char) -> char {
        match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap(),
            _ => c,
        }
    }

    fn scanner() -> &'static Scanner {
        Scanner::shared()
    }

    fn text(s: &str) -> Option<&'static str> {
        scanner().scan_text("t", s).map(|f| f.rule)
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// Where a disguised secret can be put, and the place its finding must name.
    fn positions(encoded: &str) -> Vec<(&'static str, Option<Finding>, &'static str)> {
        let s = scanner();
        vec![
            ("text", s.scan_text("t", encoded), "t"),
            (
                "url path",
                s.scan_request(&format!("https://example.com/upload/{encoded}"), &[], b""),
                "url",
            ),
            (
                "query",
                s.scan_request(
                    &format!("https://example.com/search?q=weather&token={encoded}&page=2"),
                    &[],
                    b"",
                ),
                "query:token",
            ),
            (
                "header",
                s.scan_request(
                    "https://example.com/",
                    &headers(&[("Accept", "*/*"), ("X-Token", encoded)]),
                    b"",
                ),
                "header:X-Token",
            ),
            (
                "text body",
                s.scan_request(
                    "https://example.com/",
                    &[],
                    format!("note: {encoded}\n").as_bytes(),
                ),
                "body",
            ),
            (
                "JSON body",
                s.scan_request(
                    "https://example.com/",
                    &headers(&[("Content-Type", "application/json")]),
                    json!({"event": "push", "data": [1, {"v": encoded}]})
                        .to_string()
                        .as_bytes(),
                ),
                "body:/data/1/v",
            ),
            (
                "arguments",
                s.scan_json(&json!({"url": "https://example.com", "body": {"text": encoded}})),
                "/body/text",
            ),
        ]
    }

    #[test]
    fn every_rule_has_a_sample_and_a_well_formed_name() {
        let named: std::collections::BTreeSet<_> = samples().iter().map(|(r, _)| *r).collect();
        let mut seen = std::collections::BTreeSet::new();
        for rule in Scanner::rules() {
            assert!(rule.starts_with("dlp:") && rule.len() > 4, "{rule}");
            assert!(seen.insert(rule), "{rule} is defined twice");
            assert!(named.contains(rule), "{rule} has no sample");
        }
        let literals: usize = SHAPES.iter().map(|s| s.starts.len()).sum();
        // Aho–Corasick's SIMD prefilter (Teddy) takes at most 64 literals.
        assert!(literals <= 64, "{literals} literals");
    }

    #[test]
    fn each_sample_is_found_raw_with_its_rule() {
        for (rule, secret) in samples() {
            assert_eq!(text(&secret), Some(rule), "{secret}");
            assert_eq!(
                text(&format!("the key is {secret}.")),
                Some(rule),
                "{secret}"
            );
        }
    }

    #[test]
    fn each_sample_is_found_through_each_encoding_in_each_position() {
        let mut failures = Vec::new();
        for (rule, secret) in samples() {
            for (how, encode) in encodings() {
                let encoded = encode(&secret);
                for (position, found, place) in positions(&encoded) {
                    match found {
                        Some(f) if f.rule == rule && f.place == place => {}
                        other => failures.push(format!(
                            "{rule} {how} in {position}: {:?}",
                            other.map(|f| (f.rule, f.place, f.decoded))
                        )),
                    }
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} misses:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn findings_name_the_layers_they_were_decoded_through() {
        let secret = "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";
        let layers = |s: &str| scanner().scan_text("t", s).map(|f| f.decoded);
        assert_eq!(layers(secret), Some(vec![]));
        assert_eq!(layers(&percent(secret)), Some(vec![Layer::Percent]));
        assert_eq!(
            layers(&percent(&percent(secret))),
            Some(vec![Layer::Percent, Layer::Percent])
        );
        assert_eq!(
            layers(&b64(secret.as_bytes(), STD, true)),
            Some(vec![Layer::Base64])
        );
        assert_eq!(
            layers(&percent(&b64(secret.as_bytes(), STD, true))),
            Some(vec![Layer::Percent, Layer::Base64])
        );
        let fw: String = secret.chars().map(fullwidth).collect();
        assert_eq!(layers(&fw), Some(vec![Layer::Unicode]));
        assert_eq!(
            layers(&b64(fw.as_bytes(), URL, false)),
            Some(vec![Layer::Base64, Layer::Unicode])
        );
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(layers(&hex), Some(vec![Layer::Hex]));
        assert_eq!(
            layers("\\u0067hp_wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx"),
            Some(vec![Layer::Escape])
        );
        assert_eq!(
            layers("&#103;&#x68;p_wWPw5k4aXcaT4fNP0UcnZwJUVFk6LO0pINUx"),
            Some(vec![Layer::Escape])
        );
    }

    #[test]
    fn a_secret_split_across_two_json_fields_is_found() {
        let f = scanner()
            .scan_json(&json!({"a": "AKIAIOSF", "b": "ODNN7EXAMPLE"}))
            .unwrap();
        assert_eq!(
            (f.rule, f.place.as_str()),
            ("dlp:aws-access-key", "/a + /b")
        );
        let f = scanner()
            .scan_json(&json!({"parts": ["x", "ghp_wWPw5k4aXcaT4fNP", "0UcnZwJUVFk6LO0pINUx"]}))
            .unwrap();
        assert_eq!(
            (f.rule, f.place.as_str()),
            ("dlp:github-token", "/parts/1 + /parts/2")
        );
        // Split and base64-encoded as a whole.
        let encoded = b64(b"xoxb-123456789012-1234567890123-AbCdEfGhIjKl", STD, true);
        let (a, b) = encoded.split_at(20);
        let f = scanner().scan_json(&json!({"p1": a, "p2": b})).unwrap();
        assert_eq!(f.rule, "dlp:slack-token");
        assert_eq!(f.decoded, vec![Layer::Base64]);
    }

    #[test]
    fn a_secret_split_in_every_sample_is_found_across_fields_params_and_headers() {
        for (rule, secret) in samples() {
            // Early, so that neither part is a credential alone and the place names both; and
            // in the middle, where the first half of a long token may already be one.
            let early = if secret.starts_with("https://") {
                16
            } else {
                8
            };
            for (at, both) in [(early, true), (secret.len() / 2, false)] {
                let (a, b) = secret.split_at(at);
                let check = |found: Option<Finding>, joined: &str, what: &str| {
                    let found = found.unwrap_or_else(|| panic!("{secret} split at {at} in {what}"));
                    assert_eq!(found.rule, rule, "{secret} split at {at} in {what}");
                    if both {
                        assert_eq!(found.place, joined, "{secret} split at {at} in {what}");
                    }
                };
                check(
                    scanner().scan_json(&json!({"a": a, "b": b})),
                    "/a + /b",
                    "JSON",
                );
                let url = format!("https://example.com/?a={}&b={}", percent(a), percent(b));
                check(
                    scanner().scan_request(&url, &[], b""),
                    "query:a + query:b",
                    "a query",
                );
                let hs = headers(&[("X-A", a), ("X-B", b)]);
                check(
                    scanner().scan_request("https://example.com/", &hs, b""),
                    "header:X-A + header:X-B",
                    "headers",
                );
                let form = scanner().scan_request(
                    "https://example.com/",
                    &headers(&[("content-type", "application/x-www-form-urlencoded")]),
                    format!("a={}&b={}", percent(a), percent(b)).as_bytes(),
                );
                check(form, "body:a + body:b", "a form");
            }
        }
    }

    #[test]
    fn base64_wrapped_across_lines_is_decoded_whole() {
        // A GitHub token, base64-encoded and broken mid-token at a line end, as a MIME
        // part's body would carry it (with some text before it).
        let encoded = b64(
            b"token=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 for the deploy",
            STD,
            true,
        );
        for line_end in ["\r\n", "\n"] {
            let (a, b) = encoded.split_at(20);
            let body = format!(
                "--b\r\nContent-Transfer-Encoding: base64\r\n\r\n{a}{line_end}{b}\r\n--b--"
            );
            assert_eq!(
                text(&body),
                Some("dlp:github-token"),
                "{line_end:?}: {body}"
            );
        }
        // Ordinary text over several lines is not joined into anything.
        assert_eq!(text("first line of words\nsecond line of words\n"), None);
    }

    #[test]
    fn an_aws_secret_key_is_found_beside_its_name() {
        let value = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        for args in [
            json!({"aws_secret_access_key": value}),
            json!({"Credentials": {"AccessKeyId": "x", "SecretAccessKey": value}}),
            json!({"env": format!("AWS_SECRET_ACCESS_KEY={value}")}),
            json!({"config": format!("[default]\naws_secret_access_key = {value}\n")}),
        ] {
            assert_eq!(
                scanner().scan_json(&args).map(|f| f.rule),
                Some("dlp:aws-secret-key"),
                "{args}"
            );
        }
        let hs = headers(&[("X-Aws-Secret-Access-Key", value)]);
        let f = scanner().scan_request("https://example.com/", &hs, b"");
        assert_eq!(f.map(|f| f.rule), Some("dlp:aws-secret-key"));
        // Without its name, forty base64 characters are anything.
        assert_eq!(scanner().scan_json(&json!({"v": value})), None);
    }

    #[test]
    fn benign_look_alikes_pass() {
        let benign = [
            // Digests, ids.
            "e83c5163316f89bfbde7d9ab23ca2e25604af290",
            "commit E83C5163316F89BFBDE7D9AB23CA2E25604AF290",
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "550e8400-e29b-41d4-a716-446655440000",
            "550E8400-E29B-41D4-A716-446655440000",
            "d41d8cd98f00b204e9800998ecf8427e",
            // `sk-` and friends inside words, or followed by names.
            "task-list",
            "desk-lamp-with-an-adjustable-arm-and-a-dimmer",
            "the risk-assessment-2024-quarterly-report-final is due",
            "pip install sk-learn-compatible-estimator-pipeline",
            "flask-sqlalchemy-migrations-and-alembic-helpers",
            "xoxo-hugs-and-kisses-forever-and-always",
            "hf_hubdownloadwithprogressbarenabled",
            "pdf_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh",
            "MSG.aB3dE5gH7jK9mN1pQ3sT5v.wX7zA9cD1fG3iJ5lM7oP9rS1uV3xY5aB7dE9gH1jK3m",
            "ASKU0123456789abcdef0123456789abcdef",
            "SKU-0123456789abcdef0123456789abcdef",
            "npm_config_registry=https://registry.npmjs.org/",
            // `AKIA` followed by lower case, or too long to be a key id.
            "AKIAiosfodnn7example",
            "AKIAIOSFODNN7EXAMPLEANDMORE",
            "XAKIAIOSFODNN7EXAMPLE",
            // Forty base64 characters without the name that makes them a secret.
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key = YOUR_SECRET_ACCESS_KEY_GOES_HERE_PLEASE",
            // Public keys and certificates.
            "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA7bq\n-----END PUBLIC KEY-----",
            "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n-----END CERTIFICATE-----",
            "-----BEGIN RSA PUBLIC KEY-----",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
            // JWT look-alikes: `eyJ` segments that are not JSON, or JSON without `alg`.
            "eyJzomething.eyJotherthing.signature",
            "eyJub3QiOiJqd3Qi.eyJhbm90aGVyIjoidGhpbmcifQ.c2ln",
            "eyJhbGciOiJIUzI1NiJ9.not-base64-json.sig",
            // Ordinary prose, URLs, paths and identifiers.
            "The secret to a good API key rotation policy is automation; see docs/keys.md.",
            "https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=PLFgquLnL59alCl_2TQvOiD5Vgm1hCaGSI&index=3",
            "https://docs.google.com/document/d/1A2b3C4d5E6f7G8h9I0jK1lM2nO3pQ4rS5tU6vW7xY8z/edit?usp=sharing",
            "https://shop.example.com/search?q=blue%20running%20shoes&size=42&color=navy&sort=price_asc&page=3&session=8f14e45fceea167a5a36dedd4bea2543&utm_source=newsletter&utm_medium=email&utm_campaign=spring_sale_2024&ref=homepage_banner_v2",
            "/usr/local/lib/python3.12/site-packages/requests/adapters.py",
            "getUserAccountSettingsForOrganizationAdministrator",
            "café naïve résumé – “quoted” — 日本語のテキスト",
            "ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ ｉｓ ｆｉｎｅ",
        ];
        for s in benign {
            assert_eq!(scanner().scan_text("t", s), None, "{s}");
            let url = format!("https://example.com/p/{}?v={}", percent(s), percent(s));
            assert_eq!(scanner().scan_request(&url, &[], s.as_bytes()), None, "{s}");
        }
        let english = "The quick brown fox jumps over the lazy dog, then keeps running home.";
        assert_eq!(text(&b64(english.as_bytes(), STD, true)), None);
        assert_eq!(text(&b64(english.as_bytes(), URL, false)), None);
        let hex: String = english.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(text(&hex), None);
        let random: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(text(&b64(&random, STD, true)), None);
        let json = json!({
            "token": "eyJub3QiOiJqd3Qi.eyJhbm90aGVyIjoidGhpbmcifQ.c2ln",
            "items": ["task-list", "desk-lamp"],
            "sha": "e83c5163316f89bfbde7d9ab23ca2e25604af290",
            "id": "550e8400-e29b-41d4-a716-446655440000",
            "access": "AKIA", "rest": "lowercase-and-more",
            "pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        });
        assert_eq!(scanner().scan_json(&json), None);
        let f = scanner().scan_request(
            "https://api.github.com/repos/rust-lang/rust/commits/e83c5163316f89bfbde7d9ab23ca2e25604af290?per_page=100&page=2",
            &headers(&[
                ("Accept", "application/vnd.github+json"),
                ("User-Agent", "aether/0.1"),
                ("If-None-Match", "W/\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\""),
            ]),
            br#"{"query": "repo:rust-lang/rust is:open", "variables": {"first": 50}}"#,
        );
        assert_eq!(f, None);
    }

    #[test]
    fn a_finding_never_shows_the_secret() {
        for (rule, secret) in samples() {
            for found in [
                scanner().scan_text("body", &secret),
                scanner().scan_json(&json!({ secret.clone(): 1 })),
                scanner().scan_json(&json!({"outer": { secret.clone(): {"inner": 1}}})),
                scanner().scan_request(
                    &format!("https://example.com/?{}=1", percent(&secret)),
                    &[],
                    b"",
                ),
                scanner().scan_request(
                    "https://example.com/",
                    &[(secret.clone(), "v".to_string())],
                    b"",
                ),
            ] {
                let found = found.unwrap_or_else(|| panic!("{rule}: {secret}"));
                assert_eq!(found.rule, rule);
                let shown = format!("{found} {found:?}");
                // The distinctive middle of the secret, not a prefix like `-----BEGIN `.
                let middle = &secret[secret.len() / 4..secret.len() * 3 / 4];
                assert!(!shown.contains(middle), "{shown} shows {secret}");
            }
        }
        let f = scanner()
            .scan_json(&json!({"AKIAIOSFODNN7EXAMPLE": "x"}))
            .unwrap();
        assert_eq!(f.place, "/(redacted)");
    }

    #[test]
    fn a_finding_reads_as_rule_place_and_decoding() {
        let token = b64(b"user: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", STD, true);
        let hs = headers(&[("Authorization", &format!("Basic {token}"))]);
        let f = scanner()
            .scan_request("https://example.com/", &hs, b"")
            .unwrap();
        assert_eq!(
            f.to_string(),
            "a credential (dlp:github-token) in header:Authorization (base64-decoded)"
        );
        let url = format!(
            "https://example.com/?next={}",
            percent(&percent(&b64(b"AKIAIOSFODNN7EXAMPLE", URL, false)))
        );
        let f = scanner().scan_request(&url, &[], b"").unwrap();
        assert_eq!(
            f.to_string(),
            "a credential (dlp:aws-access-key) in query:next (percent-decoded, then base64-decoded)"
        );
        let f = scanner().scan_json(&json!("AKIAIOSFODNN7EXAMPLE")).unwrap();
        assert_eq!(
            f.to_string(),
            "a credential (dlp:aws-access-key) in arguments"
        );
    }

    #[test]
    fn binary_and_non_utf8_bodies_are_scanned_as_bytes() {
        let mut body = vec![0xFF, 0x00, 0x9C, 0x80];
        body.extend_from_slice(b"AKIAIOSFODNN7EXAMPLE");
        body.extend_from_slice(&[0xC3, 0x28]);
        let f = scanner().scan_request("https://example.com/", &[], &body);
        assert_eq!(f.map(|f| f.rule), Some("dlp:aws-access-key"));
        assert_eq!(
            scanner().scan_request("https://example.com/", &[], &[0xFF; 4096]),
            None
        );
    }

    #[test]
    fn secrets_in_userinfo_host_and_fragment_are_found() {
        for url in [
            "https://x: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@github.com/a/b.git",
            "https://AKIAIOSFODNN7EXAMPLE.attacker.example/",
            "https://example.com/cb#access_token=ya29.a0AfH6SMBx3kQ9Zt7LmNpQrStUvWxYz012345",
        ] {
            let f = scanner().scan_request(url, &[], b"");
            assert_eq!(f.map(|f| f.place), Some("url".to_string()), "{url}");
        }
    }

    #[test]
    fn crafted_nesting_stays_bounded() {
        // Percent-encoding a ligature-heavy text over and over: NFKC expands it, every layer
        // triggers; the budget keeps the scan linear.
        let mut s = "ﷺﷺﷺﷺ%25%25%25 ".repeat(2000);
        for _ in 0..3 {
            s = percent(&s);
        }
        let started = std::time::Instant::now();
        let _ = scanner().scan_text("t", &s);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn the_regex_loop_reference_agrees_on_raw_samples() {
        let reference = Scanner::regex_loop();
        for (rule, secret) in samples() {
            let found = reference.scan_text("t", &format!("x {secret} y"));
            assert_eq!(found.map(|f| f.rule), Some(rule), "{secret}");
        }
        assert_eq!(reference.scan_text("t", "task-list desk-lamp"), None);
    }
}
