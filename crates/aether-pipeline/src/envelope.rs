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
