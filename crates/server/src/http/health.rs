//! `GET /healthz`: the process answers.

use axum::Json;

/// `{"status":"ok"}`.
pub async fn get() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}
