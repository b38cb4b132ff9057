//! tenure's API tokens as the etcd listener's users
//! ([`tenure_etcd_server::auth`]): a token's name and secret are an etcd
//! user's name and password, its role the calls it may make.

use crate::http::auth::{ApiAuth, Role};
use std::sync::Arc;
use tenure_etcd_server::auth::{Auth, Permission, Policy, Tokens};

/// The tokens of the HTTP API, for the etcd listener.
struct ApiTokens(ApiAuth);

fn permission(role: Role) -> Permission {
    match role {
        Role::Read => Permission::Read,
        Role::Write => Permission::Write,
        Role::Admin => Permission::Admin,
    }
}

impl Tokens for ApiTokens {
    fn login(&self, name: &str, secret: &str) -> Option<Permission> {
        let token = self.0.token_of(secret)?;
        (token.name() == name).then(|| permission(token.role()))
    }

    fn bearer(&self, secret: &str) -> Option<(Arc<str>, Permission)> {
        let token = self.0.token_of(secret)?;
        Some((token.name().into(), permission(token.role())))
    }

    fn named(&self, name: &str) -> Option<Permission> {
        self.0.tokens().iter().find(|t| t.name() == name).map(|t| permission(t.role()))
    }
}

/// The etcd listener's auth over `api`, on cluster `cluster_id`: its
/// tokens (none when the API is open to anyone: Authenticate then answers
/// that auth is off), and whether a call without one is refused
/// (`require_token`) or is the client certificate's.
pub(crate) fn etcd_auth(api: &ApiAuth, require_token: bool, cluster_id: &str) -> Auth {
    let tokens = (!api.is_insecure_open() && !api.tokens().is_empty())
        .then(|| Arc::new(ApiTokens(api.clone())) as Arc<dyn Tokens>);
    let policy = if require_token { Policy::TokenRequired } else { Policy::Certificate };
    Auth { tokens, policy, cluster_id: cluster_id.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::auth::ApiToken;

    #[test]
    fn a_token_logs_in_by_its_name_and_secret_and_keeps_its_role() {
        let api = ApiAuth::with_tokens(vec![
            ApiToken::new("reader", Role::Read, "reader-secret-0123456789abcdef").unwrap(),
            ApiToken::new("app", Role::Write, "app-secret-0123456789abcdef0123").unwrap(),
        ])
        .unwrap();
        let auth = etcd_auth(&api, true, "prod");
        assert_eq!(auth.policy, Policy::TokenRequired);
        let tokens = auth.tokens.expect("tokens");
        assert_eq!(tokens.login("app", "app-secret-0123456789abcdef0123"), Some(Permission::Write));
        assert_eq!(tokens.login("reader", "app-secret-0123456789abcdef0123"), None, "wrong name");
        assert_eq!(tokens.login("app", "guess"), None);
        let (name, p) = tokens.bearer("reader-secret-0123456789abcdef").unwrap();
        assert_eq!((&*name, p), ("reader", Permission::Read));
        assert_eq!(tokens.named("app"), Some(Permission::Write));
        assert_eq!(tokens.named("nobody"), None);
        assert!(etcd_auth(&ApiAuth::insecure_open(), false, "prod").tokens.is_none());
    }
}
