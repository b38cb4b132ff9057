//! What the leader measures of a group of partitions (docs/PARTITIONS.md,
//! "Observing a group"), through the HTTP API and `/metrics` of a real
//! three-node cluster in this process: a member that excludes a partition
//! leaves it without an owner (its spell grows, the gauge says 1); a
//! second member joins, the keeper moves one partition from the first and
//! grants the excluded one: one move (the first grant of a partition is
//! none), the spell ends, the leader's counters and histogram count it and
//! the followers' gauges are absent. Every read of the group goes through
//! a follower, which passes it on to the leader; `local=true` does not.

use crate::servers::{
    agreement, call_as, eventually, start_cluster, Server, READ_TOKEN, WRITE_TOKEN,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tenure_server::http::HttpLimits;

/// Bound on the keeper settling a group (grants, a release asked and
/// served, a grant again), on a loaded two-core machine.
const SETTLE_BOUND: Duration = Duration::from_secs(15);
/// How long the excluded partition is watched without an owner.
const WATCHED: Duration = Duration::from_millis(300);

async fn post(addr: SocketAddr, path: &str, body: Value) -> Value {
    let a = call_as(addr, WRITE_TOKEN, "POST", path, &body.to_string()).await;
    assert_eq!(a.status, 200, "POST {path} {body}: {}", a.body);
    serde_json::from_str(&a.body).unwrap()
}

async fn get_json(addr: SocketAddr, path: &str) -> Value {
    let a = call_as(addr, READ_TOKEN, "GET", path, "").await;
    assert_eq!(a.status, 200, "GET {path}: {}", a.body);
    serde_json::from_str(&a.body).unwrap()
}

/// `/metrics` of `addr`: each sample line's name (with labels) and value.
async fn metrics(addr: SocketAddr) -> BTreeMap<String, f64> {
    let a = call_as(addr, READ_TOKEN, "GET", "/metrics", "").await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body
        .lines()
        .filter(|l| l.starts_with("tenure_partitions_"))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(name, v)| (name.to_string(), v.parse().unwrap()))
        .collect()
}

/// Plays member `session`: releases what it is asked to give up; returns
/// what it owns (partition: release asked).
async fn serve_releases(addr: SocketAddr, session: u64) -> BTreeMap<u64, bool> {
    let a = get_json(addr, &format!("/v1/groups/g/assignment?session={session}")).await;
    let mut owned = BTreeMap::new();
    for o in a["owned"].as_array().unwrap() {
        let (p, epoch, release) =
            (o["partition"].as_u64().unwrap(), o["epoch"].as_u64().unwrap(), o["release"] == true);
        if release {
            let body = json!({"session": session, "partition": p, "epoch": epoch});
            let a =
                call_as(addr, WRITE_TOKEN, "POST", "/v1/groups/g/release", &body.to_string()).await;
            assert!([200, 409].contains(&a.status), "{}", a.body);
        }
        owned.insert(p, release);
    }
    owned
}

/// The figures of partition `p` in a group answer.
fn partition(g: &Value, p: u64) -> Value {
    g["stats"]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["partition"] == p)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn session(addr: SocketAddr) -> u64 {
    post(addr, "/v1/sessions", json!({"ttl_ms": 600000})).await["id"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_and_a_spell_without_an_owner_show_in_the_api_and_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let heartbeat = Duration::from_millis(50);
    let mut servers: Vec<Server> =
        start_cluster(3, heartbeat, heartbeat * 10, HttpLimits::default(), dir.path());
    let l = agreement(&servers).await;
    let leader_id = servers[l].id;
    let (leader, f1, f2) = (servers[l].http, servers[(l + 1) % 3].http, servers[(l + 2) % 3].http);
    let (a, b) = (session(f1).await, session(f2).await);

    // A owns 0 to 2; it excludes 3, which nobody can own yet.
    post(
        f1,
        "/v1/groups/g/join",
        json!({"session": a, "partitions": 4, "stabilise_ms": 0, "excluded": [3]}),
    )
    .await;
    let g = eventually("A owns 0 to 2", SETTLE_BOUND, || async {
        let g = get_json(f2, "/v1/groups/g").await;
        (g["owners"].as_array().unwrap().len() == 3).then_some(g)
    })
    .await;
    let s = &g["stats"];
    assert_eq!(s["node"].as_u64(), Some(leader_id), "the follower answers with the leader's: {g}");
    assert_eq!((s["moves"].as_u64(), s["unowned"].as_u64()), (Some(0), Some(1)), "{g}");
    assert_eq!(s["imbalance"].as_f64(), Some(0.0), "one ready member: {g}");
    for p in 0..3 {
        // The group was created under this leader: each first grant ended a
        // spell, and none is a move.
        assert_eq!(partition(&g, p)["spells"].as_u64(), Some(1), "{g}");
    }
    let first = partition(&g, 3)["unowned_ms"].as_u64().expect("3 has no owner");
    tokio::time::sleep(WATCHED).await;
    let g = get_json(f1, "/v1/groups/g").await;
    let later = partition(&g, 3)["unowned_ms"].as_u64().expect("3 still has no owner");
    assert!(later >= first + WATCHED.as_millis() as u64, "the spell grows: {first} then {later}");
    let m = metrics(leader).await;
    assert_eq!(m.get("tenure_partitions_unowned{group=\"g\"}"), Some(&1.0), "{m:?}");
    assert_eq!(m.get("tenure_partitions_imbalance{group=\"g\"}"), Some(&0.0), "{m:?}");
    assert_eq!(m.get("tenure_partitions_unowned_seconds_count"), Some(&3.0), "{m:?}");
    assert_eq!(m.get("tenure_partitions_moves_total"), Some(&0.0), "{m:?}");

    // Asked without the leader: the follower's store, no figures, and why.
    let local = get_json(f1, "/v1/groups/g?local=true").await;
    assert!(local.get("stats").is_none(), "{local}");
    assert!(local["stats_error"].as_str().unwrap().contains("local=true"), "{local}");
    assert_eq!(local["owners"].as_array().unwrap().len(), 3, "{local}");
    // The query the follower passes on is its own (local=false is no
    // duplicate field for the leader), with the reader's consistency.
    let passed = get_json(f1, "/v1/groups/g?local=false&consistency=stale").await;
    assert!(passed["stats"].is_object(), "the leader's figures: {passed}");

    // B joins: it takes 3 (no previous owner: no move) and one of A's (a move).
    post(f2, "/v1/groups/g/join", json!({"session": b})).await;
    let (mine, theirs) = eventually("A and B own 2 each", SETTLE_BOUND, || async {
        let mine = serve_releases(f1, a).await;
        let theirs = serve_releases(f2, b).await;
        let settled = mine.len() == 2
            && theirs.len() == 2
            && !mine.values().chain(theirs.values()).any(|r| *r);
        if !settled {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        settled.then_some((mine, theirs))
    })
    .await;
    assert!(theirs.contains_key(&3), "B owns the partition A excludes: {theirs:?}");
    let moved = *theirs.keys().find(|&&p| p != 3).unwrap();
    assert!(!mine.contains_key(&moved));
    let g = get_json(f2, "/v1/groups/g").await;
    let s = &g["stats"];
    assert_eq!(s["node"].as_u64(), Some(leader_id), "no change of leader during the test: {g}");
    assert_eq!((s["moves"].as_u64(), s["unowned"].as_u64()), (Some(1), Some(0)), "{g}");
    assert_eq!(s["imbalance"].as_f64(), Some(0.0), "{g}");
    let p3 = partition(&g, 3);
    assert!(p3.get("unowned_ms").is_none(), "3 has an owner now: {p3}");
    assert_eq!(p3["spells"].as_u64(), Some(1), "{p3}");
    let spell = p3["last_unowned_ms"].as_u64().unwrap();
    assert!(spell >= later, "3's spell lasted from the group's start to B's grant: {spell} ms");
    assert_eq!(p3["total_unowned_ms"].as_u64(), Some(spell));
    let pm = partition(&g, moved);
    assert_eq!(pm["spells"].as_u64(), Some(2), "the first grant, then the move: {pm}");
    let m = metrics(leader).await;
    assert_eq!(m.get("tenure_partitions_moves_total"), Some(&1.0), "{m:?}");
    assert_eq!(m.get("tenure_partitions_unowned_seconds_count"), Some(&5.0), "{m:?}");
    assert_eq!(m.get("tenure_partitions_unowned{group=\"g\"}"), Some(&0.0), "{m:?}");
    let over_a_bit = m.get("tenure_partitions_unowned_seconds_bucket{le=\"0.25\"}").copied();
    assert_eq!(over_a_bit, Some(4.0), "3's spell is over 300 ms, the others short: {m:?}");
    for f in [f1, f2] {
        let m = metrics(f).await;
        assert_eq!(m.get("tenure_partitions_moves_total"), Some(&0.0), "a follower: {m:?}");
        assert!(
            !m.keys().any(|k| k.starts_with("tenure_partitions_unowned{")
                || k.starts_with("tenure_partitions_imbalance")),
            "no gauges on a follower: {m:?}"
        );
    }
    for s in &mut servers {
        s.stop(Duration::from_secs(5)).await.unwrap();
    }
}
