//! The limits every tool's arguments share, checked at step 6 before anything reads them
//! further: how long a URL may be, how many request headers and how big, and what HTTP
//! allows in their names and values.

use serde_json::Value;

/// The longest URL an argument may hold.
pub const MAX_URL_BYTES: usize = 8 << 10;
/// The most request headers a call may send, and the most bytes of one (name and value).
pub const MAX_HEADERS: usize = 64;
pub const MAX_HEADER_BYTES: usize = 8 << 10;

/// What in a call's arguments breaks the limits every tool shares, before anything reads them:
/// a URL argument longer than [`MAX_URL_BYTES`]; request headers (a `headers` object, which
/// network tools send as they are) too many, too long, or not what HTTP allows — a name
/// that is not a token, a value with a control character (CR, LF and NUL inject headers).
/// Returns the rule and why, bounded.
pub(crate) fn arguments_out_of_bounds(
    def: &aether_policy::ToolDef,
    args: &Value,
) -> Option<(&'static str, String)> {
    // A network tool's every URL (declared or not); another tool's declared ones.
    let kinds = &def.arguments;
    let urls = match def.meta.reaches_network {
        true => kinds.urls_in(args),
        false => kinds.strings_named(&kinds.urls, args),
    };
    for url in urls {
        if url.len() > MAX_URL_BYTES {
            return Some((
                "limits:url",
                format!(
                    "a URL argument is {} bytes; at most {MAX_URL_BYTES} are sent",
                    url.len()
                ),
            ));
        }
    }
    // Anything but an object is not headers as network tools take them: the schema judges it.
    let headers = args.get("headers")?.as_object()?;
    if headers.len() > MAX_HEADERS {
        return Some((
            "limits:headers",
            format!(
                "{} request headers; at most {MAX_HEADERS} are sent",
                headers.len()
            ),
        ));
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    for (name, value) in headers {
        let shown: String = name.escape_debug().take(64).collect();
        if name.is_empty() || !name.bytes().all(token) {
            return Some((
                "headers:name",
                format!(
                    "header name \"{shown}\" is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
                ),
            ));
        }
        let Some(value) = value.as_str() else {
            continue;
        };
        if name.len() + value.len() > MAX_HEADER_BYTES {
            return Some((
                "limits:headers",
                format!(
                    "header \"{shown}\" is {} bytes; at most {MAX_HEADER_BYTES} are sent",
                    name.len() + value.len()
                ),
            ));
        }
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Some((
                "headers:value",
                format!(
                    "header \"{shown}\" holds a control character (CR, LF, NUL, …), which HTTP does not allow in a value"
                ),
            ));
        }
    }
    None
}
