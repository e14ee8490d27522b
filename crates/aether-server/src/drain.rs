//! A request body its handler never read is read before the answer goes.
//!
//! hyper keeps an HTTP/1.1 connection open after a response only when the request's body was
//! read to its end; otherwise it reads what has already arrived once and, if the body is not
//! all there yet, closes the connection after the response. The client does not know: it sent
//! `Connection: keep-alive`, got an answer without `Connection: close`, and sends its next
//! request on a socket the server is closing ("server disconnected without sending a
//! response"). Every early refusal (401 before the body, the Host gate, a rate limit) answers
//! without reading the body, and the MCP SDKs send their next request at once (the OAuth
//! client's discovery right after the 401). So the outermost layer keeps a body the handler
//! dropped unread and reads it (at most [`MAX_BODY_BYTES`], for at most [`DRAIN_TIMEOUT`])
//! before the answer is written; a body larger or slower than that still closes the
//! connection, as before.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use crate::http::MAX_BODY_BYTES;

/// How long an unread body may take to arrive before the answer goes without it.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The middleware: passes the request on with its body watched, and reads what the handler
/// left of it before returning the answer.
pub async fn drain_unread(request: Request, next: Next) -> Response {
    if request.body().is_end_stream() {
        return next.run(request).await;
    }
    let left = Arc::new(Mutex::new(None));
    let request = request.map(|body| {
        Body::new(Watched {
            inner: Some(body),
            left: left.clone(),
        })
    });
    let response = next.run(request).await;
    let unread = left.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(body) = unread {
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, read_to_end(body, MAX_BODY_BYTES)).await;
    }
    response
}

/// Reads and drops `body` up to `limit` bytes; stops early at an error or past the limit.
async fn read_to_end(mut body: Body, limit: usize) {
    let mut read = 0usize;
    while let Some(Ok(frame)) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Some(data) = frame.data_ref() {
            read += data.len();
            if read > limit {
                return;
            }
        }
    }
}

/// A request body that, dropped before its end, hands itself back to [`drain_unread`].
struct Watched {
    inner: Option<Body>,
    left: Arc<Mutex<Option<Body>>>,
}

impl HttpBody for Watched {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            // Read to its end (or failed): nothing is left to read.
            self.inner = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && !inner.is_end_stream()
        {
            *self.left.lock().unwrap_or_else(|e| e.into_inner()) = Some(inner);
        }
    }
}
