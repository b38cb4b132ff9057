//! One write token floods the leader with campaigns in new elections
//! (docs/SECURITY.md, "What a client cannot take"): 10,000 campaigns over
//! 20 connections from 10 sessions, on a cluster of three real `tenure
//! server` processes with TLS and API tokens. The cluster keeps its leader
//! and term throughout, every campaign gets a definite answer (200, none
//! unknown), campaign latency stays flat from the first thousand to the
//! last, and the leader's election driver never wakes late by more than a
//! bound, read from its `tenure_driver_lag_recent_max_seconds` gauge.
//!
//! Before the caps were counted on apply, each campaign scanned every
//! election name under the replica's lock (13 ms per campaign with none,
//! 62 ms at 4,000), and such a flood cost the leader its quorum 2 to 4
//! times.

use crate::harness::{serial, TestCluster, APP_TOKEN, READ_TOKEN};
use futures_util::future::join_all;
use hyper::Method;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Campaigns in the flood, each in an election of its own.
const CAMPAIGNS: usize = 10_000;
/// Sessions they are spread over: 1,000 each, a session's key limit.
const SESSIONS: usize = 10;
/// Campaigns in flight at once, one connection of its own each (not the
/// harness's pooled client: what is measured is the server).
const CONNECTIONS: usize = 20;
/// How long one campaign may take before it counts as unanswered: longer
/// than the server's own bound on a write (`REQUEST_TIMEOUT`, 10 s), so a
/// write the server gave up on is seen as the server's answer (504,
/// outcome unknown) and a silent server as this.
const ANSWER_BOUND: Duration = Duration::from_secs(15);
/// The cluster's timings: a heartbeat every 100 ms, elections after 1 s.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_TIMEOUT_MS: u64 = 1_000;
/// The latest the leader's driver may wake under the flood: half an
/// election timeout (a wake that late already risks the leader's office).
const LAG_BOUND: Duration = Duration::from_millis(ELECTION_TIMEOUT_MS / 2);
/// How often the monitor reads every node's term and the leader's lag.
const MONITOR_EVERY: Duration = Duration::from_millis(500);

/// `name value` of a Prometheus text exposition.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The median of `samples` (sorted in place).
fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_campaigns_by_one_token_cost_no_leader() {
    let _serial = serial().await;
    let cluster = TestCluster::start(3, HEARTBEAT_MS, ELECTION_TIMEOUT_MS);
    let all = [0, 1, 2];
    let (leader, term) = cluster.wait_agreement(&all, Duration::from_secs(20)).await;

    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let grant = cluster
            .request_within(
                ANSWER_BOUND,
                leader,
                Some(APP_TOKEN),
                Method::POST,
                "/v1/sessions",
                Some(("application/json", r#"{"ttl_ms": 600000}"#)),
            )
            .await
            .expect("a grant answered");
        assert_eq!(grant.status, 200, "grant: {}", grant.text);
        sessions.push(grant.json["id"].as_u64().expect("a session id"));
    }

    let next = AtomicUsize::new(0);
    // (completion order, latency) of each answered campaign, and the others.
    let latencies = Mutex::new(Vec::with_capacity(CAMPAIGNS));
    let failures = Mutex::new(Vec::new());
    let done = AtomicUsize::new(0);
    let flood = async {
        let worker = || async {
            let mut connection = cluster.api_connection(leader).await;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= CAMPAIGNS {
                    return;
                }
                let body = format!(r#"{{"session": {}, "value": "v{i}"}}"#, sessions[i % SESSIONS]);
                let path = format!("/v1/elections/flood-{i}/campaign");
                let sent = Instant::now();
                let answer = connection
                    .request(
                        ANSWER_BOUND,
                        Some(APP_TOKEN),
                        Method::POST,
                        &path,
                        Some(("application/json", &body)),
                    )
                    .await;
                let took = sent.elapsed();
                match answer {
                    Ok(a) if a.status == 200 => latencies.lock().unwrap().push(took),
                    Ok(a) => {
                        failures.lock().unwrap().push(format!("{path}: {} {}", a.status, a.text))
                    }
                    Err(e) => {
                        failures.lock().unwrap().push(format!("{path}: {e}"));
                        connection = cluster.api_connection(leader).await;
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        };
        join_all((0..CONNECTIONS).map(|_| worker())).await;
    };
    // Reads every node's term and the leader's driver lag until the flood ends.
    let monitor = async {
        let mut terms = Vec::new();
        let mut worst_lag = 0.0_f64;
        while done.load(Ordering::Relaxed) < CAMPAIGNS {
            for i in all {
                if let Some(s) = cluster.status(i).await {
                    terms.push((i, s["term"].as_u64(), s["leader"].as_u64()));
                }
            }
            let metrics = cluster
                .request_within(
                    ANSWER_BOUND,
                    leader,
                    Some(READ_TOKEN),
                    Method::GET,
                    "/metrics",
                    None,
                )
                .await;
            if let Some(m) = metrics {
                if let Some(lag) = gauge(&m.text, "tenure_driver_lag_recent_max_seconds") {
                    worst_lag = worst_lag.max(lag);
                }
            }
            tokio::time::sleep(MONITOR_EVERY).await;
        }
        (terms, worst_lag)
    };
    let started = Instant::now();
    let ((), (terms, worst_lag)) = tokio::join!(flood, monitor);
    let elapsed = started.elapsed();

    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {CAMPAIGNS} campaigns had no definite success, first: {:?}\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        cluster.logs()
    );
    let latencies = latencies.into_inner().unwrap();
    assert_eq!(latencies.len(), CAMPAIGNS);
    let leader_id = cluster.servers[leader].id;
    for (i, t, l) in &terms {
        assert_eq!(
            (*t, *l),
            (Some(term), Some(leader_id)),
            "node {} saw another term or leader during the flood\n{}",
            i + 1,
            cluster.logs()
        );
    }
    assert!(terms.len() >= 3, "the monitor read the nodes: {terms:?}");
    // Flat: the last thousand campaigns, among 10,000 elections, cost about
    // what the first thousand did among none.
    let tenth = CAMPAIGNS / 10;
    let deciles: Vec<Duration> = latencies.chunks(tenth).map(|c| median(&mut c.to_vec())).collect();
    let (first, last) = (deciles[0], deciles[deciles.len() - 1]);
    let mut all_sorted = latencies.clone();
    all_sorted.sort_unstable();
    let p99 = all_sorted[all_sorted.len() * 99 / 100];
    let max = all_sorted[all_sorted.len() - 1];
    eprintln!(
        "{CAMPAIGNS} campaigns in {elapsed:.1?} ({:.0}/s); median per thousand: {deciles:.1?}; \
         p99 {p99:.1?}, max {max:.1?}; leader's driver woke at most {:.1} ms late",
        CAMPAIGNS as f64 / elapsed.as_secs_f64(),
        worst_lag * 1e3
    );
    assert!(
        last <= first * 3 + Duration::from_millis(25),
        "campaign latency grew with the elections: median {first:?} for the first thousand, \
         {last:?} for the last"
    );
    assert!(
        worst_lag < LAG_BOUND.as_secs_f64(),
        "the leader's election driver woke {:.0} ms late under the flood",
        worst_lag * 1e3
    );
    // And the cluster still agrees, on the same leader and term.
    let after = cluster.wait_agreement(&all, Duration::from_secs(5)).await;
    assert_eq!(after, (leader, term), "the leader or term changed\n{}", cluster.logs());
}
