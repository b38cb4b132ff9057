//! A read token lists a large store on the leader from four clients at once
//! (docs/SECURITY.md, "List answers are paged"), on a cluster of three real
//! `tenure server` processes with TLS and API tokens: [`VALUES`] values of
//! 64 KiB, four readers each listing every key, following `more` with
//! `after=`. Every reader gets every key once, in order; the leader's
//! resident memory grows by less than [`RSS_GROWTH_BOUND`] while they read;
//! the cluster keeps its leader and term.
//!
//! Before list answers were paged, the whole range was copied under the
//! replica's lock and serialised in one answer: 118 MB of JSON from a store
//! of 19.7 MB; four such reads deposed the leader and eight raised its RSS
//! from 83 to 1,039 MiB.
//!
//! `TENURE_LARGE_READS_VALUES=N` changes the store's size, and
//! `TENURE_LARGE_READS_CONTROL=1` fills the values with a control byte
//! (six bytes of JSON each: the answers swell sixfold and the test takes
//! minutes; CI runs 2,000 printable values).

use crate::harness::{api_name, serial, TestCluster, APP_TOKEN, READ_TOKEN};
use futures_util::future::join_all;
use hyper::Method;
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Tries of one put of the fill before an unknown outcome or a 503 fails
/// the test.
const FILL_TRIES: u32 = 3;
/// Values in the store, by default: as the attack was reported.
const VALUES: usize = 10_000;
/// Each value: 64 KiB (the store's largest).
const VALUE_BYTES: usize = 64 * 1024;
/// How long the leader is left to settle after the fill (its last snapshot
/// written) before its memory is measured.
const SETTLE: Duration = Duration::from_secs(5);
/// Puts in flight at once while filling the store.
const FILL_CONCURRENCY: usize = 16;
/// Clients listing at once.
const READERS: usize = 4;
/// How much the leader's resident memory may grow while they read: four
/// answers of at most 4 MiB of JSON each and their pages, and the
/// connections' buffers, with room for the allocator.
const RSS_GROWTH_BOUND_MIB: u64 = 256;
/// How long one page may take, TLS and waiting for an answer slot included.
const PAGE_BOUND: Duration = Duration::from_secs(30);
/// Tries of one page whose connection closed before any answer: the server
/// drops a connection that has not sent its request within its
/// `UNPROVEN_TIMEOUT` (2 s), which a debug build busy serialising the other
/// readers' pages on two loaded cores may take for the TLS handshake; a
/// client sends the GET again, as any would.
const PAGE_TRIES: u32 = 3;
/// The cluster's timings: a heartbeat every 100 ms, elections after 1 s.
const HEARTBEAT_MS: u64 = 100;
const ELECTION_TIMEOUT_MS: u64 = 1_000;

/// What a reader looks at in a page: the keys (the values are skipped).
#[derive(Deserialize)]
struct Page {
    kvs: Vec<Key>,
    more: bool,
}

#[derive(Deserialize)]
struct Key {
    key: String,
}

/// `GET path` with the read token on a new connection to `port`: status and body.
async fn get(tls: &TlsConnector, port: u16, path: &str) -> Option<(u16, Vec<u8>)> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let mut stream = tls.connect(api_name(), tcp).await.ok()?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {READ_TOKEN}\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer).await;
    let Some(split) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        eprintln!("no answer to {path}: {read:?}, {} bytes", answer.len());
        return None;
    };
    let head = String::from_utf8_lossy(&answer[..split]);
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, answer.split_off(split + 4)))
}

/// Lists every key under `big/` on `port`, page by page; the keys and the
/// pages it took.
async fn list_all(
    cluster: &TestCluster,
    tls: &TlsConnector,
    port: u16,
    bytes: &AtomicU64,
) -> (Vec<String>, usize) {
    let (mut keys, mut pages, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let mut path = "/v1/kv?prefix=big/".to_string();
        if let Some(a) = &after {
            path.push_str(&format!("&after={a}"));
        }
        let mut answer = None;
        for _ in 0..PAGE_TRIES {
            answer = tokio::time::timeout(PAGE_BOUND, get(tls, port, &path))
                .await
                .expect("a page within its bound");
            if answer.is_some() {
                break;
            }
        }
        let (status, body) = answer
            .unwrap_or_else(|| panic!("a page unanswered {PAGE_TRIES} times\n{}", cluster.logs()));
        if status == 503 {
            // Every answer slot is busy: as told, a second later.
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body[..body.len().min(300)]));
        bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        // Parsed off the runtime's workers: a page of 4 MiB takes a while in
        // a debug build, and the other readers' handshakes must go on.
        let page: Page = tokio::task::spawn_blocking(move || serde_json::from_slice(&body))
            .await
            .unwrap()
            .expect("a page of JSON");
        pages += 1;
        after = page.kvs.last().map(|k| k.key.clone());
        keys.extend(page.kvs.into_iter().map(|k| k.key));
        if !page.more {
            return (keys, pages);
        }
    }
}

/// `name value` of a Prometheus text exposition.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_full_reads_of_a_large_store_keep_the_leader_and_its_memory() {
    let _serial = serial().await;
    let values = std::env::var("TENURE_LARGE_READS_VALUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(VALUES);
    let cluster = TestCluster::start(3, HEARTBEAT_MS, ELECTION_TIMEOUT_MS);
    let all = [0, 1, 2];
    let (leader, term) = cluster.wait_agreement(&all, Duration::from_secs(20)).await;

    // The store: `values` keys of 64 KiB, put by FILL_CONCURRENCY writers
    // through the leader.
    let control = std::env::var("TENURE_LARGE_READS_CONTROL").is_ok_and(|v| v == "1");
    let fill_since = Instant::now();
    let value = if control { "\u{1}" } else { "x" }.repeat(VALUE_BYTES);
    let next = AtomicUsize::new(0);
    let writer = || async {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= values {
                return;
            }
            let path = format!("/v1/kv/big/{i:05}");
            let body = Some(("application/octet-stream", value.as_str()));
            // A put is the same whether it took effect once or twice: one
            // whose outcome is unknown (504: no commit within the request
            // timeout, on a machine the fill keeps busy) or that found no
            // leader (503) is sent again, a few times.
            let mut tries = 0;
            let r = loop {
                tries += 1;
                let r = cluster
                    .request_within(PAGE_BOUND, leader, Some(APP_TOKEN), Method::PUT, &path, body)
                    .await
                    .unwrap_or_else(|| panic!("put {i} unanswered\n{}", cluster.logs()));
                if !matches!(r.status, 503 | 504) || tries == FILL_TRIES {
                    break r;
                }
            };
            assert_eq!(r.status, 200, "put {i} ({tries} tries): {}", r.text);
        }
    };
    join_all((0..FILL_CONCURRENCY).map(|_| writer())).await;
    let filled = fill_since.elapsed();
    let (filled_leader, filled_term) = cluster.wait_agreement(&all, Duration::from_secs(20)).await;
    tokio::time::sleep(SETTLE).await;

    // The readers, and a monitor of the leader's memory and every term.
    let tls = cluster.tls_connector();
    let port = cluster.servers[filled_leader].http_port;
    let rss_before = cluster.rss_kib(filled_leader);
    let reading = AtomicBool::new(true);
    let peak = AtomicU64::new(rss_before);
    let bytes = AtomicU64::new(0);
    let read_since = Instant::now();
    let readers = join_all((0..READERS).map(|_| list_all(&cluster, &tls, port, &bytes)));
    let monitor = async {
        let mut terms = Vec::new();
        while reading.load(Ordering::Relaxed) {
            peak.fetch_max(cluster.rss_kib(filled_leader), Ordering::Relaxed);
            for i in all {
                if let Some(s) = cluster.status(i).await {
                    terms.push(s["term"].as_u64().unwrap_or(0));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        terms
    };
    let (lists, terms) = tokio::join!(
        async {
            let lists = readers.await;
            reading.store(false, Ordering::Relaxed);
            lists
        },
        monitor
    );
    let read_for = read_since.elapsed();
    let growth_mib = (peak.load(Ordering::Relaxed) - rss_before) / 1024;
    let metrics = cluster
        .request_within(PAGE_BOUND, filled_leader, Some(READ_TOKEN), Method::GET, "/metrics", None)
        .await
        .expect("metrics answered");
    let lag_ms = gauge(&metrics.text, "tenure_driver_lag_max_seconds").unwrap_or(f64::NAN) * 1e3;
    println!(
        "{values} values of 64 KiB filled in {filled:?} (term {term} -> {filled_term}); {READERS} \
         readers listed every key in {read_for:?}: {} pages each, {} MiB of JSON in all; the \
         leader's RSS {} MiB before, +{growth_mib} MiB at most while they read; its driver's \
         longest late wake {lag_ms:.1} ms",
        lists[0].1,
        bytes.load(Ordering::Relaxed) >> 20,
        rss_before / 1024,
    );

    let expected: Vec<String> = (0..values).map(|i| format!("big/{i:05}")).collect();
    for (keys, _) in &lists {
        assert!(keys == &expected, "a reader got {} keys, not each once in order", keys.len());
    }
    assert!(
        growth_mib < RSS_GROWTH_BOUND_MIB,
        "the leader's RSS grew by {growth_mib} MiB while {READERS} clients listed the store"
    );
    assert!(
        terms.iter().all(|&t| t == filled_term),
        "a term changed while the store was read: {terms:?}\n{}",
        cluster.logs()
    );
    assert_eq!(
        cluster.wait_agreement(&all, Duration::from_secs(5)).await,
        (filled_leader, filled_term)
    );
}
