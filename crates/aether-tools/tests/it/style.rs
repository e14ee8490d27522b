//! `record_style`: the record's token tables come from the stylesheets, the prose may name
//! only colours they contain, and the record is written like any write (confined, undoable).

use serde_json::json;

use crate::common::{Tree, call, denied, invalid, ok};

const SITE: &str = r##":root { --brand: #0A7; --ink: #1b1f24; }
body { color: var(--ink); background: #FFFFFF; font-family: "Inter", system-ui, sans-serif; font-size: 16px; }
h1 { font-size: 2.25rem; color: var(--brand); margin: 0 0 24px; }
.card { border-radius: 8px; padding: 16px 24px; box-shadow: 0 1px 2px rgba(0, 0, 0, 0.2); }
/* an old colour, #ff0000, commented out */
@media (min-width: 48em) { .card { padding: 24px 32px; } }
"##;

#[tokio::test]
async fn the_record_is_generated_from_the_stylesheets_and_names_only_their_colours() {
    let t = Tree::new();
    t.file("web/site.css", SITE);
    t.file(
        "web/extra.css",
        ".note { color: #1B1F24; border-radius: 4px; }\n",
    );
    let cx = t.cx_writable();
    let (text, out) = ok(call(
        &cx,
        "record_style",
        json!({
            "stylesheets": ["web/site.css", "web/extra.css"],
            "direction": "Calm and legible: ink #1b1f24 on white (#fff), the teal #00aa77 only for headings.",
            "rules": ["Headings use the brand teal, rgb(0 170 119), and nothing else does."],
            "output": "docs/STYLE.md",
        }),
    )
    .await);
    assert_eq!(
        (out["path"].as_str(), out["created"].as_bool()),
        (Some("docs/STYLE.md"), Some(true)),
        "{text}"
    );
    assert_eq!(
        (
            out["colours"].as_u64(),
            out["custom_properties"].as_u64(),
            out["breakpoints"].as_u64()
        ),
        (Some(4), Some(2), Some(1)),
        "{out}"
    );
    let record = std::fs::read_to_string(t.ws.join("docs/STYLE.md")).unwrap();
    for line in [
        "## Direction\n\nCalm and legible",
        "- Headings use the brand teal",
        "| `#1b1f24` | 2 | --ink, color |",
        "| `#00aa77` | 1 | --brand |",
        "| `#ffffff` | 1 | background |",
        "| `rgba(0, 0, 0, 0.2)` | 1 | box-shadow |",
        "| `--brand` | `#0A7` |",
        "| `\"Inter\", system-ui, sans-serif` | 1 |",
        "| `24px` | 3 |",
        "| `(min-width: 48em)` |",
    ] {
        assert!(
            record.contains(line),
            "the record lacks {line:?}:\n{record}"
        );
    }
    // The commented-out colour is no token.
    assert!(!record.contains("#ff0000"), "{record}");

    // Prose naming a colour the code does not have is refused; the record stays as it was.
    let message = invalid(
        call(
            &cx,
            "record_style",
            json!({"stylesheets": ["web/site.css"], "direction": "Accents in #ff0000 and hsl(10 80% 50%).", "output": "docs/STYLE.md"}),
        )
        .await,
    );
    assert!(
        message.contains("#ff0000") && message.contains("no stylesheet contains"),
        "{message}"
    );
    assert_eq!(
        std::fs::read_to_string(t.ws.join("docs/STYLE.md")).unwrap(),
        record
    );

    // Undone like any write; confined like any path.
    ok(call(&cx, "revert_file", json!({"path": "docs/STYLE.md"})).await);
    assert!(!t.ws.join("docs/STYLE.md").exists());
    denied(
        call(
            &cx,
            "record_style",
            json!({"stylesheets": ["../outside/secret.txt"], "direction": "x"}),
        )
        .await,
    );
    denied(
        call(&cx, "record_style", json!({"stylesheets": ["web/site.css"], "direction": "x", "output": "../outside/STYLE.md"}))
            .await,
    );
    assert!(!t.outside.join("STYLE.md").exists());
}
