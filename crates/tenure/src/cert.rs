//! `tenure cert`: a CA and node certificates for a cluster, ready for
//! `tenure server --tls-cert/--tls-key/--tls-ca` and the clients' `--cacert`.

use crate::config::DEFAULT_CLUSTER_ID;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use tenure_core::NodeId;
use tenure_node::tls::certgen::{self, CertRequest, DEFAULT_HOSTS, DEFAULT_NODE_DAYS};

/// Flags of `tenure cert`.
#[derive(Args, Debug)]
#[command(after_help = "\
Writes, in --out:
  ca.pem, ca-key.pem            the cluster's CA (made unless both are already there;
                                an existing CA signs the new node certificates)
  node-<id>.pem, node-<id>-key.pem   each node's certificate and key (keys: mode 0600;
                                existing files are never overwritten)

A node certificate names node-<id>.<cluster-id> (peers check it against the id a node
claims) and the --hosts (clients of the HTTP API check the address they connect to).
Keys are ECDSA P-256. Example, three hosts:
  tenure cert --out certs --nodes 1,2,3 --cluster-id prod --hosts localhost,10.0.0.1,10.0.0.2,10.0.0.3")]
pub struct CertArgs {
    /// Directory to write the files to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The nodes to make certificates for, comma-separated ids.
    #[arg(long, value_name = "ID,...", value_delimiter = ',', required = true)]
    pub nodes: Vec<u64>,
    /// The cluster id the servers run with (`--cluster-id`); it is part of each node's name.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CLUSTER_ID)]
    pub cluster_id: String,
    /// DNS names and IP addresses clients reach the nodes' HTTP APIs at, comma-separated;
    /// every node certificate names all of them [default: localhost,127.0.0.1,::1].
    #[arg(long, value_name = "HOST,...", value_delimiter = ',')]
    pub hosts: Option<Vec<String>>,
    /// How long the node certificates are valid, in days (the CA: ten years).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_NODE_DAYS)]
    pub days: u32,
}

/// Runs `tenure cert`.
pub fn run(args: CertArgs) -> anyhow::Result<ExitCode> {
    let nodes = args
        .nodes
        .iter()
        .map(|&n| {
            if n == 0 {
                anyhow::bail!("node id 0 is not allowed: ids are positive")
            } else {
                Ok(NodeId(n))
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let hosts = args.hosts.unwrap_or_else(|| DEFAULT_HOSTS.iter().map(|h| h.to_string()).collect());
    let request =
        CertRequest { cluster_id: args.cluster_id.clone(), nodes, hosts, days: args.days };
    let made = certgen::generate(&args.out, &request)
        .with_context(|| format!("cannot make certificates in {}", args.out.display()))?;
    let ca_key = args.out.join(certgen::CA_KEY_FILE);
    if made.ca_created {
        println!(
            "made a CA: {} (its key {} signs more nodes: keep it secret)",
            made.ca.display(),
            ca_key.display()
        );
    } else {
        println!("signed with the existing CA {}", made.ca.display());
    }
    for (id, files) in &made.nodes {
        println!("node {id}: {} and {}", files.cert.display(), files.key.display());
    }
    println!("\nstart each node with its own files, e.g. node {}:", made.nodes[0].0);
    let (id, files) = &made.nodes[0];
    println!(
        "  tenure server --id {id} --cluster-id {} --tls-cert {} --tls-key {} --tls-ca {}",
        args.cluster_id,
        files.cert.display(),
        files.key.display(),
        made.ca.display()
    );
    println!("and point the clients at the CA:\n  tenure status --cacert {}", made.ca.display());
    Ok(ExitCode::SUCCESS)
}
