//! Canonical JSON and SHA-256 digests.
//!
//! A definition hash must not depend on the order in which a map happened to be built, or on
//! whether some crate in the build switched `serde_json` to insertion order. So objects are
//! written with their keys sorted, without whitespace, before hashing.

use std::fmt;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest, shown as `sha256:` followed by 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses `sha256:HEX` or bare `HEX`.
    pub fn parse(s: &str) -> Option<Digest> {
        let hex = s.strip_prefix("sha256:").unwrap_or(s);
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex, &mut out).ok()?;
        Some(Digest(out))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.to_hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

pub fn sha256(bytes: &[u8]) -> Digest {
    Digest(Sha256::digest(bytes).into())
}

/// The length of `value` as compact JSON, counted as it is written out, never held
/// (`None` when it does not serialize).
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).ok()?;
    Some(count.0)
}

/// `value` as compact JSON with every object's keys in byte order.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_len_is_the_length_of_the_json_written() {
        for value in [
            json!(null),
            json!("a \"quoted\" line\n\twith a tab and é"),
            json!({"b": [1, 2.5, true], "a": {"c": "\u{1}"}}),
        ] {
            assert_eq!(
                json_len(&value),
                Some(serde_json::to_vec(&value).unwrap().len())
            );
        }
    }

    #[test]
    fn key_order_does_not_change_the_digest() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 1}], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, {"p": 1, "q": 2}]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"p":1,"q":2}]},"b":1}"#
        );
    }

    #[test]
    fn digest_round_trips_through_text() {
        let d = sha256(b"aether");
        assert_eq!(Digest::parse(&d.to_string()), Some(d));
        assert_eq!(Digest::parse(&d.to_hex()), Some(d));
        assert_eq!(Digest::parse("sha256:zz"), None);
    }
}
