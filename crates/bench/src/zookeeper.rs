//! A local ZooKeeper ensemble (Debian's `zookeeper` package: its jar under
//! /usr/share/java and `java` on the PATH), for `tenure bench elect --store zk`.

use anyhow::{bail, Context};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use tenure_launch::{free_ports, temp_dir, Proc, LOG_TAIL_LINES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{sleep, Instant};

/// The server's jar; its manifest names the jars it needs.
pub const JAR: &str = "/usr/share/java/zookeeper.jar";
/// How to install ZooKeeper when it is missing.
pub const INSTALL_HINT: &str = "apt-get install zookeeper (Debian; ZooKeeper 3.8)";
/// ZooKeeper's tick: the session timeout's bounds below are in ticks, and
/// the leader expires sessions in buckets one tick wide. Short, so that a
/// short session timeout is allowed.
pub const TICK_MS: u64 = 200;
/// How long a started ensemble may take until every server serves.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between readiness probes.
const STARTUP_POLL: Duration = Duration::from_millis(100);
/// Timeout of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether ZooKeeper can be started here.
pub fn available() -> bool {
    Path::new(JAR).exists()
        && Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success())
}

/// A local ensemble; dropping it kills the servers and removes their data.
pub struct ZooKeeper {
    servers: Vec<Proc>,
    client_ports: Vec<u16>,
    // Declared last: removed after the servers are dead.
    dir: tempfile::TempDir,
}

impl ZooKeeper {
    /// Starts `n` servers on loopback and waits until each serves (as the
    /// ensemble's leader or a follower; `standalone` for one server).
    pub async fn start(n: usize) -> anyhow::Result<Self> {
        if !available() {
            bail!("ZooKeeper is not installed ({JAR} and java are needed): {INSTALL_HINT}");
        }
        let dir = temp_dir("tenure-bench-zk-")?;
        let ports = free_ports(3 * n)?;
        let client_ports: Vec<u16> = (0..n).map(|i| ports[3 * i]).collect();
        let quorum: String = (0..n)
            .map(|i| {
                format!("server.{}=127.0.0.1:{}:{}\n", i + 1, ports[3 * i + 1], ports[3 * i + 2])
            })
            .collect();
        let mut servers = Vec::with_capacity(n);
        for (i, port) in client_ports.iter().enumerate() {
            let id = i + 1;
            let data = dir.path().join(format!("zk{id}"));
            std::fs::create_dir_all(&data).context("creating a ZooKeeper data dir")?;
            std::fs::write(data.join("myid"), format!("{id}\n"))?;
            let cfg = dir.path().join(format!("zk{id}.cfg"));
            std::fs::write(&cfg, config(&data, *port, if n > 1 { &quorum } else { "" }))?;
            let main = if n > 1 {
                "org.apache.zookeeper.server.quorum.QuorumPeerMain"
            } else {
                "org.apache.zookeeper.server.ZooKeeperServerMain"
            };
            let mut c = Command::new("java");
            c.args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", JAR, main])
                .arg(&cfg);
            let mut proc = Proc::new(format!("zk{id}"), dir.path().join(format!("zk{id}.log")));
            proc.spawn(c)?;
            servers.push(proc);
        }
        let zk = ZooKeeper { servers, client_ports, dir };
        zk.wait_serving().await?;
        Ok(zk)
    }

    async fn wait_serving(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        for port in &self.client_ports {
            loop {
                if let Ok(mode) = mode(*port).await {
                    if ["leader", "follower", "standalone"].contains(&mode.as_str()) {
                        break;
                    }
                }
                if Instant::now() > deadline {
                    bail!(
                        "ZooKeeper on port {port} did not serve within {STARTUP_TIMEOUT:?}\n{}",
                        self.log_tails()
                    );
                }
                sleep(STARTUP_POLL).await;
            }
        }
        Ok(())
    }

    /// The servers as `host:port,...`, for a client's connect string.
    pub fn hosts(&self) -> String {
        self.client_ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// The last lines of every server's log.
    pub fn log_tails(&self) -> String {
        let _ = self.dir.path();
        self.servers.iter().map(|p| p.log_tail(LOG_TAIL_LINES)).collect()
    }
}

/// One server's zoo.cfg.
fn config(data: &Path, client_port: u16, quorum: &str) -> String {
    format!(
        "tickTime={TICK_MS}\ninitLimit=20\nsyncLimit=10\ndataDir={}\nclientPort={client_port}\n\
         clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr,ruok,mntr,stat\nminSessionTimeout={}\n\
         maxSessionTimeout=60000\nmaxClientCnxns=0\n{quorum}",
        data.display(),
        2 * TICK_MS
    )
}

/// The server's mode (`srvr`'s "Mode:" line).
async fn mode(port: u16) -> anyhow::Result<String> {
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(b"srvr").await?;
        let mut out = String::new();
        s.take(64 * 1024).read_to_string(&mut out).await?;
        anyhow::Ok(out)
    };
    let out = tokio::time::timeout(PROBE_TIMEOUT, probe).await.context("srvr timed out")??;
    out.lines()
        .find_map(|l| l.strip_prefix("Mode: "))
        .map(|m| m.trim().to_string())
        .with_context(|| format!("no Mode in {out:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_the_ensemble_and_allows_short_sessions() {
        let c = config(Path::new("/d/zk1"), 2181, "server.1=127.0.0.1:1:2\n");
        assert!(c.contains("tickTime=200\n") && c.contains("minSessionTimeout=400\n"), "{c}");
        assert!(c.contains("dataDir=/d/zk1\n") && c.contains("clientPort=2181\n"), "{c}");
        assert!(c.ends_with("server.1=127.0.0.1:1:2\n"), "{c}");
        assert!(c.contains("admin.enableServer=false"), "no Jetty on :8080: {c}");
    }
}
