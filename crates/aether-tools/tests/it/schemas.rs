//! Declared schemas: every tool's definition is well formed, and a successful call of each
//! tool returns structured output that validates against its output schema.

use std::collections::BTreeSet;

use serde_json::json;

use crate::common::{Tree, call, ok, tool_names};

#[test]
fn every_definition_is_a_workspace_tool_with_valid_schemas_and_honest_metadata() {
    const WRITERS: [&str; 6] = [
        "write_file",
        "edit_file",
        "move_file",
        "create_directory",
        "delete_file",
        "revert_file",
    ];
    // check_finishing is the quality group's, and reads only.
    use aether_tools::Tool;
    let finishing = aether_tools::workspace::CheckFinishing::new();
    assert_eq!(finishing.def().group, "quality");
    assert_eq!(finishing.def().meta, aether_policy::ToolMeta::read_only());
    for tool in aether_tools::workspace::tools() {
        let def = tool.def();
        assert_eq!(def.group, "workspace", "{}", def.name);
        if WRITERS.contains(&def.name.as_str()) {
            assert!(!def.meta.read_only, "{}", def.name);
            assert!(!def.meta.reaches_network, "{}", def.name);
        } else {
            assert_eq!(
                def.meta,
                aether_policy::ToolMeta::read_only(),
                "{}",
                def.name
            );
        }
        for schema in [&def.input_schema, &def.output_schema] {
            if let Err(e) = jsonschema::meta::validate(schema) {
                panic!("{}: {schema} is not a valid JSON Schema: {e}", def.name);
            }
            assert_eq!(schema["type"], "object", "{}", def.name);
        }
    }
}

#[tokio::test]
async fn every_tool_output_validates_against_its_schema() {
    let t = Tree::new();
    t.file("src/lib.rs", "pub fn needle() {}\n");
    t.file("notes.txt", "one\ntwo\n");
    t.file("site.css", "body { color: #111; }\n");
    t.link("notes.txt", "alias");
    let cx = t.cx_writable();
    // `call` validates the arguments against the input schema and the structured output
    // against the output schema; these calls cover every tool and every output shape.
    let calls = [
        ("list_roots", json!({})),
        ("check_finishing", json!({})),
        ("tts_status", json!({})),
        ("tts_render", json!({"script": "notes.txt"})),
        (
            "record_style",
            json!({"stylesheets": ["site.css"], "direction": "Ink on paper."}),
        ),
        ("list_dir", json!({})),
        ("read_file", json!({"path": "notes.txt"})),
        ("read_file", json!({"path": "notes.txt", "start_line": 2})),
        ("read_file", json!({"path": "notes.txt", "tail": 1})),
        (
            "read_multiple_files",
            json!({"paths": ["notes.txt", "missing.txt"]}),
        ),
        ("get_file_info", json!({"path": "notes.txt"})),
        ("get_file_info", json!({"path": "alias"})),
        ("get_file_info", json!({"path": "src"})),
        ("glob", json!({"pattern": "*.rs"})),
        ("search_files", json!({"query": "needle"})),
        ("search_files", json!({"glob": "*.txt"})),
        ("list_files", json!({})),
        (
            "write_file",
            json!({"path": "new/a.txt", "content": "a\nb\n"}),
        ),
        (
            "edit_file",
            json!({"path": "new/a.txt", "search": "b", "replace": "c"}),
        ),
        (
            "edit_file",
            json!({"path": "new/a.txt", "search": "c", "replace": "d", "dry_run": true}),
        ),
        (
            "move_file",
            json!({"source": "new/a.txt", "destination": "new/b.txt"}),
        ),
        ("create_directory", json!({"path": "made/here"})),
        ("delete_file", json!({"path": "new/b.txt"})),
        ("revert_file", json!({"path": "new/b.txt"})),
    ];
    let mut covered = BTreeSet::new();
    for (tool, args) in calls {
        let (_, out) = ok(call(&cx, tool, args).await);
        assert!(out.is_object(), "{tool}: {out}");
        covered.insert(tool.to_string());
    }
    assert_eq!(covered, tool_names().into_iter().collect::<BTreeSet<_>>());
}
