//! The test network: one network namespace per node, each joined by a veth
//! pair to a bridge in the root namespace, in a private /24 of 10.213.0.0/16
//! that exists only on this machine. The root namespace has an address on the
//! bridge so the test process reaches every node's HTTP API directly.
//!
//! Names carry the creating process id (`tenure-<pid>-<k>-<i>` namespaces,
//! `tfb<pid>k<k>` bridges) so parallel runs never collide and leftovers of
//! runs whose process is gone can be recognised and removed.

use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Namespace name prefix of every run.
pub const NETNS_PREFIX: &str = "tenure-";
/// Bridge name prefix (interface names are limited to 15 bytes).
const BRIDGE_PREFIX: &str = "tfb";
/// Host-side veth name prefix.
const VETH_PREFIX: &str = "tfv";
/// The first two octets of every run's subnet.
const SUBNET_BASE: [u8; 2] = [10, 213];
/// The root namespace's host number on the bridge.
const HOST_OCTET: u8 = 254;
/// At most this many nodes per network (one digit in interface names).
pub const MAX_NODES: usize = 9;
/// Run counters wrap here (two digits in interface names).
const RUN_COUNTER_WRAP: u32 = 100;

static RUN_COUNTER: AtomicU32 = AtomicU32::new(0);

/// Runs `ip` (or any program) and turns a non-zero exit into an error that
/// carries the command line and its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program).args(args).stdin(Stdio::null()).output().map_err(|e| {
        Error::Command { command: format!("{program} {}", args.join(" ")), detail: e.to_string() }
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            command: format!("{program} {}", args.join(" ")),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One run's namespaces, bridge and addresses. Dropping it removes them.
#[derive(Debug)]
pub struct Network {
    bridge: String,
    namespaces: Vec<String>,
    subnet: u8,
}

impl Network {
    /// Creates `n` namespaces joined to a fresh bridge. Leftovers of dead
    /// runs are removed first.
    pub fn create(n: usize) -> Result<Self> {
        if n == 0 || n > MAX_NODES {
            return Err(Error::Config(format!("1..={MAX_NODES} nodes, not {n}")));
        }
        cleanup_leftovers();
        let pid = std::process::id();
        let k = RUN_COUNTER.fetch_add(1, Ordering::Relaxed) % RUN_COUNTER_WRAP;
        let subnet = free_subnet(pid, k)?;
        let mut net =
            Network { bridge: format!("{BRIDGE_PREFIX}{pid}k{k}"), namespaces: Vec::new(), subnet };
        // From here on, Drop removes whatever was created if a step fails.
        run("ip", &["link", "add", &net.bridge, "type", "bridge"])?;
        let host = format!("{}/24", net.host_addr());
        run("ip", &["addr", "add", &host, "dev", &net.bridge])?;
        run("ip", &["link", "set", &net.bridge, "up"])?;
        for i in 0..n {
            let ns = format!("{NETNS_PREFIX}{pid}-{k}-{i}");
            run("ip", &["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let veth = format!("{VETH_PREFIX}{pid}k{k}n{i}");
            run(
                "ip",
                &["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns],
            )?;
            run("ip", &["link", "set", &veth, "master", &net.bridge])?;
            run("ip", &["link", "set", &veth, "up"])?;
            let addr = format!("{}/24", net.node_addr(i));
            run("ip", &["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"])?;
            run("ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.namespaces.len()
    }

    /// True when the network has no node (never, once created).
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// The address of node `i` (0-based) inside its namespace.
    pub fn node_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(SUBNET_BASE[0], SUBNET_BASE[1], self.subnet, i as u8 + 1)
    }

    /// The root namespace's address on the bridge (where the checker's
    /// requests come from; never blocked by a fault).
    pub fn host_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(SUBNET_BASE[0], SUBNET_BASE[1], self.subnet, HOST_OCTET)
    }

    /// The namespace of node `i`.
    pub fn namespace(&self, i: usize) -> &str {
        &self.namespaces[i]
    }

    /// The bridge's name.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and so the pair.
        for ns in &self.namespaces {
            kill_namespace_processes(ns);
            let _ = run("ip", &["netns", "del", ns]);
        }
        let _ = run("ip", &["link", "del", &self.bridge]);
    }
}

/// SIGKILLs every process still running in namespace `ns`.
fn kill_namespace_processes(ns: &str) {
    if let Ok(pids) = run("ip", &["netns", "pids", ns]) {
        for pid in pids.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A third octet not used by any address in the root namespace, starting
/// from one derived from the run so parallel runs usually differ at once.
fn free_subnet(pid: u32, k: u32) -> Result<u8> {
    let used = run("ip", &["-o", "-4", "addr", "show"])?;
    let prefix = format!("{}.{}.", SUBNET_BASE[0], SUBNET_BASE[1]);
    let taken: Vec<u8> = used
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(&prefix))
        .filter_map(|rest| rest.split('.').next()?.parse().ok())
        .collect();
    let start = (pid.wrapping_mul(7).wrapping_add(k) % 250) as u8;
    (0..250u8)
        .map(|d| (start.wrapping_add(d) % 250) + 1)
        .find(|o| !taken.contains(o))
        .ok_or_else(|| Error::Config("no free 10.213.x.0/24 subnet".into()))
}

/// The pid a run-owned name was created by, if the name is one of ours.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NETNS_PREFIX).or_else(|| name.strip_prefix(BRIDGE_PREFIX))?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// True while process `pid` exists.
pub(crate) fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces and bridges left by runs whose process is gone (a
/// test killed by a timeout cannot run its Drop guards), with any server
/// still running inside them. (Their temporary directories are removed by
/// `tenure_launch::temp_dir`.)
pub fn cleanup_leftovers() {
    if let Ok(list) = run("ip", &["netns", "list"]) {
        for ns in list.lines().filter_map(|l| l.split_whitespace().next()) {
            if owner_pid(ns).is_some_and(|pid| !alive(pid)) {
                kill_namespace_processes(ns);
                let _ = run("ip", &["netns", "del", ns]);
            }
        }
    }
    if let Ok(list) = run("ip", &["-o", "link", "show", "type", "bridge"]) {
        for name in list.lines().filter_map(|l| l.split(':').nth(1)).map(str::trim) {
            if name.starts_with(BRIDGE_PREFIX) && owner_pid(name).is_some_and(|pid| !alive(pid)) {
                let _ = run("ip", &["link", "del", name]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_reads_our_names_only() {
        assert_eq!(owner_pid("tenure-1234-5-0"), Some(1234));
        assert_eq!(owner_pid("tfb99k3"), Some(99));
        assert_eq!(owner_pid("tenure-probe"), None);
        assert_eq!(owner_pid("docker0"), None);
    }
}
