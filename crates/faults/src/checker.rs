//! The outside observer. One task per node polls `GET /v1/status` every
//! [`POLL_INTERVAL`]; another follows `GET /v1/watch` (SSE) and reconnects
//! when the stream ends. Every observation is checked as it arrives:
//!
//! - **one leader per term**: whoever says "I lead term T" (status role
//!   `leader`, or a watch event with role `leader`) and whoever says "node L
//!   leads with fencing token T" must name the same node for T;
//! - **fencing tokens never decrease per observer**: each node's status
//!   sequence and each node's watch stream;
//! - **globally across leaders**: a node claiming leadership (status role
//!   `leader`) with token F, in a request sent after a response had shown a
//!   leader with a token above F, is a stale leader a client could still
//!   reach: a violation.
//!
//! Changes of each node's view are logged with their time so scenarios can
//! count leader changes, terms and measure failover/convergence.

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::Request;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often each node's status is polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(15);
/// A status request not answered this fast counts as "no answer" (a paused
/// node never answers).
pub const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);
/// Pause before reconnecting a watch stream that ended or failed.
pub const WATCH_RECONNECT: Duration = Duration::from_millis(50);
/// Largest SSE event accepted; a longer one is a protocol error.
const MAX_SSE_EVENT: usize = 64 * 1024;
/// How often `wait_for` re-evaluates its condition.
const WAIT_POLL: Duration = Duration::from_millis(5);
/// The stall monitor's tick.
const STALL_TICK: Duration = Duration::from_millis(5);
/// A tick late by more than this is recorded as a scheduling stall of the
/// test process: a sign the machine is too loaded for the timings.
pub const STALL_REPORT: Duration = Duration::from_millis(100);
/// Most stalls kept.
const MAX_STALLS: usize = 1000;
/// Most observations kept in the change log (only changes are logged, so a
/// long run stays far below this).
const MAX_LOG: usize = 1_000_000;

/// Where an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A `GET /v1/status` poll.
    Status,
    /// An event on the `/v1/watch` stream.
    Watch,
}

/// One node's view, as reported: its role, term, and the leader and
/// fencing token it knows of (the watch event's body; a status answer has
/// the same fields).
pub type View = tenure_api::LeadershipBody;

/// An observation with its timing.
#[derive(Debug, Clone)]
pub struct Observation {
    /// Index of the node observed (its slot: see [`Checker::renamed`]).
    pub node: usize,
    /// The id of the node in that slot when it was observed (set by the
    /// checker's state; whatever the caller gives is replaced).
    pub id: u64,
    /// Where from.
    pub source: Source,
    /// When the request was sent (the watch stream's connect time for events).
    pub sent: Instant,
    /// When the answer arrived.
    pub received: Instant,
    /// What the node said.
    pub view: View,
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Two different nodes were said to lead the same term.
    TwoLeaders {
        /// The term (fencing token).
        term: u64,
        /// The first node named.
        first: u64,
        /// The other node named.
        second: u64,
        /// Who said so.
        evidence: String,
    },
    /// One observer saw a fencing token go down.
    TokenDecreased {
        /// The observer.
        observer: String,
        /// Before.
        from: u64,
        /// After.
        to: u64,
    },
    /// A node claimed leadership (status role `leader`) with a token below
    /// one already observed before the request was sent.
    StaleLeader {
        /// The stale claimant.
        node: u64,
        /// Its token.
        token: u64,
        /// The higher token seen before the request was sent.
        seen: u64,
        /// How long before the request was sent the higher token was seen.
        seen_before_request: Duration,
        /// How long the request took to be answered.
        answered_in: Duration,
    },
}

/// Everything observed so far.
#[derive(Debug, Default)]
pub struct State {
    /// The latest status of each node (None until it first answers).
    pub latest: Vec<Option<Observation>>,
    /// Every change of a node's view (per source), in arrival order.
    pub log: Vec<Observation>,
    /// Broken invariants.
    pub violations: Vec<Violation>,
    /// Status polls answered.
    pub polls: u64,
    /// Watch events received.
    pub events: u64,
    /// Scheduling stalls of this process longer than [`STALL_REPORT`]:
    /// (when it ended, how late the tick was).
    pub stalls: Vec<(Instant, Duration)>,
    /// Node ids by index.
    ids: Vec<u64>,
    /// Term (fencing token) -> the node said to lead it, and by whom.
    leader_of: BTreeMap<u64, (u64, String)>,
    /// Last fencing token per observer.
    last_token: HashMap<(usize, Source), u64>,
    /// Token of a leadership claim -> when it was first received.
    claims: BTreeMap<u64, Instant>,
    /// The previous view per observer, to log changes only.
    previous: HashMap<(usize, Source), View>,
    /// Every (leader id, term) a leader claimed itself, with when.
    spans: BTreeMap<(u64, u64), ClaimSpan>,
}

/// When one leadership was claimed by the leader itself.
#[derive(Debug, Clone, Copy)]
pub struct ClaimSpan {
    /// The first answer with the claim arrived.
    pub first_received: Instant,
    /// The latest request answered with the claim was sent.
    pub last_sent: Instant,
    /// The latest answer with the claim arrived.
    pub last_received: Instant,
}

impl State {
    fn observe(&mut self, mut o: Observation) {
        let id = self.ids[o.node];
        o.id = id;
        let observer = format!("node {id} {:?}", o.source);
        self.check_one_leader_per_term(&o, id, &observer);
        self.check_token_not_decreasing(&o, observer);
        if o.source == Source::Status && o.view.role == "leader" {
            self.check_claim_not_stale(&o, id);
        }
        if o.view.role == "leader" {
            self.record_claim_span(&o, id);
        }
        if self.previous.get(&(o.node, o.source)) != Some(&o.view) {
            self.previous.insert((o.node, o.source), o.view.clone());
            if self.log.len() < MAX_LOG {
                self.log.push(o.clone());
            }
        }
        match o.source {
            Source::Status => {
                self.polls += 1;
                let node = o.node;
                self.latest[node] = Some(o);
            }
            Source::Watch => self.events += 1,
        }
    }

    /// One leader per term: the node that says it leads and the leader it
    /// names must be the node first named for that term.
    fn check_one_leader_per_term(&mut self, o: &Observation, id: u64, observer: &str) {
        let mut named = Vec::new();
        if o.view.role == "leader" {
            named.push((o.view.term, id));
        }
        if let (Some(l), Some(t)) = (o.view.leader, o.view.fencing_token) {
            named.push((t, l));
        }
        named.dedup();
        for (term, leader) in named {
            match self.leader_of.get(&term) {
                Some((first, by)) if *first != leader => {
                    self.violations.push(Violation::TwoLeaders {
                        term,
                        first: *first,
                        second: leader,
                        evidence: format!("{by} named {first}; {observer} named {leader}"),
                    });
                }
                Some(_) => {}
                None => {
                    self.leader_of.insert(term, (leader, observer.to_string()));
                }
            }
        }
    }

    /// Per-observer fencing monotonicity.
    fn check_token_not_decreasing(&mut self, o: &Observation, observer: String) {
        if let Some(t) = o.view.fencing_token {
            let last = self.last_token.entry((o.node, o.source)).or_insert(t);
            if t < *last {
                self.violations.push(Violation::TokenDecreased { observer, from: *last, to: t });
            }
            *last = (*last).max(t);
        }
    }

    /// Global: no leadership claim (a status answer with role `leader`) below
    /// a token already seen before its request was sent.
    fn check_claim_not_stale(&mut self, o: &Observation, id: u64) {
        let token = o.view.term;
        let seen =
            self.claims.range(token + 1..).filter(|(_, at)| **at < o.sent).max_by_key(|(t, _)| **t);
        if let Some((&seen, &at)) = seen {
            self.violations.push(Violation::StaleLeader {
                node: id,
                token,
                seen,
                seen_before_request: o.sent - at,
                answered_in: o.received - o.sent,
            });
        }
        let at = self.claims.entry(token).or_insert(o.received);
        *at = (*at).min(o.received);
    }

    /// Widens the span of the leadership (`id`, term) that `o` claims.
    fn record_claim_span(&mut self, o: &Observation, id: u64) {
        let span = self.spans.entry((id, o.view.term)).or_insert(ClaimSpan {
            first_received: o.received,
            last_sent: o.sent,
            last_received: o.received,
        });
        span.first_received = span.first_received.min(o.received);
        span.last_sent = span.last_sent.max(o.sent);
        span.last_received = span.last_received.max(o.received);
    }

    /// The distinct (leader id, term) leaderships claimed by a leader itself
    /// in observations received at or after `since`, in order of first sight.
    pub fn leaderships_since(&self, since: Instant) -> Vec<(u64, u64)> {
        let mut seen: Vec<(Instant, (u64, u64))> = self
            .spans
            .iter()
            .filter(|(_, s)| s.last_received >= since)
            .map(|(l, s)| (s.first_received, *l))
            .collect();
        seen.sort();
        seen.into_iter().map(|(_, l)| l).collect()
    }

    /// When leader `id` claimed `term`, if it ever did.
    pub fn claim(&self, id: u64, term: u64) -> Option<ClaimSpan> {
        self.spans.get(&(id, term)).copied()
    }

    /// The times in `[from, to]` when no node was seen leading, longest
    /// first: (start, length) of each gap between the leaderships that the
    /// leaders themselves claimed (status `role=leader`, or a watch event
    /// saying so). A leadership counts from the first answer that claimed
    /// it to the last; a gap runs from the last claim of one to the first
    /// of the next, so it overstates the time without a leader by up to one
    /// poll interval ([`POLL_INTERVAL`]) and the time a claim takes to
    /// arrive, and understates it by no more than the latter.
    pub fn leaderless(&self, from: Instant, to: Instant) -> Vec<(Instant, Duration)> {
        let mut spans: Vec<(Instant, Instant)> = self
            .spans
            .values()
            .filter(|s| s.last_received >= from && s.first_received <= to)
            .map(|s| (s.first_received, s.last_received))
            .collect();
        spans.sort();
        let mut gaps = Vec::new();
        let mut covered = from;
        for (start, end) in spans {
            if start > covered {
                gaps.push((covered, start - covered));
            }
            covered = covered.max(end);
        }
        if to > covered {
            gaps.push((covered, to - covered));
        }
        gaps.sort_by_key(|&(_, length)| std::cmp::Reverse(length));
        gaps
    }

    /// Slot `i` holds node `id` from now on ([`Checker::renamed`]).
    fn rename(&mut self, i: usize, id: u64) {
        self.ids[i] = id;
        self.latest[i] = None;
        self.last_token.retain(|(node, _), _| *node != i);
        self.previous.retain(|(node, _), _| *node != i);
    }

    /// The highest term any node reported at or after `since`.
    pub fn max_term_since(&self, since: Instant) -> u64 {
        let logged = self.log.iter().filter(|o| o.received >= since).map(|o| o.view.term);
        let latest =
            self.latest.iter().flatten().filter(|o| o.received >= since).map(|o| o.view.term);
        logged.chain(latest).max().unwrap_or(0)
    }

    /// The first time a node other than the given one claimed leadership of
    /// a term above `term`, in an answer received after `since`.
    pub fn first_new_leader(&self, since: Instant, term: u64) -> Option<(u64, u64, Instant)> {
        self.log
            .iter()
            .filter(|o| o.received >= since && o.view.role == "leader" && o.view.term > term)
            .map(|o| (o.id, o.view.term, o.received))
            .next()
    }

    /// If every node in `among` has answered a status request sent at or
    /// after `since`, all name the same leader in the same term, and that
    /// leader is one of them and says it leads: (leader id, term).
    pub fn agreement(&self, among: &[usize], since: Instant) -> Option<(u64, u64)> {
        let mut agreed: Option<(u64, u64)> = None;
        for &i in among {
            let o = self.latest[i].as_ref().filter(|o| o.sent >= since)?;
            let l = (o.view.leader?, o.view.term);
            if agreed.is_some_and(|a| a != l) {
                return None;
            }
            agreed = Some(l);
        }
        let (leader, term) = agreed?;
        let li = self.ids.iter().position(|&id| id == leader)?;
        if !among.contains(&li) {
            return None;
        }
        let o = self.latest[li].as_ref()?;
        (o.view.role == "leader" && o.view.term == term).then_some((leader, term))
    }
}

/// The running checker. Dropping it stops its tasks.
pub struct Checker {
    state: Arc<Mutex<State>>,
    tasks: Vec<JoinHandle<()>>,
}

type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// How the servers' HTTP API is reached: HTTPS trusting the run's CA (the
/// servers run with TLS), or plain HTTP (`--insecure-no-tls`); either with
/// the bearer token every request sends.
#[derive(Clone)]
pub struct Api {
    tls: Option<Arc<rustls::ClientConfig>>,
    /// `Bearer <token>`.
    authorization: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Api").field("https", &self.tls.is_some()).finish_non_exhaustive()
    }
}

impl Api {
    /// HTTPS, trusting the CA certificate in `ca`, sending `token`.
    pub fn https(ca: &Path, token: &str) -> crate::error::Result<Self> {
        let roots = tenure_node::tls::read_roots(ca)
            .map_err(|e| crate::error::Error::Config(e.to_string()))?;
        let config = rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| crate::error::Error::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Api { tls: Some(Arc::new(config)), authorization: format!("Bearer {token}") })
    }

    /// Plain HTTP, sending `token`.
    pub fn http(token: &str) -> Self {
        Api { tls: None, authorization: format!("Bearer {token}") }
    }

    /// The URL of `path` at `addr`.
    pub fn url(&self, addr: SocketAddr, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{addr}{path}")
    }

    /// The `Authorization` header value every request sends.
    pub(crate) fn authorization(&self) -> &str {
        &self.authorization
    }

    /// A connector for https:// (trusting the run's CA) and http:// URLs,
    /// giving up a connection attempt after `connect_timeout`.
    pub(crate) fn connector(&self, connect_timeout: Duration) -> HttpsConnector<HttpConnector> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        http.enforce_http(false);
        let config = match &self.tls {
            Some(c) => (**c).clone(),
            None => rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
                .with_safe_default_protocol_versions()
                .expect("the ring provider supports the default versions")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        };
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http)
    }

    /// A new client (its own connection pool) sending the token.
    fn caller(&self) -> Caller {
        let connector = self.connector(REQUEST_TIMEOUT);
        Caller {
            http: Client::builder(TokioExecutor::new()).build(connector),
            authorization: self.authorization.clone(),
        }
    }
}

/// The pooled client of the pollers and watchers, and the `Authorization`
/// header value they send.
#[derive(Clone)]
struct Caller {
    http: HttpClient,
    authorization: String,
}

impl Checker {
    /// Starts polling and watching every node through `api` (its scheme and
    /// token); `ids[i]` is node `i`'s id. Must be called inside a tokio runtime.
    pub fn start(addrs: Vec<SocketAddr>, ids: Vec<u64>, api: Api) -> Self {
        let state = Arc::new(Mutex::new(State {
            latest: vec![None; addrs.len()],
            ids,
            ..State::default()
        }));
        let client = api.caller();
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(stall_monitor(state.clone())));
        for (i, addr) in addrs.into_iter().enumerate() {
            let (status, events) = (api.url(addr, "/v1/status"), api.url(addr, "/v1/watch"));
            tasks.push(tokio::spawn(poll(i, status, client.clone(), state.clone())));
            tasks.push(tokio::spawn(watch(i, events, client.clone(), state.clone())));
        }
        Checker { state, tasks }
    }

    /// A locked view of everything observed.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Slot `i` holds node `id` from now on (its previous node was killed
    /// and its data wiped; a new node joins there): later observations are
    /// of `id`, a new observer whose tokens start afresh.
    pub fn renamed(&self, i: usize, id: u64) {
        self.state().rename(i, id);
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.state().violations.clone()
    }

    /// Re-evaluates `f` on the observations until it returns Some, at most
    /// `bound`; returns the value and how long it took.
    pub async fn wait_for<T>(
        &self,
        bound: Duration,
        mut f: impl FnMut(&State) -> Option<T>,
    ) -> Option<(T, Duration)> {
        let start = Instant::now();
        loop {
            if let Some(v) = f(&self.state()) {
                return Some((v, start.elapsed()));
            }
            if start.elapsed() > bound {
                return None;
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One `GET {addr}{path}` through `api` (its scheme and token) on its own
/// connection, waiting at most `timeout`: (status code, body), or None
/// without an answer.
pub async fn get_once(
    api: Api,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Option<(u16, String)> {
    request_once(api, hyper::Method::GET, addr, path, timeout).await
}

/// One `{method} {addr}{path}` without a body, as [`get_once`] (a `DELETE
/// /v1/members/{id}` with an admin [`Api`], for instance).
pub async fn request_once(
    api: Api,
    method: hyper::Method,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Option<(u16, String)> {
    let client = api.caller();
    let req = Request::builder()
        .method(method)
        .uri(api.url(addr, path))
        .header("authorization", &client.authorization)
        .body(Empty::new())
        .ok()?;
    let fut = async {
        let resp = client.http.request(req).await.ok()?;
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.ok()?.to_bytes();
        Some((code, String::from_utf8_lossy(&bytes).into_owned()))
    };
    tokio::time::timeout(timeout, fut).await.ok()?
}

/// Records how late a short sleep wakes: the test process shares the CPUs
/// with the servers, so a long stall here means they may have stalled too.
async fn stall_monitor(state: Arc<Mutex<State>>) {
    loop {
        let before = Instant::now();
        tokio::time::sleep(STALL_TICK).await;
        let late = before.elapsed().saturating_sub(STALL_TICK);
        if late > STALL_REPORT {
            let mut s = lock(&state);
            if s.stalls.len() < MAX_STALLS {
                s.stalls.push((Instant::now(), late));
            }
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

async fn poll(i: usize, url: String, client: Caller, state: Arc<Mutex<State>>) {
    loop {
        let sent = Instant::now();
        let req = Request::get(url.as_str())
            .header("authorization", &client.authorization)
            .body(Empty::new())
            .expect("static request");
        let fut = async {
            let resp = client.http.request(req).await.ok()?;
            if resp.status() != 200 {
                return None;
            }
            let bytes = resp.into_body().collect().await.ok()?.to_bytes();
            serde_json::from_slice::<View>(&bytes).ok()
        };
        if let Ok(Some(view)) = tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
            let received = Instant::now();
            lock(&state).observe(Observation {
                node: i,
                id: 0,
                source: Source::Status,
                sent,
                received,
                view,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

async fn watch(i: usize, url: String, client: Caller, state: Arc<Mutex<State>>) {
    loop {
        let sent = Instant::now();
        let req = Request::get(url.as_str())
            .header("accept", "text/event-stream")
            .header("authorization", &client.authorization)
            .body(Empty::new())
            .expect("static request");
        if let Ok(Ok(resp)) = tokio::time::timeout(REQUEST_TIMEOUT, client.http.request(req)).await
        {
            let mut body = resp.into_body();
            let mut buf: Vec<u8> = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else { continue };
                buf.extend_from_slice(&data);
                while let Some(end) = find_event_end(&buf) {
                    let event: Vec<u8> = buf.drain(..end).collect();
                    if let Some(view) = parse_event(&event) {
                        lock(&state).observe(Observation {
                            node: i,
                            id: 0,
                            source: Source::Watch,
                            sent,
                            received: Instant::now(),
                            view,
                        });
                    }
                }
                if buf.len() > MAX_SSE_EVENT {
                    break;
                }
            }
        }
        tokio::time::sleep(WATCH_RECONNECT).await;
    }
}

/// The length of the first complete SSE event (through its blank line).
fn find_event_end(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\n\n").map(|p| p + 2)
}

/// The `data:` payload of a `leadership` event, parsed.
fn parse_event(event: &[u8]) -> Option<View> {
    let text = std::str::from_utf8(event).ok()?;
    let data: String =
        text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
    serde_json::from_str(&data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(n: usize) -> State {
        State { latest: vec![None; n], ids: (1..=n as u64).collect(), ..State::default() }
    }

    fn obs(
        node: usize,
        source: Source,
        at: Instant,
        view: (&str, u64, Option<u64>),
    ) -> Observation {
        Observation {
            node,
            id: 0,
            source,
            sent: at,
            received: at,
            view: View {
                role: view.0.into(),
                term: view.1,
                leader: view.2,
                fencing_token: view.2.map(|_| view.1),
            },
        }
    }

    #[test]
    fn two_leaders_in_one_term_are_caught() {
        let mut s = state(3);
        let t = Instant::now();
        s.observe(obs(0, Source::Status, t, ("leader", 2, Some(1))));
        s.observe(obs(2, Source::Watch, t, ("follower", 2, Some(1))));
        assert!(s.violations.is_empty());
        s.observe(obs(1, Source::Status, t, ("leader", 2, Some(2))));
        assert!(matches!(
            s.violations[..],
            [Violation::TwoLeaders { term: 2, first: 1, second: 2, .. }]
        ));
    }

    #[test]
    fn a_decreasing_token_is_caught_per_observer() {
        let mut s = state(2);
        let t = Instant::now();
        s.observe(obs(1, Source::Watch, t, ("follower", 3, Some(1))));
        s.observe(obs(1, Source::Status, t, ("follower", 2, Some(2))));
        assert!(s.violations.is_empty(), "different observers");
        s.observe(obs(1, Source::Watch, t, ("follower", 2, Some(2))));
        assert!(matches!(s.violations[..], [Violation::TokenDecreased { from: 3, to: 2, .. }]));
    }

    #[test]
    fn a_stale_leader_claim_after_a_newer_one_is_caught() {
        let mut s = state(3);
        let t0 = Instant::now();
        s.observe(obs(0, Source::Status, t0, ("leader", 1, Some(1))));
        s.observe(obs(1, Source::Status, t0 + Duration::from_millis(10), ("leader", 2, Some(2))));
        // Sent before the newer claim arrived: not provably stale.
        s.observe(obs(0, Source::Status, t0 + Duration::from_millis(5), ("leader", 1, Some(1))));
        assert!(s.violations.is_empty());
        s.observe(obs(0, Source::Status, t0 + Duration::from_millis(20), ("leader", 1, Some(1))));
        assert!(matches!(
            s.violations[..],
            [Violation::StaleLeader { node: 1, token: 1, seen: 2, .. }]
        ));
    }

    #[test]
    fn agreement_needs_fresh_answers_and_the_leader_itself() {
        let mut s = state(3);
        let t0 = Instant::now();
        s.observe(obs(0, Source::Status, t0, ("leader", 4, Some(1))));
        s.observe(obs(1, Source::Status, t0, ("follower", 4, Some(1))));
        assert_eq!(s.agreement(&[0, 1, 2], t0), None, "node 3 never answered");
        s.observe(obs(2, Source::Status, t0, ("follower", 4, Some(1))));
        assert_eq!(s.agreement(&[0, 1, 2], t0), Some((1, 4)));
        assert_eq!(s.agreement(&[0, 1, 2], t0 + Duration::from_millis(1)), None, "stale");
        assert_eq!(s.leaderships_since(t0), vec![(1, 4)]);
    }

    #[test]
    fn leaderless_gaps_lie_between_the_claims_of_leaders() {
        let mut s = state(3);
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        for k in 0..=10 {
            s.observe(obs(0, Source::Status, t0 + ms(10 * k), ("leader", 1, Some(1))));
        }
        // Node 2 leads term 2 from 400 ms: a gap of 300 ms after node 1's last claim.
        for k in 40..=50 {
            s.observe(obs(1, Source::Status, t0 + ms(10 * k), ("leader", 2, Some(2))));
        }
        let gaps = s.leaderless(t0, t0 + ms(520));
        assert_eq!(gaps, vec![(t0 + ms(100), ms(300)), (t0 + ms(500), ms(20))]);
        assert_eq!(s.leaderless(t0 + ms(420), t0 + ms(480)), vec![]);
        s.rename(1, 7);
        s.observe(obs(1, Source::Status, t0 + ms(600), ("leader", 3, Some(7))));
        assert_eq!(s.leaderships_since(t0 + ms(550)), vec![(7, 3)]);
        assert!(s.violations.is_empty(), "{:?}", s.violations);
    }

    #[test]
    fn sse_events_parse() {
        let buf = b"event: leadership\ndata: {\"leader\":1,\"term\":1,\"fencing_token\":1,\"role\":\"follower\"}\n\nevent: lea";
        let end = find_event_end(buf).unwrap();
        let v = parse_event(&buf[..end]).unwrap();
        assert_eq!(v.leader, Some(1));
        assert_eq!(v.role, "follower");
        assert_eq!(find_event_end(&buf[end..]), None);
    }
}
