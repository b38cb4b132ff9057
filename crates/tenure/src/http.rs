//! The HTTP API of `tenure server` (JSON, Server-Sent Events, Prometheus).
//!
//! Every error answer is JSON `{"error": "..."}` with a 4xx or 5xx status,
//! including unknown paths, wrong methods and malformed bodies.

use crate::api::{
    ErrorBody, LeaderBody, LeadershipBody, LsnBody, PeerBody, StatusBody, TransferBody,
    TransferRequest,
};
use crate::metrics::Metrics;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::NodeId;
use tenure_node::{Leadership, NodeHandle, NodeStatus, TransferError};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// Largest request body accepted; the only body is `{"to": N}`.
const MAX_BODY_BYTES: usize = 4 * 1024;
/// Most `GET /v1/watch` streams open at once; each holds a connection.
const MAX_WATCHERS: usize = 64;
/// Interval of SSE keep-alive comments, so proxies and clients see a live stream.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    node: NodeHandle,
    metrics: Metrics,
    watchers: Arc<Semaphore>,
    /// Becomes true when the server stops, which ends the SSE streams so that
    /// the graceful HTTP shutdown does not wait for them forever.
    stopping: watch::Receiver<bool>,
}

impl AppState {
    /// State for a server in front of `node`.
    pub fn new(node: NodeHandle, metrics: Metrics, stopping: watch::Receiver<bool>) -> Self {
        AppState { node, metrics, watchers: Arc::new(Semaphore::new(MAX_WATCHERS)), stopping }
    }
}

/// The API's routes.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/leader", get(leader))
        .route("/v1/is-leader", get(is_leader))
        .route("/v1/watch", get(watch_leadership))
        .route("/v1/transfer", post(transfer))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// An error answer.
struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, error: impl Into<String>) -> Self {
        ApiError { status, body: ErrorBody { error: error.into(), leader: None } }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint; see /v1/status, /v1/leader, /v1/is-leader, /v1/watch, \
         /v1/transfer, /metrics, /healthz",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint (POST /v1/transfer; GET for the others)",
    )
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// Converts the node's status to its wire form.
pub fn status_body(s: &NodeStatus) -> StatusBody {
    StatusBody {
        id: s.id.0,
        protocol: s.protocol.to_string(),
        role: s.role.as_str().to_string(),
        term: s.term.0,
        voted_for: s.voted_for.map(|n| n.0),
        leader: s.leader.map(|n| n.0),
        leader_address: s.leader_addr.map(|a| a.to_string()),
        fencing_token: s.fencing_token.map(|t| t.0),
        lsn: s.lsn.map(|l| LsnBody { term: l.term.0, counter: l.counter }),
        storage_failed: s.storage_failed,
        peers: s
            .peers
            .iter()
            .map(|p| PeerBody {
                id: p.id.0,
                address: p.addr.to_string(),
                connected: p.connected,
                last_heard_ms: p.last_heard_ms,
                rtt_ms: p.rtt_ms,
            })
            .collect(),
    }
}

fn leadership_body(l: &Leadership) -> LeadershipBody {
    LeadershipBody {
        leader: l.leader.map(|n| n.0),
        term: l.term.0,
        fencing_token: l.fencing_token.map(|t| t.0),
        role: l.role.as_str().to_string(),
    }
}

async fn status(State(st): State<AppState>) -> Json<StatusBody> {
    Json(status_body(&st.node.status()))
}

async fn leader(State(st): State<AppState>) -> Result<Json<LeaderBody>, ApiError> {
    let s = st.node.status();
    match s.leader {
        Some(id) => Ok(Json(LeaderBody {
            id: id.0,
            address: s.leader_addr.map(|a| a.to_string()),
            term: s.term.0,
            fencing_token: s.fencing_token.map(|t| t.0),
        })),
        None => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no leader is known in term {}", s.term),
        )),
    }
}

async fn is_leader(State(st): State<AppState>) -> Response {
    if st.node.is_leader() {
        (StatusCode::OK, Json(serde_json::json!({"leader": true}))).into_response()
    } else {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this node is not the leader");
        e.body.leader = st.node.status().leader.map(|n| n.0);
        e.into_response()
    }
}

async fn transfer(
    State(st): State<AppState>,
    body: Result<Json<TransferRequest>, JsonRejection>,
) -> Result<Json<TransferBody>, ApiError> {
    let Json(req) = body.map_err(|r| {
        ApiError::new(
            r.status(),
            format!("{}; expected a JSON body like {{\"to\": 2}}", r.body_text()),
        )
    })?;
    if req.to == 0 {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "node ids are positive integers"));
    }
    let term = st.node.status().term.0;
    match st.node.transfer_leadership(NodeId(req.to)).await {
        Ok(()) => Ok(Json(TransferBody { to: req.to, from_term: term })),
        Err(e) => Err(transfer_error(e)),
    }
}

fn transfer_error(e: TransferError) -> ApiError {
    use tenure_core::TransferError as Core;
    let status = match &e {
        TransferError::Refused(Core::NotLeader { .. }) => StatusCode::CONFLICT,
        TransferError::Refused(Core::UnknownNode(_)) => StatusCode::NOT_FOUND,
        TransferError::Refused(Core::TargetUnreachable(_)) => StatusCode::CONFLICT,
        TransferError::NodeStopped => StatusCode::SERVICE_UNAVAILABLE,
    };
    match e {
        // Worded here: the core's message prints the leader as a Rust Option.
        TransferError::Refused(Core::NotLeader { leader }) => {
            let known = match leader {
                Some(id) => format!("the leader is node {id}; ask it"),
                None => "no leader is known right now".to_string(),
            };
            let mut err = ApiError::new(status, format!("this node is not the leader: {known}"));
            err.body.leader = leader.map(|n| n.0);
            err
        }
        other => ApiError::new(status, other.to_string()),
    }
}

async fn metrics(State(st): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        st.metrics.render(&st.node),
    )
        .into_response()
}

async fn watch_leadership(State(st): State<AppState>) -> Result<Response, ApiError> {
    let permit = st.watchers.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many watchers (at most {MAX_WATCHERS}); try again later"),
        )
    })?;
    let stream = leadership_events(st.node.leadership(), st.stopping.clone(), permit);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
}

/// The SSE stream: the current leadership first, then every change, until the
/// node's channel closes or the server stops. The permit is released with the stream.
fn leadership_events(
    rx: watch::Receiver<Leadership>,
    stopping: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watching {
        rx: watch::Receiver<Leadership>,
        stopping: watch::Receiver<bool>,
        first: bool,
        _permit: OwnedSemaphorePermit,
    }
    let start = Watching { rx, stopping, first: true, _permit: permit };
    stream::unfold(start, |mut w| async move {
        if !w.first {
            tokio::select! {
                changed = w.rx.changed() => changed.ok()?,
                _ = w.stopping.wait_for(|s| *s) => return None,
            }
        }
        w.first = false;
        let body = leadership_body(&w.rx.borrow_and_update());
        let event = Event::default()
            .event("leadership")
            .json_data(&body)
            .unwrap_or_else(|_| Event::default().comment("unencodable leadership"));
        Some((Ok(event), w))
    })
}
