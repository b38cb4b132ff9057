//! `tenure bench sessions`: many sessions (leases) on a cluster, through
//! etcd's v3 gRPC API so that etcd runs the same client in the same run:
//!
//! 1. **grant** `--sessions` leases of `--ttl` through every node in turn,
//!    64 at a time; the leader's resident memory before and after gives the
//!    bytes per session;
//! 2. **hold** them for `--hold` seconds, each renewed every TTL/3 over
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
use super::stats::{summarize, Summary};
use super::system::System;
use anyhow::Context;
use clap::Args;
use serde::Serialize;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, PutRequest,
};
use tonic::transport::Channel;

/// The longest one call may take before it counts as an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Grants in flight at once.
const GRANTERS: usize = 64;
/// Most sessions and streams.
const MAX_SESSIONS: usize = 1_000_000;
const MAX_STREAMS: usize = 4096;
/// Keepalive streams per connection: half of what tenure's etcd API lets
/// one connection open (`MAX_KEEPALIVE_STREAMS_PER_CONNECTION`, 16).
const STREAMS_PER_CONNECTION: usize = 8;
/// How often the leases are counted while they expire.
const COUNT_EVERY: Duration = Duration::from_millis(50);
/// How long after the last deadline the benchmark waits for the last
/// expiry before it gives up (etcd revokes about 1,000 a second: 100,000
/// take it 100 s).
const EXPIRY_PATIENCE: Duration = Duration::from_secs(150);

/// Flags of `tenure bench sessions`.
#[derive(Args, Debug)]
#[command(
    after_help = "Example: tenure bench sessions --compare etcd --sessions 10000 --ttl 20 --hold 30"
)]
pub struct SessionsArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Sessions granted and held (tenure holds at most 100,000 at once:
    /// MAX_LEASES).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    sessions: usize,
    /// Their TTL, in seconds (etcd grants whole seconds).
    #[arg(long, default_value_t = 20, value_name = "S")]
    ttl: u64,
    /// How long they are held, renewed every TTL/3.
    #[arg(long, default_value_t = 30, value_name = "S")]
    hold: u64,
    /// Keepalive streams carrying the renewals, spread over every node.
    #[arg(long, default_value_t = 64, value_name = "N")]
    streams: usize,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
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
    streams: usize,
    systems: Vec<SystemReport>,
}

/// Runs `tenure bench sessions`.
pub async fn run(args: SessionsArgs) -> anyhow::Result<ExitCode> {
    args.cluster.check()?;
    anyhow::ensure!(
        (1..=MAX_SESSIONS).contains(&args.sessions),
        "--sessions must be 1..={MAX_SESSIONS}"
    );
    anyhow::ensure!(
        (1..=MAX_STREAMS).contains(&args.streams) && args.streams <= args.sessions,
        "--streams must be 1..={MAX_STREAMS} and at most --sessions"
    );
    anyhow::ensure!((2..=3_600).contains(&args.ttl), "--ttl must be 2..=3600 s");
    anyhow::ensure!((1..=3_600).contains(&args.hold), "--hold must be 1..=3600 s");
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
        systems.push(measure("tenure", &args, &target, &urls, pid).await?);
    }
    if with_etcd {
        let mut etcd = args.cluster.start_etcd(false).await?;
        let (leader, _) = wait_stable(&etcd, &nodes, timing).await?;
        let urls: Vec<String> = nodes.iter().map(|&i| etcd.client_url(i)).collect();
        let target = Target { url: urls[leader].clone(), follower_url: String::new(), tls: None };
        let pid = etcd.proc(leader).pid();
        systems.push(measure("etcd", &args, &target, &urls, pid).await?);
    }
    let report = SessionsReport {
        nodes: args.cluster.nodes,
        tls: !args.cluster.insecure_no_tls,
        ttl_s: args.ttl,
        hold_s: args.hold,
        streams: args.streams,
        systems,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The three phases against one system.
async fn measure(
    system: &'static str,
    args: &SessionsArgs,
    target: &Target,
    urls: &[String],
    leader_pid: Option<u32>,
) -> anyhow::Result<SystemReport> {
    let mut channels = Vec::new();
    for url in urls {
        channels.push(target.connect(url).await?);
    }
    let rss_before = leader_pid.and_then(rss_mib);
    eprintln!("{system}: granting {} sessions of {} s ...", args.sessions, args.ttl);
    let granted = Instant::now();
    let ids = grant_all(&channels, args.sessions, args.ttl as i64)
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
    let mut keepalive = Vec::new();
    for c in 0..args.streams.div_ceil(STREAMS_PER_CONNECTION) {
        keepalive.push(target.connect(&urls[c % urls.len()]).await?);
    }
    let held = hold(&keepalive, &ids, args).await;
    let abandoned = Instant::now();
    // Each lease's deadline: its last renewal + TTL; the first and last.
    let ttl = Duration::from_secs(args.ttl);
    let first_deadline = held.first_last.0 + ttl;
    let last_deadline = held.first_last.1 + ttl;
    eprintln!("{system}: abandoned; counting them until none is left ...");
    let mut lease = LeaseClient::new(channels[0].clone());
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
        tokio::time::sleep(COUNT_EVERY).await;
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
        renewals: held.latencies.len() as u64,
        renewals_per_second: held.latencies.len() as f64 / args.hold as f64,
        renewal_ms: summarize(&held.latencies),
        renewal_errors: held.errors,
        false_expiries: held.false_expiries,
        last_expiry_after_deadline_ms: gone_at
            .map(|g| g.saturating_duration_since(last_deadline).as_secs_f64() * 1e3),
        expiries_per_second: Some(
            (ids.len() - left_at_end) as f64
                / end.saturating_duration_since(first_deadline).as_secs_f64().max(1e-3),
        ),
        left_at_end,
        write_p99_held_ms: p99_between(abandoned - Duration::from_secs(args.hold), abandoned),
        write_p99_expiring_ms: p99_between(first_deadline, end),
    })
}

/// Grants `n` leases of `ttl` seconds through every channel in turn,
/// [`GRANTERS`] at a time; their ids.
async fn grant_all(channels: &[Channel], n: usize, ttl: i64) -> anyhow::Result<Vec<i64>> {
    let next = Arc::new(AtomicU64::new(0));
    let mut granters = Vec::new();
    for g in 0..GRANTERS.min(n) {
        let channel = channels[g % channels.len()].clone();
        let next = next.clone();
        granters.push(tokio::spawn(async move {
            let mut lease = LeaseClient::new(channel);
            let mut ids = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < n as u64 {
                let grant = lease.lease_grant(LeaseGrantRequest { ttl, id: 0 });
                let answer = tokio::time::timeout(CALL_TIMEOUT, grant)
                    .await
                    .context("a grant took too long")?
                    .context("a grant was refused")?;
                ids.push((Instant::now(), answer.into_inner().id));
            }
            anyhow::Ok(ids)
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for g in granters {
        ids.extend(g.await.context("a granter panicked")??);
    }
    // In grant order: each stream renews its leases in that order, so the
    // first granted are the first renewed.
    ids.sort_unstable();
    Ok(ids.into_iter().map(|(_, id)| id).collect())
}

/// What holding the sessions gave.
struct Held {
    latencies: Vec<f64>,
    errors: u64,
    false_expiries: u64,
    /// The earliest and the latest of the leases' last renewals.
    first_last: (Instant, Instant),
}

/// Renews every lease every TTL/3 for `args.hold` seconds over
/// `args.streams` keepalive streams (stream `s` on connection `s %
/// connections`, the connections spread over every node, with every
/// `streams`-th lease).
async fn hold(channels: &[Channel], ids: &[i64], args: &SessionsArgs) -> Held {
    let started = Instant::now();
    let until = started + Duration::from_secs(args.hold);
    let every = Duration::from_millis(args.ttl * 1000 / 3);
    let mut streams = Vec::new();
    for s in 0..args.streams {
        let channel = channels[s % channels.len()].clone();
        let mine: Vec<i64> = ids.iter().skip(s).step_by(args.streams).copied().collect();
        streams.push(tokio::spawn(keep(channel, mine, every, until)));
    }
    let mut held =
        Held { latencies: Vec::new(), errors: 0, false_expiries: 0, first_last: (until, started) };
    for s in streams {
        match s.await {
            Ok(k) => {
                held.latencies.extend(k.latencies);
                held.errors += k.errors;
                held.false_expiries += k.false_expiries;
                held.first_last.0 = held.first_last.0.min(k.first_last.0);
                held.first_last.1 = held.first_last.1.max(k.first_last.1);
            }
            Err(_) => held.errors += 1,
        }
    }
    held
}

/// One stream: renews each of `leases` every `every`, spread evenly, one
/// renewal in flight, until `until`.
async fn keep(channel: Channel, leases: Vec<i64>, every: Duration, until: Instant) -> Held {
    let start = Instant::now();
    let mut held =
        Held { latencies: Vec::new(), errors: 0, false_expiries: 0, first_last: (until, start) };
    let mut last = vec![start; leases.len()];
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let mut client = LeaseClient::new(channel);
    let Some(&first) = leases.first() else { return held };
    // The first request goes with the call (etcd answers the headers with
    // the first answer).
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
    let gap = every / leases.len() as u32;
    let mut n = 0usize;
    let mut pending = Some(Instant::now());
    loop {
        if let Some(sent) = pending.take() {
            match tokio::time::timeout(CALL_TIMEOUT, stream.message()).await {
                Ok(Ok(Some(answer))) => {
                    held.latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                    if answer.ttl <= 0 {
                        held.false_expiries += 1;
                    }
                    last[n % leases.len()] = sent;
                }
                _ => {
                    held.errors += 1;
                    break;
                }
            }
            n += 1;
        }
        // Lease n is renewed at start + its place in the round + rounds.
        let due = start + every * (n / leases.len()) as u32 + gap * (n % leases.len()) as u32;
        if due >= until {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        let sent = Instant::now();
        if tx.send(LeaseKeepAliveRequest { id: leases[n % leases.len()] }).await.is_err() {
            held.errors += 1;
            break;
        }
        pending = Some(sent);
    }
    // A last round back to back, so that every deadline falls within the
    // time it takes: the leases are abandoned together.
    if held.errors == 0 {
        for (i, &id) in leases.iter().enumerate() {
            let sent = Instant::now();
            if tx.send(LeaseKeepAliveRequest { id }).await.is_err() {
                held.errors += 1;
                break;
            }
            match tokio::time::timeout(CALL_TIMEOUT, stream.message()).await {
                Ok(Ok(Some(answer))) => {
                    held.latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                    if answer.ttl <= 0 {
                        held.false_expiries += 1;
                    }
                    last[i] = sent;
                }
                _ => {
                    held.errors += 1;
                    break;
                }
            }
        }
    }
    held.first_last =
        (last.iter().copied().min().unwrap_or(start), last.iter().copied().max().unwrap_or(start));
    held
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
        "{} nodes, TLS {} (tenure; etcd plain), sessions of {} s held {} s, renewed every TTL/3 \
         over {} streams spread over every node, one writer",
        r.nodes, r.tls, r.ttl_s, r.hold_s, r.streams
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
    if let Some(t) = r.systems.iter().find(|s| s.system == "tenure") {
        let zero = t.false_expiries == 0 && t.renewal_errors == 0;
        println!(
            "goal: 0 false expiries while held — measured {} — {}",
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
