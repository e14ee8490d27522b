//! The screen's unit tests: shapes, layers, places, the reference loop.
use super::*;
use serde_json::json;

include!("../../tests/data/dlp_families.rs.in");

/// One sample of each template of each rule, as it would be leaked.
fn samples() -> Vec<(&'static str, String)> {
    family_samples(1)
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
    // Every literal is distinctive enough that the automaton wakes rarely: two bytes at
    // least, and three unless it is one of the few anchored where a shape needs them.
    for lit in SHAPES.iter().flat_map(|s| s.starts) {
        assert!(lit.len() >= 3 || *lit == "Q~", "{lit}");
    }
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
        .scan_json(&json!({"a": "AKIA2E7Q", "b": "J4VXMZ8KWRNB"}))
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
    let encoded = b64(b"xoxb-493057816204-8731955023746-QwErTy5UiOp2", STD, true);
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
                // Unless the second part is a credential alone (a bare secret key).
                let alone = scanner().scan_text("t", b).map(|f| f.rule);
                if alone.is_none() || alone != Some(found.rule) {
                    assert_eq!(found.rule, rule, "{secret} split at {at} in {what}");
                }
                if both && alone.is_none() {
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
        let body =
            format!("--b\r\nContent-Transfer-Encoding: base64\r\n\r\n{a}{line_end}{b}\r\n--b--");
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
fn an_aws_secret_key_is_found_beside_its_name_or_alone() {
    let value = "q8Lz3vR1tY6wP0sJ9mN2bX5cV7fH4kG1dA3eS8uZ";
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
    let f = scanner().scan_json(&json!({"v": value}));
    assert_eq!(f.map(|f| f.rule), Some("dlp:cloud-secret-key"));
    // AWS's documented example is a placeholder, named or not.
    for args in [
        json!({"v": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}),
        json!({"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}),
    ] {
        assert_eq!(scanner().scan_json(&args), None, "{args}");
    }
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
        "AKIA2E7QJ4VXMZ8KWRNBANDMORE",
        "XAKIA2E7QJ4VXMZ8KWRNB",
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
        .scan_json(&json!({"AKIA2E7QJ4VXMZ8KWRNB": "x"}))
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
        percent(&percent(&b64(b"AKIA2E7QJ4VXMZ8KWRNB", URL, false)))
    );
    let f = scanner().scan_request(&url, &[], b"").unwrap();
    assert_eq!(
        f.to_string(),
        "a credential (dlp:aws-access-key) in query:next (percent-decoded, then base64-decoded)"
    );
    let f = scanner().scan_json(&json!("AKIA2E7QJ4VXMZ8KWRNB")).unwrap();
    assert_eq!(
        f.to_string(),
        "a credential (dlp:aws-access-key) in arguments"
    );
}

#[test]
fn binary_and_non_utf8_bodies_are_scanned_as_bytes() {
    let mut body = vec![0xFF, 0x00, 0x9C, 0x80];
    body.extend_from_slice(b"AKIA2E7QJ4VXMZ8KWRNB");
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
        "https://AKIA2E7QJ4VXMZ8KWRNB.attacker.example/",
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

#[test]
fn the_documented_rules_are_the_rules() {
    let doc = include_str!("../../../../docs/SHELL_AND_NETWORK.md");
    let section = &doc[doc.find("### DLP").expect("a DLP section")..];
    let documented: Vec<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(rule, _)| rule.to_string())
        .collect();
    let rules: Vec<String> = Scanner::rules().map(str::to_string).collect();
    assert_eq!(
        documented, rules,
        "docs/SHELL_AND_NETWORK.md's DLP table, in rule order"
    );
}

/// The in-order join looks only around junctions: a secret cut far from its start (a long
/// token), one cut inside its literal, and the shapes that hold whitespace are still found
/// when long prose surrounds them, and a credential no junction crosses is left to the values'
/// own scans.
#[test]
fn the_join_finds_what_crosses_a_junction_wherever_it_starts() {
    let url_safe: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let prose = "The scheduler drops tasks when the queue is full; steps follow. ".repeat(40);
    let header = b64(br#"{"alg":"HS256","typ":"JWT"}"#, url_safe, false);
    let claims: String = (0..60).map(|i| format!("\"c{i}\":\"v{i}x9Q\",")).collect();
    let payload = b64(
        format!("{{{claims}\"sub\":\"42\"}}").as_bytes(),
        url_safe,
        false,
    );
    let jwt = format!("{header}.{payload}.Xq3v9Lm2Pz8Rw4Tn6Yb1Kd7Hs5Gf0Ja2Ce4");
    assert!(jwt.len() > 1000, "{}", jwt.len());
    let cut = 900;
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                prose.clone(),
                jwt[..cut].to_string(),
                jwt[cut..].to_string(),
                prose.clone(),
            ],
            "dlp:jwt",
        ),
        (
            vec![
                prose.clone(),
                "-----BEGIN RSA PRIV".into(),
                "ATE KEY-----\nMIIEowIBAAKCAQEA3vQx".into(),
                prose.clone(),
            ],
            "dlp:private-key",
        ),
        (
            vec![
                prose.clone(),
                format!("{prose}DD_API_KEY: 3f9a1c7e5b2d8"),
                "04f6a9c1e3b5d7f0a2c".into(),
                format!(" {prose}"),
            ],
            "dlp:datadog-key",
        ),
    ];
    for (values, rule) in cases {
        let args = json!({ "parts": values });
        let found = scanner().scan_json(&args).map(|f| f.rule);
        assert_eq!(found, Some(rule), "{rule}");
    }
    // Found by its own value's scan, not the join's: the same answer either way.
    let whole = json!({ "parts": [prose.clone(), jwt.clone(), prose.clone()] });
    assert_eq!(scanner().scan_json(&whole).map(|f| f.rule), Some("dlp:jwt"));
    // Prose joined to prose holds nothing.
    let plain = json!({ "parts": [prose.clone(), prose.clone(), "ghp_", prose] });
    assert_eq!(scanner().scan_json(&plain), None);
}
