//! Application elections on real processes in network namespaces (issue
//! 12): `tenure run` leaders made to go in every way (command exit,
//! SIGTERM, SIGKILL, SIGSTOP past the TTL, cut off from tenure) hand over
//! to the next without two of them ever writing to a fenced resource at
//! once, and a SIGKILL of the tenure leader changes no application
//! leadership. Root, `ip netns`, `nft` and bash needed (the test skips
//! visibly otherwise, fails with `TENURE_FAULTS_REQUIRE=1`).

use tenure_faults::app_elections;
use tenure_faults::scenarios::run_test as run;

/// `TENURE_FAULT_HANDOVERS` sets the number of handovers (default 100).
#[test]
fn fenced_resource_sees_no_overlap_over_many_handovers() {
    let handovers = match std::env::var("TENURE_FAULT_HANDOVERS") {
        Ok(n) => n.parse().unwrap_or_else(|_| panic!("TENURE_FAULT_HANDOVERS={n:?}: a number")),
        Err(_) => 100,
    };
    run("app-fenced-handovers", || app_elections::fenced_handovers(handovers));
}
