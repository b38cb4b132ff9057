//! What the handlers share, and the error answer every handler gives.

use super::auth::ApiAuth;
use super::watchers::Watchers;
use crate::api::ErrorBody;
use crate::metrics::Metrics;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use tenure_kv::Store;
use tenure_node::{NodeHandle, RateLimitedLog, Replicated};
use tokio::sync::watch;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub(crate) node: NodeHandle,
    /// The node's replicated key-value store.
    pub(crate) kv: Replicated<Store>,
    pub(crate) metrics: Metrics,
    /// Who may call which endpoint.
    pub(crate) auth: Arc<ApiAuth>,
    /// The open `GET /v1/watch` streams, in all, per address and per token.
    pub(crate) watchers: Watchers,
    /// Refused requests (auth, limits), logged as a summary per interval.
    pub(crate) rejections: Arc<RateLimitedLog>,
    /// Becomes true when the server stops, which ends the SSE streams so that
    /// the graceful HTTP shutdown does not wait for them forever.
    pub(crate) stopping: watch::Receiver<bool>,
}

impl AppState {
    /// State for a server in front of `node`, admitting callers by `auth` and
    /// counting refusals in `rejections`.
    pub fn new(
        node: NodeHandle,
        kv: Replicated<Store>,
        metrics: Metrics,
        auth: ApiAuth,
        rejections: Arc<RateLimitedLog>,
        stopping: watch::Receiver<bool>,
    ) -> Self {
        AppState {
            node,
            kv,
            metrics,
            auth: Arc::new(auth),
            watchers: Watchers::default(),
            rejections,
            stopping,
        }
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
