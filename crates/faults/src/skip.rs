//! Whether this machine can run the namespace tests at all. When it cannot
//! (not root, no `ip netns`, no `nft`), the tests say so loudly and skip;
//! with `TENURE_FAULTS_REQUIRE=1` (for CI) a skip is a failure instead.

use crate::net::{run, NETNS_PREFIX};

/// Set to `1` to turn a skip into a test failure.
pub const REQUIRE_ENV: &str = "TENURE_FAULTS_REQUIRE";

/// Why the fault tests cannot run here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// A sentence a human can act on.
    pub reason: String,
}

impl Skip {
    /// Prints the visible SKIPPED line for `test`, or panics when skips are
    /// not allowed (`TENURE_FAULTS_REQUIRE=1`).
    pub fn report(&self, test: &str) {
        let line = format!("SKIPPED: {test}: {}", self.reason);
        if std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1") {
            panic!("{line} ({REQUIRE_ENV}=1 forbids skipping)");
        }
        // Straight to the stderr handle: the test harness captures
        // `eprintln!` of passing tests, and a skip must never pass silently.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\n{line}\n");
    }
}

/// `None` when network namespaces and nftables are usable here (root, `ip
/// netns add` works, `nft` runs inside a namespace); otherwise why not.
pub fn require_netns() -> Option<Skip> {
    let skip = |reason: String| Some(Skip { reason });
    if !nix::unistd::geteuid().is_root() {
        return skip("not root: creating network namespaces needs CAP_SYS_ADMIN and CAP_NET_ADMIN; run the tests as root".into());
    }
    let probe = format!("{NETNS_PREFIX}{}-probe", std::process::id());
    if let Err(e) = run("ip", &["netns", "add", &probe]) {
        return skip(format!("`ip netns` is unavailable: {e}"));
    }
    let nft = run("ip", &["netns", "exec", &probe, "nft", "list", "ruleset"]);
    let _ = run("ip", &["netns", "del", &probe]);
    if let Err(e) = nft {
        return skip(format!("nftables is unavailable (install the `nftables` package): {e}"));
    }
    None
}
