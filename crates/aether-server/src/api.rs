//! What the admin API and the console share beneath their routes: the bearer token read from
//! a request's `Authorization` header, and how a request that cannot be served is answered —
//! a status and `{"error": message}` ([`ApiError`]), built from the errors the handlers meet so
//! they can use `?`.

use aether_pipeline::PipelineError;
use aether_pipeline::accounts::AccountError;
use aether_store::StoreError;
use axum::response::{IntoResponse, Json, Response};
use http::StatusCode;
use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use serde_json::json;

/// The token of an `Authorization: Bearer …` header; `None` without one. A malformed header
/// counts as a token nobody has.
pub fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return Some("");
    }
    let text = value.to_str().unwrap_or("");
    let (scheme, token) = text.split_once(' ').unwrap_or((text, ""));
    if scheme.eq_ignore_ascii_case("bearer") {
        Some(token.trim())
    } else {
        Some("")
    }
}

/// A 401 with the `Bearer` challenge.
pub fn unauthorized(message: &str) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    response
}

/// The API's answer to a request it cannot serve: `status` and `{"error": message}`.
pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// A request the admin API cannot serve, answered as [`error`] answers it. The store refusing
/// a change is a conflict (409), an unknown agent is not found (404), the arguments not making
/// sense a bad request (400), anything else Aether's own failure (500).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.status, &self.message)
    }
}

impl From<PipelineError> for ApiError {
    fn from(e: PipelineError) -> ApiError {
        match e {
            PipelineError::Store(e) => e.into(),
            PipelineError::UnknownAgent { name, known } => ApiError::not_found(format!(
                "no agent is named {name:?}; configured agents: {known}"
            )),
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Invalid(message) => ApiError::conflict(message),
            e @ (StoreError::DocumentExists { .. } | StoreError::DocumentChanged { .. }) => {
                ApiError::conflict(e.to_string())
            }
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl From<AccountError> for ApiError {
    fn from(e: AccountError) -> ApiError {
        match e {
            AccountError::Invalid(message) => ApiError::bad_request(message),
            AccountError::Store(e) => e.into(),
            other => ApiError::internal(other.to_string()),
        }
    }
}
