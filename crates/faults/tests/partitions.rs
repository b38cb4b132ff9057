//! Groups of partitions on real processes in network namespaces: four
//! `tenure run --group` members share eight partitions, each copy writing
//! to a fenced resource; a member is SIGKILLed, SIGSTOPped past its TTL,
//! SIGTERMed and cut off from the cluster past its TTL, and the tenure
//! leader is SIGKILLed with a member, in turn; no two copies of a partition
//! overlap, epochs never go back, and every fault moved partitions
//! (`tenure_faults::partitions`). Root, `ip netns`, `nft` and bash needed
//! (the test skips visibly otherwise, fails with `TENURE_FAULTS_REQUIRE=1`).

use tenure_faults::partitions;
use tenure_faults::scenarios::run_test as run;

/// `TENURE_FAULT_PARTITION_ROUNDS`, else 2: each round applies every fault
/// once (to the members in turn).
fn rounds() -> usize {
    match std::env::var("TENURE_FAULT_PARTITION_ROUNDS") {
        Ok(n) => {
            n.parse().unwrap_or_else(|_| panic!("TENURE_FAULT_PARTITION_ROUNDS={n:?}: a number"))
        }
        Err(_) => 2,
    }
}

#[test]
fn partition_copies_never_overlap_through_member_and_leader_faults() {
    run("partitions-fenced", || partitions::fenced_partitions(rounds()));
}

/// The negative control: copies whose writer leaves its process group
/// (`setsid`, which no guard stops) keep writing after their partition
/// moved, and the resource must say so.
#[test]
fn copies_that_escape_their_guards_are_caught() {
    run("partitions-escaping-copies", partitions::escaping_copies_are_caught);
}
