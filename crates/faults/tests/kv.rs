//! The replicated key-value store on real `tenure server` processes in
//! network namespaces: linearizable under partitions, SIGKILLs
//! and pauses; no acknowledged write lost when every node is killed at
//! once; a wiped node catches up. Root, `ip netns` and `nft` needed, as for
//! the other fault scenarios (they skip visibly otherwise); one at a time.
//! `TENURE_FAULT_PROTOCOL` picks the election protocol.

use tenure_faults::kv_scenarios;
use tenure_faults::scenarios::run_test as run;

/// `TENURE_FAULT_KV_SECONDS` sets the length (default 20 s),
/// `TENURE_FAULT_SEED` the seed of the clients and the fault schedule.
#[test]
fn kv_linearizable_under_faults() {
    let duration = kv_scenarios::seconds_from_env();
    let seed = std::env::var("TENURE_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    run("kv-linearizable", || kv_scenarios::linearizable(duration, seed));
}

#[test]
fn kv_kill_every_node_loses_no_acknowledged_write() {
    run("kv-kill-all", kv_scenarios::kill_all);
}

#[test]
fn kv_wiped_follower_catches_up() {
    run("kv-wiped-follower", || kv_scenarios::wiped_follower(kv_scenarios::WIPE_ENTRIES));
}

/// More writes than the snapshot interval first: the new node installs the
/// leader's snapshot.
#[test]
fn kv_wiped_follower_catches_up_by_snapshot() {
    run("kv-wiped-follower-snapshot", || kv_scenarios::wiped_follower(kv_scenarios::WIPE_SNAPSHOT));
}

/// The negative control: stale reads must fail the same check.
#[test]
fn kv_stale_reads_are_caught() {
    run("kv-stale-reads-caught", kv_scenarios::stale_reads_are_caught);
}

/// The leader's log writes fail (its file size limit lowered): it gives
/// its leadership up, another node leads, writes go on and none is lost;
/// lifted, it catches up.
#[test]
fn kv_leader_whose_log_writes_fail_gives_up_its_leadership() {
    run("kv-leader-write-fails", kv_scenarios::leader_write_fails);
}
