//! `tenure cert`: a CA and node certificates for a cluster, ready for
//! `tenure server --tls-cert/--tls-key/--tls-ca` and the clients' `--cacert`;
//! and certificates for applications that reach the etcd listener.

use anyhow::Context;
use clap::Args;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tenure::config::DEFAULT_CLUSTER_ID;
use tenure_core::NodeId;
use tenure_node::tls::certgen::{self, CertRequest, DEFAULT_HOSTS, DEFAULT_NODE_DAYS};

/// Flags of `tenure cert`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("made").required(true).multiple(true).args(["nodes", "clients"])))]
#[command(after_help = "\
Writes, in --out:
  ca.pem, ca-key.pem            the cluster's CA (made unless both are already there;
                                an existing CA signs the new node certificates, of
                                the --cluster-id its other nodes have)
  node-<id>.pem, node-<id>-key.pem   each node's certificate and key (keys: mode 0600;
                                existing files are never overwritten)
  client-<name>.pem, client-<name>-key.pem   each --clients name's certificate and key
  admin.token, tenure.toml      an API token of role admin (mode 0600) and a server config
                                file naming it (kept if already there), so that the
                                commands printed at the end work as printed

A node certificate names node-<id>.<cluster-id> (peers check it against the id a node
claims) and the --hosts (clients of the HTTP API check the address they connect to).
A client certificate is for an application of the etcd listener (--etcd-listen asks
for a certificate of the cluster's CA: etcdctl --cert/--key); it names no node, so a
peer port refuses it: give it to applications instead of a node's. A call it makes
without a token has the role of the API token named <name> (none of that name: refused;
--etcd-require-token: a token is needed), as etcd takes a certificate's common name for
its user (docs/ETCD.md). Keys are ECDSA P-256. Examples:
  tenure cert --out certs --nodes 1,2,3 --cluster-id prod --hosts localhost,10.0.0.1,10.0.0.2,10.0.0.3
  tenure cert --out certs --cluster-id prod --clients billing-api   # later, with the same CA")]
pub struct CertArgs {
    /// Directory to write the files to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The nodes to make certificates for, comma-separated ids.
    #[arg(long, value_name = "ID,...", value_delimiter = ',',
          value_parser = crate::usage::node_id)]
    pub nodes: Vec<u64>,
    /// Applications to make client certificates for, comma-separated names (lowercase
    /// letters, digits and '-'): for the etcd listener, instead of a node's certificate.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub clients: Vec<String>,
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
    let nodes = args.nodes.iter().map(|&n| NodeId(n)).collect();
    let hosts = args.hosts.unwrap_or_else(|| DEFAULT_HOSTS.iter().map(|h| h.to_string()).collect());
    let request = CertRequest {
        cluster_id: args.cluster_id.clone(),
        nodes,
        clients: args.clients.clone(),
        hosts,
        days: args.days,
    };
    let made = certgen::generate(&args.out, &request).map_err(|e| {
        let said = format!("cannot make certificates in {}: {e}", args.out.display());
        match e {
            // What the flags asked for cannot be made: a usage error (64).
            certgen::CertGenError::Invalid(_) => crate::usage::usage(said),
            _ => anyhow::anyhow!(said),
        }
    })?;
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
    for (name, files) in &made.clients {
        println!("client {name}: {} and {}", files.cert.display(), files.key.display());
    }
    let (token, config) = api_token(&args.out)?;
    println!("API token (role admin): {} in {}", token.display(), config.display());
    if let Some((id, files)) = made.nodes.first() {
        println!("\nstart each node with its own files, e.g. node {id}:");
        println!(
            "  tenure server --config {} --id {id} --cluster-id {} --tls-cert {} --tls-key {} \
             --tls-ca {}",
            config.display(),
            args.cluster_id,
            files.cert.display(),
            files.key.display(),
            made.ca.display()
        );
    }
    if let Some((name, files)) = made.clients.first() {
        println!(
            "an etcd client (servers started with --etcd-listen HOST:PORT):\n  etcdctl \
             --endpoints https://HOST:PORT --cacert {} --cert {} --key {} get --prefix ''\n\
             (a call without a token has the role of the API token named {name}: name one so \
             in the servers' [[api_tokens]], or call with --user NAME:SECRET)",
            made.ca.display(),
            files.cert.display(),
            files.key.display()
        );
    }
    println!(
        "and point the clients at the CA and the token:\n  tenure status --cacert {} --token-file {}",
        made.ca.display(),
        token.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The admin token file written next to the certificates.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";
/// The server config file naming it.
pub const CONFIG_FILE: &str = "tenure.toml";
/// Random bytes of a token made here (64 hex digits).
const TOKEN_BYTES: usize = 32;

/// Writes, in `out`, an admin token (mode 0600) and a config file whose
/// `api_tokens` name it, unless they exist (never overwritten): a server
/// refuses to start without tokens. Returns both paths, absolute.
fn api_token(out: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    use rand_core::{OsRng, RngCore};
    let out = out.canonicalize().with_context(|| format!("resolving {}", out.display()))?;
    let token = out.join(ADMIN_TOKEN_FILE);
    let config = out.join(CONFIG_FILE);
    let create = |path: &Path, mode: u32, text: &str| -> anyhow::Result<()> {
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path) {
            Ok(mut f) => {
                f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
        }
    };
    let mut bytes = [0u8; TOKEN_BYTES];
    OsRng.fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    create(&token, 0o600, &format!("{hex}\n"))?;
    let toml_path = toml::Value::String(token.display().to_string());
    create(
        &config,
        0o644,
        &format!(
            "# Written by `tenure cert`: who may call the HTTP API (see `tenure server --help`).\n\
             [[api_tokens]]\nname = \"admin\"\nrole = \"admin\"\ntoken_file = {toml_path}\n"
        ),
    )?;
    Ok((token, config))
}
