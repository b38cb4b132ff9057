//! The HTTP API of a store-led server: the endpoints of [`ENDPOINTS`] that
//! are about leadership answer from the store's election (`/v1/status`,
//! `/v1/leader`, `/v1/is-leader`, `/v1/watch`, `/metrics`, `/healthz`), with
//! the same bodies, gate and stream limits as a node's; those that need
//! tenure's own replicated state (key-value store, sessions, elections,
//! transfer) answer 404 saying so.
//!
//! [`ENDPOINTS`]: crate::http::ENDPOINTS

use super::view::{Local, View};
use crate::http::auth::Caller;
use crate::http::leader::{is_leader_answer, leader_answer};
use crate::http::watch::{leadership_sse, stream_slot};
use crate::http::{health, routes, ApiError, Endpoint, Gate, Watchers, MAX_BODY_BYTES};
use crate::metrics::Metrics;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Extension, Json, Router};
use std::sync::Arc;
use tenure_api::{LeaderBody, StatusBody};
use tenure_core::{NodeId, Role};
use tenure_node::{Leadership, RateLimitedLog};
use tokio::sync::watch;

/// What the handlers share.
#[derive(Clone)]
pub(crate) struct StoreState {
    pub(crate) id: NodeId,
    /// `store:<kind>`, the protocol `/v1/status` names.
    pub(crate) protocol: Arc<str>,
    /// The store's URL, for the 404 of the endpoints not served here.
    pub(crate) store_url: Arc<str>,
    pub(crate) local: watch::Receiver<Local>,
    pub(crate) view: watch::Receiver<View>,
    pub(crate) leadership: watch::Receiver<Leadership>,
    pub(crate) metrics: Metrics,
    pub(crate) watchers: Watchers,
    pub(crate) rejections: Arc<RateLimitedLog>,
    pub(crate) stopping: watch::Receiver<bool>,
}

impl StoreState {
    /// Whether this server leads now: its leading context is not cancelled
    /// and its session's deadline has not passed, checked at this call.
    fn leads_now(&self) -> bool {
        self.local.borrow().valid_token().is_some()
    }

    /// The view, with the role of leader only while [`Self::leads_now`].
    fn view_now(&self) -> View {
        let mut view = self.view.borrow().clone();
        if view.leadership.role == Role::Leader && !self.leads_now() {
            view.leadership.role = Role::Follower;
        }
        view
    }
}

/// The router: every path of the table, behind `gate`.
pub(crate) fn router(state: StoreState, gate: &Gate) -> Router {
    routes(gate, handlers).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

/// The handlers of one row of the table.
fn handlers(e: &'static Endpoint, m: MethodFilter) -> MethodRouter<StoreState> {
    match e.path {
        "/v1/status" => on(m, status),
        "/v1/leader" => on(m, leader),
        "/v1/is-leader" => on(m, is_leader),
        "/v1/watch" => on(m, watch_leadership),
        "/metrics" => on(m, metrics),
        "/healthz" => on(m, health::get),
        _ => on(m, move |State(st): State<StoreState>| async move { not_served(&st, e) }),
    }
}

/// 404 for an endpoint that needs tenure's own replicated state.
fn not_served(st: &StoreState, e: &Endpoint) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!(
            "this server's leadership comes from {}; {} is served only by servers of tenure's \
             own cluster",
            st.store_url,
            e.shown_path()
        ),
    )
}

async fn status(State(st): State<StoreState>) -> Json<StatusBody> {
    let View { leadership: l, leader_http } = st.view_now();
    Json(StatusBody {
        id: st.id.0,
        incarnation: None,
        directory: None,
        protocol: st.protocol.to_string(),
        role: l.role.as_str().to_string(),
        term: l.term.0,
        voted_for: None,
        leader: l.leader.map(|n| n.0),
        leader_address: leader_http.clone(),
        fencing_token: l.fencing_token.map(|t| t.0),
        lsn: None,
        storage_failed: false,
        peers: Vec::new(),
        http_address: None,
        leader_http_address: leader_http,
        replication: None,
        cluster_id: None,
        voters: None,
        // A store-led server's failovers are the store's (see STORES.md).
        timings: None,
        membership: None,
    })
}

async fn leader(State(st): State<StoreState>) -> Result<Json<LeaderBody>, ApiError> {
    let View { leadership: l, leader_http } = st.view_now();
    let body = l.leader.map(|id| LeaderBody {
        id: id.0,
        address: leader_http.clone(),
        http_address: leader_http,
        term: l.term.0,
        fencing_token: l.fencing_token.map(|t| t.0),
    });
    leader_answer(body, l.term.0)
}

async fn is_leader(State(st): State<StoreState>) -> Response {
    is_leader_answer(st.leads_now(), || st.view.borrow().leadership.leader.map(|n| n.0))
}

async fn watch_leadership(
    State(st): State<StoreState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let slot = stream_slot(&st.watchers, &st.rejections, &caller)?;
    Ok(leadership_sse(st.leadership.clone(), st.stopping.clone(), slot))
}

async fn metrics(State(st): State<StoreState>) -> Response {
    let leadership = st.leadership.borrow().clone();
    (
        [(header::CONTENT_TYPE, crate::http::metrics::CONTENT_TYPE)],
        st.metrics.render_store(st.leads_now(), &leadership),
    )
        .into_response()
}
