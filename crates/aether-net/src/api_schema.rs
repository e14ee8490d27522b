//! `capture_api_schema` (Elevated, egress-checked): an API's schema captured from the API
//! itself, saved into the workspace as OpenAPI 3.1, and compared with an agreed schema.
//!
//! The document the API advertises wins: the URL given, then the usual places (`openapi.json`
//! beside it, `/openapi.json`, `/openapi.yaml`, `/swagger.json`, `/v3/api-docs`,
//! `/api-docs`), each fetched through the egress gate like `http_request`. An OpenAPI 3.0
//! document is brought to 3.1 (`nullable` becomes a `null` type). Without one, each endpoint
//! listed is probed with a GET, and its JSON answers give the shapes: a path segment that is
//! a number or a UUID becomes a parameter, and the answers of one template are merged (a
//! property is required where every answer had it). Swagger 2.0 is not converted: list the
//! endpoints to probe instead.
//!
//! The comparison with the agreed schema (a workspace file, JSON or YAML) goes operation by
//! operation: one the agreed schema has that the API lacks, or a property it requires that
//! the answer lacks, or a type that differs, is breaking; one the API has beyond it is
//! additive. A probed capture is compared only where it probed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aether_policy::ArgumentKinds;
use aether_policy::{AgentProfile, Risk, ToolDef};
use aether_tools_core::{
    CallContext, SaveFile, Tool, ToolError, ToolOutput, parse_args, read_text_file, schema_of,
};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::{Request, Resolve, fetch};

/// Bytes of one answer read at most.
const MAX_BODY: usize = 2 << 20;
/// Endpoints probed at most.
const MAX_ENDPOINTS: usize = 50;
/// Bytes of an agreed schema read at most.
const MAX_AGREED: u64 = 4 << 20;
/// How deep schemas are compared and merged.
const MAX_DEPTH: usize = 32;
/// Differences reported at most.
const MAX_DIFFERENCES: usize = 200;
/// The HTTP methods an OpenAPI path item holds.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The API's base URL (http or https), or its OpenAPI document's URL. Its host must be in
    /// the agent's allowed domains.
    url: String,
    /// Paths on the same host to probe with a GET when the API advertises no OpenAPI
    /// document (e.g. "/users", "/users/1"); at most 50.
    #[serde(default)]
    endpoints: Vec<String>,
    /// The workspace file to save the captured schema in (OpenAPI 3.1, JSON), e.g.
    /// "api/openapi.json".
    output: String,
    /// The root to save in, and to read the agreed schema from (default: the only root).
    #[serde(default)]
    root: Option<String>,
    /// A workspace file holding the agreed schema (OpenAPI, JSON or YAML) to compare with.
    #[serde(default)]
    agreed: Option<String>,
    /// Seconds for each request, redirects included (1-60, default 15).
    #[serde(default)]
    #[schemars(range(min = 1, max = 60))]
    timeout_seconds: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
struct Output {
    /// "advertised" (the API's own document) or "probed" (inferred from its answers).
    source: String,
    /// The advertised document's URL, when there was one.
    document_url: Option<String>,
    /// The OpenAPI version the API advertised (before it was brought to 3.1).
    advertised_version: Option<String>,
    /// Where the schema was saved (`root:path`).
    saved: String,
    /// Operations in the captured schema ("GET /users/{id}").
    operations: Vec<String>,
    /// Each endpoint probed, with its answer.
    probes: Vec<Probe>,
    /// The differences from the agreed schema (none without one).
    differences: Vec<Difference>,
    /// With an agreed schema: whether nothing breaking differs.
    matches_agreed: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
struct Probe {
    path: String,
    status: u16,
    content_type: Option<String>,
    /// Whether the answer was JSON (and so gave a shape).
    json: bool,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
struct Difference {
    /// "breaking" or "additive".
    severity: String,
    /// The operation ("GET /users/{id}"), or "*" for the document.
    operation: String,
    /// What differs, with where (a JSON pointer into the answer's schema, when there is one).
    detail: String,
}

pub struct CaptureApiSchema {
    def: ToolDef,
    resolver: Arc<dyn Resolve>,
    saver: Arc<dyn SaveFile>,
}

impl CaptureApiSchema {
    pub fn new(resolver: Arc<dyn Resolve>, saver: Arc<dyn SaveFile>) -> CaptureApiSchema {
        let def = crate::research_def(
            "capture_api_schema",
            "Capture an API's schema",
            "Capture a running API's schema from its endpoints, on a host the operator allowed: \
                 the OpenAPI document it advertises if it has one (3.0 is brought to 3.1), else \
                 the JSON shapes of the endpoints you list, each probed with a GET. Saves OpenAPI \
                 3.1 (JSON) into the workspace (revert_file undoes it), and with `agreed` (a \
                 workspace OpenAPI file) lists each difference as breaking or additive.",
            schema_of::<Args>(),
            schema_of::<Output>(),
            Risk::Medium,
            // It writes (and may replace) the output file.
            false,
        )
        .declaring(ArgumentKinds::urls(&["url"]).and_paths(&["output", "agreed"]));
        CaptureApiSchema {
            def,
            resolver,
            saver,
        }
    }

    async fn get(
        &self,
        cx: &CallContext,
        policy: &aether_policy::egress::EgressPolicy,
        url: &str,
        timeout: Duration,
    ) -> Result<crate::Response, ToolError> {
        fetch(
            &self.resolver,
            policy,
            cx.destinations.as_ref(),
            Request {
                method: reqwest::Method::GET,
                url: url.to_string(),
                headers: vec![(
                    "Accept".into(),
                    "application/json, application/yaml;q=0.9, */*;q=0.1".into(),
                )],
                body: None,
                timeout,
                max_body: MAX_BODY,
            },
        )
        .await
    }
}

#[async_trait]
impl Tool for CaptureApiSchema {
    fn def(&self) -> &ToolDef {
        &self.def
    }

    fn available_to(&self, agent: &AgentProfile) -> Result<(), String> {
        crate::reaches_somewhere(agent)
    }

    async fn call(&self, cx: CallContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = parse_args(args)?;
        let policy = crate::policy_for(&cx.agent)?;
        let timeout = Duration::from_secs(args.timeout_seconds.unwrap_or(15).clamp(1, 60));
        let base = url::Url::parse(&args.url)
            .map_err(|e| ToolError::InvalidArguments(format!("url {:?}: {e}", args.url)))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(ToolError::InvalidArguments(format!(
                "url {:?}: only http and https are captured",
                args.url
            )));
        }
        if args.endpoints.len() > MAX_ENDPOINTS {
            return Err(ToolError::InvalidArguments(format!(
                "{} endpoints listed; at most {MAX_ENDPOINTS} are probed",
                args.endpoints.len()
            )));
        }
        let endpoints = args
            .endpoints
            .iter()
            .map(|e| same_origin(&base, e))
            .collect::<Result<Vec<_>, _>>()?;
        // Read the agreed schema first: a bad one is refused before any request goes out.
        let agreed = match &args.agreed {
            Some(path) => {
                let file = read_text_file(
                    &cx,
                    args.root.as_deref(),
                    path,
                    MAX_AGREED,
                    "an agreed schema",
                )?;
                Some(
                    parse_document(&file.text)
                        .map_err(|e| ToolError::InvalidArguments(format!("{}: {e}", file.shown)))?,
                )
            }
            None => None,
        };

        let mut advertised = None;
        let tried = candidates(&base);
        for (i, candidate) in tried.iter().enumerate() {
            let answer = match self.get(&cx, &policy, candidate, timeout).await {
                Ok(answer) => answer,
                // Refused by the egress gate or a rule, or the API's own URL unreachable:
                // nothing else of this host is tried.
                Err(e @ (ToolError::Denied { .. } | ToolError::Cancelled)) => return Err(e),
                Err(e) if i == 0 => return Err(e),
                Err(_) => continue,
            };
            if !(200..300).contains(&answer.status) || answer.truncated {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&answer.body) else {
                continue;
            };
            if let Ok(doc) = parse_document(text)
                && (doc.get("openapi").is_some() || doc.get("swagger").is_some())
            {
                advertised = Some((answer.url, doc));
                break;
            }
        }

        let mut probes = Vec::new();
        let (source, document_url, advertised_version, doc) = match advertised {
            Some((url, doc)) if doc.get("openapi").is_some() => {
                let version = doc
                    .get("openapi")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let doc = to_openapi_31(doc, &version)?;
                ("advertised", Some(url), Some(version), doc)
            }
            found => {
                if endpoints.is_empty() {
                    return Err(ToolError::failed(match found {
                        Some((url, _)) => format!(
                            "{url} is a Swagger 2.0 document, which Aether does not convert; \
                             list the endpoints to probe instead"
                        ),
                        None => format!(
                            "{} advertises no OpenAPI document (tried {}); list the endpoints to \
                             probe instead",
                            base,
                            tried.join(", ")
                        ),
                    }));
                }
                let mut answers = Vec::new();
                for (path, url) in &endpoints {
                    let answer = self.get(&cx, &policy, url.as_str(), timeout).await?;
                    let content_type = answer.content_type();
                    let json: Option<Value> = (!answer.truncated)
                        .then(|| serde_json::from_slice(&answer.body).ok())
                        .flatten();
                    probes.push(Probe {
                        path: path.clone(),
                        status: answer.status,
                        content_type: content_type.clone(),
                        json: json.is_some(),
                    });
                    answers.push(Answer {
                        path: path.clone(),
                        status: answer.status,
                        content_type,
                        json,
                    });
                }
                let doc = probed_document(&base, &answers);
                ("probed", None, found.map(|_| "2.0".to_string()), doc)
            }
        };

        let operations = operations_of(&doc);
        let (differences, matches_agreed) = match &agreed {
            Some(agreed) => {
                let only = (source == "probed").then(|| operations.clone());
                let differences = compare(agreed, &doc, only.as_deref());
                let breaking = differences.iter().any(|d| d.severity == "breaking");
                (differences, Some(!breaking))
            }
            None => (Vec::new(), None),
        };
        let mut bytes = serde_json::to_string_pretty(&doc)
            .map_err(|e| ToolError::failed(format!("cannot write the schema: {e}")))?;
        bytes.push('\n');
        let saved = self
            .saver
            .save(
                &cx,
                "capture_api_schema",
                args.root.as_deref(),
                &args.output,
                bytes.as_bytes(),
            )
            .await?;

        let mut text = format!(
            "{} {} operation(s) of {} ({}) into {}{}.",
            if saved.unchanged {
                "Found the same"
            } else {
                "Saved"
            },
            operations.len(),
            base,
            match (&document_url, &advertised_version) {
                (Some(url), Some(v)) => format!("its OpenAPI {v} document at {url}"),
                _ => format!("probed {} endpoint(s)", probes.len()),
            },
            saved.shown,
            if saved.unchanged {
                ""
            } else {
                "; revert_file undoes it"
            },
        );
        for p in &probes {
            text.push_str(&format!(
                "\n  GET {} → {}{}",
                p.path,
                p.status,
                if p.json { "" } else { " (not JSON: no shape)" }
            ));
        }
        match matches_agreed {
            Some(true) if differences.is_empty() => {
                text.push_str("\nIt matches the agreed schema.")
            }
            Some(ok) => {
                text.push_str(&format!(
                    "\n{} the agreed schema: {} difference(s).",
                    if ok {
                        "Nothing breaking differs from"
                    } else {
                        "It BREAKS"
                    },
                    differences.len()
                ));
                for d in &differences {
                    text.push_str(&format!("\n  {} {}: {}", d.severity, d.operation, d.detail));
                }
            }
            None => {}
        }
        let output = Output {
            source: source.to_string(),
            document_url,
            advertised_version,
            saved: saved.shown,
            operations,
            probes,
            differences,
            matches_agreed,
        };
        Ok(ToolOutput::with_structured(
            text,
            serde_json::to_value(output).unwrap_or(Value::Null),
        ))
    }
}

/// Where an API's OpenAPI document usually is: `base` itself, `openapi.json` beside it, and
/// the common places from the host's root; each once.
fn candidates(base: &url::Url) -> Vec<String> {
    let mut found: Vec<String> = vec![base.to_string()];
    let beside = match base.path().ends_with('/') {
        true => base.join("openapi.json"),
        false => base.join(&format!(
            "{}/openapi.json",
            base.path().rsplit('/').next().unwrap_or("")
        )),
    };
    let rooted = [
        "/openapi.json",
        "/openapi.yaml",
        "/swagger.json",
        "/v3/api-docs",
        "/api-docs",
    ]
    .into_iter()
    .map(|p| base.join(p));
    for url in std::iter::once(beside).chain(rooted).flatten() {
        let url = url.to_string();
        if !found.contains(&url) {
            found.push(url);
        }
    }
    found
}

/// Endpoint `path` on `base`'s origin: an absolute path (no scheme, no host, no `..`),
/// returned as written and as a URL.
fn same_origin(base: &url::Url, path: &str) -> Result<(String, url::Url), ToolError> {
    let refused = |why: &str| {
        Err(ToolError::InvalidArguments(format!(
            "endpoint {path:?}: {why}; endpoints are paths on the API's host, like \"/users/1\""
        )))
    };
    if !path.starts_with('/') || path.starts_with("//") || path.contains('\\') {
        return refused("not a path from the host's root");
    }
    if path.split(['/', '?']).any(|s| s == ".." || s == ".") {
        return refused("a path with . or ..");
    }
    let Ok(url) = base.join(path) else {
        return refused("not a path");
    };
    if url.origin() != base.origin() {
        return refused("it leaves the API's host");
    }
    Ok((path.to_string(), url))
}

/// An OpenAPI document as JSON or YAML, which must be an object.
fn parse_document(text: &str) -> Result<Value, String> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(json) => serde_yaml_ng::from_str(text)
            .map_err(|yaml| format!("neither JSON ({json}) nor YAML ({yaml})"))?,
    };
    match doc.is_object() {
        true => Ok(doc),
        false => Err("not an OpenAPI document (not an object)".into()),
    }
}

/// An OpenAPI 3.x document as 3.1: `nullable: true` beside a `type` becomes a type that
/// admits `null`, and the version says 3.1.0. A 3.1 document is kept as it is.
fn to_openapi_31(mut doc: Value, version: &str) -> Result<Value, ToolError> {
    if version.starts_with("3.1") {
        return Ok(doc);
    }
    if !version.starts_with("3.0") {
        return Err(ToolError::failed(format!(
            "the API advertises OpenAPI {version:?}, which Aether does not convert to 3.1"
        )));
    }
    fn walk(v: &mut Value, depth: usize) {
        if depth > 256 {
            return;
        }
        match v {
            Value::Object(map) => {
                if let Some(nullable) = map.remove("nullable")
                    && nullable == Value::Bool(true)
                {
                    match map.get("type").cloned() {
                        Some(Value::String(t)) => {
                            map.insert("type".into(), json!([t, "null"]));
                        }
                        Some(Value::Array(mut types)) => {
                            if !types.contains(&json!("null")) {
                                types.push(json!("null"));
                            }
                            map.insert("type".into(), Value::Array(types));
                        }
                        _ => {
                            // No type to widen (a $ref or a composition): allow null beside it.
                            let rest = std::mem::take(map);
                            map.insert(
                                "anyOf".into(),
                                json!([Value::Object(rest), {"type": "null"}]),
                            );
                        }
                    }
                }
                for child in map.values_mut() {
                    walk(child, depth + 1);
                }
            }
            Value::Array(items) => {
                for child in items {
                    walk(child, depth + 1);
                }
            }
            _ => {}
        }
    }
    walk(&mut doc, 0);
    doc["openapi"] = json!("3.1.0");
    Ok(doc)
}

/// One probed endpoint's answer.
struct Answer {
    path: String,
    status: u16,
    content_type: Option<String>,
    json: Option<Value>,
}

/// A path's template: each segment that is a number or a UUID becomes a parameter named by
/// the segment before it (`/users/1` → `/users/{usersId}`), with its type.
fn template(path: &str) -> (String, Vec<(String, &'static str)>) {
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut out = Vec::new();
    let mut params = Vec::new();
    let mut previous = "";
    for segment in path.split('/').skip(1) {
        let kind = if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            Some("integer")
        } else if is_uuid(segment) {
            Some("string")
        } else {
            None
        };
        match kind {
            Some(kind) => {
                let stem: String = previous
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let mut name = match stem.is_empty() {
                    true => "id".to_string(),
                    false => format!("{stem}Id"),
                };
                while params.iter().any(|(n, _)| *n == name) {
                    name.push('_');
                }
                out.push(format!("{{{name}}}"));
                params.push((name, kind));
            }
            None => out.push(segment.to_string()),
        }
        previous = segment;
    }
    (format!("/{}", out.join("/")), params)
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The OpenAPI 3.1 document of the probed answers: one GET per template, a response per
/// status, the JSON answers' shapes merged.
fn probed_document(base: &url::Url, answers: &[Answer]) -> Value {
    // Template → its parameters, and a response per status.
    type Probed = (Vec<(String, &'static str)>, BTreeMap<u16, Response>);
    let mut paths: BTreeMap<String, Probed> = BTreeMap::new();
    for a in answers {
        let (path, params) = template(&a.path);
        let entry = paths
            .entry(path)
            .or_insert_with(|| (params, BTreeMap::new()));
        let response = entry.1.entry(a.status).or_default();
        if let Some(ct) = &a.content_type {
            response
                .content_type
                .get_or_insert_with(|| ct.split(';').next().unwrap_or(ct).trim().to_string());
        }
        if let Some(json) = &a.json {
            let shape = shape_of(json, 0);
            response.schema = Some(match response.schema.take() {
                Some(before) => merge(before, shape, 0),
                None => shape,
            });
        }
    }
    let mut out = Map::new();
    for (path, (params, responses)) in paths {
        let mut rs = Map::new();
        for (status, r) in responses {
            let mut response = json!({ "description": reason(status) });
            if let Some(schema) = r.schema {
                let ct = r
                    .content_type
                    .filter(|c| c.contains("json"))
                    .unwrap_or_else(|| "application/json".into());
                response["content"] = json!({ ct: { "schema": schema } });
            }
            rs.insert(status.to_string(), response);
        }
        let mut get = json!({ "responses": rs });
        if !params.is_empty() {
            get["parameters"] = Value::Array(
                params
                    .iter()
                    .map(|(name, kind)| {
                        json!({"name": name, "in": "path", "required": true, "schema": {"type": kind}})
                    })
                    .collect(),
            );
        }
        out.insert(path, json!({ "get": get }));
    }
    let mut server = base.clone();
    server.set_query(None);
    server.set_fragment(None);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": format!("{} (captured)", base.host_str().unwrap_or("API")),
            "version": "captured",
            "description": "Captured by Aether's capture_api_schema from the API's answers to GET requests.",
        },
        "servers": [{ "url": server.as_str().trim_end_matches('/') }],
        "paths": out,
    })
}

#[derive(Default)]
struct Response {
    content_type: Option<String>,
    schema: Option<Value>,
}

fn reason(status: u16) -> String {
    reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| r.to_string())
        .unwrap_or_else(|| format!("HTTP {status}"))
}

/// The JSON Schema of one value: its type, an object's properties (all required), an
/// array's items (merged).
fn shape_of(v: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return json!({});
    }
    match v {
        Value::Null => json!({"type": "null"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"type": "integer"}),
        Value::Number(_) => json!({"type": "number"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Array(items) => {
            let merged = items
                .iter()
                .map(|i| shape_of(i, depth + 1))
                .reduce(|a, b| merge(a, b, depth + 1));
            json!({"type": "array", "items": merged.unwrap_or_else(|| json!({}))})
        }
        Value::Object(map) => {
            let properties: Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), shape_of(v, depth + 1)))
                .collect();
            let required: Vec<&String> = map.keys().collect();
            json!({"type": "object", "properties": properties, "required": required})
        }
    }
}

/// Two shapes as one: objects keep every property (required where both require it), arrays
/// merge their items, an integer and a number are a number, anything else is either.
fn merge(a: Value, b: Value, depth: usize) -> Value {
    if a == b || depth > MAX_DEPTH {
        return a;
    }
    let (ta, tb) = (type_of(&a), type_of(&b));
    match (ta.as_deref(), tb.as_deref()) {
        (Some("object"), Some("object")) => {
            let mut props = a["properties"].as_object().cloned().unwrap_or_default();
            for (k, v) in b["properties"].as_object().cloned().unwrap_or_default() {
                let merged = match props.remove(&k) {
                    Some(before) => merge(before, v, depth + 1),
                    None => v,
                };
                props.insert(k, merged);
            }
            let req = |s: &Value| -> BTreeSet<String> {
                s["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_str().map(String::from))
                    .collect()
            };
            let required: Vec<String> = req(&a).intersection(&req(&b)).cloned().collect();
            json!({"type": "object", "properties": props, "required": required})
        }
        (Some("array"), Some("array")) => {
            let items = merge(a["items"].clone(), b["items"].clone(), depth + 1);
            json!({"type": "array", "items": items})
        }
        (Some("integer"), Some("number")) | (Some("number"), Some("integer")) => {
            json!({"type": "number"})
        }
        _ if a == json!({}) => b,
        _ if b == json!({}) => a,
        _ => {
            let mut options = Vec::new();
            for s in [a, b] {
                match s.get("anyOf").and_then(Value::as_array) {
                    Some(inner) => options.extend(inner.iter().cloned()),
                    None => options.push(s),
                }
            }
            let mut kept: Vec<Value> = Vec::new();
            for o in options {
                if !kept.contains(&o) {
                    kept.push(o);
                }
            }
            json!({ "anyOf": kept })
        }
    }
}

/// A schema's one type, if it has one (`"string"`, or `["string", "null"]`'s first that is
/// not null).
fn type_of(s: &Value) -> Option<String> {
    match s.get("type")? {
        Value::String(t) => Some(t.clone()),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(String::from),
        _ => None,
    }
}

/// Whether a schema admits `null`.
fn admits_null(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Value::as_array)
            .is_some_and(|o| o.iter().any(admits_null)),
    }
}

/// "GET /users/{id}" for every operation of a document.
fn operations_of(doc: &Value) -> Vec<String> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            if item.get(method).is_some() {
                ops.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    ops
}

/// A path as compared: its parameters' names do not matter (`/users/{id}` is
/// `/users/{userId}`).
fn path_key(path: &str) -> String {
    path.split('/')
        .map(|s| match s.starts_with('{') && s.ends_with('}') {
            true => "{}",
            false => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every operation of `doc` by method and path key: (method, key) → (path as written, its
/// operation).
fn operation_map(doc: &Value) -> BTreeMap<(String, String), (String, Value)> {
    let mut ops = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                ops.insert(
                    (method.to_uppercase(), path_key(path)),
                    (path.clone(), op.clone()),
                );
            }
        }
    }
    ops
}

/// The differences between the `agreed` document and the `captured` one; `only` (a probed
/// capture's operations) limits them to what was probed.
fn compare(agreed: &Value, captured: &Value, only: Option<&[String]>) -> Vec<Difference> {
    let mut out = Vec::new();
    let (mine, theirs) = (operation_map(agreed), operation_map(captured));
    let named = |(method, _): &(String, String), path: &str| format!("{method} {path}");
    for (key, (path, agreed_op)) in &mine {
        match theirs.get(key) {
            None if only.is_none() => out.push(Difference {
                severity: "breaking".into(),
                operation: named(key, path),
                detail: "in the agreed schema, not in the API".into(),
            }),
            None => {}
            Some((_, captured_op)) => compare_operation(
                agreed,
                agreed_op,
                captured,
                captured_op,
                &named(key, path),
                &mut out,
            ),
        }
    }
    for (key, (path, _)) in &theirs {
        if !mine.contains_key(key) {
            out.push(Difference {
                severity: "additive".into(),
                operation: named(key, path),
                detail: "in the API, not in the agreed schema".into(),
            });
        }
    }
    out.truncate(MAX_DIFFERENCES);
    out
}

/// One operation's responses: a success the agreed schema promises that the API does not
/// give is breaking, one it gives beyond them additive; the bodies of the successes both
/// have are compared.
fn compare_operation(
    agreed_doc: &Value,
    agreed: &Value,
    captured_doc: &Value,
    captured: &Value,
    operation: &str,
    out: &mut Vec<Difference>,
) {
    let responses = |op: &Value| -> BTreeMap<String, Value> {
        op["responses"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    let (mine, theirs) = (responses(agreed), responses(captured));
    for (status, response) in &theirs {
        if !status.starts_with('2') {
            continue;
        }
        let Some(promised) = mine.get(status).or_else(|| mine.get("2XX")) else {
            out.push(Difference {
                severity: "additive".into(),
                operation: operation.into(),
                detail: format!("answers {status}, which the agreed schema does not list"),
            });
            continue;
        };
        let body = |doc: &Value, r: &Value| -> Option<Value> {
            let r = resolve(doc, r, 0)?;
            let content = r.get("content")?.as_object()?;
            let (_, media) = content
                .iter()
                .find(|(ct, _)| ct.contains("json"))
                .or_else(|| content.iter().next())?;
            media.get("schema").cloned()
        };
        if let (Some(want), Some(got)) = (body(agreed_doc, promised), body(captured_doc, response))
        {
            compare_schema(agreed_doc, &want, captured_doc, &got, "", operation, out, 0);
        }
    }
    let any_success = |m: &BTreeMap<String, Value>| m.keys().any(|s| s.starts_with('2'));
    if any_success(&mine) && !any_success(&theirs) && !theirs.is_empty() {
        out.push(Difference {
            severity: "breaking".into(),
            operation: operation.into(),
            detail: format!(
                "no success: the API answered {}",
                theirs.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        });
    }
}

/// `v` with its `$ref` (to this document) followed, a few at most.
fn resolve(doc: &Value, v: &Value, depth: usize) -> Option<Value> {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) if depth < 16 => {
            let target = doc.pointer(r.strip_prefix('#')?)?;
            resolve(doc, target, depth + 1)
        }
        Some(_) => None,
        None => Some(v.clone()),
    }
}

/// The answer's schema `got` against the promised `want`, at `at` (a JSON pointer).
#[allow(clippy::too_many_arguments)]
fn compare_schema(
    want_doc: &Value,
    want: &Value,
    got_doc: &Value,
    got: &Value,
    at: &str,
    operation: &str,
    out: &mut Vec<Difference>,
    depth: usize,
) {
    if depth > MAX_DEPTH || out.len() >= MAX_DIFFERENCES {
        return;
    }
    let (Some(want), Some(got)) = (resolve(want_doc, want, 0), resolve(got_doc, got, 0)) else {
        return;
    };
    let here = if at.is_empty() { "/" } else { at };
    let (tw, tg) = (type_of(&want), type_of(&got));
    if let (Some(tw), Some(tg)) = (&tw, &tg)
        && tw != tg
        && !(tw == "number" && tg == "integer")
    {
        out.push(Difference {
            severity: "breaking".into(),
            operation: operation.into(),
            detail: format!("{here}: the agreed schema says {tw}, the API answers {tg}"),
        });
        return;
    }
    if admits_null(&got) && !admits_null(&want) && tg.is_some() {
        out.push(Difference {
            severity: "breaking".into(),
            operation: operation.into(),
            detail: format!("{here}: the API answers null, which the agreed schema does not allow"),
        });
    }
    match tw.as_deref() {
        Some("object") => {
            let props = |s: &Value| s["properties"].as_object().cloned().unwrap_or_default();
            let (pw, pg) = (props(&want), props(&got));
            let required: BTreeSet<&str> = want["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for name in &required {
                if !pg.contains_key(*name) && got.get("properties").is_some() {
                    out.push(Difference {
                        severity: "breaking".into(),
                        operation: operation.into(),
                        detail: format!(
                            "{at}/{name}: required by the agreed schema, missing from the answer"
                        ),
                    });
                }
            }
            for (name, g) in &pg {
                match pw.get(name) {
                    Some(w) => compare_schema(
                        want_doc,
                        w,
                        got_doc,
                        g,
                        &format!("{at}/{name}"),
                        operation,
                        out,
                        depth + 1,
                    ),
                    None if want.get("properties").is_some() => out.push(Difference {
                        severity: "additive".into(),
                        operation: operation.into(),
                        detail: format!("{at}/{name}: in the answer, not in the agreed schema"),
                    }),
                    None => {}
                }
            }
        }
        Some("array") => {
            if let (Some(w), Some(g)) = (want.get("items"), got.get("items")) {
                compare_schema(
                    want_doc,
                    w,
                    got_doc,
                    g,
                    &format!("{at}/items"),
                    operation,
                    out,
                    depth + 1,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_uuids_in_paths_become_parameters() {
        assert_eq!(
            template("/users/42/posts/7"),
            (
                "/users/{usersId}/posts/{postsId}".to_string(),
                vec![("usersId".into(), "integer"), ("postsId".into(), "integer")]
            )
        );
        assert_eq!(
            template("/o/0b5e5f1c-3f6e-4c1a-9d2b-7a1e2c3d4e5f?x=1").0,
            "/o/{oId}"
        );
        assert_eq!(template("/health").0, "/health");
        assert_eq!(template("/1/1").0, "/{id}/{1Id}");
    }

    #[test]
    fn answers_merge_into_one_shape() {
        let a = shape_of(&json!({"id": 1, "name": "a", "tags": ["x"]}), 0);
        let b = shape_of(&json!({"id": 2.5, "tags": [], "note": null}), 0);
        let m = merge(a, b, 0);
        assert_eq!(m["properties"]["id"]["type"], "number");
        assert_eq!(m["required"], json!(["id", "tags"]));
        assert_eq!(m["properties"]["tags"]["items"]["type"], "string");
        assert_eq!(m["properties"]["note"]["type"], "null");
        let either = merge(json!({"type": "string"}), json!({"type": "integer"}), 0);
        assert_eq!(either["anyOf"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn endpoints_stay_on_the_apis_host() {
        let base = url::Url::parse("http://api.test:8080/v1/").unwrap();
        assert!(same_origin(&base, "/users/1").is_ok());
        for bad in [
            "users",
            "//evil.test/x",
            "http://evil.test/",
            "/../admin",
            "/a/./b",
            "\\x",
        ] {
            assert!(same_origin(&base, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn openapi_30_nullable_becomes_a_null_type() {
        let doc = json!({"openapi": "3.0.3", "components": {"schemas": {"U": {
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"$ref": "#/components/schemas/V", "nullable": true},
                "c": {"type": "integer", "nullable": false}
            }
        }}}});
        let out = to_openapi_31(doc, "3.0.3").unwrap();
        assert_eq!(out["openapi"], "3.1.0");
        let p = &out["components"]["schemas"]["U"]["properties"];
        assert_eq!(p["a"]["type"], json!(["string", "null"]));
        assert_eq!(p["b"]["anyOf"][1], json!({"type": "null"}));
        assert_eq!(p["c"], json!({"type": "integer"}));
        assert!(to_openapi_31(json!({}), "4.0").is_err());
    }
}
