//! The command envelope: what a caller says about a call beside its arguments, in the MCP
//! request's `_meta` (never in the tool's own input): an explicit confirmation
//! (`aether/confirm`), an idempotency key (`aether/idempotencyKey`), when it was issued
//! (`aether/issuedAt`) and until when it holds (`aether/expiresAt`; both RFC 3339 or
//! milliseconds since the epoch).

use serde_json::{Map, Value};

/// How long an idempotency key keeps the first call's result.
pub const IDEMPOTENCY_RETENTION_US: i64 = 24 * 3_600 * 1_000_000;
/// How far in the future an envelope may say it was issued (clock skew).
pub const ISSUED_SKEW_US: i64 = 5 * 60 * 1_000_000;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    pub confirm: Option<bool>,
    pub idempotency_key: Option<String>,
    pub issued_at_us: Option<i64>,
    pub expires_at_us: Option<i64>,
    /// What was wrong with it, if anything (the call is then refused).
    pub problem: Option<String>,
    /// The W3C trace context the request carried (`traceparent`, as MCP 2026-07-28 puts it
    /// in `_meta`), kept in the audit row. One not well-formed is ignored, as W3C says a
    /// receiver does: it refuses nothing.
    pub trace: Option<String>,
}

/// A W3C `traceparent` (version 00 and the later ones read as 00 reads them): `VV-TRACE-PARENT-FF`,
/// lowercase hex, the trace and parent ids not all zeros, version `ff` invalid.
pub fn traceparent(value: &str) -> Option<&str> {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let [version, trace, parent, flags, rest @ ..] = parts.as_slice() else {
        return None;
    };
    let well_formed = hex(version, 2)
        && *version != "ff"
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && hex(flags, 2)
        && (rest.is_empty() || *version != "00");
    well_formed.then(|| &value[..55])
}

fn time_us(key: &str, v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .filter(|ms| *ms >= 0)
            .and_then(|ms| ms.checked_mul(1_000))
            .ok_or_else(|| format!("{key} is not a time (milliseconds since the epoch)")),
        Value::String(s) => {
            time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map(|t| (t.unix_timestamp_nanos() / 1_000) as i64)
                .map_err(|e| format!("{key} {s:?} is not an RFC 3339 time: {e}"))
        }
        _ => Err(format!("{key} is not a time")),
    }
}

impl Envelope {
    /// The envelope of a request's `_meta` (keys Aether does not know are left alone).
    pub fn from_meta(meta: &Map<String, Value>) -> Envelope {
        let mut e = Envelope::default();
        let mut problems = Vec::new();
        if let Some(v) = meta.get("aether/confirm") {
            match v.as_bool() {
                Some(b) => e.confirm = Some(b),
                None => problems.push("aether/confirm is not true or false".to_string()),
            }
        }
        if let Some(v) = meta.get("aether/idempotencyKey") {
            match v.as_str() {
                Some(k)
                    if !k.is_empty()
                        && k.len() <= 128
                        && k.chars().all(|c| {
                            c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
                        }) =>
                {
                    e.idempotency_key = Some(k.to_string())
                }
                _ => problems.push(
                    "aether/idempotencyKey is 1-128 of letters, digits, '.', '_', ':', '-'".into(),
                ),
            }
        }
        for (key, slot) in [
            ("aether/issuedAt", &mut e.issued_at_us),
            ("aether/expiresAt", &mut e.expires_at_us),
        ] {
            if let Some(v) = meta.get(key) {
                match time_us(key, v) {
                    Ok(t) => *slot = Some(t),
                    Err(why) => problems.push(why),
                }
            }
        }
        e.trace = meta
            .get("traceparent")
            .and_then(Value::as_str)
            .and_then(traceparent)
            .map(str::to_string);
        if !problems.is_empty() {
            e.problem = Some(problems.join("; "));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_trace_context_is_kept_when_well_formed_and_ignored_when_not() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let e = Envelope::from_meta(json!({"traceparent": good}).as_object().unwrap());
        assert_eq!(e.trace.as_deref(), Some(good));
        assert!(e.problem.is_none());
        // A later version may carry more; its first four fields are what is kept.
        assert_eq!(
            traceparent(&format!("01{}-extra", &good[2..])),
            Some(&format!("01{}", &good[2..])[..])
        );
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e47\u{e9}-00f067aa0ba902b7-01",
        ] {
            assert_eq!(traceparent(bad), None, "{bad}");
            let e = Envelope::from_meta(json!({"traceparent": bad}).as_object().unwrap());
            assert!(e.trace.is_none() && e.problem.is_none(), "{bad}");
        }
        let e = Envelope::from_meta(json!({"traceparent": 7}).as_object().unwrap());
        assert!(e.trace.is_none() && e.problem.is_none());
    }

    proptest::proptest! {
        // proptest's default runs 256 cases, or `PROPTEST_CASES`.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text, and text shaped like a traceparent with any hex or near-hex: no panic;
        /// what is kept is always four well-formed fields, version 00 to fe, ids not zero.
        #[test]
        fn only_well_formed_trace_contexts_are_kept(
            text in proptest::prop_oneof![
                "[ -~]{0,80}",
                "[0-9a-fA-Fg]{2}-[0-9a-fA-F0]{32}-[0-9a-fA-F0]{16}-[0-9a-f]{2}(-[ -~]{0,8})?",
                "0{0,2}-0{32}-[0-9a-f]{16}-01",
            ],
        ) {
            if let Some(kept) = traceparent(&text) {
                let parts: Vec<&str> = kept.split('-').collect();
                let hex = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                proptest::prop_assert_eq!(parts.len(), 4, "{}", text);
                proptest::prop_assert!(parts.iter().all(|p| hex(p)), "{}", text);
                proptest::prop_assert_eq!(
                    parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
                    vec![2, 32, 16, 2]
                );
                proptest::prop_assert!(parts[0] != "ff");
                proptest::prop_assert!(parts[1].bytes().any(|b| b != b'0'));
                proptest::prop_assert!(parts[2].bytes().any(|b| b != b'0'));
                proptest::prop_assert!(text.starts_with(kept));
            }
        }
    }

    #[test]
    fn an_envelope_is_read_from_meta_and_anything_malformed_is_a_problem() {
        let meta = json!({
            "aether/confirm": true,
            "aether/idempotencyKey": "order-42",
            "aether/expiresAt": "2030-01-01T00:00:00Z",
            "aether/issuedAt": 1_700_000_000_000i64,
            "progressToken": "p1"
        });
        let e = Envelope::from_meta(meta.as_object().unwrap());
        assert_eq!(e.confirm, Some(true));
        assert_eq!(e.idempotency_key.as_deref(), Some("order-42"));
        assert_eq!(e.expires_at_us, Some(1_893_456_000_000_000));
        assert_eq!(e.issued_at_us, Some(1_700_000_000_000_000));
        assert!(e.problem.is_none());
        for bad in [
            json!({"aether/confirm": "yes"}),
            json!({"aether/idempotencyKey": ""}),
            json!({"aether/idempotencyKey": "a b"}),
            json!({"aether/expiresAt": "tomorrow"}),
            json!({"aether/issuedAt": -5}),
        ] {
            assert!(
                Envelope::from_meta(bad.as_object().unwrap())
                    .problem
                    .is_some(),
                "{bad}"
            );
        }
    }
}
