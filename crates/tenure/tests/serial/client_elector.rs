//! The `tenure-client` library against a cluster of real `tenure server`
//! processes: two leader latches, one leads, the other takes over within a
//! second when the first closes; an elector's callbacks get the token and a
//! leading context that is cancelled when it stops, and every new leader;
//! a token check answers true for the current token only.

use crate::harness::{serial, TestCluster, ADMIN_TOKEN};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_client::{
    parse_endpoints, CancellationToken, Client, ClientOptions, Cluster, Election, Ended,
    LeaderElector, LeaderLatch, Store, TenureStore,
};

/// Bound on a first election, including process start-up on a busy machine.
const START_BOUND: Duration = Duration::from_secs(10);
/// Bound on a handover after a latch closes (it resigns).
const HANDOVER_BOUND: Duration = Duration::from_secs(1);
const TTL: Duration = Duration::from_secs(3);

async fn setup() -> (TestCluster, Arc<TenureStore>) {
    let c = TestCluster::start(3, 20, 200);
    c.wait_agreement(&[0, 1, 2], START_BOUND).await;
    let ca = c.ca();
    let client =
        Client::new(ClientOptions { cacert: Some(&ca), token: Some(ADMIN_TOKEN) }).unwrap();
    let list = (0..3).map(|i| c.endpoint(i)).collect::<Vec<_>>().join(",");
    let endpoints = parse_endpoints(&list, client.https()).unwrap();
    (c, Arc::new(TenureStore::new(Arc::new(Cluster::new(client, endpoints).unwrap()))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_takes_over_when_the_leading_one_closes() {
    let _serial = serial().await;
    let (_c, tenure) = setup().await;
    let store: Arc<dyn Store> = tenure.clone();
    let a = LeaderLatch::start(store.clone(), "latch", "a", TTL).unwrap();
    assert!(a.await_leadership(START_BOUND).await);
    let b = LeaderLatch::start(store.clone(), "latch", "b", TTL).unwrap();
    assert!(!b.await_leadership(Duration::from_millis(500)).await, "one leader at a time");
    assert!(a.has_leadership());
    let first = a.leadership().unwrap();

    let election = Election::new(store, "latch").unwrap();
    assert!(election.check(first.token).await.unwrap().current);
    assert_eq!(tenure.leader("latch").await.unwrap().unwrap().value, "a");

    let closed = Instant::now();
    a.close().await;
    assert!(first.cancel.is_cancelled(), "the leading context ends with the leadership");
    assert!(b.await_leadership(HANDOVER_BOUND).await, "b leads within {HANDOVER_BOUND:?}");
    eprintln!("latch handover after close: {:?}", closed.elapsed());
    let second = b.leadership().unwrap();
    assert!(second.token > first.token);
    let check = election.check(first.token).await.unwrap();
    assert!(!check.current && check.token == Some(second.token), "{check:?}");
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elector_calls_back_with_the_token_and_a_context_cancelled_on_stop() {
    let _serial = serial().await;
    let (_c, tenure) = setup().await;
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let contexts = Arc::new(Mutex::new(Vec::<CancellationToken>::new()));
    let (e1, e2, e3, ctx) = (events.clone(), events.clone(), events.clone(), contexts.clone());
    let elector = LeaderElector::new(tenure, "jobs", "node-a")
        .unwrap()
        .ttl(TTL)
        .on_started_leading(move |leading| {
            e1.lock().unwrap().push(format!("started {}", leading.token));
            assert!(leading.is_valid());
            ctx.lock().unwrap().push(leading.cancel);
        })
        .on_stopped_leading(move |why| e2.lock().unwrap().push(format!("stopped {why}")))
        .on_new_leader(move |leader| {
            let text = leader.map_or("none".to_string(), |l| format!("{} {}", l.value, l.token));
            e3.lock().unwrap().push(format!("leader {text}"));
        });
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let stop = stop.clone();
        async move { elector.run(stop).await }
    });
    let started = Instant::now();
    while contexts.lock().unwrap().is_empty() {
        assert!(started.elapsed() < START_BOUND, "not elected: {:?}", events.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let context = contexts.lock().unwrap()[0].clone();
    assert!(!context.is_cancelled());
    // Let the observer report the leader before stopping.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();
    assert_eq!(run.await.unwrap().unwrap(), Ended::Stopped);
    assert!(context.is_cancelled());
    let events = events.lock().unwrap().clone();
    let token = events.iter().find_map(|e| e.strip_prefix("started ")).expect("started");
    assert!(events.contains(&format!("leader node-a {token}")), "{events:?}");
    assert_eq!(events.last().unwrap(), "stopped stopped", "{events:?}");
}
