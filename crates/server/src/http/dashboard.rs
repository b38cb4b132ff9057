//! The dashboard: `GET /` serves a single page, `/ui/app.js` and
//! `/ui/app.css` its script and style, all compiled into the binary (no CDN;
//! it works offline). They hold no data, so they are open to anyone; the
//! page reads the API (`/v1/cluster`, `/v1/timeline`, `/v1/watch`,
//! `/v1/elections`, `/v1/sessions`, `/metrics`, `/v1/groups` and
//! `/v1/groups/{name}`) with the bearer token the person types
//! in when the API needs one. See `src/dashboard/README.md`.

use super::state::AppState;
use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

const INDEX_HTML: &str = include_str!("../dashboard/index.html");
const APP_JS: &str = include_str!("../dashboard/app.js");
const APP_CSS: &str = include_str!("../dashboard/app.css");

/// Only this origin's script, style and API; no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; \
     connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The dashboard's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/ui/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
}

/// The page, told which node serves it and whether the API needs a token.
async fn index(State(st): State<AppState>) -> Response {
    let auth = if st.auth.is_insecure_open() { "open" } else { "token" };
    let page = INDEX_HTML
        .replace("{{NODE_ID}}", &st.node.status().id.0.to_string())
        .replace("{{AUTH}}", auth);
    asset("text/html; charset=utf-8", page)
}

fn asset(content_type: &'static str, body: impl Into<String>) -> Response {
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")),
    ];
    (headers, body.into()).into_response()
}
