//! `tenure bench sessions`: many sessions (leases) on a cluster, through
//! etcd's v3 gRPC API so that etcd runs the same client in the same run:
//!
//! 1. **grant** `--sessions` leases of `--ttl` through every node in turn,
//!    64 at a time; the leader's resident memory before and after gives the
//!    bytes per session;
//! 2. **hold** them for `--hold` seconds, each renewed every
//!    TTL/`--renewals-per-ttl` (3, as etcd's Go client renews) over
//!    `--streams` keepalive streams spread over every node (a follower
//!    sends the renewals on to its leader), while one writer puts back to
//!    back: renewals per second, their latency, and every renewal answered
//!    with a TTL of 0 or less (a session lost while its holder renewed it:
//!    a false expiry);
//! 3. **abandon** them all at once, after a last round of renewals back to
//!    back (so that their deadlines fall close together): the writer goes on, and the leases are
//!    counted (`LeaseLeases`) every 50 ms until none is left: when the last
//!    expired against its deadline (its last renewal + TTL), the expiries
//!    per second from the first deadline to the last expiry, and the
//!    writer's p99 while they expire against its p99 while they were held.

use super::cluster_args::ClusterArgs;
use super::failover::wait_stable;
use super::grpc::{start_tenure, Target};
use super::kv::rss_mib;
use super::plot;
use super::stats::{summarize, Summary};
use super::system::System;
use anyhow::Context;
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseLeasesRequest,
    PutRequest,
};
use tokio::sync::{mpsc, watch};
use tokio::time::error::Elapsed;
use tonic::transport::Channel;
use tonic::Status;

/// The longest one call may take before it counts as an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Grants in flight at once.
const GRANTERS: usize = 64;
/// Most sessions, counts of sessions and streams.
const MAX_SESSIONS: usize = 1_000_000;
const MAX_COUNTS: usize = 16;
const MAX_STREAMS: usize = 4096;
/// Keepalive streams per connection: half of what tenure's etcd API lets
/// one connection open (`MAX_KEEPALIVE_STREAMS_PER_CONNECTION`, 16).
const STREAMS_PER_CONNECTION: usize = 8;
/// How often the leases are counted while they expire: every 50 ms, or
/// every [`COUNT_EVERY_MANY`] above [`MANY`] sessions, where one count
/// copies megabytes out of the store (a million ids are 11 MB).
const COUNT_EVERY: Duration = Duration::from_millis(50);
const COUNT_EVERY_MANY: Duration = Duration::from_millis(250);
const MANY: usize = 100_000;
/// Renewals one keepalive stream has under way at once (tenure's server
/// answers up to 64 of a stream at once: `MAX_KEEPALIVES_IN_FLIGHT`).
const PIPELINE: usize = 32;
/// The slowest renewal the histogram tells apart: a minute, in µs.
const HISTOGRAM_MAX_US: u64 = 60_000_000;
/// The largest answer the bench decodes: `LeaseLeases` of a million
/// leases is about 11 MB, beyond tonic's 4 MiB default.
const MAX_ANSWER_BYTES: usize = 64 << 20;
/// How long after the last deadline the benchmark waits for the last
/// expiry before it gives up (etcd revokes about 1,000 a second: 100,000
/// take it 100 s).
const EXPIRY_PATIENCE: Duration = Duration::from_secs(150);

/// Flags of `tenure bench sessions`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  tenure bench sessions --compare etcd --sessions 10000 --ttl 20 --hold 30\n  \
                  tenure bench sessions --sessions 100000,300000,500000 --streams 512 --plot sessions.svg"
)]
pub struct SessionsArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Sessions granted and held (tenure holds at most 1,000,000 at once:
    /// MAX_LEASES). Several counts, comma-separated, are measured in turn
    /// on the same cluster (each once the last has expired): a curve.
    #[arg(long, default_value = "10000", value_name = "N[,N...]", value_delimiter = ',')]
    sessions: Vec<usize>,
    /// Their TTL, in seconds (etcd grants whole seconds).
    #[arg(long, default_value_t = 20, value_name = "S")]
    ttl: u64,
    /// How long they are held.
    #[arg(long, default_value_t = 30, value_name = "S")]
    hold: u64,
    /// Renewals of each session per TTL: 3 is etcd's Go client's (every
    /// TTL/3), 2 the fewest that leaves a renewal's worth of slack.
    #[arg(long, default_value_t = 3, value_name = "N")]
    renewals_per_ttl: u64,
    /// Keepalive streams carrying the renewals, spread over every node.
    #[arg(long, default_value_t = 64, value_name = "N")]
    streams: usize,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Also draw the renewals' p99 against the sessions held, one line per
    /// system, as an SVG (a count with false expiries is marked with a
    /// cross).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// One system's results.
#[derive(Debug, Serialize)]
struct SystemReport {
    system: &'static str,
    sessions: usize,
    grants_per_second: f64,
    /// The leader's resident memory growth over the grants, per session.
    leader_bytes_per_session: Option<f64>,
    renewals: u64,
    /// Renewals per second from the first grant to the end of the hold.
    renewals_per_second: f64,
    renewal_ms: Option<Summary>,
    /// Renewals that failed (a status, a timeout, a broken stream).
    renewal_errors: u64,
    /// Renewals answered with a TTL of 0 or less while held.
    false_expiries: u64,
    /// From the last deadline (last renewal + TTL) to no lease left, ms.
    last_expiry_after_deadline_ms: Option<f64>,
    /// Sessions expired per second, from the first deadline to the last
    /// expiry (or to giving up, counting those expired by then).
    expiries_per_second: Option<f64>,
    /// Sessions left when the benchmark gave up waiting (0: none).
    left_at_end: usize,
    write_p99_held_ms: Option<f64>,
    write_p99_expiring_ms: Option<f64>,
}

/// The whole run, as printed with --json.
#[derive(Debug, Serialize)]
struct SessionsReport {
    nodes: usize,
    tls: bool,
    ttl_s: u64,
    hold_s: u64,
    renewals_per_ttl: u64,
    streams: usize,
    systems: Vec<SystemReport>,
}

/// Runs `tenure bench sessions`.
pub async fn run(args: SessionsArgs) -> anyhow::Result<ExitCode> {
    args.cluster.check()?;
    anyhow::ensure!(
        !args.sessions.is_empty()
            && args.sessions.len() <= MAX_COUNTS
            && args.sessions.iter().all(|n| (1..=MAX_SESSIONS).contains(n)),
        "--sessions must be 1 to {MAX_COUNTS} counts, each 1..={MAX_SESSIONS}"
    );
    anyhow::ensure!(
        (1..=MAX_STREAMS).contains(&args.streams)
            && args.sessions.iter().all(|&n| args.streams <= n),
        "--streams must be 1..={MAX_STREAMS} and at most each --sessions count"
    );
    anyhow::ensure!((2..=3_600).contains(&args.ttl), "--ttl must be 2..=3600 s");
    anyhow::ensure!((1..=3_600).contains(&args.hold), "--hold must be 1..=3600 s");
    anyhow::ensure!((2..=10).contains(&args.renewals_per_ttl), "--renewals-per-ttl must be 2..=10");
    let with_etcd = match args.cluster.with_etcd() {
        Ok(w) => w,
        Err(code) => return Ok(code),
    };
    let timing = args.cluster.timing();
    let nodes: Vec<usize> = (0..args.cluster.nodes).collect();
    let mut systems = Vec::new();
    {
        let (mut tenure, leader, target) = start_tenure(&args.cluster).await?;
        let urls = tenure.etcd_urls().to_vec();
        let pid = tenure.proc(leader).pid();
        for &n in &args.sessions {
            systems.push(measure("tenure", n, &args, &target, &urls, pid).await?);
        }
    }
    if with_etcd {
        let mut etcd = args.cluster.start_etcd(false).await?;
        let (leader, _) = wait_stable(&etcd, &nodes, timing).await?;
        let urls: Vec<String> = nodes.iter().map(|&i| etcd.client_url(i)).collect();
        let target = Target { url: urls[leader].clone(), follower_url: String::new(), tls: None };
        let pid = etcd.proc(leader).pid();
        for &n in &args.sessions {
            systems.push(measure("etcd", n, &args, &target, &urls, pid).await?);
        }
    }
    let report = SessionsReport {
        nodes: args.cluster.nodes,
        tls: !args.cluster.insecure_no_tls,
        ttl_s: args.ttl,
        hold_s: args.hold,
        renewals_per_ttl: args.renewals_per_ttl,
        streams: args.streams,
        systems,
    };
    if let Some(path) = &args.plot {
        write_plot(path, &report)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The three phases against one system, with `sessions` sessions.
async fn measure(
    system: &'static str,
    sessions: usize,
    args: &SessionsArgs,
    target: &Target,
    urls: &[String],
    leader_pid: Option<u32>,
) -> anyhow::Result<SystemReport> {
    let mut channels = Vec::new();
    for url in urls {
        channels.push(target.connect(url).await?);
    }
    let mut keepalive = Vec::new();
    for c in 0..args.streams.div_ceil(STREAMS_PER_CONNECTION) {
        keepalive.push(target.connect(&urls[c % urls.len()]).await?);
    }
    // The keepalive streams start with the grants: each lease is renewed
    // from its grant on, as a client does (a million grants take a minute,
    // longer than a TTL).
    let every = Duration::from_millis(args.ttl * 1000 / args.renewals_per_ttl);
    let (until, until_known) = watch::channel(None);
    let mut feeds = Vec::new();
    let mut streams = Vec::new();
    for s in 0..args.streams {
        let (feed, granted) = mpsc::channel(sessions.div_ceil(args.streams));
        feeds.push(feed);
        let channel = keepalive[s % keepalive.len()].clone();
        streams.push(tokio::spawn(keep(channel, granted, every, until_known.clone())));
    }
    let rss_before = leader_pid.and_then(rss_mib);
    eprintln!(
        "{system}: granting {} sessions of {} s, each renewed every {every:?} from its grant on ...",
        sessions, args.ttl
    );
    let granted = Instant::now();
    let ids = grant_all(&channels, sessions, args.ttl as i64, feeds)
        .await
        .with_context(|| format!("{system}: granting the sessions"))?;
    let grants_per_second = ids.len() as f64 / granted.elapsed().as_secs_f64();
    // Every grant is applied on the leader once it answered (the grants
    // went through every node: wait for the followers' answers to settle).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = leader_pid.and_then(rss_mib);
    let leader_bytes_per_session = match (rss_before, rss_after) {
        (Some(b), Some(a)) => Some((a - b) * 1024.0 * 1024.0 / ids.len() as f64),
        _ => None,
    };

    // Hold, with a writer.
    let writing = Arc::new(AtomicBool::new(true));
    let writes: Arc<Mutex<Vec<(Instant, f64)>>> = Arc::default();
    let writer = tokio::spawn(writer(channels[0].clone(), writing.clone(), writes.clone()));
    eprintln!("{system}: holding them for {} s over {} streams ...", args.hold, args.streams);
    let hold_started = Instant::now();
    let _ = until.send(Some(hold_started + Duration::from_secs(args.hold)));
    let mut held = Held::new(granted);
    for s in streams {
        match s.await {
            Ok(k) => held.add(k),
            Err(_) => held.errors += 1,
        }
    }
    let renewing_for = granted.elapsed().as_secs_f64();
    let abandoned = Instant::now();
    // Each lease's deadline: its last renewal + TTL; the first and last.
    let ttl = Duration::from_secs(args.ttl);
    let first_deadline = held.first_last.0 + ttl;
    let last_deadline = held.first_last.1 + ttl;
    eprintln!("{system}: abandoned; counting them until none is left ...");
    let mut lease =
        LeaseClient::new(channels[0].clone()).max_decoding_message_size(MAX_ANSWER_BYTES);
    let count_every = if ids.len() > MANY { COUNT_EVERY_MANY } else { COUNT_EVERY };
    let mut gone_at = None;
    let mut left_at_end = ids.len();
    while Instant::now() < last_deadline + EXPIRY_PATIENCE {
        let left = tokio::time::timeout(CALL_TIMEOUT, lease.lease_leases(LeaseLeasesRequest {}))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|r| r.into_inner().leases.len());
        if let Some(left) = left {
            left_at_end = left;
        }
        if left == Some(0) {
            gone_at = Some(Instant::now());
            break;
        }
        tokio::time::sleep(count_every).await;
    }
    writing.store(false, Ordering::Relaxed);
    let _ = tokio::time::timeout(CALL_TIMEOUT, writer).await;
    let writes = writes.lock().expect("the writer's samples").clone();
    let p99_between = |from: Instant, to: Instant| {
        let l: Vec<f64> =
            writes.iter().filter(|(at, _)| *at >= from && *at < to).map(|w| w.1).collect();
        summarize(&l).map(|s| s.p99)
    };
    let end = gone_at.unwrap_or_else(Instant::now);
    Ok(SystemReport {
        system,
        sessions: ids.len(),
        grants_per_second,
        leader_bytes_per_session,
        renewals: held.latencies.len(),
        renewals_per_second: held.latencies.len() as f64 / renewing_for,
        renewal_ms: held.summary(),
        renewal_errors: held.errors,
        false_expiries: held.false_expiries,
        last_expiry_after_deadline_ms: gone_at
            .map(|g| g.saturating_duration_since(last_deadline).as_secs_f64() * 1e3),
        expiries_per_second: Some(
            (ids.len() - left_at_end) as f64
                / end.saturating_duration_since(first_deadline).as_secs_f64().max(1e-3),
        ),
        left_at_end,
        write_p99_held_ms: p99_between(hold_started, abandoned),
        write_p99_expiring_ms: p99_between(first_deadline, end),
    })
}

/// Grants `n` leases of `ttl` seconds through every channel in turn,
/// [`GRANTERS`] at a time, handing each to a keepalive stream's `feeds`
/// in turn as it is granted; their ids.
async fn grant_all(
    channels: &[Channel],
    n: usize,
    ttl: i64,
    feeds: Vec<mpsc::Sender<(Instant, i64)>>,
) -> anyhow::Result<Vec<i64>> {
    let next = Arc::new(AtomicU64::new(0));
    let feeds = Arc::new(feeds);
    let mut granters = Vec::new();
    for g in 0..GRANTERS.min(n) {
        let channel = channels[g % channels.len()].clone();
        let (next, feeds) = (next.clone(), feeds.clone());
        granters.push(tokio::spawn(async move {
            let mut lease = LeaseClient::new(channel);
            let mut ids = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                if k >= n {
                    break;
                }
                let grant = lease.lease_grant(LeaseGrantRequest { ttl, id: 0 });
                let answer = tokio::time::timeout(CALL_TIMEOUT, grant)
                    .await
                    .context("a grant took too long")?
                    .context("a grant was refused")?;
                let id = answer.into_inner().id;
                // Each feed holds all its stream's leases: never full.
                let _ = feeds[k % feeds.len()].send((Instant::now(), id)).await;
                ids.push(id);
            }
            anyhow::Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for g in granters {
        ids.extend(g.await.context("a granter panicked")??);
    }
    Ok(ids)
}

/// What holding the sessions gave.
struct Held {
    /// Renewal latencies, in microseconds (bounded memory: a million
    /// sessions held ten minutes renew 90 million times).
    latencies: Histogram<u64>,
    errors: u64,
    false_expiries: u64,
    /// The earliest and the latest of the leases' last renewals (sent).
    first_last: (Instant, Instant),
}

impl Held {
    /// Nothing held yet; `start` stands for "no renewal" in `first_last`.
    fn new(start: Instant) -> Held {
        Held {
            latencies: Histogram::new_with_bounds(1, HISTOGRAM_MAX_US, 3)
                .expect("the histogram's bounds are valid"),
            errors: 0,
            false_expiries: 0,
            first_last: (Instant::now() + Duration::from_secs(86_400), start),
        }
    }

    /// One renewal's answer, sent at `sent`, with TTL `ttl`.
    fn answered(&mut self, sent: Instant, ttl: i64) {
        let us = sent.elapsed().as_micros().clamp(1, u128::from(HISTOGRAM_MAX_US)) as u64;
        self.latencies.saturating_record(us);
        if ttl <= 0 {
            self.false_expiries += 1;
        }
    }

    /// Adds another stream's.
    fn add(&mut self, k: Held) {
        let _ = self.latencies.add(&k.latencies);
        self.errors += k.errors;
        self.false_expiries += k.false_expiries;
        self.first_last.0 = self.first_last.0.min(k.first_last.0);
        self.first_last.1 = self.first_last.1.max(k.first_last.1);
    }

    /// The renewals' latencies in milliseconds.
    fn summary(&self) -> Option<Summary> {
        let h = &self.latencies;
        let ms = |us: u64| us as f64 / 1e3;
        (!h.is_empty()).then(|| Summary {
            count: h.len() as usize,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            min: ms(h.min()),
            mean: h.mean() / 1e3,
        })
    }
}

/// One stream, up to [`PIPELINE`] renewals in flight (clientv3 sends each
/// lease's renewal without waiting for the last answer): each lease
/// `granted` to it is renewed every `every` from its grant on, until the
/// hold's end (`until`, known once the grants are done); then a last round
/// of every lease back to back, one at a time, so that every deadline falls
/// within the time it takes: the leases are abandoned together.
async fn keep(
    channel: Channel,
    mut granted: mpsc::Receiver<(Instant, i64)>,
    every: Duration,
    mut until: watch::Receiver<Option<Instant>>,
) -> Held {
    let mut held = Held::new(Instant::now());
    // The first lease opens the stream (etcd answers the headers with the
    // first answer).
    let Some((_, first)) = granted.recv().await else { return held };
    let (tx, rx) = mpsc::channel(PIPELINE);
    let mut client = LeaseClient::new(channel);
    let sent = Instant::now();
    if tx.send(LeaseKeepAliveRequest { id: first }).await.is_err() {
        held.errors += 1;
        return held;
    }
    let call = client.lease_keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx));
    let Ok(Ok(stream)) = tokio::time::timeout(CALL_TIMEOUT, call).await else {
        held.errors += 1;
        return held;
    };
    let mut stream = stream.into_inner();
    // When the renewals under way were sent: answers come in order.
    let mut sent_at = VecDeque::from([sent]);
    // (due, lease), in due order: every lease is pushed back
    // `every` after its renewal, and grants come in time order.
    let mut queue = VecDeque::from([(sent + every, first)]);
    let mut feeding = true;
    loop {
        let end = *until.borrow_and_update();
        let next = queue.front().map(|&(due, _)| due);
        if let (Some(end), Some(next)) = (end, next) {
            if next >= end {
                break;
            }
        }
        let due = next.unwrap_or_else(|| Instant::now() + CALL_TIMEOUT);
        let room = sent_at.len() < PIPELINE;
        tokio::select! {
            biased;
            answer = tokio::time::timeout(CALL_TIMEOUT, stream.message()), if !sent_at.is_empty() => {
                let sent = sent_at.pop_front().expect("a renewal is under way");
                if !answered(answer, sent, &mut held) {
                    break;
                }
            }
            g = granted.recv(), if feeding => match g {
                Some((at, id)) => queue.push_back((at + every, id)),
                None => feeding = false,
            },
            changed = until.changed(), if end.is_none() => {
                if changed.is_err() {
                    break;
                }
            }
            () = tokio::time::sleep_until(due.into()), if next.is_some() && room => {
                let (_, id) = queue.pop_front().expect("a lease is due");
                let sent = Instant::now();
                if tx.send(LeaseKeepAliveRequest { id }).await.is_err() {
                    held.errors += 1;
                    break;
                }
                sent_at.push_back(sent);
                queue.push_back((sent + every, id));
            }
        }
    }
    // The renewals under way answered, a last round one at a time: a
    // lease's deadline counts from when its renewal was sent, which is
    // never after the leader renewed it (an expiry never looks early).
    while let Some(sent) = sent_at.pop_front() {
        if held.errors > 0 {
            break;
        }
        let answer = tokio::time::timeout(CALL_TIMEOUT, stream.message()).await;
        if !answered(answer, sent, &mut held) {
            break;
        }
    }
    let mut last = Vec::with_capacity(queue.len());
    for &(_, id) in &queue {
        if held.errors > 0 {
            break;
        }
        let sent = Instant::now();
        if tx.send(LeaseKeepAliveRequest { id }).await.is_err() {
            held.errors += 1;
            break;
        }
        let answer = tokio::time::timeout(CALL_TIMEOUT, stream.message()).await;
        if answered(answer, sent, &mut held) {
            last.push(sent);
        }
    }
    held.first_last = (
        last.iter().copied().min().unwrap_or(held.first_last.0),
        last.iter().copied().max().unwrap_or(held.first_last.1),
    );
    held
}

/// Counts the answer to the renewal sent at `sent` (an error if there is
/// none: the stream broke or the answer took [`CALL_TIMEOUT`]; false
/// then).
fn answered(
    answer: Result<Result<Option<LeaseKeepAliveResponse>, Status>, Elapsed>,
    sent: Instant,
    held: &mut Held,
) -> bool {
    match answer {
        Ok(Ok(Some(a))) => {
            held.answered(sent, a.ttl);
            true
        }
        _ => {
            held.errors += 1;
            false
        }
    }
}

/// Puts back to back until `writing` is false, recording each answered
/// put's time and latency (ms).
async fn writer(
    channel: Channel,
    writing: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(Instant, f64)>>>,
) {
    let mut kv = KvClient::new(channel);
    let mut n = 0u64;
    while writing.load(Ordering::Relaxed) {
        let put = PutRequest {
            key: format!("bench-sessions-{}", n % 1000).into_bytes(),
            value: vec![b'v'; 128],
            ..Default::default()
        };
        n += 1;
        let sent = Instant::now();
        if let Ok(Ok(_)) = tokio::time::timeout(CALL_TIMEOUT, kv.put(put)).await {
            let l = sent.elapsed().as_secs_f64() * 1e3;
            samples.lock().expect("the writer's samples").push((sent, l));
        }
    }
}

fn print_report(r: &SessionsReport) {
    println!(
        "{} nodes, TLS {} (tenure; etcd plain), sessions of {} s held {} s, renewed every TTL/{} \
         over {} streams spread over every node, one writer",
        r.nodes, r.tls, r.ttl_s, r.hold_s, r.renewals_per_ttl, r.streams
    );
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for s in &r.systems {
        let (p50, p99) = s.renewal_ms.as_ref().map_or((None, None), |l| (Some(l.p50), Some(l.p99)));
        println!(
            "{}: {} sessions, {:.0} grants/s, leader {} bytes/session; {} renewals ({:.0}/s, p50 \
             {} ms, p99 {} ms, {} errors), {} false expiries; last expiry {} ms after the last \
             deadline ({} left when it gave up), {} expiries/s; writes p99 {} ms held, {} ms \
             expiring",
            s.system,
            s.sessions,
            s.grants_per_second,
            f(s.leader_bytes_per_session),
            s.renewals,
            s.renewals_per_second,
            f(p50),
            f(p99),
            s.renewal_errors,
            s.false_expiries,
            f(s.last_expiry_after_deadline_ms),
            s.left_at_end,
            f(s.expiries_per_second),
            f(s.write_p99_held_ms),
            f(s.write_p99_expiring_ms),
        );
    }
    for t in r.systems.iter().filter(|s| s.system == "tenure") {
        let zero = t.false_expiries == 0 && t.renewal_errors == 0;
        println!(
            "goal: 0 false expiries while {} sessions are held — measured {} — {}",
            t.sessions,
            t.false_expiries,
            if zero { "MET" } else { "NOT MET" }
        );
        if let Some(e) = t.expiries_per_second {
            let met = e >= 10_000.0;
            println!(
                "goal: expirations >= 10,000/s while writes run — measured {e:.0}/s with {} \
                 sessions — {}",
                t.sessions,
                if met { "MET" } else { "NOT MET" }
            );
        }
        if let (Some(h), Some(x)) = (t.write_p99_held_ms, t.write_p99_expiring_ms) {
            let met = x <= 2.0 * h;
            println!(
                "goal: write p99 while sessions expire <= 2x its value before — measured {x:.2} \
                 ms against {h:.2} ms — {}",
                if met { "MET" } else { "NOT MET" }
            );
        }
    }
}

/// Draws the renewals' p99 (ms, log scale) against the sessions held, one
/// line per system; a count with false expiries or failed renewals is
/// marked with a cross, the others with a dot.
fn write_plot(path: &Path, r: &SessionsReport) -> anyhow::Result<()> {
    let series = plot::series_by_name(r.systems.iter().filter_map(|s| {
        let l = s.renewal_ms.as_ref()?;
        Some((s.system, (s.sessions as f64, l.p99, s.false_expiries > 0 || s.renewal_errors > 0)))
    }));
    let title = format!(
        "{} nodes: sessions of {} s renewed every TTL/{}, renewal p99",
        r.nodes, r.ttl_s, r.renewals_per_ttl
    );
    let axes = plot::XyAxes {
        x: "sessions held",
        y: "renewal p99 (ms)",
        log_y: true,
        failed: "false expiries or failed renewals",
    };
    plot::write_xy(path, &title, axes, &series).context("writing the plot")
}
