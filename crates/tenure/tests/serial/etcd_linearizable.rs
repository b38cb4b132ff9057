//! The etcd gRPC KV is linearizable through leader kills: clients put,
//! compare-and-set (a Txn on the key's `mod_revision`) and read (a
//! linearizable Range) a few keys through random nodes of a real 3-node
//! cluster while its leader is SIGKILLed and restarted twice; the history
//! is checked by the simulator's checker (revisions, then Wing–Gong
//! linearizability key by key, `tenure_sim::kvcheck`), the one the netns
//! suite uses for the HTTP API.
//!
//! How a gRPC answer enters the history: a put or a Txn answered is
//! returned (written, or a conflict with the key's `mod_revision`); a write
//! that failed in any way may or may not have happened (unknown: always
//! sound); a read that failed changed nothing (not executed).

use crate::harness::serial;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::request_op::Request as Op;
use tenure_etcd_api::etcdserverpb::response_op::Response as OpAnswer;
use tenure_etcd_api::etcdserverpb::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};
use tenure_etcd_api::mvccpb::KeyValue as EtcdKeyValue;
use tenure_kv::{KeyValue, LeaseId, Response};
use tenure_sim::kvcheck;
use tenure_sim::workload::{key_name, value_bytes, Expected, Fate, KvInput, KvOutput, Record};
use tonic::transport::Channel;

/// Bound on a first election and the etcd listeners' start on a busy machine.
const START_BOUND: Duration = Duration::from_secs(15);
/// How long a client waits for one answer.
const OP_TIMEOUT: Duration = Duration::from_secs(4);
/// Keys the clients share.
const KEYS: usize = 3;
/// Clients, each with a connection to every node.
const CLIENTS: usize = 4;
/// Leader kills (SIGKILL, then the node restarted).
const KILLS: usize = 2;
/// Work before, between and after the kills.
const PHASE: Duration = Duration::from_millis(1500);

/// The time since `base`, in ns: one clock for every client.
fn ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

fn kv_of(kv: EtcdKeyValue) -> KeyValue {
    KeyValue {
        key: String::from_utf8(kv.key).unwrap(),
        value: kv.value,
        create_revision: kv.create_revision as u64,
        mod_revision: kv.mod_revision as u64,
        version: kv.version as u64,
        lease: (kv.lease != 0).then_some(LeaseId(kv.lease as u64)),
    }
}

/// `message` as a request with the client's deadline.
fn timed<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.set_timeout(OP_TIMEOUT);
    r
}

/// Runs `input` on `client`: its fate.
async fn run(client: &mut KvClient<Channel>, input: &KvInput, base: Instant) -> Fate {
    match *input {
        KvInput::Put { key, value } => {
            let put = PutRequest {
                key: key_name(key).into_bytes(),
                value: value_bytes(value),
                ..Default::default()
            };
            match tokio::time::timeout(OP_TIMEOUT, client.put(timed(put))).await {
                Ok(Ok(a)) => Fate::Returned {
                    at_ns: ns(base),
                    output: KvOutput::Written {
                        revision: a.into_inner().header.unwrap().revision as u64,
                    },
                },
                _ => Fate::Unknown,
            }
        }
        KvInput::Cas { key, expected, value } => {
            let name = key_name(key).into_bytes();
            let txn = TxnRequest {
                compare: vec![Compare {
                    result: CompareResult::Equal as i32,
                    target: CompareTarget::Mod as i32,
                    key: name.clone(),
                    range_end: Vec::new(),
                    target_union: Some(TargetUnion::ModRevision(expected.revision as i64)),
                }],
                success: vec![RequestOp {
                    request: Some(Op::RequestPut(PutRequest {
                        key: name.clone(),
                        value: value_bytes(value),
                        ..Default::default()
                    })),
                }],
                failure: vec![RequestOp {
                    request: Some(Op::RequestRange(RangeRequest {
                        key: name,
                        ..Default::default()
                    })),
                }],
            };
            let answer = tokio::time::timeout(OP_TIMEOUT, client.txn(timed(txn))).await;
            let Ok(Ok(a)) = answer else { return Fate::Unknown };
            let a = a.into_inner();
            let revision = a.header.unwrap().revision as u64;
            let output = if a.succeeded {
                KvOutput::Written { revision }
            } else {
                let current = a.responses.into_iter().find_map(|r| match r.response {
                    Some(OpAnswer::ResponseRange(r)) => r.kvs.into_iter().next(),
                    _ => None,
                });
                let mod_revision = current.map_or(0, |kv| kv.mod_revision as u64);
                KvOutput::Write(Response::Conflict { mod_revision, revision })
            };
            Fate::Returned { at_ns: ns(base), output }
        }
        KvInput::Read { key } => {
            let get = RangeRequest { key: key_name(key).into_bytes(), ..Default::default() };
            match tokio::time::timeout(OP_TIMEOUT, client.range(timed(get))).await {
                Ok(Ok(a)) => {
                    let a = a.into_inner();
                    Fate::Returned {
                        at_ns: ns(base),
                        output: KvOutput::Read {
                            kv: a.kvs.into_iter().next().map(kv_of),
                            revision: a.header.unwrap().revision as u64,
                        },
                    }
                }
                _ => Fate::NotExecuted,
            }
        }
        ref other => panic!("not sent here: {other:?}"),
    }
}

/// What a client learns of a key from a record (for its next
/// compare-and-set), as the netns suite's clients do.
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

/// One client until `stop`: random operations on random keys through
/// random nodes (a xorshift of its own seed).
async fn client(
    who: usize,
    mut nodes: Vec<KvClient<Channel>>,
    values: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    base: Instant,
) -> Vec<Record> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (who as u64 + 1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut seen: Vec<Option<Expected>> = vec![None; KEYS];
    let mut history = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let key = (next() % KEYS as u64) as usize;
        let node = (next() % nodes.len() as u64) as usize;
        let input = match next() % 10 {
            0..=2 => KvInput::Put { key, value: values.fetch_add(1, Ordering::Relaxed) },
            3..=5 => KvInput::Cas {
                key,
                expected: seen[key].unwrap_or(Expected::ABSENT),
                value: values.fetch_add(1, Ordering::Relaxed),
            },
            _ => KvInput::Read { key },
        };
        let call_ns = ns(base);
        let fate = run(&mut nodes[node], &input, base).await;
        let record = Record { client: who, call_ns, input, fate, final_read: false };
        seen[key] = learned(&record);
        history.push(record);
        tokio::time::sleep(Duration::from_millis(next() % 4)).await;
    }
    history
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_grpc_kv_is_linearizable_through_leader_kills() {
    let _serial = serial().await;
    let (mut c, endpoints) = crate::harness::etcd_cluster();
    let (mut leader, mut term) = c.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let mut channels = Vec::new();
    for (url, tls) in &endpoints {
        channels.push(crate::harness::etcd_channel(url, tls).await);
    }
    let base = Instant::now();
    let values = Arc::new(AtomicU32::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|who| {
            let nodes = channels.iter().cloned().map(KvClient::new).collect();
            tokio::spawn(client(who, nodes, values.clone(), stop.clone(), base))
        })
        .collect();

    let mut kills = Vec::new();
    tokio::time::sleep(PHASE).await;
    for _ in 0..KILLS {
        let killed_at = ns(base);
        c.crash(leader);
        let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
        let (next, next_term, took) =
            c.wait_leader(&survivors, term, Instant::now(), START_BOUND).await;
        tokio::time::sleep(PHASE).await;
        let addr = endpoints[leader].0.trim_start_matches("https://").to_string();
        c.spawn_with(leader, &["--etcd-listen", &addr]);
        kills.push((leader, killed_at, took));
        (leader, term) = (next, next_term);
        tokio::time::sleep(PHASE).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut history = Vec::new();
    for t in tasks {
        history.extend(t.await.unwrap());
    }

    // The final reads: every key once, through any node that answers.
    let mut reader: Vec<_> = channels.iter().cloned().map(KvClient::new).collect();
    for key in 0..KEYS {
        let until = Instant::now() + START_BOUND;
        let mut node = 0;
        loop {
            let input = KvInput::Read { key };
            let call_ns = ns(base);
            let fate = run(&mut reader[node % 3], &input, base).await;
            let done = matches!(fate, Fate::Returned { .. });
            history.push(Record { client: CLIENTS, call_ns, input, fate, final_read: true });
            if done {
                break;
            }
            assert!(Instant::now() < until, "no node answered the final read of k{key}");
            node += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Enough happened around the kills for the check to mean something.
    let written =
        |r: &&Record| matches!(r.fate, Fate::Returned { output: KvOutput::Written { .. }, .. });
    let reads =
        |r: &&Record| matches!(r.fate, Fate::Returned { output: KvOutput::Read { .. }, .. });
    for &(node, killed_at, took) in &kills {
        let after = history.iter().filter(|r| r.call_ns > killed_at + took.as_nanos() as u64);
        let acked = after.filter(written).count();
        assert!(acked >= 10, "only {acked} writes acknowledged after node {node}'s kill");
    }
    let acked = history.iter().filter(written).count();
    let answered = history.iter().filter(reads).count();
    let unknown = history.iter().filter(|r| matches!(r.fate, Fate::Unknown)).count();
    let verdict = kvcheck::check_history(&history, KEYS, kvcheck::MAX_SEARCH_STEPS);
    assert!(
        verdict.violations.is_empty() && verdict.undecided.is_empty(),
        "not linearizable: {:?} {:?}\n{}",
        verdict.violations,
        verdict.undecided,
        c.logs()
    );
    eprintln!(
        "etcd gRPC KV through {KILLS} leader kills: {} operations, {acked} writes acknowledged, \
         {answered} reads answered, {unknown} unknown; linearizable ({} search steps)",
        history.len(),
        verdict.steps
    );
}
