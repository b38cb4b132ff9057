//! The HTTP API of `tenure server` (JSON, Server-Sent Events, Prometheus).
//!
//! Every endpoint is listed once, in [`ENDPOINTS`] (path, methods, who may
//! call it, purpose): the router is built from that table, each endpoint
//! behind a gate that admits callers by its [`Access`] ([`auth`]: bearer
//! tokens of role `read` or `admin`), and the answers to an unknown path
//! (404, naming the endpoints) and to a wrong method (405, with `Allow`) read
//! it. Each resource's handlers live in a module of their own.
//!
//! Every error answer is JSON `{"error": "..."}` with a 4xx or 5xx status,
//! including unknown paths, wrong methods, malformed bodies, missing or
//! invalid tokens (401) and a role too low (403).
//!
//! [`serve`] runs the API on a listener within the limits of [`HttpLimits`]:
//! a cap on connections and timeouts for headers, bodies and idle keep-alive.
//! `/v1/watch` streams are limited in all, per client address and per token
//! ([`MAX_WATCHERS`], [`MAX_WATCHERS_PER_ADDRESS`], [`MAX_WATCHERS_PER_TOKEN`]).
//! Refusals are counted and logged as one summary line per
//! [`REJECTION_LOG_INTERVAL`], not a line each.

pub mod auth;
mod conn;
mod gate;
mod health;
mod leader;
mod limits;
mod metrics;
mod serve;
mod state;
mod status;
mod transfer;
mod watch;
mod watchers;

pub use auth::{Access, ApiAuth, ApiToken, Role, TokenError, TokenSpec};
pub use limits::{
    HttpLimits, BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, IDLE_TIMEOUT, MAX_BODY_BYTES,
    MAX_CONNECTIONS, REJECTION_LOG_INTERVAL, SHUTDOWN_GRACE,
};
pub use serve::serve;
pub use state::{ApiError, AppState};
pub use status::status_body;
pub use transfer::target as transfer_target;
pub use watchers::{MAX_WATCHERS, MAX_WATCHERS_PER_ADDRESS, MAX_WATCHERS_PER_TOKEN};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, Method, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;

/// One endpoint of the API.
pub struct Endpoint {
    /// The path, e.g. `/v1/status`.
    pub path: &'static str,
    /// The methods it answers (a GET endpoint answers HEAD too).
    pub methods: &'static [Method],
    /// Who may call it: `Read` and `Admin` need a token of that role (admin
    /// includes read); `Probe` is open to anyone unless the server asks a
    /// read token for the probes ([`ApiAuth::open_probes`]).
    pub access: Access,
    /// What it does, in a line.
    pub description: &'static str,
    /// Its handlers, for the method filter built from `methods`.
    handlers: fn(MethodFilter) -> MethodRouter<AppState>,
}

/// Every endpoint of the API, in the order the 404 answer lists them.
pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        path: "/v1/status",
        methods: &[Method::GET],
        access: Access::Read,
        description: "this node's role, term, vote, known leader, fencing token and peers",
        handlers: |m| on(m, status::get),
    },
    Endpoint {
        path: "/v1/leader",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the known leader's id, address, term and fencing token, or 503",
        handlers: |m| on(m, leader::get),
    },
    Endpoint {
        path: "/v1/is-leader",
        methods: &[Method::GET],
        access: Access::Probe,
        description: "200 on the leader (while its lease is valid), 503 elsewhere",
        handlers: |m| on(m, leader::is_leader),
    },
    Endpoint {
        path: "/v1/watch",
        methods: &[Method::GET],
        access: Access::Read,
        description: "Server-Sent Events: the current leadership, then every change",
        handlers: |m| on(m, watch::get),
    },
    Endpoint {
        path: "/v1/transfer",
        methods: &[Method::POST],
        access: Access::Admin,
        description: "hand leadership to the node in the body {\"to\": N}",
        handlers: |m| on(m, transfer::post),
    },
    Endpoint {
        path: "/metrics",
        methods: &[Method::GET],
        access: Access::Read,
        description: "Prometheus metrics",
        handlers: |m| on(m, metrics::get),
    },
    Endpoint {
        path: "/healthz",
        methods: &[Method::GET],
        access: Access::Probe,
        description: "{\"status\":\"ok\"} while the process answers",
        handlers: |m| on(m, health::get),
    },
];

impl Endpoint {
    /// The methods to list in `Allow`: the table's, and HEAD with GET (the
    /// router answers HEAD wherever it answers GET).
    pub fn allowed(&self) -> Vec<Method> {
        let mut allowed = self.methods.to_vec();
        if allowed.contains(&Method::GET) && !allowed.contains(&Method::HEAD) {
            allowed.push(Method::HEAD);
        }
        allowed
    }

    fn method_router(&'static self, state: &AppState) -> MethodRouter<AppState> {
        let filter = self
            .methods
            .iter()
            .map(|m| MethodFilter::try_from(m.clone()).expect("the table names standard methods"))
            .reduce(MethodFilter::or)
            .expect("every endpoint has a method");
        let gate = move |st, req, next| gate::admit(st, self.access, self.path, req, next);
        (self.handlers)(filter)
            .route_layer(middleware::from_fn_with_state(state.clone(), gate))
            .fallback(move |method: Method| async move { self.method_not_allowed(&method) })
    }

    /// 405 with `Allow` from the table.
    fn method_not_allowed(&self, method: &Method) -> Response {
        let allowed = self.allowed().iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
        let error = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} is not allowed on {}; use {allowed}", self.path),
        );
        ([(header::ALLOW, allowed)], error).into_response()
    }
}

/// The API's routes, built from [`ENDPOINTS`], each behind the gate of its
/// [`Access`].
pub fn router(state: AppState) -> Router {
    ENDPOINTS
        .iter()
        .fold(Router::new(), |router, e| router.route(e.path, e.method_router(&state)))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// 404 naming every endpoint.
async fn not_found() -> ApiError {
    let known = ENDPOINTS.iter().map(|e| e.path).collect::<Vec<_>>().join(", ");
    ApiError::new(StatusCode::NOT_FOUND, format!("no such endpoint; see {known}"))
}
