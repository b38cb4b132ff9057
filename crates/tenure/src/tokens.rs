//! API tokens on the command line: the server's (from the config file's
//! `[[api_tokens]]`, or none with `--insecure-open-api`) and the CLI
//! clients' (`--token`, `--token-file`, `TENURE_TOKEN`).

use anyhow::{bail, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use tenure_server::http::auth::{check_token, read_token_file};
use tenure_server::http::{ApiAuth, TokenSpec};

pub use tenure_client::TOKEN_ENV;

/// What `tenure server` says when no token is configured.
const NO_TOKENS: &str = "\
the HTTP API has no tokens configured, so anyone who reaches it could transfer leadership. \
Add tokens to the config file (--config):

  [[api_tokens]]
  name = \"ops\"
  role = \"admin\"                         # admin: transfer, and everything write may do
  token_file = \"/etc/tenure/ops.token\"   # one secret per file, at least 16 characters, chmod 600
                                         # (make one: umask 077; openssl rand -hex 32 > ops.token)
  [[api_tokens]]
  name = \"monitoring\"
  role = \"read\"                          # read: status, leader, watch, metrics, kv reads
                                         # (write: kv writes, and everything read may do)
  token_sha256 = \"<sha256sum of the token>\"

or, for a local test cluster only, pass --insecure-open-api (insecure_open_api = true)";

/// The server's API access from its settings: the tokens of the config file
/// (relative token files are found from `base`, the config file's
/// directory), whether the probes are open (default: yes), or, with
/// `insecure_open`, no checks at all. No tokens and not `insecure_open` is
/// an error: the server does not start with an API anyone could steer.
pub fn server_auth(
    tokens: Option<&[TokenSpec]>,
    base: &Path,
    open_probes: Option<bool>,
    insecure_open: bool,
) -> anyhow::Result<ApiAuth> {
    let tokens = tokens.unwrap_or_default();
    if insecure_open {
        if !tokens.is_empty() {
            bail!(
                "--insecure-open-api (insecure_open_api) turns every token check off, but \
                 api_tokens are configured: remove one or the other"
            );
        }
        return Ok(ApiAuth::insecure_open());
    }
    if tokens.is_empty() {
        bail!("{NO_TOKENS}");
    }
    let loaded = tokens
        .iter()
        .map(|spec| spec.load(base))
        .collect::<Result<Vec<_>, _>>()
        .context("bad `api_tokens` in the config file")?;
    let auth = ApiAuth::with_tokens(loaded).context("bad `api_tokens` in the config file")?;
    Ok(auth.open_probes(open_probes.unwrap_or(true)))
}

/// The token flags of `tenure status`, `watch`, `transfer`, `kv`, `elect` and `run`.
#[derive(Args, Debug, Default, Clone)]
pub struct TokenArgs {
    /// Bearer token for the HTTP API; status, watch, kv reads and elect --observe need role
    /// read, kv writes, elect and run write, transfer and notify-dead admin.
    /// Others on this machine can see a flag in `ps`: prefer TENURE_TOKEN or --token-file
    /// [default: $TENURE_TOKEN].
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// File holding the bearer token, instead of --token (it must not be readable by every
    /// user: chmod 600).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

impl TokenArgs {
    /// The token to send: `--token`, `--token-file`, else `$TENURE_TOKEN`, else none.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        if let Some(path) = &self.token_file {
            return Ok(Some(read_token_file(path)?));
        }
        let (token, what) = match (&self.token, std::env::var(TOKEN_ENV)) {
            (Some(t), _) => (t.trim().to_string(), "given with --token"),
            (None, Ok(t)) if !t.trim().is_empty() => (t.trim().to_string(), "in $TENURE_TOKEN"),
            _ => return Ok(None),
        };
        check_token(&token, what)?;
        Ok(Some(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use tenure_server::http::Role;

    fn spec(name: &str, role: Role, file: &str) -> TokenSpec {
        TokenSpec { name: name.into(), role, token_file: Some(file.into()), token_sha256: None }
    }

    #[test]
    fn no_tokens_refuses_to_start_unless_insecure() {
        let err = server_auth(None, Path::new("."), None, false).unwrap_err().to_string();
        assert!(err.contains("[[api_tokens]]") && err.contains("--insecure-open-api"), "{err}");
        assert!(server_auth(None, Path::new("."), None, true).unwrap().is_insecure_open());
    }

    #[test]
    fn tokens_are_loaded_from_files_beside_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ops.token");
        std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let specs = [spec("ops", Role::Admin, "ops.token")];
        let auth = server_auth(Some(&specs), dir.path(), Some(false), false).unwrap();
        assert_eq!((auth.tokens()[0].name(), auth.probes_open()), ("ops", false));
        assert!(server_auth(Some(&specs), dir.path(), None, false).unwrap().probes_open());

        let err = server_auth(Some(&specs), dir.path(), None, true).unwrap_err().to_string();
        assert!(err.contains("remove one or the other"), "{err}");

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o604)).unwrap();
        let err = format!("{:#}", server_auth(Some(&specs), dir.path(), None, false).unwrap_err());
        assert!(err.contains("readable by every user"), "{err}");
        assert!(!err.contains("0123456789abcdef0123"), "the error shows no token: {err}");
    }

    #[test]
    fn the_cli_token_is_checked_and_read_from_a_private_file() {
        let short = TokenArgs { token: Some("short".into()), token_file: None };
        let err = short.token().unwrap_err().to_string();
        assert!(err.contains("given with --token") && err.contains("at least 16"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, " 0123456789abcdef0123 \n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let from_file = TokenArgs { token: None, token_file: Some(file) };
        assert_eq!(from_file.token().unwrap().as_deref(), Some("0123456789abcdef0123"));
    }
}
