//! The command line of one `tenure server`: every launcher builds it here,
//! so a flag is renamed in one place.

use std::ffi::OsString;
use std::path::PathBuf;

/// How a server speaks to its peers and serves its API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// Mutual TLS between the servers and HTTPS for the API, with these files.
    Files {
        /// The node's certificate (`--tls-cert`).
        cert: PathBuf,
        /// Its private key (`--tls-key`).
        key: PathBuf,
        /// The cluster's CA (`--tls-ca`).
        ca: PathBuf,
    },
    /// `--insecure-no-tls`.
    Off,
}

/// The flags of one `tenure server`, as docs/CLI.md names them.
#[derive(Debug, Clone)]
pub struct ServerArgs {
    /// `--config`: the config file (the API tokens).
    pub config: PathBuf,
    /// `--id`.
    pub id: u64,
    /// `--listen`: the peer transport's `HOST:PORT`.
    pub listen: String,
    /// `--http`: the API's `HOST:PORT`.
    pub http: String,
    /// `--peers`: `ID=HOST:PORT,...` ([`address_list`]); not given with
    /// `join`, nor when empty (a node that joined before restarts from the
    /// members it recorded).
    pub peers: String,
    /// `--join`: the HTTP API endpoints of a running cluster to join,
    /// comma-separated, instead of `--peers` (None: not given).
    pub join: Option<String>,
    /// `--peer-http`: every node's API, `ID=HOST:PORT,...` (None: not given).
    pub peer_http: Option<String>,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--heartbeat-ms`.
    pub heartbeat_ms: u64,
    /// `--election-timeout-ms`.
    pub election_timeout_ms: u64,
    /// `--cluster-id`.
    pub cluster_id: String,
    /// `--protocol` (`raft`, `ranked` or `paxos`).
    pub protocol: String,
    /// The TLS flags.
    pub tls: Tls,
    /// `--single-node`: a one-node cluster, asked for.
    pub single_node: bool,
    /// `--etcd-listen HOST:PORT`: also serve etcd's v3 gRPC API there.
    pub etcd_listen: Option<String>,
}

impl ServerArgs {
    /// The arguments after the program name, starting with `server`.
    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["server".into(), "--config".into()];
        args.push(self.config.clone().into());
        let mut flag = |name: &str, value: String| {
            args.push(name.into());
            args.push(value.into());
        };
        flag("--id", self.id.to_string());
        flag("--listen", self.listen.clone());
        flag("--http", self.http.clone());
        match &self.join {
            Some(join) => flag("--join", join.clone()),
            None if self.peers.is_empty() => {}
            None => flag("--peers", self.peers.clone()),
        }
        if let Some(peer_http) = &self.peer_http {
            flag("--peer-http", peer_http.clone());
        }
        flag("--heartbeat-ms", self.heartbeat_ms.to_string());
        flag("--election-timeout-ms", self.election_timeout_ms.to_string());
        flag("--cluster-id", self.cluster_id.clone());
        flag("--protocol", self.protocol.clone());
        args.push("--data-dir".into());
        args.push(self.data_dir.clone().into());
        match &self.tls {
            Tls::Files { cert, key, ca } => {
                for (name, path) in [("--tls-cert", cert), ("--tls-key", key), ("--tls-ca", ca)] {
                    args.push(name.into());
                    args.push(path.clone().into());
                }
            }
            Tls::Off => args.push("--insecure-no-tls".into()),
        }
        if self.single_node {
            args.push("--single-node".into());
        }
        if let Some(listen) = &self.etcd_listen {
            args.push("--etcd-listen".into());
            args.push(listen.into());
        }
        args
    }
}

/// `ID=ADDRESS,...` as `--peers` and `--peer-http` take it.
pub fn address_list(nodes: impl IntoIterator<Item = (u64, String)>) -> String {
    nodes.into_iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ServerArgs {
        ServerArgs {
            config: "/c/api.toml".into(),
            id: 2,
            listen: "127.0.0.1:7002".into(),
            http: "127.0.0.1:8002".into(),
            peers: address_list([(1, "127.0.0.1:7001".into()), (2, "127.0.0.1:7002".into())]),
            peer_http: None,
            join: None,
            data_dir: "/c/node-2".into(),
            heartbeat_ms: 50,
            election_timeout_ms: 500,
            cluster_id: "test".into(),
            protocol: "raft".into(),
            tls: Tls::Off,
            single_node: false,
            etcd_listen: None,
        }
    }

    fn text(a: &ServerArgs) -> String {
        a.args().iter().map(|s| s.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn the_command_line_names_every_setting_once() {
        assert_eq!(
            text(&args()),
            "server --config /c/api.toml --id 2 --listen 127.0.0.1:7002 --http 127.0.0.1:8002 \
             --peers 1=127.0.0.1:7001,2=127.0.0.1:7002 --heartbeat-ms 50 \
             --election-timeout-ms 500 --cluster-id test --protocol raft --data-dir /c/node-2 \
             --insecure-no-tls"
        );
        let mut a = args();
        a.tls =
            Tls::Files { cert: "/c/n.pem".into(), key: "/c/k.pem".into(), ca: "/c/ca.pem".into() };
        a.peer_http = Some("1=h:1".into());
        a.single_node = true;
        let t = text(&a);
        assert!(t.contains(" --peer-http 1=h:1 "), "{t}");
        assert!(
            t.ends_with("--tls-cert /c/n.pem --tls-key /c/k.pem --tls-ca /c/ca.pem --single-node"),
            "{t}"
        );
        assert!(!t.contains("insecure"), "{t}");
        a.join = Some("https://127.0.0.1:8001".into());
        let t = text(&a);
        assert!(t.contains(" --join https://127.0.0.1:8001 ") && !t.contains("--peers"), "{t}");
    }
}
