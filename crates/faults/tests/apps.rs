//! Application elections on real processes in network namespaces (issues
//! 12 and 13): `tenure run` leaders made to go in every way (command exit,
//! SIGTERM, SIGKILL of `tenure run`, of its guard alone, of their process
//! group or of both pids, SIGSTOP past the TTL, cut off from the store) hand
//! over to the next without two of them ever writing to a fenced resource
//! at once, the election held by tenure's own cluster, a 3-member etcd
//! cluster or a 3-server ZooKeeper ensemble; a SIGKILL of a store member
//! (tenure: its leader, which must change no application leadership) in
//! between. Root, `ip netns`, `nft` and bash needed (the test skips
//! visibly otherwise, fails with `TENURE_FAULTS_REQUIRE=1`); etcd and
//! ZooKeeper (Debian `etcd-server`, `zookeeper`) for theirs (a missing one
//! fails the test).

use tenure_faults::app_backend::{unsupported, Held};
use tenure_faults::app_elections;
use tenure_faults::scenarios::run_test as run;
use tenure_faults::stores::StoreKind;

/// `TENURE_FAULT_HANDOVERS`, else `default`.
fn handovers(default: usize) -> usize {
    match std::env::var("TENURE_FAULT_HANDOVERS") {
        Ok(n) => n.parse().unwrap_or_else(|_| panic!("TENURE_FAULT_HANDOVERS={n:?}: a number")),
        Err(_) => default,
    }
}

/// `TENURE_FAULT_HANDOVERS` sets the number of handovers (default 100).
#[test]
fn fenced_resource_sees_no_overlap_over_many_handovers() {
    let handovers = handovers(100);
    run("app-fenced-handovers", || app_elections::fenced_handovers(handovers));
}

/// The election held by an external store (default 30 handovers). A
/// `tenure` binary built without that store skips visibly (fails with
/// `TENURE_FAULTS_REQUIRE=1`).
fn on_store(kind: StoreKind, name: &str) {
    if let Some(skip) = unsupported(kind) {
        skip.report(name);
        return;
    }
    let handovers = handovers(30);
    run(name, || app_elections::fenced_handovers_on(Held::External(kind), handovers));
}

#[test]
fn fenced_resource_sees_no_overlap_with_the_election_in_etcd() {
    on_store(StoreKind::Etcd, "app-fenced-handovers-etcd");
}

#[test]
fn fenced_resource_sees_no_overlap_with_the_election_in_zookeeper() {
    on_store(StoreKind::ZooKeeper, "app-fenced-handovers-zk");
}
