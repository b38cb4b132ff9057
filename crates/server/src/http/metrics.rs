//! `GET /metrics`: Prometheus (OpenMetrics) text.

use super::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The content type of the metrics.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric of the node, rendered at this call.
pub async fn get(State(st): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], st.metrics.render(&st.node, &st.kv)).into_response()
}
