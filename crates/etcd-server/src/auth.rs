//! Who may call what on the etcd listener: tenure's API tokens as etcd's
//! users (docs/ETCD.md, "Users and roles").
//!
//! `Authenticate{name, password}` with a token's name and its secret answers
//! a token that the client then sends with every call (gRPC metadata
//! `token`, as etcd's clients do): the call gets the token's role. A call
//! without one is the client certificate's ([`Policy::Certificate`]): a
//! node's certificate is an administrator's, any other has the role of the
//! token named as the certificate names its user, as etcd takes a
//! certificate's common name for the user's name; unless the listener
//! requires tokens ([`Policy::TokenRequired`]). Each method needs a
//! role ([`needed`]); a call below it is refused with etcd's `permission
//! denied` before the service sees it (`crate::gate`). The caller rides in
//! the request's extensions ([`Caller`]) for the checks that depend on what
//! the call touches: a lease's owner (renewing, revoking, attaching keys,
//! campaigning or locking with it) and whether a Txn writes.

use crate::subject::Presented;
use std::sync::Arc;
use tenure_etcd_api::etcdserverpb::{AuthenticateRequest, AuthenticateResponse};
use tonic::{Request, Response, Status};

/// A caller's role on the etcd API, in increasing order of power: tenure's
/// token roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Reads, watches, leader and member lists, status.
    Read,
    /// Writes, leases, campaigns and locks; and all of `Read`.
    Write,
    /// Compaction, and every lease whoever owns it; and all of `Write`.
    Admin,
}

/// The caller of one request, as the auth layer found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The name of its token; none for a call by client certificate.
    pub token: Option<Arc<str>>,
    /// What it may do.
    pub permission: Permission,
}

impl Caller {
    /// A call by a node's certificate alone, without tokens (an API open to
    /// anyone), or on a plain listener: an administrator.
    pub fn certificate() -> Caller {
        Caller { token: None, permission: Permission::Admin }
    }

    /// The caller a request carries (a request the layer did not see, in
    /// unit tests, is the certificate's).
    pub fn of<T>(request: &Request<T>) -> Caller {
        request.extensions().get::<Caller>().cloned().unwrap_or_else(Caller::certificate)
    }

    /// The owner a lease this caller grants records: its token's name
    /// (none for a certificate: the administrators').
    pub fn grant_owner(&self) -> Option<String> {
        self.token.as_deref().map(str::to_string)
    }

    /// Whether it may renew or revoke a lease owned by `owner`: an
    /// administrator always, else only the token named `owner`.
    pub fn may_use(&self, owner: Option<&str>) -> bool {
        self.permission == Permission::Admin
            || owner.is_some_and(|o| self.token.as_deref() == Some(o))
    }
}

/// tenure's API tokens, as the etcd listener checks them (implemented by
/// the server over its token configuration).
pub trait Tokens: Send + Sync + 'static {
    /// The role of the token named `name` whose secret is `secret`.
    fn login(&self, name: &str, secret: &str) -> Option<Permission>;
    /// The name and role of the token whose secret is `secret`.
    fn bearer(&self, secret: &str) -> Option<(Arc<str>, Permission)>;
    /// The role of the token named `name`.
    fn named(&self, name: &str) -> Option<Permission>;
}

/// What a call without a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The client certificate's call ([`certificate_user`]): a node's
    /// certificate is an administrator, any other has the role of the
    /// token of the name it gives.
    Certificate,
    /// Refused: every call but Authenticate needs a token.
    TokenRequired,
}

/// The auth of one listener: the tokens (none: Authenticate answers that
/// auth is off), the policy for calls without one, and the cluster's id
/// (part of the names in its certificates).
#[derive(Clone)]
pub struct Auth {
    /// The tokens, if the server has any.
    pub tokens: Option<Arc<dyn Tokens>>,
    /// Calls without a token.
    pub policy: Policy,
    /// The cluster's id (`--cluster-id`).
    pub cluster_id: String,
}

/// Who a client certificate of the cluster's CA is, by its common name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertificateUser<'a> {
    /// One of the cluster's nodes (`node-<id>.<cluster id>`, as `tenure
    /// cert --nodes` makes them).
    Node,
    /// The user of this name: `client-<name>.<cluster id>` (as `tenure cert
    /// --clients` makes them) names `<name>`; any other common name (another
    /// cluster's node, a certificate made by other tools) names itself.
    User(&'a str),
}

/// Who the certificate with common name `cn` is on cluster `cluster_id`.
pub fn certificate_user<'a>(cn: &'a str, cluster_id: &str) -> CertificateUser<'a> {
    let ours = cn.strip_suffix(cluster_id).and_then(|rest| rest.strip_suffix('.'));
    if let Some(id) = ours.and_then(|rest| rest.strip_prefix("node-")) {
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            return CertificateUser::Node;
        }
    }
    match ours.and_then(|rest| rest.strip_prefix("client-")) {
        Some(name) if !name.is_empty() => CertificateUser::User(name),
        _ => CertificateUser::User(cn),
    }
}

/// The answer to a call without a token by a certificate without a common
/// name.
pub const NO_COMMON_NAME: &str = "tenure: this client certificate names no user (its subject \
     has no common name): call with a token (etcdctl --user NAME:SECRET), or use a certificate \
     made by `tenure cert --clients NAME` for a token named NAME";

/// etcd's answer to Authenticate while its auth is off, which clients take
/// as "carry on without a token".
pub const AUTH_NOT_ENABLED: &str = "etcdserver: authentication is not enabled";
/// etcd's answer to a bad name or password.
pub const AUTH_FAILED: &str = "etcdserver: authentication failed, invalid user ID or password";
/// etcd's answer to a token it does not know; clientv3 authenticates again.
pub const INVALID_TOKEN: &str = "etcdserver: invalid auth token";
/// etcd's answer to a call without a token where one is required.
pub const USER_EMPTY: &str = "etcdserver: user name is empty";
/// etcd's answer to a call the caller's role does not allow.
pub const PERMISSION_DENIED: &str = "etcdserver: permission denied";

/// The longest name or password Authenticate reads.
const MAX_CREDENTIAL_BYTES: usize = 1024;

/// gRPC's health check (`grpc.health.v1.Health`), served as etcd serves it.
pub const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";

/// The health service's stream, not served: it would hold the listener's
/// shutdown open (probes call Check).
pub const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";

/// The role a method needs; `None` for Authenticate and the health
/// check, which anyone may call. Methods not listed (compaction, the Auth administration, member
/// changes, maintenance beyond Status and Alarm) need `Admin`.
pub fn needed(path: &str) -> Option<Permission> {
    use Permission::*;
    Some(match path {
        // Health probes, as etcd answers them: without credentials.
        "/etcdserverpb.Auth/Authenticate" | HEALTH_CHECK => return None,
        // A Txn that writes needs `write`: checked by the KV service, which
        // sees whether it does.
        "/etcdserverpb.KV/Range"
        | "/etcdserverpb.KV/Txn"
        | "/etcdserverpb.Watch/Watch"
        | "/etcdserverpb.Lease/LeaseTimeToLive"
        | "/etcdserverpb.Lease/LeaseLeases"
        | "/etcdserverpb.Cluster/MemberList"
        | "/etcdserverpb.Maintenance/Status"
        | "/etcdserverpb.Maintenance/Alarm"
        | "/v3electionpb.Election/Leader"
        | "/v3electionpb.Election/Observe" => Read,
        "/etcdserverpb.KV/Put"
        | "/etcdserverpb.KV/DeleteRange"
        | "/etcdserverpb.Lease/LeaseGrant"
        | "/etcdserverpb.Lease/LeaseRevoke"
        | "/etcdserverpb.Lease/LeaseKeepAlive"
        | "/v3electionpb.Election/Campaign"
        | "/v3electionpb.Election/Proclaim"
        | "/v3electionpb.Election/Resign"
        | "/v3lockpb.Lock/Lock"
        | "/v3lockpb.Lock/Unlock" => Write,
        _ => Admin,
    })
}

/// Methods that need an admin token even where a client certificate alone
/// is an administrator: the member changes, which can take the cluster
/// apart (the HTTP API's `/v1/members` asks the same).
const TOKEN_ONLY: [&str; 3] = [
    "/etcdserverpb.Cluster/MemberAdd",
    "/etcdserverpb.Cluster/MemberRemove",
    "/etcdserverpb.Cluster/MemberPromote",
];

/// The answer to a member change without a token.
pub const MEMBERS_NEED_A_TOKEN: &str = "tenure: member changes need an admin token \
     (etcdctl --user NAME:SECRET with an admin token's name and secret); a client certificate \
     alone does not make them";

impl Auth {
    /// The caller of a call to `path` presenting `token` (the `token`
    /// metadata) on a connection whose client showed what `presented`
    /// reads (asked only for a call without a token), or the refusal etcd
    /// would answer.
    pub fn admit(
        &self,
        path: &str,
        token: Option<&[u8]>,
        presented: impl FnOnce() -> Presented,
    ) -> Result<Caller, Status> {
        let Some(needed) = needed(path) else { return Ok(Caller::certificate()) };
        let caller = match token {
            None if self.tokens.is_some() && TOKEN_ONLY.contains(&path) => {
                return Err(Status::permission_denied(MEMBERS_NEED_A_TOKEN))
            }
            None => match self.policy {
                Policy::Certificate => self.certificate_caller(&presented())?,
                Policy::TokenRequired => return Err(Status::invalid_argument(USER_EMPTY)),
            },
            Some(token) => {
                let found = self.tokens.as_ref().and_then(|tokens| {
                    let secret = std::str::from_utf8(token).ok()?;
                    tokens.bearer(secret.trim())
                });
                let Some((name, permission)) = found else {
                    return Err(Status::unauthenticated(INVALID_TOKEN));
                };
                Caller { token: Some(name), permission }
            }
        };
        if caller.permission < needed {
            return Err(Status::permission_denied(PERMISSION_DENIED));
        }
        Ok(caller)
    }

    /// The caller of a call without a token by a client that `presented`
    /// what it did.
    fn certificate_caller(&self, presented: &Presented) -> Result<Caller, Status> {
        let (Some(tokens), Presented::Certificate(cn)) = (&self.tokens, presented) else {
            // No tokens (an API open to anyone) or no TLS: anyone is an
            // administrator, as on an etcd whose auth is off.
            return Ok(Caller::certificate());
        };
        let Some(cn) = cn else { return Err(Status::permission_denied(NO_COMMON_NAME)) };
        match certificate_user(cn, &self.cluster_id) {
            CertificateUser::Node => Ok(Caller::certificate()),
            CertificateUser::User(name) => match tokens.named(name) {
                Some(permission) => Ok(Caller { token: Some(name.into()), permission }),
                None => Err(Status::permission_denied(format!(
                    "tenure: this client certificate names the user {name:?}, and no API token \
                     is named so; a call without a token has the role of the token the \
                     certificate names: give the nodes a token named {name:?} ([[api_tokens]]), \
                     or call with a token (etcdctl --user NAME:SECRET)"
                ))),
            },
        }
    }

    /// etcd's Authenticate: a token's name and secret answer the secret as
    /// the token to send with every call (any node takes it, as every node
    /// has the same tokens); without tokens, etcd's "not enabled".
    pub fn authenticate(
        &self,
        request: Request<AuthenticateRequest>,
        header: tenure_etcd_api::etcdserverpb::ResponseHeader,
    ) -> Result<Response<AuthenticateResponse>, Status> {
        let Some(tokens) = &self.tokens else {
            return Err(Status::failed_precondition(AUTH_NOT_ENABLED));
        };
        let r = request.into_inner();
        if r.name.len() > MAX_CREDENTIAL_BYTES || r.password.len() > MAX_CREDENTIAL_BYTES {
            return Err(Status::invalid_argument(AUTH_FAILED));
        }
        match tokens.login(&r.name, &r.password) {
            Some(_) => {
                Ok(Response::new(AuthenticateResponse { header: Some(header), token: r.password }))
            }
            None => Err(Status::invalid_argument(AUTH_FAILED)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Two;
    impl Tokens for Two {
        fn login(&self, name: &str, secret: &str) -> Option<Permission> {
            self.bearer(secret).filter(|(n, _)| &**n == name).map(|(_, p)| p)
        }
        fn bearer(&self, secret: &str) -> Option<(Arc<str>, Permission)> {
            match secret {
                "r-secret" => Some(("reader".into(), Permission::Read)),
                "w-secret" => Some(("app".into(), Permission::Write)),
                _ => None,
            }
        }
        fn named(&self, name: &str) -> Option<Permission> {
            ["r-secret", "w-secret"]
                .into_iter()
                .find_map(|s| self.bearer(s).filter(|(n, _)| &**n == name).map(|(_, p)| p))
        }
    }

    fn auth(policy: Policy) -> Auth {
        Auth { tokens: Some(Arc::new(Two)), policy, cluster_id: "prod".into() }
    }

    /// A client certificate of the cluster's CA with common name `cn`.
    fn cert(cn: &str) -> Presented {
        Presented::Certificate(Some(cn.into()))
    }

    const NODE: &str = "node-2.prod";

    #[test]
    fn a_token_gets_its_role_and_nothing_above_it() {
        let a = auth(Policy::Certificate);
        let reader = a.admit("/etcdserverpb.KV/Range", Some(b"r-secret"), || cert(NODE)).unwrap();
        assert_eq!(
            (reader.token.as_deref(), reader.permission),
            (Some("reader"), Permission::Read)
        );
        let put = a.admit("/etcdserverpb.KV/Put", Some(b"r-secret"), || cert(NODE)).unwrap_err();
        assert_eq!((put.code(), put.message()), (tonic::Code::PermissionDenied, PERMISSION_DENIED));
        assert!(a.admit("/etcdserverpb.KV/Put", Some(b"w-secret"), || cert(NODE)).is_ok());
        let compact =
            a.admit("/etcdserverpb.KV/Compact", Some(b"w-secret"), || cert(NODE)).unwrap_err();
        assert_eq!(compact.code(), tonic::Code::PermissionDenied);
        // An unknown method needs an administrator.
        assert!(a.admit("/etcdserverpb.Auth/UserAdd", Some(b"w-secret"), || cert(NODE)).is_err());
        let bad = a.admit("/etcdserverpb.KV/Range", Some(b"guess"), || cert(NODE)).unwrap_err();
        assert_eq!((bad.code(), bad.message()), (tonic::Code::Unauthenticated, INVALID_TOKEN));
    }

    #[test]
    fn without_a_token_the_policy_decides() {
        let open = auth(Policy::Certificate);
        assert_eq!(
            open.admit("/etcdserverpb.KV/Compact", None, || cert(NODE)).unwrap(),
            Caller::certificate()
        );
        let strict = auth(Policy::TokenRequired);
        let e = strict.admit("/etcdserverpb.KV/Range", None, || cert(NODE)).unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::InvalidArgument, USER_EMPTY));
        assert!(
            strict.admit("/etcdserverpb.Auth/Authenticate", None, || cert(NODE)).is_ok(),
            "to get one"
        );
        // Member changes need an admin token even where a certificate is an
        // administrator; without tokens (an open API) anyone is.
        for path in TOKEN_ONLY {
            let e = open.admit(path, None, || cert(NODE)).unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (tonic::Code::PermissionDenied, MEMBERS_NEED_A_TOKEN)
            );
            assert!(open.admit(path, Some(b"w-secret"), || cert(NODE)).is_err(), "{path}");
            let no_tokens =
                Auth { tokens: None, policy: Policy::Certificate, cluster_id: "prod".into() };
            assert!(no_tokens.admit(path, None, || cert(NODE)).is_ok(), "{path}");
        }
        assert!(open.admit("/etcdserverpb.Cluster/MemberList", None, || cert(NODE)).is_ok());
    }

    #[test]
    fn without_a_token_a_certificate_has_the_role_of_the_token_it_names() {
        let a = auth(Policy::Certificate);
        let range = "/etcdserverpb.KV/Range";
        let put = "/etcdserverpb.KV/Put";
        // A node's certificate: an administrator.
        assert_eq!(
            a.admit("/etcdserverpb.KV/Compact", None, || cert(NODE)).unwrap(),
            Caller::certificate()
        );
        // An application's (`tenure cert --clients reader`): the token reader's role, as it.
        let reader = a.admit(range, None, || cert("client-reader.prod")).unwrap();
        assert_eq!(
            (reader.token.as_deref(), reader.permission),
            (Some("reader"), Permission::Read)
        );
        let e = a.admit(put, None, || cert("client-reader.prod")).unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::PermissionDenied, PERMISSION_DENIED));
        let app = a.admit(put, None, || cert("client-app.prod")).unwrap();
        assert_eq!((app.token.as_deref(), app.permission), (Some("app"), Permission::Write));
        // A common name of other tools names its user as it is.
        assert_eq!(a.admit(put, None, || cert("app")).unwrap().token.as_deref(), Some("app"));
        // No token of that name, another cluster's node or client, no common
        // name: refused, saying why.
        for cn in [
            "client-stranger.prod",
            "node-2.staging",
            "client-app.staging",
            "node-x.prod",
            "node-.prod",
            "client-.prod",
        ] {
            let e = a.admit(range, None, || cert(cn)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{cn}");
            assert!(e.message().contains("no API token is named so"), "{cn}: {}", e.message());
        }
        let e = a.admit(range, None, || Presented::Certificate(None)).unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::PermissionDenied, NO_COMMON_NAME));
        // A token decides over the certificate, either way.
        let up = a.admit(put, Some(b"w-secret"), || cert("client-reader.prod")).unwrap();
        assert_eq!(up.permission, Permission::Write);
        let down = a.admit(put, Some(b"r-secret"), || cert(NODE)).unwrap_err();
        assert_eq!(down.code(), tonic::Code::PermissionDenied);
        // A plain listener, or no tokens at all: anyone is an administrator.
        assert_eq!(a.admit(put, None, || Presented::Plain).unwrap(), Caller::certificate());
        let open = Auth { tokens: None, policy: Policy::Certificate, cluster_id: "prod".into() };
        assert_eq!(
            open.admit(put, None, || cert("client-stranger.prod")).unwrap(),
            Caller::certificate()
        );
        // Required tokens: a certificate alone is nobody.
        let e = auth(Policy::TokenRequired).admit(range, None, || cert(NODE)).unwrap_err();
        assert_eq!(e.message(), USER_EMPTY);
    }

    #[test]
    fn a_certificates_common_name_names_a_node_or_a_user() {
        use CertificateUser::*;
        for (cn, want) in [
            ("node-1.prod", Node),
            ("node-12345.prod", Node),
            ("client-billing-api.prod", User("billing-api")),
            ("client-a.b.prod", User("a.b")),
            ("billing", User("billing")),
            ("node-1.staging", User("node-1.staging")),
            ("node-1.xprod", User("node-1.xprod")),
            ("node-1prod", User("node-1prod")),
            ("node-one.prod", User("node-one.prod")),
            ("client-.prod", User("client-.prod")),
            ("prod", User("prod")),
            ("", User("")),
        ] {
            assert_eq!(certificate_user(cn, "prod"), want, "{cn}");
        }
    }

    #[test]
    fn authenticate_answers_the_token_for_a_name_and_its_secret_only() {
        let a = auth(Policy::TokenRequired);
        let login = |name: &str, password: &str| {
            let r = AuthenticateRequest { name: name.into(), password: password.into() };
            a.authenticate(Request::new(r), Default::default())
        };
        assert_eq!(login("app", "w-secret").unwrap().into_inner().token, "w-secret");
        for (name, password) in [("reader", "w-secret"), ("app", "nope"), ("", "")] {
            let e = login(name, password).unwrap_err();
            assert_eq!((e.code(), e.message()), (tonic::Code::InvalidArgument, AUTH_FAILED));
        }
        // A stranger's huge or malformed credentials: refused, as a wrong one.
        let huge = "x".repeat(MAX_CREDENTIAL_BYTES + 1);
        for (name, password) in [(huge.as_str(), "w-secret"), ("app", huge.as_str())] {
            let e = login(name, password).unwrap_err();
            assert_eq!((e.code(), e.message()), (tonic::Code::InvalidArgument, AUTH_FAILED));
        }
        for token in [&[0xff, 0xfe][..], &[b'x'; 70_000][..], b""] {
            let e = a.admit("/etcdserverpb.KV/Range", Some(token), || cert(NODE)).unwrap_err();
            assert_eq!((e.code(), e.message()), (tonic::Code::Unauthenticated, INVALID_TOKEN));
        }
        let off = Auth { tokens: None, policy: Policy::Certificate, cluster_id: "prod".into() };
        let r = AuthenticateRequest { name: "app".into(), password: "w-secret".into() };
        let e = off.authenticate(Request::new(r), Default::default()).unwrap_err();
        assert_eq!(e.message(), AUTH_NOT_ENABLED);
    }

    #[test]
    fn a_lease_is_its_owners_and_the_administrators() {
        let app = Caller { token: Some("app".into()), permission: Permission::Write };
        assert!(app.may_use(Some("app")));
        assert!(!app.may_use(Some("other")));
        assert!(!app.may_use(None), "a lease without owner is the administrators'");
        assert!(Caller::certificate().may_use(Some("app")));
        assert_eq!(app.grant_owner().as_deref(), Some("app"));
        assert_eq!(Caller::certificate().grant_owner(), None);
    }
}
