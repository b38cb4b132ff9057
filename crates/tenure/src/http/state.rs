//! What the handlers share, and the error answer every handler gives.

use crate::api::ErrorBody;
use crate::metrics::Metrics;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use tenure_node::NodeHandle;
use tokio::sync::{watch, Semaphore};

/// Most `GET /v1/watch` streams open at once; each holds a connection.
pub const MAX_WATCHERS: usize = 64;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub(crate) node: NodeHandle,
    pub(crate) metrics: Metrics,
    /// Permits for the open `GET /v1/watch` streams ([`MAX_WATCHERS`]).
    pub(crate) watchers: Arc<Semaphore>,
    /// Becomes true when the server stops, which ends the SSE streams so that
    /// the graceful HTTP shutdown does not wait for them forever.
    pub(crate) stopping: watch::Receiver<bool>,
}

impl AppState {
    /// State for a server in front of `node`.
    pub fn new(node: NodeHandle, metrics: Metrics, stopping: watch::Receiver<bool>) -> Self {
        AppState { node, metrics, watchers: Arc::new(Semaphore::new(MAX_WATCHERS)), stopping }
    }
}

/// An error answer: `{"error": "..."}` (with `"leader"` where it helps) and a
/// 4xx or 5xx status.
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) body: ErrorBody,
}

impl ApiError {
    /// An error answer with `status` and the message `error`.
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        ApiError { status, body: ErrorBody { error: error.into(), leader: None } }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}
