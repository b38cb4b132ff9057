//! `GET /metrics`: Prometheus (OpenMetrics) text.

use super::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Every metric of the node, rendered at this call.
pub async fn get(State(st): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        st.metrics.render(&st.node, &st.kv),
    )
        .into_response()
}
