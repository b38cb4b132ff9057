//! Network faults as nftables rules inside a node's namespace: drops by
//! source/destination address for cuts (one direction = only the output
//! hook), `numgen random mod 100 < P` for random loss. The kernel has no
//! `netem`, so this is how links fail.
//!
//! The `nft` CLI is run through `ip netns exec` with std::process::Command:
//! the rules must be installed in another network namespace, and entering it
//! from this multi-threaded process (setns is per thread) would be more
//! fragile than one short command per change; no maintained crate speaks the
//! nftables netlink protocol directly. Only peer addresses are ever
//! matched, so the checker (the bridge's host address) is never cut off.

use crate::error::{Error, Result};
use crate::net::Network;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// The table every rule of ours lives in (one per namespace).
pub const TABLE: &str = "tenure_faults";

/// Runs an nft script inside namespace `ns`.
fn nft(ns: &str, script: &str) -> Result<()> {
    let command = format!("ip netns exec {ns} nft -f - <<< {script:?}");
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Command { command: command.clone(), detail: e.to_string() })?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(script.as_bytes())
        .map_err(|e| Error::Command { command: command.clone(), detail: e.to_string() })?;
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Command { command: command.clone(), detail: e.to_string() })?;
    if !out.status.success() {
        return Err(Error::Command {
            command,
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Creates the (empty) fault table of node `i`: an input and an output
/// chain, both accepting by default.
pub fn install(net: &Network, i: usize) -> Result<()> {
    nft(
        net.namespace(i),
        &format!(
            "table inet {TABLE} {{\n\
             chain input {{ type filter hook input priority 0; policy accept; }}\n\
             chain output {{ type filter hook output priority 0; policy accept; }}\n\
             }}\n"
        ),
    )
}

/// An address set in nft syntax.
fn set(addrs: &[Ipv4Addr]) -> String {
    let list: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    format!("{{ {} }}", list.join(", "))
}

/// Node `i` drops everything it would receive from `from`.
pub fn drop_input_from(net: &Network, i: usize, from: &[usize]) -> Result<()> {
    let addrs: Vec<Ipv4Addr> = from.iter().map(|&j| net.node_addr(j)).collect();
    nft(net.namespace(i), &format!("add rule inet {TABLE} input ip saddr {} drop\n", set(&addrs)))
}

/// Node `i` drops everything it would send to `to`.
pub fn drop_output_to(net: &Network, i: usize, to: &[usize]) -> Result<()> {
    let addrs: Vec<Ipv4Addr> = to.iter().map(|&j| net.node_addr(j)).collect();
    nft(net.namespace(i), &format!("add rule inet {TABLE} output ip daddr {} drop\n", set(&addrs)))
}

/// Node `i` loses `percent`% of the packets it exchanges with its peers,
/// each direction drawn independently.
pub fn lose(net: &Network, i: usize, peers: &[usize], percent: u32) -> Result<()> {
    let addrs: Vec<Ipv4Addr> = peers.iter().map(|&j| net.node_addr(j)).collect();
    let s = set(&addrs);
    nft(
        net.namespace(i),
        &format!(
            "add rule inet {TABLE} input ip saddr {s} numgen random mod 100 < {percent} drop\n\
             add rule inet {TABLE} output ip daddr {s} numgen random mod 100 < {percent} drop\n"
        ),
    )
}

/// Removes every rule of node `i` (the table and its chains stay).
pub fn heal(net: &Network, i: usize) -> Result<()> {
    nft(net.namespace(i), &format!("flush table inet {TABLE}\n"))
}

/// The rules currently in node `i`'s table, as `nft list` prints them.
pub fn list(net: &Network, i: usize) -> Result<String> {
    crate::net::run(
        "ip",
        &["netns", "exec", net.namespace(i), "nft", "list", "table", "inet", TABLE],
    )
}
