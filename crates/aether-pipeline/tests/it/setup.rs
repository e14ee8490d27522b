//! Building a pipeline: unknown agents, catalogs with duplicate or malformed tools (refused
//! before anything is approved), and the capability document.

use std::sync::Arc;

use aether_pipeline::{Catalog, CatalogError, PipelineError, Transport, capabilities};
use aether_policy::config::Limits;
use aether_policy::{Tier, ToolDef};
use aether_tools::{CallContext, Tool, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::support::*;

/// A tool with whatever definition a test gives it.
struct Defined(ToolDef);

#[async_trait]
impl Tool for Defined {
    fn def(&self) -> &ToolDef {
        &self.0
    }

    async fn call(&self, _cx: CallContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ran"))
    }
}

fn defined(def: ToolDef) -> Arc<dyn Tool> {
    Arc::new(Defined(def))
}

#[tokio::test]
async fn a_session_for_an_unknown_agent_is_refused_with_the_known_ones() {
    let h = Harness::new();
    let lead = aether_policy::AgentProfile::with_groups("lead", &["alpha"]);
    let p = h
        .pipeline(
            vec![worker(), lead],
            Limits::default(),
            vec![Echo::new("echo", "alpha", Tier::Standard)],
        )
        .await;
    match p.session("ghost", Transport::Http, "s1".into()) {
        Err(PipelineError::UnknownAgent { name, known }) => {
            assert_eq!(name, "ghost");
            assert_eq!(known, "lead, worker");
        }
        Err(other) => panic!("wrong error: {other}"),
        Ok(ctx) => panic!("a session for an unknown agent: {ctx:?}"),
    }
    let ctx = p.session("worker", Transport::Http, "s2".into()).unwrap();
    assert_eq!(
        (ctx.agent.name.as_str(), ctx.transport.as_str()),
        ("worker", "http")
    );
    assert_eq!(*ctx.groups, ["alpha".to_string()].into());
    h.check().await;
}

async fn refused_catalog(tools: Vec<Arc<dyn Tool>>) -> CatalogError {
    let h = Harness::new();
    let error = match h
        .try_pipeline(vec![worker()], Limits::default(), tools)
        .await
    {
        Err(PipelineError::Catalog(e)) => e,
        Err(other) => panic!("expected a catalog error, got {other}"),
        Ok(_) => panic!("a bad catalog was accepted"),
    };
    assert!(
        h.store.registry().await.unwrap().is_empty(),
        "a refused catalog approved something"
    );
    let report = h.check().await;
    assert_eq!(report.rows, 0);
    error
}

#[tokio::test]
async fn a_catalog_with_two_tools_of_one_name_is_refused() {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Echo::new("echo", "alpha", Tier::Standard),
        Echo::new("other", "alpha", Tier::Standard),
        Echo::new("echo", "beta", Tier::Elevated),
    ];
    match refused_catalog(tools).await {
        CatalogError::Duplicate(name) => assert_eq!(name, "echo"),
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_malformed_definition_is_refused_with_its_problems() {
    let mut bad = def("bad name", "Alpha", Tier::Standard, open_schema());
    bad.description = "short".into();
    let tools = vec![
        defined(def("fine", "alpha", Tier::Standard, open_schema())),
        defined(bad),
    ];
    match refused_catalog(tools).await {
        CatalogError::Malformed { name, problems } => {
            assert_eq!(name, "bad name");
            let all = problems.join("\n");
            for needle in ["name", "group", "description"] {
                assert!(
                    problems.iter().any(|p| p.contains(needle)),
                    "{needle} not named in:\n{all}"
                );
            }
        }
        other => panic!("{other}"),
    }

    // A schema that is not valid JSON Schema.
    let bad = def(
        "bad_schema",
        "alpha",
        Tier::Standard,
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}),
    );
    match refused_catalog(vec![defined(bad)]).await {
        CatalogError::Malformed { name, problems } => {
            assert_eq!(name, "bad_schema");
            assert!(
                problems
                    .iter()
                    .any(|p| p.contains("input schema is not valid JSON Schema")),
                "{problems:?}"
            );
        }
        other => panic!("{other}"),
    }

    // An output schema that is not an object schema.
    let mut bad = def("bad_output", "alpha", Tier::Standard, open_schema());
    bad.output_schema = json!({"type": "string"});
    match refused_catalog(vec![defined(bad)]).await {
        CatalogError::Malformed { name, problems } => {
            assert_eq!(name, "bad_output");
            assert!(
                problems.iter().any(|p| p.contains("output schema")),
                "{problems:?}"
            );
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn the_catalog_validates_and_the_capability_document_lists_what_is_built() {
    let calc = def("calculate", "calc", Tier::Standard, strict_schema());
    let catalog = Catalog::new(vec![
        defined(calc),
        Echo::new("echo", "alpha", Tier::Standard),
    ])
    .unwrap();
    assert_eq!(catalog.len(), 2);
    assert!(catalog.validate("calculate", &valid()).is_ok());
    let err = catalog
        .validate("calculate", &json!({"text": 1}))
        .unwrap_err();
    assert!(err.contains("/text"), "{err}");
    assert!(catalog.validate("nope", &json!({})).is_err());

    let doc = capabilities(&catalog);
    let list = doc["capabilities"].as_array().unwrap();
    let find = |key: &str| {
        list.iter()
            .find(|c| c["capability"] == key)
            .unwrap_or_else(|| panic!("{key} missing"))
    };
    assert_eq!(find("calc")["application_status"], "available");
    assert_eq!(find("calc")["mcp_exposure"], "exposed");
    assert_eq!(find("calc")["tools"], json!(["calculate"]));
    assert_eq!(find("shell")["application_status"], "planned");
    assert_eq!(find("shell")["tools"], json!([]));
    // A tool of a group that is not a capability is not advertised as one.
    assert!(list.iter().all(|c| c["capability"] != "alpha"));
}
