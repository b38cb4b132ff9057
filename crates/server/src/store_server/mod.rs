//! A server whose leadership comes from an external store (`tenure server
//! --store URL`, Leader and Followers): no consensus node of its own, no peers, no data
//! directory. It campaigns in one election of the store (tenure's named
//! elections, etcd or ZooKeeper: docs/STORES.md) with the value
//! `{"id":N,"http":"host:port"}`, again after every loss, observes the
//! election to know who leads and where that leader's API is, and serves
//! the leadership endpoints of tenure's HTTP API from it: `/v1/status`,
//! `/v1/leader`, `/v1/is-leader`, `/v1/watch`, `/metrics` and `/healthz`,
//! with the same bodies, tokens and limits as a node of tenure's own
//! cluster. See [`view`] for the roles and the term (the store's fencing
//! token).
//!
//! On shutdown it resigns first (its successor leads at once), then stops
//! the API. A server killed outright is replaced once its session expires
//! in the store, about one TTL later.

mod campaign;
mod routes;
pub mod view;

use crate::http::{self, ApiAuth, Gate, HttpLimits, Watchers, REJECTION_LOG_INTERVAL};
use crate::metrics::Metrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::NodeId;
use tenure_elect::{CancellationToken, Election, LeaderElector, Store};
use tenure_node::{Leadership, RateLimitedLog};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};
use view::{CandidateValue, Local, Seen, View};

/// How long a shutdown waits for the resignation and the session's close
/// before it stops the API anyway (the store then ends the session at its
/// TTL).
pub const RESIGN_BOUND: Duration = Duration::from_secs(5);

/// What a store-led server runs with.
pub struct StoreServerConfig {
    /// This server's node id: in its candidate value, and the leader's id
    /// every server reports.
    pub id: NodeId,
    /// The store that holds the election.
    pub store: Arc<dyn Store>,
    /// The store's URL as given, for logs and the 404 of the endpoints not
    /// served here.
    pub store_url: String,
    /// The election's name in the store.
    pub election: String,
    /// The TTL of its sessions in the store.
    pub ttl: Duration,
    /// The address of this server's API that the others can reach (in its
    /// candidate value); None: the HTTP listener's address.
    pub advertise_http: Option<String>,
    /// The HTTP server's connection cap and timeouts.
    pub http: HttpLimits,
    /// Who may call the API.
    pub api: ApiAuth,
    /// HTTPS with this server's certificate; None: plain HTTP (insecure).
    pub tls: Option<TlsAcceptor>,
}

impl std::fmt::Debug for StoreServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreServerConfig")
            .field("id", &self.id)
            .field("store_url", &self.store_url)
            .field("election", &self.election)
            .field("ttl", &self.ttl)
            .field("advertise_http", &self.advertise_http)
            .field("https", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a store-led server could not run.
#[derive(Debug, thiserror::Error)]
pub enum StoreServerError {
    /// The HTTP listener could not be handed to the async runtime.
    #[error("the HTTP listener cannot be used")]
    HttpListener(#[source] std::io::Error),
    /// The election's name, the value or the TTL were refused.
    #[error("cannot campaign in election {election}")]
    Election {
        /// The election.
        election: String,
        /// Why.
        #[source]
        source: tenure_elect::Error,
    },
    /// No address for others to reach this server's API.
    #[error(
        "the HTTP API listens on {0}, which other servers cannot reach: give the address they \
         can (--advertise-http HOST:PORT)"
    )]
    Unadvertisable(std::net::SocketAddr),
}

/// The tasks of a running server, stopped in order on shutdown.
struct Tasks {
    stop_campaign: CancellationToken,
    campaign: tokio::task::JoinHandle<()>,
    stop_view: CancellationToken,
    stopping_tx: watch::Sender<bool>,
    http: tokio::task::JoinHandle<()>,
    background: Vec<tokio::task::JoinHandle<()>>,
    rejections: Arc<RateLimitedLog>,
}

/// Runs a store-led server with its API on `http_listener` until `shutdown`
/// completes; then it resigns (within [`RESIGN_BOUND`]) while the API still
/// answers, and stops.
pub async fn run(
    config: StoreServerConfig,
    http_listener: std::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), StoreServerError> {
    http_listener.set_nonblocking(true).map_err(StoreServerError::HttpListener)?;
    let listener =
        tokio::net::TcpListener::from_std(http_listener).map_err(StoreServerError::HttpListener)?;
    let http_addr = listener.local_addr().map_err(StoreServerError::HttpListener)?;
    let me = CandidateValue { id: config.id.0, http: advertised(&config, http_addr)? };
    let election_error =
        |source| StoreServerError::Election { election: config.election.clone(), source };
    let election = Election::new(config.store.clone(), &config.election).map_err(election_error)?;
    let elector = LeaderElector::new(config.store.clone(), &config.election, &me.encode())
        .map_err(election_error)?
        .ttl(config.ttl);
    tenure_elect::session::check_ttl(config.ttl).map_err(election_error)?;
    info!(
        node = %config.id,
        http = %http_addr,
        https = config.tls.is_some(),
        store = %config.store_url,
        election = %config.election,
        ttl_ms = config.ttl.as_millis() as u64,
        "tenure server started; its leadership comes from the store"
    );
    if config.tls.is_none() {
        warn!(
            http = %http_addr,
            "INSECURE: the HTTP API runs without TLS (insecure_no_tls); anyone who reaches it \
             reads plain text. Use this on a development machine only"
        );
    }
    crate::server::log_api_access(&config.api);
    let tasks = start(config, me, election, elector, listener);
    shutdown.await;
    tasks.stop().await;
    Ok(())
}

/// The address in the candidate value: `--advertise-http`, else the
/// listener's, which must then be a specific one.
fn advertised(
    config: &StoreServerConfig,
    addr: std::net::SocketAddr,
) -> Result<String, StoreServerError> {
    match &config.advertise_http {
        Some(a) => Ok(a.clone()),
        None if addr.ip().is_unspecified() => Err(StoreServerError::Unadvertisable(addr)),
        None => Ok(addr.to_string()),
    }
}

/// Starts the campaign, the observer, the view's publisher, the failover
/// histogram and the API.
fn start(
    config: StoreServerConfig,
    me: CandidateValue,
    election: Election,
    elector: LeaderElector,
    listener: tokio::net::TcpListener,
) -> Tasks {
    let local = Arc::new(watch::channel(Local::Idle).0);
    let (seen_tx, seen) = watch::channel(Seen::Unknown);
    let (view_tx, view) = watch::channel(View::initial());
    let leadership_tx = Arc::new(watch::channel(View::initial().leadership).0);
    let leadership: watch::Receiver<Leadership> = leadership_tx.subscribe();
    let (stop_campaign, stop_view) = (CancellationToken::new(), CancellationToken::new());
    let elector = campaign::with_callbacks(elector, local.clone());
    let campaign = tokio::spawn(campaign::run(elector, local.clone(), stop_campaign.clone()));
    let metrics = Metrics::default();
    let rejections = Arc::new(RateLimitedLog::new("HTTP requests", REJECTION_LOG_INTERVAL));
    let background = vec![
        tokio::spawn(view::observe(election, seen_tx, stop_view.clone())),
        tokio::spawn(view::publish(
            me,
            local.subscribe(),
            seen,
            view_tx,
            leadership_tx,
            stop_view.clone(),
        )),
        tokio::spawn(metrics.clone().track_failovers(leadership.clone())),
        tokio::spawn({
            let rejections = rejections.clone();
            async move { rejections.run().await }
        }),
    ];
    let (stopping_tx, stopping) = watch::channel(false);
    let state = routes::StoreState {
        id: config.id,
        protocol: format!("store:{}", config.store.kind()).into(),
        store_url: config.store_url.into(),
        local: local.subscribe(),
        view,
        leadership,
        metrics,
        watchers: Watchers::default(),
        rejections: rejections.clone(),
        stopping: stopping.clone(),
    };
    let gate = Gate { auth: Arc::new(config.api), rejections: rejections.clone() };
    let app = routes::router(state, &gate);
    let mut http_stop = stopping;
    let serving =
        http::serve(listener, app, config.http, config.tls, rejections.clone(), async move {
            let _ = http_stop.wait_for(|s| *s).await;
        });
    let http = tokio::spawn(serving);
    Tasks { stop_campaign, campaign, stop_view, stopping_tx, http, background, rejections }
}

impl Tasks {
    /// Resigns (while the API still answers, so watchers see the handover),
    /// then stops the API and the rest.
    async fn stop(self) {
        info!("shutting down: resigning first");
        self.stop_campaign.cancel();
        let mut campaign = self.campaign;
        if tokio::time::timeout(RESIGN_BOUND, &mut campaign).await.is_err() {
            warn!("the resignation did not end within {RESIGN_BOUND:?}; stopping anyway");
            campaign.abort();
        }
        self.stop_view.cancel();
        let _ = self.stopping_tx.send(true);
        if let Err(e) = self.http.await {
            warn!(error = %e, "the HTTP server task failed");
        }
        for task in self.background {
            task.abort();
        }
        self.rejections.flush();
        info!("stopped");
    }
}
