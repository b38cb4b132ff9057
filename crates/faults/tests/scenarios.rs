//! The fault scenarios as tests: real `tenure server` processes in network
//! namespaces. They need root, `ip netns` and `nft`, and skip visibly
//! otherwise (`TENURE_FAULTS_REQUIRE=1` makes a skip fail). They share the
//! machine, so they run one at a time (a lock, whatever `--test-threads`).

use std::future::Future;
use std::sync::Mutex;
use tenure_faults::scenarios::{self, Outcome};
use tenure_faults::{random, skip};

static SERIAL: Mutex<()> = Mutex::new(());

fn run<F: Future<Output = Result<Outcome, String>>>(name: &str, scenario: impl FnOnce() -> F) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = skip::require_netns() {
        s.report(name);
        return;
    }
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    match rt.block_on(scenario()) {
        Ok(outcome) => {
            for l in &outcome.lines {
                eprintln!("{name}: {l}");
            }
        }
        Err(msg) => panic!("{name} FAILED: {msg}"),
    }
}

#[test]
fn non_sticky_leader() {
    run("non-sticky-leader", scenarios::non_sticky_leader);
}

#[test]
fn leader_ping_pong() {
    run("leader-ping-pong", scenarios::leader_ping_pong);
}

#[test]
fn one_link_failure() {
    run("one-link-failure", scenarios::one_link_failure);
}

#[test]
fn leader_crash() {
    run("leader-crash", scenarios::leader_crash);
}

/// RUNTIME-ISSUE (pinned; failed 1 of 11 runs, and round 72 of `tenure-faults
/// random --minutes 2 --seed 42`): a request that reaches
/// the stopped leader is answered on SIGCONT before the driver steps down:
/// `/v1/status` says role `leader`, fencing token 1, after node 2 was
/// already seen leading term 2 (`/v1/is-leader` correctly says 503). The
/// status handler reports the core's role without checking the lease.
/// Run with `--include-ignored`.
#[test]
#[ignore = "RUNTIME-ISSUE: /v1/status reports role leader past the lease after SIGCONT (flaky, ~1 in 10)"]
fn leader_pause() {
    run("leader-pause", scenarios::leader_pause);
}

/// RUNTIME-ISSUE (pinned, flaky): after the heal the majority leader's TCP
/// connections to the two minority nodes are in retransmission backoff
/// (`ss` just before the heal: `rto:1632 backoff:3`, ~1.1 KB unsent), so the
/// minority hears the leader only at the next retransmission, not at the
/// heal. Measured: with 30/300 ms timings 1.57–1.72 s after the heal in 5 of
/// 5 runs (bound 1.1 s); with 50/500 ms 1.87 s in 1 of 3 (bound 1.5 s),
/// 0.83–0.89 s in the others. The transport never abandons a silent
/// connection. Run with `--include-ignored`.
#[test]
#[ignore = "RUNTIME-ISSUE: stalled TCP peer connections delay healing past 2 x election timeout + 500 ms"]
fn minority_partition_with_leader() {
    run("minority-partition-with-leader", || scenarios::minority_partition(true));
}

#[test]
fn minority_partition_without_leader() {
    run("minority-partition-without-leader", || scenarios::minority_partition(false));
}

/// RUNTIME-ISSUE (pinned, failed 2 of 2): the same TCP stall, scaled: a
/// follower isolated for 10 s rejoins only 4.2–4.9 s after the heal (bound
/// 1.1 s), because the peer connections' retransmission timeout has backed
/// off to seconds; heal time grows with the partition's length.
#[test]
#[ignore = "RUNTIME-ISSUE: after a 10 s isolation the follower rejoins 4-5 s after the heal (TCP retransmission backoff)"]
fn long_isolation() {
    run("long-isolation", scenarios::long_isolation);
}

/// Short by default (0.25 min); `TENURE_FAULT_MINUTES` sets the length.
#[test]
fn random_faults() {
    let duration = random::minutes_from_env(0.25);
    let seed = std::env::var("TENURE_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    run("random-faults", || async move {
        eprintln!("random-faults: seed {seed}, {duration:?}");
        let report = random::random_run(random::DEFAULT_NODES, duration, seed, |l| {
            eprintln!("random-faults: {l}")
        })
        .await?;
        Ok(Outcome { lines: vec![format!("seed {seed}: {}", report.summary())] })
    });
}
