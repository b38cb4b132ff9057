//! `tenure server`: reads the settings, binds the listeners and runs the
//! server (the library's [`tenure_server::server::run`]) until SIGTERM or Ctrl-C.

use crate::logging;
use crate::store_url;
use crate::supervise::{self, Supervision};
use anyhow::{bail, Context};
use std::future::Future;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use tenure::config::{JoinSettings, ServerArgs, ServerSettings};
use tenure_api::PromoteMode;
use tenure_client::ClientOptions;
use tenure_node::tls::TlsIdentity;
use tenure_node::{ResetOutcome, Security};
use tenure_server::http::auth::read_token_file;
use tenure_server::http::HttpLimits;
use tenure_server::join::{self, record, Join};
use tenure_server::server::{self, ServerConfig, ServerError};
use tenure_server::store_server::{self, StoreServerConfig};
use tokio::signal::unix::{signal, SignalKind};
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// Runs the server; returns when it has shut down.
pub async fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    if args.store_led()? {
        if args.supervised {
            bail!("--supervised: a server with --store has no node of its own to supervise");
        }
        return run_store_led(args).await;
    }
    let mut settings = args.resolve()?;
    logging::init(settings.log_format);
    // The TLS files are checked before anything is bound: a certificate that
    // cannot work takes no port (the node reads them again when it starts),
    // and a supervisor starts no child that would refuse them.
    if let Security::MutualTls(files) = &settings.node.security {
        TlsIdentity::load(files, &settings.node.cluster_id, settings.node.id)?;
    }
    if args.supervised {
        // Everything else the node would refuse is refused here, before any
        // child (`--reset-state` conflicts with `--supervised`).
        let supervision = Supervision::new(&args, &settings)?;
        return supervise::run(supervision).await;
    }
    supervise::bind_to_supervisor()?;
    if args.reset_state {
        reset_state(&settings.node, args.reset_term)?;
    }
    let join = match settings.join.take() {
        Some(join) => prepare_join(&mut settings, join).await?,
        None => None,
    };
    // Bind the API first: a port clash is then reported before the node joins
    // the cluster and starts voting.
    let http = TcpListener::bind(settings.http)
        .with_context(|| format!("cannot listen for HTTP on {}", settings.http))?;
    let peers = TcpListener::bind(settings.node.listen)
        .with_context(|| format!("cannot listen for peers on {}", settings.node.listen))?;
    let stop = stop_signal()?;
    let config = ServerConfig {
        api: settings.api,
        http_addresses: settings.http_addresses,
        etcd_listen: settings.etcd_listen,
        etcd_require_token: settings.etcd_require_token,
        join,
        ..ServerConfig::new(settings.node)
    };
    let id = config.node.id;
    if let Err(e) = server::run(config, peers, http, stop).await {
        if let ServerError::Removed(removal) = &e {
            eprintln!("error: {removal}");
            return Ok(ExitCode::from(REMOVED_EXIT));
        }
        return match needs_a_term(&e) {
            true => Err(anyhow::anyhow!(
                "{:#}. Instead, node {id} can be given up and replaced, which needs no term: \
                 wipe its data directory, start a new node (a new id) with --join, and run \
                 `tenure member replace {id} NEW HOST:PORT` (docs/OPERATIONS.md)",
                anyhow::Error::new(e)
            )),
            false => Err(e.into()),
        };
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit status of a node removed from the cluster while it was away
/// (sysexits' `EX_CONFIG`): the supervisor (`--supervised`) and the
/// systemd unit do not restart it, since no restart can help.
pub const REMOVED_EXIT: u8 = 78;

/// Whether the node refused to start from a state that only
/// `--reset-term` recovers (no record of its votes is left).
fn needs_a_term(e: &ServerError) -> bool {
    use tenure_node::{Recovery, StartError};
    let ServerError::Node { source, .. } = e else { return false };
    matches!(
        source,
        StartError::CorruptState { recovery: Recovery::NeedsTerm { .. }, .. }
            | StartError::StateMissing { recovery: Recovery::NeedsTerm { .. }, .. }
    )
}

/// `--join`: the cluster's members, from the record of an earlier join in
/// the data directory, else asked of the cluster (and recorded); returns
/// how the server asks to be added once it runs, unless it was added by an
/// earlier start.
async fn prepare_join(
    settings: &mut ServerSettings,
    join: JoinSettings,
) -> anyhow::Result<Option<Join>> {
    let token = match &join.token_file {
        Some(path) => Some(
            read_token_file(path)
                .with_context(|| format!("--join-token-file {}", path.display()))?,
        ),
        None => None,
    };
    let cacert = join.cacert.as_deref();
    let client = tenure_client::Client::new(ClientOptions { cacert, token: token.as_deref() })
        .context("--join")?;
    let endpoints = tenure_client::parse_endpoints(&join.endpoints, client.https())
        .with_context(|| format!("--join {}", join.endpoints))?;
    let cluster = Arc::new(tenure_client::Cluster::new(client, endpoints)?);
    let node = &settings.node;
    let (peers, added) = match record::read(&node.data_dir, node.id, &node.cluster_id)? {
        Some(joined) => {
            info!(node = %node.id, added = joined.added,
                "joined before: starting from the members recorded then");
            (joined.peers(&node.data_dir)?, joined.added)
        }
        None => {
            let members = join::cluster_members(&cluster)
                .await
                .with_context(|| format!("--join {}: cannot read the members", join.endpoints))?;
            info!(node = %node.id, config = %members.config, voters = members.voters.len(),
                learners = members.learners.len(), "the cluster's members");
            let peers = join::peers_of(&members, node.id).await?;
            let joined = record::JoinRecord::new(node.id, &node.cluster_id, &peers);
            record::write(&node.data_dir, &joined)?;
            (peers, false)
        }
    };
    settings.with_members(peers)?;
    // Added once, a node is not added again: it may have been removed since.
    Ok((!added).then(|| Join { cluster, address: join.address, promote: PromoteMode::Auto }))
}

/// `tenure server --store`: a server whose leadership comes from the store
/// (no node of its own), until SIGTERM or Ctrl-C; it resigns first.
async fn run_store_led(args: ServerArgs) -> anyhow::Result<ExitCode> {
    let s = crate::store_settings::resolve(&args)?;
    let base = s.base;
    logging::init(base.log_format);
    let tls = match &base.security {
        Security::MutualTls(files) => {
            let identity = TlsIdentity::load(files, &base.cluster_id, base.id)?;
            Some(TlsAcceptor::from(identity.https_server_config()))
        }
        Security::InsecureNoTls => None,
    };
    let cacert = s.store_auth.cacert.as_deref();
    let store = store_url::open(&s.store, cacert, &s.store_token, &s.store_auth)
        .with_context(|| format!("--store {}", s.store))?;
    let http = TcpListener::bind(base.http)
        .with_context(|| format!("cannot listen for HTTP on {}", base.http))?;
    let stop = stop_signal()?;
    let config = StoreServerConfig {
        id: base.id,
        store,
        store_url: s.store.to_string(),
        election: s.election,
        ttl: s.ttl,
        advertise_http: s.advertise_http,
        http: HttpLimits::default(),
        api: base.api,
        tls,
    };
    store_server::run(config, http, stop).await?;
    Ok(ExitCode::SUCCESS)
}

/// `--reset-state`: resets the data directory's state if a start would refuse
/// it (see [`tenure_node::reset_state`]), before the node starts.
fn reset_state(node: &tenure_node::NodeConfig, term: Option<u64>) -> anyhow::Result<()> {
    let data_dir = node.data_dir.display();
    match tenure_node::reset_state(node, term.map(tenure_core::Term))
        .with_context(|| format!("--reset-state: node {} cannot reset its state", node.id))?
    {
        ResetOutcome::NotNeeded { state } => warn!(
            %data_dir,
            term = %state.term,
            voted_for = ?state.voted_for,
            "--reset-state: the state needs no reset and was left alone; drop the flag"
        ),
        ResetOutcome::Reset { refused, state } => warn!(
            %data_dir,
            term = %state.term,
            voted_for = ?state.voted_for,
            refused,
            "--reset-state: wrote a new state file; drop the flag for later starts"
        ),
    }
    Ok(())
}

/// Completes on SIGTERM or SIGINT (Ctrl-C). The handlers are installed here,
/// before the node starts, so that an early signal is not lost.
fn stop_signal() -> anyhow::Result<impl Future<Output = ()>> {
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!(signal = name, "stop signal received");
    })
}
