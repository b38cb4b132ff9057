//! Revision-exact parity with etcd: one seeded random workload of KV and
//! Lease calls (puts with and without leases, prev_kv, `ignore_value` and
//! `ignore_lease`, ranges with every
//! read option and at past revisions, single and prefix deletes,
//! transactions over every compare target and result, over one key or a
//! range, with puts (leases, `ignore_value`, `ignore_lease`), reads with
//! every option, range deletes and nested transactions, lease grants and
//! revokes, compactions and the reads they cut off), run through the
//! generated tonic clients against a real etcd 3.4 and against a tenure
//! follower, compared op by op: the same header revisions, key metadata
//! (create and mod revision, version, lease), answers and errors; and the
//! event stream of a watch over every key opened before the workload. Lease
//! ids are masked (etcd's are random, tenure's count), and the headers'
//! cluster, member and term ids.
//!
//! Skipped (with a message) when `etcd` is not on PATH; CI installs it.
//! `TENURE_PARITY_SEEDS` (default 4) and `TENURE_PARITY_OPS` (default 400)
//! size it.

use crate::etcdctl::installed;
use crate::harness::serial;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::compare::{CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::request_op::Request as Op;
use tenure_etcd_api::etcdserverpb::watch_client::WatchClient;
use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion;
use tenure_etcd_api::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, LeaseGrantRequest, LeaseRevokeRequest,
    PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest, WatchRequest,
};
use tenure_testkit::etcd::EtcdCluster;
use tonic::transport::Channel;

/// Bound on a first election and the etcd listeners' start on a busy machine.
const START_BOUND: Duration = Duration::from_secs(15);

/// How long the watch's events may take to arrive after the last write.
const EVENTS_BOUND: Duration = Duration::from_secs(10);

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: the workload's only randomness, from its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One step of the workload, as both systems receive it (lease ids by
/// their grant's index, resolved per system).
#[derive(Clone, Debug)]
enum Step {
    Put {
        key: String,
        value: String,
        prev_kv: bool,
        lease: Option<usize>,
        ignore_value: bool,
        ignore_lease: bool,
    },
    Range(RangeRequest),
    Delete {
        key: String,
        prefix: bool,
        prev_kv: bool,
    },
    /// Lease ids as in [`Step::Put`], plus one (0: none); revisions as in
    /// [`Step::Range`].
    Txn(TxnRequest),
    Grant,
    Revoke(usize),
    /// Compact to this many revisions before the current one.
    Compact(i64),
}

const KEYS: [&str; 8] = ["a", "b", "c", "p/1", "p/2", "p/3", "q", "z"];

fn key(rng: &mut Rng) -> String {
    KEYS[rng.below(KEYS.len() as u64) as usize].to_string()
}

/// The end of the range of every key starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().unwrap() += 1;
    end
}

/// A random range read: one key, the `p/` prefix or every key; maybe at a
/// past revision (relative to the current one, resolved when the step
/// runs: negative, back from it); with random options.
fn range_request(rng: &mut Rng) -> RangeRequest {
    let mut r = RangeRequest { key: key(rng).into_bytes(), ..Default::default() };
    match rng.below(3) {
        0 => {}
        1 => (r.key, r.range_end) = (b"p/".to_vec(), prefix_end("p/")),
        _ => (r.key, r.range_end) = (b"\0".to_vec(), b"\0".to_vec()),
    }
    if rng.chance(30) {
        r.revision = -(rng.below(12) as i64) + 2;
    }
    r.limit = if rng.chance(30) { rng.below(3) as i64 } else { 0 };
    r.sort_order = rng.below(3) as i32;
    r.sort_target = rng.below(5) as i32;
    r.keys_only = rng.chance(15);
    r.count_only = rng.chance(10);
    if rng.chance(10) {
        r.min_mod_revision = rng.below(8) as i64;
    }
    r
}

/// A random comparison: every target and result, of one key, the `p/`
/// prefix or every key from one on.
fn compare(rng: &mut Rng) -> Compare {
    let target = rng.below(5) as i32;
    let union = match target {
        t if t == CompareTarget::Version as i32 => TargetUnion::Version(rng.below(3) as i64),
        t if t == CompareTarget::Create as i32 => TargetUnion::CreateRevision(rng.below(10) as i64),
        t if t == CompareTarget::Mod as i32 => TargetUnion::ModRevision(rng.below(10) as i64),
        t if t == CompareTarget::Value as i32 => {
            TargetUnion::Value(format!("v{}", rng.below(4)).into_bytes())
        }
        _ => TargetUnion::Lease(0),
    };
    let (key, range_end) = match rng.below(4) {
        0 => (b"p/".to_vec(), prefix_end("p/")),
        1 => (key(rng).into_bytes(), b"\0".to_vec()),
        _ => (key(rng).into_bytes(), Vec::new()),
    };
    Compare { result: rng.below(4) as i32, target, key, range_end, target_union: Some(union) }
}

/// A random transaction of up to three comparisons and up to three
/// operations per branch: puts (with a lease, `ignore_value`,
/// `ignore_lease`), reads with every option, single, prefix and open-ended
/// deletes, and transactions nested up to two deep.
fn txn(rng: &mut Rng, grants: u64, depth: u32) -> TxnRequest {
    let compare = (0..rng.below(4)).map(|_| compare(rng)).collect();
    let branch = |rng: &mut Rng| -> Vec<RequestOp> {
        (0..rng.below(4))
            .map(|_| {
                let op = match rng.below(10) {
                    0..=3 => {
                        let mut p = PutRequest {
                            key: key(rng).into_bytes(),
                            value: format!("t{}", rng.below(4)).into_bytes(),
                            prev_kv: rng.chance(50),
                            ..Default::default()
                        };
                        if grants > 0 && rng.chance(25) {
                            p.lease = rng.below(grants) as i64 + 1;
                        }
                        if rng.chance(10) {
                            (p.ignore_value, p.value) = (true, Vec::new());
                        }
                        if rng.chance(10) {
                            (p.ignore_lease, p.lease) = (true, 0);
                        }
                        Op::RequestPut(p)
                    }
                    4..=6 => Op::RequestRange(range_request(rng)),
                    7..=8 => {
                        let (key, range_end) = match rng.below(4) {
                            0 => (b"p/".to_vec(), prefix_end("p/")),
                            1 => (key(rng).into_bytes(), b"\0".to_vec()),
                            _ => (key(rng).into_bytes(), Vec::new()),
                        };
                        let prev_kv = rng.chance(50);
                        Op::RequestDeleteRange(DeleteRangeRequest { key, range_end, prev_kv })
                    }
                    _ if depth < 2 => Op::RequestTxn(txn(rng, grants, depth + 1)),
                    _ => Op::RequestRange(RangeRequest {
                        key: key(rng).into_bytes(),
                        ..Default::default()
                    }),
                };
                RequestOp { request: Some(op) }
            })
            .collect()
    };
    let success = branch(rng);
    let failure = branch(rng);
    let mut t = TxnRequest { compare, success, failure };
    if depth == 0 && keeps(&t) {
        no_open_deletes(&mut t);
    }
    t
}

/// True if a put of `t` keeps a key's value or lease.
fn keeps(t: &TxnRequest) -> bool {
    t.success.iter().chain(&t.failure).any(|op| match &op.request {
        Some(Op::RequestPut(p)) => p.ignore_value || p.ignore_lease,
        Some(Op::RequestTxn(nested)) => keeps(nested),
        _ => false,
    })
}

/// Makes every delete of `t` of every key from one on a delete of that
/// key: etcd 3.4 panics on such a delete followed by a put that keeps the
/// deleted key's value (tenure refuses it: docs/ETCD.md).
fn no_open_deletes(t: &mut TxnRequest) {
    for op in t.success.iter_mut().chain(&mut t.failure) {
        match &mut op.request {
            Some(Op::RequestDeleteRange(d)) if d.range_end == b"\0" => d.range_end.clear(),
            Some(Op::RequestTxn(nested)) => no_open_deletes(nested),
            _ => {}
        }
    }
}

/// The workload of `seed`: `ops` steps over [`KEYS`].
fn workload(seed: u64, ops: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut grants = 0;
    let mut compactions = 0;
    let mut steps = Vec::new();
    for _ in 0..ops {
        let step = match rng.below(100) {
            0..=29 => {
                let (ignore_value, ignore_lease) = (rng.chance(8), rng.chance(8));
                Step::Put {
                    key: key(&mut rng),
                    value: if ignore_value { String::new() } else { format!("v{}", rng.below(4)) },
                    prev_kv: rng.chance(50),
                    lease: (grants > 0 && !ignore_lease && rng.chance(25))
                        .then(|| rng.below(grants) as usize),
                    ignore_value,
                    ignore_lease,
                }
            }
            30..=54 => Step::Range(range_request(&mut rng)),
            55..=64 => Step::Delete {
                key: if rng.chance(30) { "p/".to_string() } else { key(&mut rng) },
                prefix: rng.chance(30),
                prev_kv: rng.chance(50),
            },
            65..=84 => Step::Txn(txn(&mut rng, grants, 0)),
            85..=91 => {
                grants += 1;
                Step::Grant
            }
            92..=97 if grants > 0 => Step::Revoke(rng.below(grants) as usize),
            98..=99 if compactions < 2 => {
                compactions += 1;
                Step::Compact(rng.below(4) as i64)
            }
            _ => Step::Range(RangeRequest { key: b"a".to_vec(), ..Default::default() }),
        };
        steps.push(step);
    }
    steps
}

/// One system's clients and the lease ids it granted, by grant index.
struct System {
    kv: KvClient<Channel>,
    lease: LeaseClient<Channel>,
    watch: WatchClient<Channel>,
    leases: Vec<i64>,
    revision: i64,
}

impl System {
    async fn connect(url: &str, tls: &[OsString]) -> System {
        let channel = crate::harness::etcd_channel(url, tls).await;
        System {
            kv: KvClient::new(channel.clone()),
            lease: LeaseClient::new(channel.clone()),
            watch: WatchClient::new(channel),
            leases: Vec::new(),
            revision: 0,
        }
    }

    /// A text of `answer` without what differs by design: the headers'
    /// ids and term, and lease ids (by grant index).
    fn masked(&self, answer: String) -> String {
        let mut text = answer;
        for field in ["cluster_id", "member_id", "raft_term"] {
            text = mask_number(&text, &format!("{field}: "), |_| "_".to_string());
        }
        for field in ["lease: ", " id: "] {
            text = mask_number(&text, field, |digits| match digits.parse::<i64>() {
                Ok(0) => "0".to_string(),
                Ok(n) => match self.leases.iter().position(|&l| l == n) {
                    Some(i) => format!("L{i}"),
                    None => format!("unknown lease {n}"),
                },
                Err(_) => digits.to_string(),
            });
        }
        text
    }

    fn lease_id(&self, i: usize) -> i64 {
        self.leases[i]
    }

    /// The transaction's lease indices as this system's ids and its
    /// relative revisions as revisions; a read at a revision of 0 or
    /// below inside a transaction reads at 1 (etcd refuses most negative
    /// ones there, tenure reads the current revision: docs/ETCD.md).
    fn resolve(&self, t: &mut TxnRequest) {
        for op in t.success.iter_mut().chain(&mut t.failure) {
            match &mut op.request {
                Some(Op::RequestPut(p)) if p.lease > 0 => {
                    p.lease = self.lease_id(p.lease as usize - 1)
                }
                Some(Op::RequestRange(r)) if r.revision != 0 => {
                    r.revision = (r.revision + self.revision - 2).max(1)
                }
                Some(Op::RequestTxn(nested)) => self.resolve(nested),
                _ => {}
            }
        }
    }

    /// Runs `step`; the masked answer or error.
    async fn run(&mut self, step: &Step) -> String {
        let text = match step.clone() {
            Step::Put { key, value, prev_kv, lease, ignore_value, ignore_lease } => {
                let lease = lease.map_or(0, |i| self.lease_id(i));
                let r = PutRequest {
                    key: key.into_bytes(),
                    value: value.into_bytes(),
                    lease,
                    prev_kv,
                    ignore_value,
                    ignore_lease,
                };
                format!("{:?}", self.kv.put(r).await.map(|a| a.into_inner()))
            }
            Step::Range(mut r) => {
                if r.revision != 0 {
                    r.revision += self.revision - 2;
                }
                format!("{:?}", self.kv.range(r).await.map(|a| a.into_inner()))
            }
            Step::Delete { key, prefix, prev_kv } => {
                let range_end = if prefix { prefix_end(&key) } else { Vec::new() };
                let r = DeleteRangeRequest { key: key.into_bytes(), range_end, prev_kv };
                format!("{:?}", self.kv.delete_range(r).await.map(|a| a.into_inner()))
            }
            Step::Txn(mut t) => {
                self.resolve(&mut t);
                format!("{:?}", self.kv.txn(t).await.map(|a| a.into_inner()))
            }
            Step::Grant => {
                let r = LeaseGrantRequest { ttl: 600, id: 0 };
                let answer = self.lease.lease_grant(r).await.map(|a| a.into_inner());
                // A failed grant keeps its index (an id no lease has): the
                // steps that name it fail alike, and the grant's own answer
                // shows the difference if the other system granted.
                self.leases.push(answer.as_ref().map_or(-1, |a| a.id));
                format!("{answer:?}")
            }
            Step::Revoke(i) => {
                let r = LeaseRevokeRequest { id: self.lease_id(i) };
                format!("{:?}", self.lease.lease_revoke(r).await.map(|a| a.into_inner()))
            }
            Step::Compact(back) => {
                // Not 0: etcd accepts a compaction at 0 once (a no-op),
                // tenure refuses it as compacted (docs/ETCD.md).
                let revision = (self.revision - back).max(1);
                let r = CompactionRequest { revision, physical: false };
                format!("{:?}", self.kv.compact(r).await.map(|a| a.into_inner()))
            }
        };
        // The store's revision after the step, from its answer's header.
        if let Some(at) = text.find("revision: ") {
            let digits: String =
                text[at + 10..].chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(r) = digits.parse::<i64>() {
                self.revision = self.revision.max(r);
            }
        }
        self.masked(errors_only_by_code_and_text(text))
    }

    /// A watch over every key from revision 2 (the first write), opened
    /// before the workload: its request sender (kept open) and its stream.
    async fn open_watch(&mut self) -> Watching {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let create = WatchCreateRequest {
            key: b"\0".to_vec(),
            range_end: b"\0".to_vec(),
            start_revision: 2,
            prev_kv: true,
            ..Default::default()
        };
        tx.send(WatchRequest { request_union: Some(RequestUnion::CreateRequest(create)) })
            .await
            .unwrap();
        let stream = self
            .watch
            .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("a watch")
            .into_inner();
        Watching { _requests: tx, stream }
    }

    /// Every event `watching` saw up to revision `last`, masked: what a
    /// client that watched the whole workload saw.
    async fn history(&self, mut watching: Watching, last: i64) -> Vec<String> {
        let mut events = Vec::new();
        let deadline = Instant::now() + EVENTS_BOUND;
        // Nothing to wait for where nothing was written.
        let mut done = last <= 1;
        while !done {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = tokio::time::timeout(left, watching.stream.message()).await;
            let Ok(Ok(Some(answer))) = next else {
                events.push(format!("the stream ended: {next:?}"));
                break;
            };
            if answer.canceled {
                events.push(format!("canceled: {}", answer.cancel_reason));
                break;
            }
            for e in answer.events {
                done |= e.kv.as_ref().is_some_and(|kv| kv.mod_revision >= last);
                events.push(self.masked(format!("{e:?}")));
            }
        }
        events
    }
}

/// An open watch: the sender of its requests (the stream ends with it).
struct Watching {
    _requests: tokio::sync::mpsc::Sender<WatchRequest>,
    stream: tonic::Streaming<tenure_etcd_api::etcdserverpb::WatchResponse>,
}

/// `text` with the number after each `field` replaced by `by(its digits)`.
fn mask_number(text: &str, field: &str, by: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(field) {
        let (before, after) = rest.split_at(at + field.len());
        out.push_str(before);
        let digits: String =
            after.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        out.push_str(&by(&digits));
        rest = &after[digits.len()..];
    }
    out.push_str(rest);
    out
}

/// A tonic error's Debug text holds its metadata and source; only its code
/// and message are etcd's answer.
fn errors_only_by_code_and_text(text: String) -> String {
    match text.strip_prefix("Err(Status { code: ") {
        Some(rest) => {
            let code: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
            let message = rest
                .split_once("message: \"")
                .and_then(|(_, m)| m.split_once('"'))
                .map_or("", |(m, _)| m);
            format!("Err({code}: {message})")
        }
        None => text,
    }
}

/// Runs `steps` on `system`: the answers, then the watch's history.
async fn transcript(system: &mut System, steps: &[Step]) -> (Vec<String>, Vec<String>) {
    system.revision = system
        .kv
        .range(RangeRequest { key: b"a".to_vec(), ..Default::default() })
        .await
        .expect("a first read")
        .into_inner()
        .header
        .unwrap()
        .revision;
    let watching = system.open_watch().await;
    let mut answers = Vec::new();
    for step in steps {
        answers.push(system.run(step).await);
    }
    let last = system.revision;
    let history = system.history(watching, last).await;
    (answers, history)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_seeded_workload_gives_what_etcd_gives_op_by_op() {
    if !installed("etcd", "--version") {
        eprintln!("SKIPPED: etcd is not on PATH (Debian: etcd-server)");
        return;
    }
    let _serial = serial().await;
    let seeds = env_or("TENURE_PARITY_SEEDS", 4);
    let ops = env_or("TENURE_PARITY_OPS", 400);
    let mut compared = BTreeMap::new();
    for seed in 1..=seeds {
        let steps = workload(seed, ops);
        let etcd = EtcdCluster::start(1);
        let mut real = System::connect(&etcd.endpoints()[0], &[]).await;
        let (want, want_history) = transcript(&mut real, &steps).await;
        drop(etcd);
        // A fresh cluster for each seed, as the etcd is.
        let (c, endpoints) = crate::harness::etcd_cluster();
        c.wait_leader(&[0, 1, 2], 0, Instant::now(), START_BOUND).await;
        let (url, tls) = &endpoints[1];
        let mut tenure = System::connect(url, tls).await;
        let (got, got_history) = transcript(&mut tenure, &steps).await;
        drop(tenure);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert_eq!(
                g,
                w,
                "seed {seed}, step {i} ({:?}) differs from etcd\nsteps before: {:?}\n{}",
                steps[i],
                &steps[i.saturating_sub(5)..i],
                c.logs()
            );
        }
        let first = got_history.iter().zip(&want_history).position(|(g, w)| g != w);
        assert_eq!(
            got_history.len(),
            want_history.len(),
            "seed {seed}: the watch's events (first difference at {first:?})"
        );
        if let Some(i) = first {
            panic!(
                "seed {seed}: watch event {i} differs\n  tenure: {}\n  etcd:   {}\nbefore: {:?}",
                got_history[i],
                want_history[i],
                &want_history[i.saturating_sub(3)..i]
            );
        }
        let txns = got.iter().filter(|a| a.starts_with("Ok(TxnResponse")).count();
        let nested = got.iter().filter(|a| a.contains("ResponseTxn(")).count();
        let refused = got.iter().filter(|a| a.starts_with("Err(")).count();
        compared.insert(seed, (got.len(), got_history.len(), txns, nested, refused));
    }
    eprintln!(
        "compared with etcd 3.4 (seed: steps, watch events, transactions answered, of them \
         with a nested one, errors): {compared:?}"
    );
}
