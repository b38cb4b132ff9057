//! The HTTP API of `tenure server` (JSON, Server-Sent Events, Prometheus).
//!
//! Every endpoint is listed once, in [`ENDPOINTS`] (path, methods, who may
//! call it, purpose): the router is built from that table, each endpoint
//! behind a gate that admits callers by its [`Access`] ([`auth`]: bearer
//! tokens of role `read`, `write` or `admin`), and the answers to an unknown
//! path (404, naming the endpoints) and to a wrong method (405, with
//! `Allow`) read it. A path may have several rows, one per access (the
//! key-value store's `GET /v1/kv/{key}` reads, its `PUT` and `DELETE`
//! write). Each resource's handlers live in a module of their own.
//!
//! Every error answer is JSON `{"error": "..."}` with a 4xx or 5xx status,
//! including unknown paths, wrong methods, malformed bodies, missing or
//! invalid tokens (401) and a role too low (403).
//!
//! [`serve()`] runs the API on a listener within the limits of [`HttpLimits`]:
//! a cap on connections and timeouts for headers, bodies and idle keep-alive.
//! `/v1/watch` and `/v1/kv-watch` streams are limited in all, per client address and per token
//! ([`MAX_WATCHERS`], [`MAX_WATCHERS_PER_ADDRESS`], [`MAX_WATCHERS_PER_TOKEN`]).
//! Refusals are counted and logged as one summary line per
//! [`REJECTION_LOG_INTERVAL`], not a line each.

mod admission;
pub mod auth;
mod budget;
mod cluster;
mod conn;
mod dashboard;
mod dead;
mod election_observe;
mod elections;
mod error;
mod gate;
mod groups;
pub(crate) mod health;
mod keepalive;
mod keepalive_stream;
mod kv;
mod kv_body;
mod kv_watch;
pub(crate) mod leader;
mod limits;
pub(crate) mod members;
pub(crate) mod metrics;
mod owner;
mod serve;
mod sessions;
mod state;
pub(crate) mod status;
mod store;
mod transfer;
pub(crate) mod watch;
mod watchers;

pub use auth::{Access, ApiAuth, ApiToken, Role, TokenError, TokenSpec};
pub use budget::{LIST_ANSWER_WAIT, MAX_LIST_ANSWERS, MAX_LIST_BYTES};
pub use cluster::PEER_STATUS_TIMEOUT;
pub use dead::notice as dead_notice;
pub use elections::{campaign_command, proclaim_request, resign_command};
pub use error::ApiError;
pub(crate) use gate::Gate;
pub use kv::MAX_TXN_BODY_BYTES;
pub use kv_body::txn_command;
pub use limits::{
    HttpLimits, BODY_READ_TIMEOUT, HEADER_READ_TIMEOUT, IDLE_TIMEOUT, MAX_BODY_BYTES,
    MAX_CONNECTIONS, MAX_UNPROVEN_CONNECTIONS, REJECTION_LOG_INTERVAL, SHUTDOWN_GRACE,
    UNPROVEN_TIMEOUT,
};
pub use members::{member_to_add, CHANGE_TIMEOUT};
pub use serve::serve;
pub use sessions::grant_command;
pub use state::AppState;
pub use status::status_body;
pub use transfer::target as transfer_target;
pub(crate) use watchers::Watchers;
pub use watchers::{MAX_WATCHERS, MAX_WATCHERS_PER_ADDRESS, MAX_WATCHERS_PER_TOKEN};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, Method, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use tenure_kv::MAX_VALUE_BYTES;

/// One endpoint of the API: a path and the methods of it that need one access.
pub struct Endpoint {
    /// The path, e.g. `/v1/status`; `{*key}` is the rest of the path.
    pub path: &'static str,
    /// The methods it answers (a GET endpoint answers HEAD too). Two rows of
    /// one path have no method in common.
    pub methods: &'static [Method],
    /// Who may call it: `Read`, `Write` and `Admin` need a token of that
    /// role or above (admin includes write, write includes read); `Probe` is
    /// open to anyone unless the server asks a read token for the probes
    /// ([`ApiAuth::open_probes`]).
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
        path: "/v1/cluster",
        methods: &[Method::GET],
        access: Access::Read,
        description: "every member's status (voters and learners), read through this node ({\"served_by\",\"nodes\": \
                      [{\"id\",\"http_address\",\"status\",\"error\"}]}); the others at \
                      their --peer-http address, with the caller's token",
        handlers: |m| on(m, cluster::get),
    },
    Endpoint {
        path: "/v1/timeline",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the leadership changes this node saw, with their cause ({\"entries\": \
                      [{\"term\",\"leader\",\"previous\",\"at_unix_ms\",\"no_leader_ms\",\
                      \"cause\",\"detail\"}]})",
        handlers: |m| on(m, cluster::timeline),
    },
    Endpoint {
        path: "/v1/watch",
        methods: &[Method::GET],
        access: Access::Read,
        description: "Server-Sent Events: the current leadership, then every change",
        handlers: |m| on(m, watch::get),
    },
    Endpoint {
        path: "/v1/kv/{*key}",
        methods: &[Method::GET],
        access: Access::Read,
        description: "a key: {\"key\",\"value\",\"create_revision\",\"mod_revision\",\"version\",\
                      \"revision\"}, 404 when absent; a value that is not UTF-8 comes as \
                      \"value_base64\" instead of \"value\"; ?consistency=stale reads this node",
        handlers: |m| on(m, kv::get),
    },
    Endpoint {
        path: "/v1/kv/{*key}",
        methods: &[Method::PUT, Method::DELETE],
        access: Access::Write,
        description: "PUT sets the key to the raw body ({\"revision\",\"fencing_token\"}), DELETE \
                      removes it; ?if_mod_revision=R: only if the key's mod_revision is R (0: \
                      absent), else 409",
        handlers: |_| {
            on(MethodFilter::PUT, kv::put)
                .on(MethodFilter::DELETE, kv::delete)
                .layer(DefaultBodyLimit::max(MAX_VALUE_BYTES))
        },
    },
    Endpoint {
        path: "/v1/kv",
        methods: &[Method::GET],
        access: Access::Read,
        description:
            "the keys starting with ?prefix=P, in order ({\"kvs\",\"more\",\"revision\"}); \
                      &limit=N, &consistency=stale",
        handlers: |m| on(m, kv::list),
    },
    Endpoint {
        path: "/v1/txn",
        methods: &[Method::POST],
        access: Access::Write,
        description: "a transaction: {\"compare\":[...],\"success\":[...],\"failure\":[...]}",
        handlers: |m| on(m, kv::txn).layer(DefaultBodyLimit::max(MAX_TXN_BODY_BYTES)),
    },
    Endpoint {
        path: "/v1/kv-watch",
        methods: &[Method::GET],
        access: Access::Read,
        description: "Server-Sent Events: the changes of ?prefix=P (or ?key=K) from \
                      ?from_revision=R on; 410 when R is compacted",
        handlers: |m| on(m, kv_watch::get),
    },
    Endpoint {
        path: "/v1/sessions",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the sessions by id ({\"sessions\",\"more\",\"revision\"}), the first \
                      100 with the leader's remaining_ms; &limit=N, &consistency=stale",
        handlers: |m| on(m, sessions::list),
    },
    Endpoint {
        path: "/v1/sessions",
        methods: &[Method::POST],
        access: Access::Write,
        description: "grants a session: {\"ttl_ms\": N} -> {\"id\",\"ttl_ms\"}",
        handlers: |m| on(m, sessions::grant),
    },
    Endpoint {
        path: "/v1/sessions/{id}",
        methods: &[Method::GET],
        access: Access::Read,
        description:
            "a session's TTL and keys ({\"id\",\"ttl_ms\",\"keys\",\"remaining_ms\"}), 404",
        handlers: |m| on(m, sessions::get),
    },
    Endpoint {
        path: "/v1/sessions/{id}",
        methods: &[Method::DELETE],
        access: Access::Write,
        description: "revokes a session, deleting its keys at one revision",
        handlers: |m| on(m, sessions::revoke),
    },
    Endpoint {
        path: "/v1/sessions/{id}/keepalive",
        methods: &[Method::POST],
        access: Access::Write,
        description: "renews a session on the leader (any node forwards it): {\"id\",\"ttl_ms\"}, \
                      a full TTL from the leader's answer; 404 when it does not exist or expires",
        handlers: |m| on(m, keepalive::post),
    },
    Endpoint {
        path: "/v1/sessions/{id}/keepalive",
        methods: &[Method::GET],
        access: Access::Write,
        description: "Server-Sent Events: renews the session every TTL/3 while open, each as \
                      `renewed` {\"id\",\"ttl_ms\",\"sent_after_ms\"}; `ended` when it is gone; \
                      404 when it does not exist",
        handlers: |m| on(m, keepalive_stream::get),
    },
    Endpoint {
        path: "/v1/elections",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the elections with a candidate, by name ({\"elections\": [{\"name\",\
                      \"leader\",\"candidates\"}],\"more\",\"revision\"}); &limit=N, \
                      &consistency=stale",
        handlers: |m| on(m, elections::list),
    },
    Endpoint {
        path: "/v1/elections/{name}",
        methods: &[Method::GET],
        access: Access::Read,
        description: "an election's leader and candidates ({\"name\",\"leader\",\"candidates\",\
                      \"revision\"})",
        handlers: |m| on(m, elections::get),
    },
    Endpoint {
        path: "/v1/elections/{name}/campaign",
        methods: &[Method::POST],
        access: Access::Write,
        description: "joins the election: {\"session\": L, \"value\": \"v\"} -> {\"leader\",\
                      \"token\",\"ahead\",...}; 409 already a candidate, 404 unknown session",
        handlers: |m| {
            on(m, elections::campaign)
                .layer(DefaultBodyLimit::max(elections::MAX_ELECTION_BODY_BYTES))
        },
    },
    Endpoint {
        path: "/v1/elections/{name}/resign",
        methods: &[Method::POST],
        access: Access::Write,
        description: "leaves the election: {\"session\": L} -> {\"revision\"}; 404",
        handlers: |m| on(m, elections::resign),
    },
    Endpoint {
        path: "/v1/elections/{name}/proclaim",
        methods: &[Method::POST],
        access: Access::Write,
        description: "the leader's new value, same token: {\"session\": L, \"value\": \"v\"}; \
                      409 when that session does not lead",
        handlers: |m| {
            on(m, elections::proclaim)
                .layer(DefaultBodyLimit::max(elections::MAX_ELECTION_BODY_BYTES))
        },
    },
    Endpoint {
        path: "/v1/elections/{name}/wait",
        methods: &[Method::GET],
        access: Access::Read,
        description: "long poll ?session=L&timeout_ms=N: answers when that candidacy leads (or at \
                      the timeout); 404 when it is gone",
        handlers: |m| on(m, elections::wait),
    },
    Endpoint {
        path: "/v1/elections/{name}/observe",
        methods: &[Method::GET],
        access: Access::Read,
        description:
            "Server-Sent Events: the leader (or no-leader), then every change and proclaim",
        handlers: |m| on(m, election_observe::get),
    },
    Endpoint {
        path: "/v1/elections/{name}/check",
        methods: &[Method::GET],
        access: Access::Read,
        description: "?token=T: whether T is the election's current fencing token \
                      ({\"current\",\"token\",\"revision\"})",
        handlers: |m| on(m, elections::check),
    },
    Endpoint {
        path: "/v1/groups",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the groups of partitions in key order: {\"groups\": [{\"name\",\"spec\",\
                      \"members\",\"owned\"}],\"more\",\"revision\"}; ?after=NAME, &limit=N \
                      (at most 100), &consistency=stale",
        handlers: |m| on(m, groups::list),
    },
    Endpoint {
        path: "/v1/groups/{name}",
        methods: &[Method::GET],
        access: Access::Read,
        description: "a group of partitions: {\"name\",\"spec\",\"members\",\"more\",\"owners\",\
                      \"unreadable\",\"revision\",\"stats\"}, 404 when it does not exist; \
                      ?after=ID, &consistency=stale, &local=true (answered by this node, not passed on \
                      to the leader)",
        handlers: |m| on(m, groups::get),
    },
    Endpoint {
        path: "/v1/groups/{name}/join",
        methods: &[Method::POST],
        access: Access::Write,
        description: "joins (or updates) a member, creating the group: {\"session\": L, \
                      \"partitions\": N, \"weight\", \"ready\", ...} -> {\"revision\"}; 404 \
                      no such group or session, 409 another partition count",
        handlers: |m| on(m, groups::join).layer(DefaultBodyLimit::max(groups::MAX_GROUP_BODY_BYTES)),
    },
    Endpoint {
        path: "/v1/groups/{name}/leave",
        methods: &[Method::POST],
        access: Access::Write,
        description: "the member and its partitions go at one revision: {\"session\": L} -> \
                      {\"revision\"}; 404 not a member",
        handlers: |m| on(m, groups::leave),
    },
    Endpoint {
        path: "/v1/groups/{name}/release",
        methods: &[Method::POST],
        access: Access::Write,
        description: "gives a partition up: {\"session\": L, \"partition\": P, \"epoch\": E} -> \
                      {\"revision\"}; 409 when it does not own P at epoch E",
        handlers: |m| on(m, groups::release),
    },
    Endpoint {
        path: "/v1/groups/{name}/assignment",
        methods: &[Method::GET],
        access: Access::Read,
        description: "?session=L: the partitions it owns ({\"owned\": [{\"partition\",\"epoch\",\
                      \"release\"}],\"revision\"}); &after=R&timeout_ms=N: long poll until the \
                      group changed after R",
        handlers: |m| on(m, groups::assignment),
    },
    Endpoint {
        path: "/v1/transfer",
        methods: &[Method::POST],
        access: Access::Admin,
        description: "hand leadership to the node in the body {\"to\": N}",
        handlers: |m| on(m, transfer::post),
    },
    Endpoint {
        path: "/v1/members",
        methods: &[Method::GET],
        access: Access::Read,
        description: "the configuration of members this node's log holds ({\"served_by\",\
                      \"leader\",\"leader_http_address\",\"config\":{\"index\",\"token\"},\
                      \"committed\",\"commit_index\",\"voters\",\"learners\"}: each \
                      {\"id\",\"address\",\"directory\",\"auto_promote\",\"http_address\",\
                      \"match_index\",\"lag_entries\"}, the last two on the leader)",
        handlers: |m| on(m, members::get),
    },
    Endpoint {
        path: "/v1/members",
        methods: &[Method::POST],
        access: Access::Admin,
        description: "adds a learner {\"id\",\"address\",\"directory\",\"promote\": \
                      \"auto\"|\"manual\"}, answered once committed with the new \
                      configuration; 409 on a follower (\"leader\", \"leader_http_address\") \
                      or a change in progress, a duplicate; 504 outcome unknown",
        handlers: |m| on(m, members::add),
    },
    Endpoint {
        path: "/v1/members/{id}",
        methods: &[Method::DELETE],
        access: Access::Admin,
        description: "removes a voter or a learner, answered once committed; 404 for a \
                      non-member, 409 as for POST",
        handlers: |m| on(m, members::remove),
    },
    Endpoint {
        path: "/v1/members/{id}/promote",
        methods: &[Method::POST],
        access: Access::Admin,
        description: "makes a learner a voter, answered once committed; 409 when it has not \
                      caught up, is a voter already, or as for POST /v1/members",
        handlers: |m| on(m, members::promote),
    },
    Endpoint {
        path: "/v1/peers/{id}/dead",
        methods: &[Method::POST],
        access: Access::Admin,
        description: "incarnation N of node id is dead (the caller knows: systemd's \
                      ExecStopPost, a supervisor): {\"incarnation\": N} -> {\"accepted\",\
                      \"node\",\"incarnation\",\"was_leader\"}; 409 when N is not the node's \
                      current incarnation (\"current_incarnation\"), 404 for a non-voter",
        handlers: |m| on(m, dead::post),
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
    /// The path as people write it: `/v1/kv/{key}` for `/v1/kv/{*key}`.
    pub fn shown_path(&self) -> String {
        self.path.replace("{*", "{")
    }

    /// A path that reaches this endpoint, for tests and examples: the
    /// parameter filled in with `example`.
    pub fn example_path(&self) -> String {
        self.path.replace("{*key}", "example").replace("{id}", "1").replace("{name}", "example")
    }

    /// The methods of the row as a filter.
    fn filter(&self) -> MethodFilter {
        self.methods
            .iter()
            .map(|m| MethodFilter::try_from(m.clone()).expect("the table names standard methods"))
            .reduce(MethodFilter::or)
            .expect("every endpoint has a method")
    }
}

/// The methods to list in `Allow` for `path`: its rows', and HEAD with GET
/// (the router answers HEAD wherever it answers GET).
pub fn allowed(path: &str) -> Vec<Method> {
    let mut allowed: Vec<Method> = ENDPOINTS
        .iter()
        .filter(|e| e.path == path)
        .flat_map(|e| e.methods.iter().cloned())
        .collect();
    if allowed.contains(&Method::GET) && !allowed.contains(&Method::HEAD) {
        allowed
            .insert(allowed.iter().position(|m| m == Method::GET).unwrap_or(0) + 1, Method::HEAD);
    }
    allowed
}

/// 405 with `Allow` from the table.
fn method_not_allowed(path: &'static str, method: &Method) -> Response {
    let allowed = allowed(path).iter().map(Method::as_str).collect::<Vec<_>>().join(", ");
    let error = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method {method} is not allowed on {}; use {allowed}", path.replace("{*", "{")),
    );
    ([(header::ALLOW, allowed)], error).into_response()
}

/// The paths of [`ENDPOINTS`], each once, in the table's order.
fn paths() -> Vec<&'static str> {
    let mut paths: Vec<&'static str> = Vec::new();
    for e in ENDPOINTS {
        if !paths.contains(&e.path) {
            paths.push(e.path);
        }
    }
    paths
}

/// The API's routes, built from [`ENDPOINTS`], each row behind the gate of
/// its [`Access`]; the rows of one path share its route and its 405.
pub fn router(state: AppState) -> Router {
    let gate = state.gate();
    routes(&gate, |e, filter| (e.handlers)(filter))
        .route("/v1/kv/", empty_key_route(&gate))
        .merge(dashboard::routes())
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// A router over every path of [`ENDPOINTS`] whose handlers come from
/// `handlers` (given the row and its methods), each row behind `gate` with
/// its [`Access`], a 405 naming the allowed methods for the others and a 404
/// naming the endpoints for unknown paths. The node's router and the
/// store-led server's ([`crate::store_server`]) are both built by it.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>(
    gate: &Gate,
    handlers: impl Fn(&'static Endpoint, MethodFilter) -> MethodRouter<S>,
) -> Router<S> {
    paths()
        .into_iter()
        .fold(Router::new(), |router, path| {
            let methods = ENDPOINTS
                .iter()
                .filter(|e| e.path == path)
                .fold(MethodRouter::new(), |m, e| {
                    let admit = move |g, req, next| gate::admit(g, e.access, req, next);
                    m.merge(
                        handlers(e, e.filter())
                            .route_layer(middleware::from_fn_with_state(gate.clone(), admit)),
                    )
                })
                .fallback(move |method: Method| async move { method_not_allowed(path, &method) });
            router.route(path, methods)
        })
        .fallback(not_found)
}

/// `/v1/kv/`, which the wildcard of `/v1/kv/{*key}` does not match (it
/// needs a character): 400, the key is empty, behind the gate of a read.
fn empty_key_route(gate: &Gate) -> MethodRouter<AppState> {
    let admit = |g, req, next| gate::admit(g, Access::Read, req, next);
    on(MethodFilter::GET.or(MethodFilter::PUT).or(MethodFilter::DELETE), empty_key)
        .route_layer(middleware::from_fn_with_state(gate.clone(), admit))
        .fallback(|method: Method| async move { method_not_allowed("/v1/kv/{*key}", &method) })
}

async fn empty_key() -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "the key is empty: /v1/kv/{key}; list keys with GET /v1/kv?prefix=P",
    )
}

/// 404 naming every endpoint.
async fn not_found() -> ApiError {
    let known = paths().iter().map(|p| p.replace("{*", "{")).collect::<Vec<_>>().join(", ");
    ApiError::new(StatusCode::NOT_FOUND, format!("no such endpoint; see {known}"))
}
