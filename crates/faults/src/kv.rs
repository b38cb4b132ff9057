//! The replicated key-value store of real servers, checked from outside:
//! clients that put, compare-and-set and read a few keys through random
//! nodes, a history of what they asked and got (one monotonic clock for
//! every client), and its check by the simulator's checker
//! ([`tenure_sim::kvcheck::check_history`]: revisions, then Wing–Gong
//! linearizability key by key).
//!
//! How an HTTP answer enters the history:
//!
//! | request | answer | fate |
//! |---|---|---|
//! | `PUT` | 200 `{"revision"}` | returned, [`KvOutput::Written`] |
//! | `PUT ?if_mod_revision=R` | 409 `{"mod_revision", "revision"}` | returned, a conflict |
//! | `PUT` | 504 `"outcome": "unknown"`, no answer in time, a connection that broke after it was made | unknown: it may or may not have happened |
//! | `PUT` | 503 with `Retry-After`; no connection could be made (so nothing was sent) | not executed |
//! | `GET` | 200 (the key), 404 `{"revision"}` | returned, a read |
//! | `GET` | 503, 504, no answer, no connection | not executed (a read changes nothing) |
//!
//! Any other answer fails the run (the clients never send bad input, so a
//! 4xx, a 500 or a 504 without `"outcome": "unknown"` is a finding, not
//! something to guess about).
//!
//! Values are the simulator's (`v<id>`, every id written once), so a read
//! tells which write it saw; keys are its `k<i>`.

use crate::checker::Api;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64;
use serde::Deserialize;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenure_api::{ErrorBody, KvGetBody, KvListBody, KvPutBody};
use tenure_kv::{KeyValue, Response};
use tenure_sim::kvcheck::{self, HistoryVerdict};
use tenure_sim::workload::{key_name, value_bytes, Expected, Fate, KvInput, KvOutput, Record};
use tokio::task::JoinHandle;

/// How long a client waits for the answer to one request. Above the
/// servers' own bound on waiting for a leader (three election timeouts, at
/// least 1 s), so that a 503 arrives before the client gives up; below
/// their bound on a proposal (10 s), which only a lost leader reaches.
pub const OP_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a connection attempt may take (a paused node accepts none).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Largest answer body read; a longer one is a finding.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Largest list answer read: a page is at most 4 MiB of JSON.
const MAX_LIST_ANSWER_BYTES: usize = 8 * 1024 * 1024;
/// Longest pause of a client between two operations.
const MAX_THINK: Duration = Duration::from_millis(5);
/// How long the final read of one key is retried before the run fails.
pub const FINAL_READ_BOUND: Duration = Duration::from_secs(20);
/// Pause between two tries of a final read (or an acknowledged write).
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Values each client draws per million: puts, then compare-and-sets; the
/// rest are linearizable reads.
const PUT_SHARE: u64 = 300_000;
const CAS_SHARE: u64 = 350_000;

/// What a server answered, or why nothing came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP answer.
    Http {
        /// The status code.
        status: u16,
        /// Whether it had a `Retry-After` header.
        retry_after: bool,
        /// The body (lossy UTF-8).
        body: String,
    },
    /// No connection to the node could be made (refused, unreachable, the
    /// TLS handshake failed): the request was never sent.
    NotSent(String),
    /// No answer after the request may have been sent: a timeout, or the
    /// connection broke.
    Nothing(String),
}

impl Answer {
    /// The status and body, or why there was no answer.
    pub fn short(&self) -> String {
        match self {
            Answer::Http { status, body, .. } => format!("{status} {body}"),
            Answer::NotSent(why) => format!("not sent ({why})"),
            Answer::Nothing(why) => format!("no answer ({why})"),
        }
    }
}

/// A key-value client with its own connection pool.
#[derive(Clone)]
pub struct KvClient {
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    api: Api,
    timeout: Duration,
}

impl KvClient {
    /// A client of the servers reached through `api`, waiting at most
    /// `timeout` for each answer.
    pub fn new(api: &Api, timeout: Duration) -> Self {
        let http = Client::builder(TokioExecutor::new()).build(api.connector(CONNECT_TIMEOUT));
        KvClient { http, api: api.clone(), timeout }
    }

    /// `PUT /v1/kv/{key}` at `addr`, a compare-and-set with `if_mod_revision`.
    pub async fn put(
        &self,
        addr: SocketAddr,
        key: &str,
        value: Vec<u8>,
        if_mod_revision: Option<u64>,
    ) -> Answer {
        let query = if_mod_revision.map(|r| format!("?if_mod_revision={r}")).unwrap_or_default();
        let url = self.api.url(addr, &format!("/v1/kv/{key}{query}"));
        self.call(Method::PUT, url, Bytes::from(value)).await
    }

    /// `GET /v1/kv/{key}` at `addr`: linearizable, or `consistency=stale`.
    pub async fn get(&self, addr: SocketAddr, key: &str, stale: bool) -> Answer {
        let query = if stale { "?consistency=stale" } else { "" };
        let url = self.api.url(addr, &format!("/v1/kv/{key}{query}"));
        self.call(Method::GET, url, Bytes::new()).await
    }

    /// Every key starting with `prefix` that node `addr` holds, read
    /// linearizably (`GET /v1/kv?prefix=P`, page after page): key ->
    /// (value, `mod_revision`). `Err` with the answer when a page was not
    /// served (try another node).
    pub async fn list(
        &self,
        addr: SocketAddr,
        prefix: &str,
    ) -> Result<std::collections::BTreeMap<String, (Vec<u8>, u64)>, String> {
        let mut all = std::collections::BTreeMap::new();
        let mut after = String::new();
        loop {
            let mut query = format!("/v1/kv?prefix={prefix}");
            if !after.is_empty() {
                query.push_str(&format!("&after={after}"));
            }
            let url = self.api.url(addr, &query);
            let answer =
                self.call_limited(Method::GET, url, Bytes::new(), MAX_LIST_ANSWER_BYTES).await;
            let Answer::Http { status: 200, body, .. } = &answer else {
                return Err(answer.short());
            };
            let page: KvListBody = parse(body, 200)?;
            for kv in page.kvs {
                let (kv, _) = key_value(KvGetBody { kv, revision: page.revision });
                all.insert(kv.key.clone(), (kv.value, kv.mod_revision));
            }
            match (page.more, all.keys().next_back()) {
                (true, Some(last)) => after = last.clone(),
                _ => return Ok(all),
            }
        }
    }

    async fn call(&self, method: Method, url: String, body: Bytes) -> Answer {
        self.call_limited(method, url, body, MAX_ANSWER_BYTES).await
    }

    async fn call_limited(&self, method: Method, url: String, body: Bytes, max: usize) -> Answer {
        let req = match Request::builder()
            .method(method)
            .uri(url)
            .header("authorization", self.api.authorization())
            .body(Full::new(body))
        {
            Ok(r) => r,
            Err(e) => return Answer::NotSent(format!("bad request: {e}")),
        };
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| match e.is_connect() {
                true => Answer::NotSent(format!("{e:?}")),
                false => Answer::Nothing(format!("{e:?}")),
            })?;
            let status = resp.status().as_u16();
            let retry_after = resp.headers().contains_key("retry-after");
            let bytes = Limited::new(resp.into_body(), max)
                .collect()
                .await
                .map_err(|e| Answer::Nothing(format!("reading the body: {e}")))?
                .to_bytes();
            Ok::<_, Answer>(Answer::Http {
                status,
                retry_after,
                body: String::from_utf8_lossy(&bytes).into_owned(),
            })
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(a)) => a,
            Ok(Err(a)) => a,
            Err(_) => Answer::Nothing(format!("timeout after {:?}", self.timeout)),
        }
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a str, status: u16) -> Result<T, String> {
    serde_json::from_str(body)
        .map_err(|e| format!("a {status} answer that does not parse ({e}): {body}"))
}

/// The fate of a write that got `answer` at `at_ns`; `Err` for an answer
/// the API does not allow.
pub fn write_fate(answer: &Answer, at_ns: u64) -> Result<Fate, String> {
    let returned = |output| Ok(Fate::Returned { at_ns, output });
    match answer {
        Answer::Nothing(_) => Ok(Fate::Unknown),
        Answer::NotSent(_) => Ok(Fate::NotExecuted),
        Answer::Http { status: 200, body, .. } => {
            let b: KvPutBody = parse(body, 200)?;
            returned(KvOutput::Written { revision: b.revision })
        }
        Answer::Http { status: 409, body, .. } => {
            let b: ErrorBody = parse(body, 409)?;
            match (b.mod_revision, b.revision) {
                (Some(mod_revision), Some(revision)) => {
                    returned(KvOutput::Write(Response::Conflict { mod_revision, revision }))
                }
                _ => Err(format!("a 409 to a write without its revisions: {body}")),
            }
        }
        Answer::Http { status: 504, body, .. } => {
            match parse::<ErrorBody>(body, 504)?.outcome.as_deref() {
                Some("unknown") => Ok(Fate::Unknown),
                _ => Err(format!("a 504 to a write without \"outcome\": \"unknown\": {body}")),
            }
        }
        Answer::Http { status: 503, retry_after: true, .. } => Ok(Fate::NotExecuted),
        other => Err(format!("a write answered {}", other.short())),
    }
}

/// The fate of a linearizable read that got `answer` at `at_ns`; `Err` for
/// an answer the API does not allow.
pub fn read_fate(answer: &Answer, at_ns: u64) -> Result<Fate, String> {
    let returned =
        |kv, revision| Ok(Fate::Returned { at_ns, output: KvOutput::Read { kv, revision } });
    match answer {
        Answer::NotSent(_) | Answer::Nothing(_) | Answer::Http { status: 503 | 504, .. } => {
            Ok(Fate::NotExecuted)
        }
        Answer::Http { status: 200, body, .. } => {
            let kv = key_value(parse(body, 200)?);
            let revision = kv.1;
            returned(Some(kv.0), revision)
        }
        Answer::Http { status: 404, body, .. } => match parse::<ErrorBody>(body, 404)?.revision {
            Some(revision) => returned(None, revision),
            None => Err(format!("a 404 to a read without the revision: {body}")),
        },
        other => Err(format!("a read answered {}", other.short())),
    }
}

/// The key of a `GET` answer, and the store's revision. A value that is not
/// UTF-8 keeps a `base64:` prefix, so it can never pass for a value a
/// client wrote.
fn key_value(b: KvGetBody) -> (KeyValue, u64) {
    let KvGetBody { kv: b, revision } = b;
    let value = match (b.value, b.value_base64) {
        (Some(v), _) => v.into_bytes(),
        (None, Some(b64)) => format!("base64:{b64}").into_bytes(),
        (None, None) => Vec::new(),
    };
    let kv = KeyValue {
        key: b.key,
        value,
        create_revision: b.create_revision,
        mod_revision: b.mod_revision,
        version: b.version,
        lease: b.lease.map(tenure_kv::LeaseId),
    };
    (kv, revision)
}

/// The one clock of a history: nanoseconds since it started.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        Clock(Instant::now())
    }

    /// Nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }

    /// An instant on this clock, in ns (0 if before its start).
    pub fn at_ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.0).as_nanos() as u64
    }
}

/// Why writes did not return, counted for the report.
#[derive(Debug, Default)]
pub struct Causes {
    /// 504 `"outcome": "unknown"`.
    gateway_timeout: AtomicUsize,
    /// No answer after the request may have been sent.
    no_answer: AtomicUsize,
    /// 503.
    unavailable: AtomicUsize,
    /// No connection could be made.
    not_sent: AtomicUsize,
}

impl Causes {
    fn count(&self, answer: &Answer) {
        let counter = match answer {
            Answer::Http { status: 504, .. } => &self.gateway_timeout,
            Answer::Http { status: 503, .. } => &self.unavailable,
            Answer::Nothing(_) => &self.no_answer,
            Answer::NotSent(_) => &self.not_sent,
            Answer::Http { .. } => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Display for Causes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        write!(
            f,
            "writes of unknown outcome: {} answered 504, {} without an answer in time; not executed: {} answered 503, {} found no connection",
            n(&self.gateway_timeout),
            n(&self.no_answer),
            n(&self.unavailable),
            n(&self.not_sent)
        )
    }
}

/// One client of a history: its connection pool, the nodes it may ask,
/// its number in the history, the history's clock, and the counts of why
/// writes did not return.
#[derive(Clone)]
pub struct Session {
    /// The HTTP client.
    pub client: KvClient,
    /// Every node's API address.
    pub addrs: Vec<SocketAddr>,
    /// The client's number in the history.
    pub who: usize,
    /// The history's clock.
    pub clock: Clock,
    /// Why writes did not return (shared by the sessions of a run).
    pub causes: Arc<Causes>,
    /// Reads ask for `consistency=stale` (only the negative control: such
    /// reads are not linearizable, and the check must say so).
    pub stale_reads: bool,
}

impl Session {
    /// Runs `input` against node `node`: one request, timed on the clock.
    pub async fn run(
        &self,
        node: usize,
        input: KvInput,
        final_read: bool,
    ) -> Result<Record, String> {
        let addr = self.addrs[node % self.addrs.len()];
        let key = key_name(input.key());
        let call_ns = self.clock.now_ns();
        let answer = match &input {
            KvInput::Put { value, .. } => {
                self.client.put(addr, &key, value_bytes(*value), None).await
            }
            KvInput::Cas { expected, value, .. } => {
                self.client.put(addr, &key, value_bytes(*value), Some(expected.revision)).await
            }
            KvInput::Read { .. } => self.client.get(addr, &key, self.stale_reads).await,
            other => return Err(format!("the HTTP clients do not send {other:?}")),
        };
        let at_ns = self.clock.now_ns();
        if !input.is_read() {
            self.causes.count(&answer);
        }
        let fate =
            if input.is_read() { read_fate(&answer, at_ns) } else { write_fate(&answer, at_ns) }
                .map_err(|e| format!("client {}, {input:?} at {addr}: {e}", self.who))?;
        Ok(Record { client: self.who, call_ns, input, fate, final_read })
    }

    /// Reads every key of `keys` once, linearizably, trying the nodes in
    /// turn until one answers (at most [`FINAL_READ_BOUND`] per key); every
    /// try is recorded, marked final.
    pub async fn final_reads(&self, keys: Range<usize>) -> Result<Vec<Record>, String> {
        let mut history = Vec::new();
        let mut node = 0;
        for key in keys {
            let started = Instant::now();
            loop {
                let r = self.run(node, KvInput::Read { key }, true).await?;
                let done = matches!(r.fate, Fate::Returned { .. });
                history.push(r);
                if done {
                    break;
                }
                node += 1;
                if started.elapsed() > FINAL_READ_BOUND {
                    return Err(format!(
                        "the final read of {} got no answer from any node within {FINAL_READ_BOUND:?}",
                        key_name(key)
                    ));
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
        Ok(history)
    }

    /// Puts a new value into `key` until a node acknowledges it (a new value
    /// for each try, after a 503 or an unknown outcome; at most `bound`);
    /// every try goes into `history`. Returns the acknowledged value and its
    /// revision.
    pub async fn acknowledged_put(
        &self,
        key: usize,
        values: &Values,
        history: &mut Vec<Record>,
        bound: Duration,
    ) -> Result<(u32, u64), String> {
        let started = Instant::now();
        let mut node = key;
        loop {
            let value = values.next();
            let r = self.run(node, KvInput::Put { key, value }, false).await?;
            let ack = match &r.fate {
                Fate::Returned { output: KvOutput::Written { revision }, .. } => Some(*revision),
                _ => None,
            };
            history.push(r);
            if let Some(revision) = ack {
                return Ok((value, revision));
            }
            if started.elapsed() > bound {
                return Err(format!(
                    "no node acknowledged a put of {} within {bound:?}",
                    key_name(key)
                ));
            }
            node += 1;
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// What a client learns of a key from one of its operations: the value and
/// `mod_revision` it now has (for a later compare-and-set), or nothing
/// known.
fn learned(r: &Record) -> Option<Expected> {
    match (&r.input, &r.fate) {
        (
            KvInput::Put { value, .. } | KvInput::Cas { value, .. },
            Fate::Returned { output: KvOutput::Written { revision }, .. },
        ) => Some(Expected { write: Some(*value), revision: *revision }),
        (_, Fate::Returned { output: KvOutput::Read { kv, .. }, .. }) => Expected::of(kv.as_ref()),
        _ => None,
    }
}

/// What a workload runs.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Concurrent clients, each with one operation at a time.
    pub clients: usize,
    /// The keys, by index (`k<i>`).
    pub keys: Range<usize>,
    /// The first client's number in the history (the others follow).
    pub first_client: usize,
    /// Reads with `consistency=stale` (the negative control), else linearizable.
    pub stale_reads: bool,
    /// The seed of the clients' choices (keys, operations, nodes).
    pub seed: u64,
}

/// Values handed out to writes: each id once, across every client of a run.
#[derive(Debug, Default)]
pub struct Values(AtomicU32);

impl Values {
    /// A value id never handed out before.
    pub fn next(&self) -> u32 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

fn below(rng: &mut Pcg64, n: u64) -> u64 {
    rng.next_u64() % n
}

/// Clients running put / compare-and-set / read until stopped.
pub struct Workload {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Result<Vec<Record>, String>>>,
}

impl Workload {
    /// Starts `spec.clients` clients on the nodes at `addrs`, timed on
    /// `clock`.
    pub fn start(
        api: &Api,
        addrs: &[SocketAddr],
        spec: &Spec,
        clock: Clock,
        values: Arc<Values>,
        causes: &Arc<Causes>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..spec.clients)
            .map(|who| {
                let session = Session {
                    client: KvClient::new(api, OP_TIMEOUT),
                    addrs: addrs.to_vec(),
                    who: spec.first_client + who,
                    clock,
                    causes: causes.clone(),
                    stale_reads: spec.stale_reads,
                };
                let seed = spec.seed.wrapping_mul(1000).wrapping_add(who as u64);
                let (keys, values, stop) = (spec.keys.clone(), values.clone(), stop.clone());
                tokio::spawn(async move {
                    client_loop(session, keys, &values, &stop, Pcg64::seed_from_u64(seed)).await
                })
            })
            .collect();
        Workload { stop, tasks }
    }

    /// Stops the clients after their current operation and returns their
    /// history, or the first answer the API does not allow.
    pub async fn stop(mut self) -> Result<Vec<Record>, String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut history = Vec::new();
        for t in std::mem::take(&mut self.tasks) {
            history.extend(t.await.map_err(|e| format!("a client task failed: {e}"))??);
        }
        history.sort_by_key(|r| r.call_ns);
        Ok(history)
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// One client: random operations on random keys of `keys` through random
/// nodes until `stop`.
async fn client_loop(
    session: Session,
    keys: Range<usize>,
    values: &Values,
    stop: &AtomicBool,
    mut rng: Pcg64,
) -> Result<Vec<Record>, String> {
    let mut seen: Vec<Option<Expected>> = vec![None; keys.end];
    let mut history = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let key = keys.start + below(&mut rng, keys.len() as u64) as usize;
        let node = below(&mut rng, session.addrs.len() as u64) as usize;
        let draw = below(&mut rng, 1_000_000);
        let input = if draw < PUT_SHARE {
            KvInput::Put { key, value: values.next() }
        } else if draw < PUT_SHARE + CAS_SHARE {
            let expected = seen[key].unwrap_or(Expected::ABSENT);
            KvInput::Cas { key, expected, value: values.next() }
        } else {
            KvInput::Read { key }
        };
        let record = session.run(node, input, false).await?;
        seen[key] = learned(&record);
        history.push(record);
        let think = MAX_THINK.as_micros() as u64;
        tokio::time::sleep(Duration::from_micros(below(&mut rng, think + 1))).await;
    }
    Ok(history)
}

/// Counts of a history, for the report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Operations (final reads included).
    pub ops: usize,
    /// Plain puts, compare-and-sets, reads.
    pub puts: usize,
    /// Compare-and-sets.
    pub cas: usize,
    /// Linearizable reads.
    pub reads: usize,
    /// Writes acknowledged (200).
    pub acked: usize,
    /// Compare-and-sets refused (409).
    pub conflicts: usize,
    /// Reads answered (200 or 404).
    pub answered_reads: usize,
    /// Writes whose outcome is unknown.
    pub unknown: usize,
    /// Writes not executed (503) and reads not answered.
    pub not_executed: usize,
    /// Final reads (tries included).
    pub final_reads: usize,
}

impl Tally {
    /// Counts `history`.
    pub fn of(history: &[Record]) -> Self {
        let mut t = Tally { ops: history.len(), ..Tally::default() };
        for r in history {
            match r.input {
                KvInput::Put { .. } => t.puts += 1,
                KvInput::Cas { .. } => t.cas += 1,
                _ => t.reads += 1,
            }
            t.final_reads += usize::from(r.final_read);
            match &r.fate {
                Fate::Returned { output: KvOutput::Written { .. }, .. } => t.acked += 1,
                Fate::Returned { output: KvOutput::Read { .. }, .. } => t.answered_reads += 1,
                Fate::Returned { output: KvOutput::Write(Response::Conflict { .. }), .. } => {
                    t.conflicts += 1
                }
                Fate::Returned { .. } => {}
                Fate::Unknown | Fate::Pending => t.unknown += 1,
                Fate::NotExecuted => t.not_executed += 1,
            }
        }
        t
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ops ({} puts, {} compare-and-sets, {} reads of which {} final): {} writes acknowledged, {} conflicts (409), {} reads answered, {} writes of unknown outcome, {} not executed (503 / read unanswered)",
            self.ops,
            self.puts,
            self.cas,
            self.reads,
            self.final_reads,
            self.acked,
            self.conflicts,
            self.answered_reads,
            self.unknown,
            self.not_executed
        )
    }
}

/// Checks `history` over `keys` keys (`k0`..) with at most `max_steps`
/// search steps per key: the verdict, or why it is not a pass (a
/// violation, or no verdict within the bound: undecided is not a pass).
pub fn check(history: &[Record], keys: usize, max_steps: u64) -> Result<HistoryVerdict, String> {
    let v = kvcheck::check_history(history, keys, max_steps);
    if v.violations.is_empty() && v.undecided.is_empty() {
        return Ok(v);
    }
    let mut out = String::new();
    for (check, what) in &v.violations {
        out.push_str(&format!("VIOLATION {check:?}: {what}\n"));
    }
    for what in &v.undecided {
        out.push_str(&format!("UNDECIDED (not a pass): {what}\n"));
    }
    Err(out)
}

/// [`check`] with the simulator's bound ([`kvcheck::MAX_SEARCH_STEPS`]).
pub fn check_linearizable(history: &[Record], keys: usize) -> Result<HistoryVerdict, String> {
    check(history, keys, kvcheck::MAX_SEARCH_STEPS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> Answer {
        Answer::Http { status, retry_after: status == 503, body: body.into() }
    }

    fn get_body(key: &str, value: u32, rev: u64, revision: u64) -> String {
        format!(
            r#"{{"key":"{key}","value":"v{value}","create_revision":{rev},"mod_revision":{rev},"version":1,"revision":{revision}}}"#
        )
    }

    /// A record of `input` called at `call` that got `answer` at `ret`.
    fn rec(client: usize, call: u64, ret: u64, input: KvInput, answer: Answer) -> Record {
        let fate = if input.is_read() { read_fate(&answer, ret) } else { write_fate(&answer, ret) }
            .unwrap();
        Record { client, call_ns: call, input, fate, final_read: false }
    }

    #[test]
    fn answers_map_to_fates() {
        let ok = write_fate(&http(200, r#"{"revision":7,"fencing_token":2}"#), 5).unwrap();
        assert_eq!(ok, Fate::Returned { at_ns: 5, output: KvOutput::Written { revision: 7 } });
        let conflict =
            write_fate(&http(409, r#"{"error":"x","mod_revision":3,"revision":9}"#), 5).unwrap();
        assert_eq!(
            conflict,
            Fate::Returned {
                at_ns: 5,
                output: KvOutput::Write(Response::Conflict { mod_revision: 3, revision: 9 })
            }
        );
        assert_eq!(
            write_fate(&http(504, r#"{"error":"x","outcome":"unknown"}"#), 5),
            Ok(Fate::Unknown)
        );
        assert_eq!(write_fate(&Answer::Nothing("timeout".into()), 5), Ok(Fate::Unknown));
        assert_eq!(write_fate(&Answer::NotSent("refused".into()), 5), Ok(Fate::NotExecuted));
        assert_eq!(write_fate(&http(503, r#"{"error":"x"}"#), 5), Ok(Fate::NotExecuted));
        // Not allowed by the API: a finding.
        assert!(write_fate(&http(504, r#"{"error":"x"}"#), 5).is_err());
        assert!(write_fate(
            &Answer::Http { status: 503, retry_after: false, body: "{}".into() },
            5
        )
        .is_err());
        assert!(write_fate(&http(400, r#"{"error":"x"}"#), 5).is_err());
        assert!(write_fate(&http(500, r#"{"error":"x"}"#), 5).is_err());
        let read = read_fate(&http(200, &get_body("k1", 4, 3, 8)), 6).unwrap();
        let Fate::Returned { output: KvOutput::Read { kv: Some(kv), revision: 8 }, .. } = read
        else {
            panic!("{read:?}")
        };
        assert_eq!((kv.key.as_str(), kv.value.as_slice(), kv.mod_revision), ("k1", &b"v4"[..], 3));
        assert_eq!(
            read_fate(&http(404, r#"{"error":"x","revision":8}"#), 6),
            Ok(Fate::Returned { at_ns: 6, output: KvOutput::Read { kv: None, revision: 8 } })
        );
        assert_eq!(read_fate(&http(503, "{}"), 6), Ok(Fate::NotExecuted));
        assert_eq!(read_fate(&Answer::NotSent("refused".into()), 6), Ok(Fate::NotExecuted));
        assert_eq!(read_fate(&Answer::Nothing("timeout".into()), 6), Ok(Fate::NotExecuted));
        assert!(read_fate(&http(404, "not json"), 6).is_err(), "a 404 of another route");
    }

    /// A clean history: put, read, CAS, a refused CAS, an unknown put that
    /// a later read shows.
    fn clean() -> Vec<Record> {
        let cas = |expected, value| KvInput::Cas { key: 0, expected, value };
        let seen1 = Expected { write: Some(1), revision: 1 };
        vec![
            rec(
                0,
                0,
                10,
                KvInput::Put { key: 0, value: 1 },
                http(200, r#"{"revision":1,"fencing_token":1}"#),
            ),
            rec(1, 20, 30, KvInput::Read { key: 0 }, http(200, &get_body("k0", 1, 1, 1))),
            rec(0, 40, 50, cas(seen1, 2), http(200, r#"{"revision":2,"fencing_token":1}"#)),
            rec(
                1,
                60,
                70,
                cas(seen1, 3),
                http(409, r#"{"error":"x","mod_revision":2,"revision":2}"#),
            ),
            rec(2, 80, 90, KvInput::Put { key: 0, value: 4 }, Answer::Nothing("timeout".into())),
            rec(1, 100, 110, KvInput::Read { key: 0 }, http(200, &get_body("k0", 4, 3, 3))),
        ]
    }

    #[test]
    fn a_linearizable_history_passes() {
        let v = check_linearizable(&clean(), 1).unwrap();
        assert!(v.steps > 0);
    }

    #[test]
    fn a_stale_read_is_a_violation() {
        let mut h = clean();
        // After v4 was read at revision 3, a read shows v2 again.
        h.push(rec(0, 120, 130, KvInput::Read { key: 0 }, http(200, &get_body("k0", 2, 2, 3))));
        let err = check_linearizable(&h, 1).unwrap_err();
        assert!(err.contains("VIOLATION Linearizability"), "{err}");
    }

    #[test]
    fn a_lost_acknowledged_write_is_a_violation() {
        let h = vec![
            rec(
                0,
                0,
                10,
                KvInput::Put { key: 0, value: 1 },
                http(200, r#"{"revision":1,"fencing_token":1}"#),
            ),
            rec(1, 20, 30, KvInput::Read { key: 0 }, http(404, r#"{"error":"x","revision":1}"#)),
        ];
        assert!(check_linearizable(&h, 1).unwrap_err().contains("VIOLATION"));
    }

    #[test]
    fn a_compare_and_set_that_should_have_failed_is_a_violation() {
        let h = vec![
            rec(
                0,
                0,
                10,
                KvInput::Put { key: 0, value: 1 },
                http(200, r#"{"revision":1,"fencing_token":1}"#),
            ),
            // Expects the key absent, yet succeeds after v1 was acknowledged.
            rec(
                1,
                20,
                30,
                KvInput::Cas { key: 0, expected: Expected::ABSENT, value: 2 },
                http(200, r#"{"revision":2,"fencing_token":1}"#),
            ),
        ];
        assert!(check_linearizable(&h, 1).unwrap_err().contains("VIOLATION"));
    }

    #[test]
    fn undecided_is_not_a_pass() {
        // Five concurrent unknown puts and a read that fits none: the
        // search needs more than one step.
        let mut h: Vec<Record> = (0..5)
            .map(|i| {
                rec(i, 0, 0, KvInput::Put { key: 0, value: i as u32 }, Answer::Nothing("t".into()))
            })
            .collect();
        h.push(rec(9, 5, 100, KvInput::Read { key: 0 }, http(200, &get_body("k0", 3, 4, 4))));
        let err = check(&h, 1, 1).unwrap_err();
        assert!(err.contains("UNDECIDED"), "{err}");
        assert!(check(&h, 1, kvcheck::MAX_SEARCH_STEPS).is_ok());
    }

    #[test]
    fn the_tally_counts_fates() {
        let t = Tally::of(&clean());
        assert_eq!((t.ops, t.puts, t.cas, t.reads), (6, 2, 2, 2));
        assert_eq!((t.acked, t.conflicts, t.answered_reads, t.unknown), (2, 1, 2, 1));
    }
}
