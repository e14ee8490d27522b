//! `capture_api_schema` through the whole pipeline against real APIs on loopback (names
//! answered by an injected resolver): an advertised OpenAPI 3.0 document saved as 3.1 and
//! compared with an agreed schema, an API without one probed, the file journalled so
//! `revert_file` undoes it; and every way a capture could leave the allowed host refused with
//! nothing saved.

use std::fs;

use aether_policy::paths::RootMode;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::*;

/// An API that advertises an OpenAPI 3.0 document; `other.test` (not allowed) is where one
/// of its documents points.
fn advertising() -> Router {
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "shop", "version": "1"},
        "paths": {
            "/users/{id}": {"get": {"responses": {"200": {
                "description": "a user",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/User"}}}
            }}}},
            "/health": {"get": {"responses": {"200": {"description": "up"}}}}
        },
        "components": {"schemas": {"User": {
            "type": "object",
            "required": ["id", "name"],
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "nickname": {"type": "string", "nullable": true}
            }
        }}}
    });
    Router::new().route(
        "/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc) }
        }),
    )
}

/// An API with no document: its answers are all there is.
fn plain() -> Router {
    Router::new()
        .route(
            "/users",
            get(|| async { axum::Json(json!([{"id": 1, "name": "ada", "email": null}])) }),
        )
        .route(
            "/users/1",
            get(|| async { axum::Json(json!({"id": 1, "name": "ada"})) }),
        )
        .route(
            "/users/2",
            get(|| async { axum::Json(json!({"id": 2, "name": "bob", "tags": ["x"]})) }),
        )
        .route("/health", get(|| async { "ok" }))
        .route(
            "/swagger-elsewhere",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "http://other.test/openapi.json")],
                )
            }),
        )
}

/// A read-write root `ws` and a read-only `ro`; the agent may reach `api.test` and
/// `plain.test` (loopback, allowed to it), and not `other.test`.
async fn world() -> NetWorld {
    NetWorld::new(
        &[("ws", RootMode::ReadWrite), ("ro", RootMode::ReadOnly)],
        &["api.test", "plain.test", "other.test"],
        &["workspace", "research"],
        &["api.test", "plain.test"],
    )
    .await
}

/// The JSON file saved at `rel` in `ws`.
fn saved(w: &NetWorld, rel: &str) -> Value {
    serde_json::from_str(&fs::read_to_string(w.ws.join(rel)).unwrap()).unwrap()
}

fn differences(out: &Value) -> Vec<(String, String, String)> {
    out["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["severity"].as_str().unwrap().to_string(),
                d["operation"].as_str().unwrap().to_string(),
                d["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_advertised_document_is_saved_as_31_compared_with_the_agreed_one_and_reverted() {
    let w = world().await;
    let port = serve(advertising()).await;
    // The agreed schema (YAML): users carry an email the API does not give, and an orders
    // operation the API does not have; health is not in it.
    fs::write(
        w.ws.join("agreed.yaml"),
        "openapi: 3.1.0\ninfo: {title: shop, version: '1'}\npaths:\n  /users/{userId}:\n    get:\n      responses:\n        '200':\n          description: a user\n          content:\n            application/json:\n              schema:\n                type: object\n                required: [id, name, email]\n                properties:\n                  id: {type: integer}\n                  name: {type: string}\n                  email: {type: string}\n  /orders:\n    get:\n      responses:\n        '200': {description: orders}\n",
    )
    .unwrap();
    let result = w
        .call(
            "capture_api_schema",
            json!({
                "url": format!("http://api.test:{port}/"),
                "output": "api/openapi.json",
                "agreed": "agreed.yaml"
            }),
        )
        .await;
    let out = structured(&result);
    assert_eq!(out["source"], "advertised");
    assert_eq!(out["advertised_version"], "3.0.3");
    assert_eq!(out["saved"], "ws:api/openapi.json");
    assert_eq!(out["operations"], json!(["GET /health", "GET /users/{id}"]));
    let saved = saved(&w, "api/openapi.json");
    assert_eq!(saved["openapi"], "3.1.0");
    assert_eq!(
        saved["components"]["schemas"]["User"]["properties"]["nickname"]["type"],
        json!(["string", "null"])
    );
    let diffs = differences(&out);
    for expected in [
        (
            "breaking",
            "GET /orders",
            "in the agreed schema, not in the API",
        ),
        (
            "breaking",
            "GET /users/{userId}",
            "/email: required by the agreed schema, missing from the answer",
        ),
        (
            "additive",
            "GET /users/{userId}",
            "/nickname: in the answer",
        ),
        (
            "additive",
            "GET /health",
            "in the API, not in the agreed schema",
        ),
    ] {
        assert!(
            diffs
                .iter()
                .any(|(s, o, d)| s == expected.0 && o == expected.1 && d.starts_with(expected.2)),
            "{expected:?} not in {diffs:?}"
        );
    }
    assert_eq!(out["matches_agreed"], false);
    // Elevated: the whole result is in the audit row.
    let row = row_of(&w.h.store, &result.call_id).await;
    assert_eq!(row.event.outcome, "ok");
    assert!(
        row.event.result.contains("GET /orders"),
        "{}",
        row.event.result
    );

    // Journalled like any write: revert_file takes it back.
    ok_text(
        &call(
            &w.p,
            &w.ctx,
            "revert_file",
            json!({"path": "api/openapi.json"}),
        )
        .await,
    );
    assert!(!w.ws.join("api/openapi.json").exists());
    w.h.check().await;
}

#[tokio::test]
async fn an_api_without_a_document_is_probed_and_its_answers_give_the_shapes() {
    let w = world().await;
    let port = serve(plain()).await;
    fs::write(
        w.ws.join("agreed.json"),
        json!({
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "1"},
            "paths": {
                "/users/{id}": {"get": {"responses": {"200": {"description": "u", "content": {
                    "application/json": {"schema": {"type": "object", "required": ["id", "name"],
                        "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                                       "tags": {"type": "array", "items": {"type": "string"}}}}}}}}}},
                "/orders": {"get": {"responses": {"200": {"description": "o"}}}}
            }
        })
        .to_string(),
    )
    .unwrap();
    let out = structured(
        &w.call(
            "capture_api_schema",
            json!({
                "url": format!("http://plain.test:{port}"),
                "endpoints": ["/users", "/users/1", "/users/2", "/health"],
                "output": "captured.json",
                "agreed": "agreed.json"
            }),
        )
        .await,
    );
    assert_eq!(out["source"], "probed");
    assert_eq!(
        out["operations"],
        json!(["GET /health", "GET /users", "GET /users/{usersId}"])
    );
    let probes = out["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 4);
    assert_eq!(probes[3]["json"], false);
    let saved = saved(&w, "captured.json");
    assert_eq!(saved["openapi"], "3.1.0");
    let user = &saved["paths"]["/users/{usersId}"]["get"];
    assert_eq!(user["parameters"][0]["schema"]["type"], "integer");
    let schema = &user["responses"]["200"]["content"]["application/json"]["schema"];
    // Two answers merged: id and name in both (required), tags in one.
    assert_eq!(schema["required"], json!(["id", "name"]));
    assert_eq!(schema["properties"]["tags"]["items"]["type"], "string");
    let list = &saved["paths"]["/users"]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    assert_eq!(list["items"]["properties"]["email"]["type"], "null");
    // The id's type differs (breaking); orders was not probed, so it is not judged.
    let diffs = differences(&out);
    assert!(
        diffs.iter().any(|(s, o, d)| s == "breaking"
            && o == "GET /users/{id}"
            && d == "/id: the agreed schema says string, the API answers integer"),
        "{diffs:?}"
    );
    assert!(
        !diffs.iter().any(|(_, o, _)| o == "GET /orders"),
        "{diffs:?}"
    );
    assert_eq!(out["matches_agreed"], false);
    w.h.check().await;
}

/// Nothing is saved in any of these.
#[tokio::test]
async fn a_capture_never_leaves_the_allowed_host_and_bad_input_changes_nothing() {
    let w = world().await;
    let port = serve(plain()).await;
    let base = format!("http://plain.test:{port}");
    // A host the agent may not reach: refused before the tool runs.
    let r = w
        .call(
            "capture_api_schema",
            json!({"url": format!("http://other.test:{port}/"), "output": "x.json"}),
        )
        .await;
    refused(
        &w.h.store,
        &r,
        aether_policy::Step::Egress,
        "egress:domain-not-allowed",
    )
    .await;
    // A credential in an endpoint: refused before anything leaves.
    let r = w
        .call("capture_api_schema", json!({"url": base, "endpoints": ["/users?key=AKIA2E7XQ4WJ9KD3LM6P"], "output": "x.json"}))
        .await;
    refused(
        &w.h.store,
        &r,
        aether_policy::Step::Egress,
        "dlp:aws-access-key",
    )
    .await;
    // Endpoints that are not paths on the API's host: a URL is judged by the egress step
    // like any URL in a call; the rest by the tool.
    for (endpoint, says) in [
        ("//other.test/x", "not a path from the host's root"),
        ("http://other.test/x", "refused: "),
        ("/../etc", "a path with . or .."),
        ("users", "not a path from the host's root"),
    ] {
        let r = w
            .call(
                "capture_api_schema",
                json!({"url": base, "endpoints": [endpoint], "output": "x.json"}),
            )
            .await;
        let said = failure(&r);
        assert!(said.contains(says), "{endpoint}: {said}");
    }
    // A document that redirects to a host not allowed: the hop is refused, the call fails.
    let r = w
        .call(
            "capture_api_schema",
            json!({"url": format!("{base}/swagger-elsewhere"), "output": "x.json"}),
        )
        .await;
    let said = failure(&r);
    assert!(said.contains("other.test"), "{said}");
    // No document and no endpoints: said so.
    let said = failure(
        &w.call(
            "capture_api_schema",
            json!({"url": base, "output": "x.json"}),
        )
        .await,
    );
    assert!(said.contains("advertises no OpenAPI document"), "{said}");
    // A read-only root.
    let said = failure(
        &w.call(
            "capture_api_schema",
            json!({"url": base, "endpoints": ["/users/1"], "output": "x.json", "root": "ro"}),
        )
        .await,
    );
    assert!(said.contains("read-only"), "{said}");
    // A broken agreed schema.
    fs::write(w.ws.join("bad.yaml"), "[not: an: api").unwrap();
    let said = failure(
        &w.call("capture_api_schema", json!({"url": base, "endpoints": ["/users/1"], "output": "x.json", "agreed": "bad.yaml"}))
            .await,
    );
    assert!(said.contains("ws:bad.yaml"), "{said}");
    let left: Vec<_> = fs::read_dir(&w.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "bad.yaml")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        fs::read_dir(w.ws.parent().unwrap().join("ro"))
            .unwrap()
            .next()
            .is_none()
    );
    w.h.check().await;
}
