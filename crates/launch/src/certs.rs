//! A cluster's CA and node certificates, made by the binary under test
//! (`tenure cert`), so the launchers test the certificates users make.

use crate::error::Error;
use std::path::Path;
use std::process::Command;

/// Runs `exe cert --out dir --nodes 1,..,n --cluster-id cluster_id` (and
/// `--hosts hosts` when given: the names or addresses every certificate
/// holds beyond loopback). An existing CA in `dir` (`ca.pem`, `ca-key.pem`)
/// is used instead of a new one.
pub fn make_certs(
    exe: &Path,
    dir: &Path,
    nodes: &[u64],
    cluster_id: &str,
    hosts: Option<&str>,
) -> Result<(), Error> {
    let nodes = nodes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut command = Command::new(exe);
    command.arg("cert").arg("--out").arg(dir);
    command.args(["--nodes", &nodes, "--cluster-id", cluster_id]);
    if let Some(hosts) = hosts {
        command.args(["--hosts", hosts]);
    }
    let line = format!("{} cert --out {} --nodes {nodes}", exe.display(), dir.display());
    let out = command.output().map_err(Error::io(format!("cannot run {line}")))?;
    if !out.status.success() {
        let output = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        return Err(Error::Command { command: line, output: output.into_owned() });
    }
    Ok(())
}
