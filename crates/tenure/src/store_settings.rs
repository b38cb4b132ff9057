//! `tenure server --store URL`: the settings of a server whose leadership
//! comes from a store ([`tenure_server::store_server`]). The flags are
//! [`tenure::config::StoreArgs`] (beside the others of `tenure server`);
//! what a store-led server shares with a node is resolved there too.

use crate::elect_cli::DEFAULT_TTL_MS;
use crate::store_url::{self, StoreAuth, StoreUrl};
use anyhow::{bail, Context};
use std::time::Duration;
use tenure::config::{ServerArgs, StoreBase};
use tenure::tokens::TokenArgs;

/// Everything `tenure server --store` needs, resolved and checked.
#[derive(Debug)]
pub struct StoreSettings {
    /// What it shares with a node: id, HTTP address, certificate, API tokens.
    pub base: StoreBase,
    /// The store.
    pub store: StoreUrl,
    /// The election.
    pub election: String,
    /// The session TTL.
    pub ttl: Duration,
    /// The address in its candidate value, if given.
    pub advertise_http: Option<String>,
    /// The store's CA (tenure's cluster's, or etcd's) and etcd user.
    pub store_auth: StoreAuth,
    /// The store's token.
    pub store_token: TokenArgs,
}

/// The settings of `tenure server --store`: the flags of tenure's own
/// consensus (and their config-file keys) are refused, naming them.
pub fn resolve(args: &ServerArgs) -> anyhow::Result<StoreSettings> {
    let base = args.resolve_store_base()?;
    let s = base.store.clone();
    let url = s.store.as_deref().context("no --store")?;
    let store = store_url::parse(url)?;
    let election = s.election.clone().unwrap_or_else(|| base.cluster_id.clone());
    tenure_client::election::check_name(&election).context("bad --election")?;
    let ttl = crate::elect_cli::ttl_of(s.ttl_ms.unwrap_or(DEFAULT_TTL_MS))?;
    match &s.advertise_http {
        Some(a) => {
            store_url::host_port(a).context("bad --advertise-http")?;
        }
        None if base.http.ip().is_unspecified() => bail!(
            "--http {} listens on every address, which is no address the other servers can \
             reach this one at: give --advertise-http HOST:PORT (published in its candidate \
             value as its API's address)",
            base.http
        ),
        None => {}
    }
    let store_token = TokenArgs { token: s.store_token, token_file: s.store_token_file };
    let tokenless = store_token.token.is_none() && store_token.token_file.is_none();
    match (&store, tokenless) {
        (StoreUrl::Tenure(_), true) => bail!(
            "--store {url}: campaigning in a tenure cluster's election needs an API token of \
             role write: give --store-token-file FILE (and --store-cacert FILE when that \
             cluster serves HTTPS)"
        ),
        (StoreUrl::Tenure(_), false) if s.store_user.is_some() => {
            bail!("--store-user is for etcd stores; tenure's cluster takes --store-token-file")
        }
        (StoreUrl::Etcd(_) | StoreUrl::ZooKeeper(_), false) => bail!(
            "--store-token and --store-token-file are for tenure:// stores; {store} takes \
             --store-cacert and --store-user"
        ),
        _ => {}
    }
    Ok(StoreSettings {
        base,
        store,
        election,
        ttl,
        advertise_http: s.advertise_http,
        store_auth: StoreAuth {
            cacert: s.store_cacert,
            user: s.store_user,
            zk_min_ttl: s.store_min_ttl_ms.map(Duration::from_millis),
        },
        store_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use tenure_core::NodeId;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        server: ServerArgs,
    }

    fn parse(args: &[&str]) -> Result<ServerArgs, String> {
        let mut all = vec!["server"];
        all.extend_from_slice(args);
        Wrap::try_parse_from(all).map(|w| w.server).map_err(|e| e.to_string())
    }

    fn resolved(args: &[&str]) -> Result<StoreSettings, String> {
        resolve(&parse(args)?).map_err(|e| format!("{e:#}"))
    }

    const BASE: [&str; 8] = [
        "--id",
        "4",
        "--insecure-no-tls",
        "--insecure-open-api",
        "--store",
        "tenure://127.0.0.1:8001,127.0.0.1:8002",
        "--store-token",
        "0123456789abcdef0123",
    ];

    #[test]
    fn defaults_name_the_election_after_the_cluster_and_take_a_ten_second_ttl() {
        let s = resolved(&BASE).unwrap();
        assert_eq!((s.base.id, s.election.as_str()), (NodeId(4), "tenure"));
        assert_eq!(s.ttl, Duration::from_secs(10));
        assert_eq!(s.base.http, "127.0.0.1:8004".parse().unwrap());
        assert_eq!(s.store.to_string(), "tenure://127.0.0.1:8001,127.0.0.1:8002");
        let mut args = BASE.to_vec();
        args.extend(["--election", "db", "--ttl-ms", "1000", "--cluster-id", "prod"]);
        let s = resolved(&args).unwrap();
        assert_eq!((s.election.as_str(), s.ttl), ("db", Duration::from_secs(1)));
    }

    #[test]
    fn the_config_file_may_hold_the_store_settings_under_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("t.toml");
        std::fs::write(
            &config,
            "id = 5\ninsecure_no_tls = true\ninsecure_open_api = true\n\
             store = \"tenure://127.0.0.1:8001\"\nelection = \"db\"\nttl_ms = 3000\n\
             advertise_http = \"h:8005\"\nstore_token_file = \"s.token\"\n",
        )
        .unwrap();
        let path = config.to_str().unwrap();
        assert!(parse(&["--config", path]).unwrap().store_led().unwrap());
        let s = resolved(&["--config", path]).unwrap();
        assert_eq!(
            (s.base.id, s.election.as_str(), s.ttl),
            (NodeId(5), "db", Duration::from_secs(3))
        );
        assert_eq!(s.advertise_http.as_deref(), Some("h:8005"));
        assert_eq!(s.store_token.token_file.as_deref(), Some(std::path::Path::new("s.token")));
        let s = resolved(&["--config", path, "--election", "other", "--ttl-ms", "2000"]).unwrap();
        assert_eq!((s.election.as_str(), s.ttl), ("other", Duration::from_secs(2)));
        assert!(!parse(&["--id", "1"]).unwrap().store_led().unwrap());
    }

    #[test]
    fn consensus_flags_and_keys_are_refused_by_name() {
        let mut args = BASE.to_vec();
        args.extend(["--peers", "1=127.0.0.1:7001", "--data-dir", "/tmp/x", "--reset-state"]);
        let err = resolved(&args).unwrap_err();
        assert!(err.contains("remove --peers, --data-dir, --reset-state"), "{err}");
        assert!(err.contains("no consensus node"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("t.toml");
        std::fs::write(&config, "heartbeat_ms = 50\nlisten = \"127.0.0.1:1\"\n").unwrap();
        let mut args = BASE.to_vec();
        args.extend(["--config", config.to_str().unwrap()]);
        let err = resolved(&args).unwrap_err();
        assert!(err.contains("the config file's listen, heartbeat_ms"), "{err}");
    }

    #[test]
    fn store_flags_need_store_and_bad_values_are_explained() {
        for args in [["--id", "1", "--election", "x"], ["--id", "1", "--store-token-file", "t"]] {
            let mut args = args.to_vec();
            args.extend(["--insecure-no-tls", "--insecure-open-api"]);
            let err = format!("{:#}", parse(&args).unwrap().resolve().unwrap_err());
            assert!(err.contains("apply only with --store URL"), "{err}");
        }
        for (extra, says) in [
            (["--ttl-ms", "100"], "--ttl-ms"),
            (["--election", "a/b"], "--election"),
            (["--advertise-http", "nohost"], "--advertise-http"),
            (["--http", "0.0.0.0:8011"], "give --advertise-http HOST:PORT"),
        ] {
            let mut args = BASE.to_vec();
            args.extend(extra);
            let err = resolved(&args).unwrap_err();
            assert!(err.contains(says), "{extra:?}: {err}");
        }
        let mut args = BASE.to_vec();
        args[5] = "consul://h:1";
        let err = resolved(&args).unwrap_err();
        assert!(err.contains("unknown store"), "{err}");
        let err = resolved(&BASE[..6]).unwrap_err();
        assert!(err.contains("--store-token-file"), "{err}");
    }
}
