//! Sessions have owners (docs/SECURITY.md, "Sessions belong to a token"):
//! a session belongs to the API token that granted it, named in the
//! replicated grant ([`tenure_kv::Lease::owner`]), so every node and every
//! later leader knows it. Only its owner, or an `admin` token, may renew,
//! revoke, campaign, resign or proclaim with it, or attach keys to it;
//! anyone else gets 403 and nothing is done. A session with no owner (one
//! granted without a token, under `--insecure-open-api`, or logged before
//! owners existed) belongs to the administrators.
//!
//! A token is known by its configured name, not by its secret or a digest
//! of it: the name is unique per configuration, not secret (the replicated
//! state and `GET /v1/sessions` may show it), and it survives rotating the
//! secret. Every node must therefore give one application's token the same
//! name, as it gives it the same role.
//!
//! The check reads the session's owner before proposing. Lease ids are
//! never reused and an owner never changes, so an owner read once holds
//! for good; a session this node has not applied yet is looked up again
//! after a linearizable read, and one still absent is refused (404) rather
//! than proposed, so no grant can slip in under a guessed id in between.

use super::auth::{Caller, Role};
use super::error::ApiError;
use super::state::AppState;
use axum::http::StatusCode;
use tenure_kv::{Command, LeaseId, RangeOp, RangeTxn, Store, TxnOp};

/// What a refused caller asked to do with the session, for the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// Renew it (a keepalive or a keepalive stream).
    Renew,
    /// Revoke it.
    Revoke,
    /// Campaign with it.
    Campaign,
    /// Resign its candidacy.
    Resign,
    /// Proclaim a value with it.
    Proclaim,
    /// Attach keys to it (a put or a transaction with `lease`).
    Attach,
    /// Join a group of partitions with it (or update the member).
    JoinGroup,
    /// Leave a group with it.
    LeaveGroup,
    /// Release a partition it owns.
    ReleasePartition,
}

impl Use {
    fn verb(self) -> &'static str {
        match self {
            Use::Renew => "renew",
            Use::Revoke => "revoke",
            Use::Campaign => "campaign with",
            Use::Resign => "resign with",
            Use::Proclaim => "proclaim with",
            Use::Attach => "attach keys to",
            Use::JoinGroup => "join a group with",
            Use::LeaveGroup => "leave a group with",
            Use::ReleasePartition => "release a partition with",
        }
    }
}

/// The owner a grant by `caller` records: its token's name (none without a
/// token: the administrators).
pub(crate) fn grant_owner(caller: &Caller) -> Option<String> {
    caller.token.as_deref().map(str::to_string)
}

/// Whether `caller` may use a session owned by `owner`: an admin token (or
/// an open API) always, else only the token named `owner`.
fn may_use(caller: &Caller, owner: Option<&str>) -> bool {
    caller.role == Some(Role::Admin)
        || owner.is_some_and(|o| caller.token.as_deref().is_some_and(|t| t == o))
}

/// The sessions a command would use: the leases its puts attach keys to,
/// and the one it revokes.
pub(crate) fn leases_used(command: &Command) -> Vec<LeaseId> {
    let mut leases = match command {
        Command::Put { lease, .. } => lease.iter().copied().collect(),
        Command::Txn { success, failure, .. } => success
            .iter()
            .chain(failure)
            .filter_map(|op| match op {
                TxnOp::Put { lease, .. } => *lease,
                TxnOp::Delete { .. } | TxnOp::Get { .. } => None,
            })
            .collect(),
        Command::Revoke { lease } => vec![*lease],
        Command::RangeTxn(txn) => {
            let mut leases = Vec::new();
            range_txn_leases(txn, &mut leases);
            leases
        }
        Command::Delete { .. }
        | Command::Grant { .. }
        | Command::Expire { .. }
        | Command::ExpireMany { .. }
        | Command::Checkpoint(_)
        | Command::DeleteRange { .. }
        | Command::Compact { .. } => vec![],
    };
    leases.sort_unstable();
    leases.dedup();
    leases
}

/// The leases the puts of etcd's transaction attach keys to, nested ones
/// included.
fn range_txn_leases(txn: &RangeTxn, leases: &mut Vec<LeaseId>) {
    for op in txn.success.iter().chain(&txn.failure) {
        match op {
            RangeOp::Put { lease: Some(lease), .. } => leases.push(*lease),
            RangeOp::Txn(nested) => range_txn_leases(nested, leases),
            _ => {}
        }
    }
}

/// Why a session may not be used.
enum Blocked {
    /// This node has not (or no longer) the session.
    Missing(LeaseId),
    /// Another token's (or the administrators').
    Foreign(LeaseId, Option<String>),
}

fn check(store: &Store, caller: &Caller, leases: &[LeaseId]) -> Result<(), Blocked> {
    for &id in leases {
        let lease = store.lease(id).ok_or(Blocked::Missing(id))?;
        if !may_use(caller, lease.owner.as_deref()) {
            return Err(Blocked::Foreign(id, lease.owner.clone()));
        }
    }
    Ok(())
}

/// Admits `caller` to `what` with each of `leases`, or refuses: 403 for a
/// session of another token, 404 for one that does not exist (after a
/// linearizable read).
pub(crate) async fn require_owner(
    st: &AppState,
    caller: &Caller,
    leases: &[LeaseId],
    what: Use,
) -> Result<(), ApiError> {
    if leases.is_empty() || caller.role == Some(Role::Admin) {
        return Ok(());
    }
    let blocked = match st.kv.read_stale(|s| check(s, caller, leases)).0 {
        Ok(()) => return Ok(()),
        // Not applied here yet, perhaps: as fresh as the call, then again.
        Err(Blocked::Missing(_)) => {
            super::store::read(st, super::store::Consistency::Linearizable, |s| {
                check(s, caller, leases)
            })
            .await?
        }
        Err(foreign) => Err(foreign),
    };
    match blocked {
        Ok(()) => Ok(()),
        Err(Blocked::Missing(id)) => Err(not_found(id)),
        Err(Blocked::Foreign(id, owner)) => Err(foreign(caller, id, owner.as_deref(), what)),
    }
}

/// 403: the session is not the caller's.
fn foreign(caller: &Caller, id: LeaseId, owner: Option<&str>, what: Use) -> ApiError {
    let owner = match owner {
        Some(o) => format!("API token {o:?}"),
        None => "the administrators (it was granted without a token)".to_string(),
    };
    let caller = caller.token.as_deref().unwrap_or("-");
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "session {id} belongs to {owner}: only it or an admin token may {} it, not token \
             {caller:?}; nothing was done",
            what.verb()
        ),
    )
}

/// 404 for a session that does not exist.
pub(crate) fn not_found(lease: LeaseId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("session {lease} does not exist (never granted, or revoked or expired)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn caller(token: Option<&str>, role: Role) -> Caller {
        Caller { token: token.map(Arc::from), role: Some(role), addr: None }
    }

    #[test]
    fn only_the_owner_or_an_admin_may_use_a_session() {
        let app = caller(Some("app"), Role::Write);
        let other = caller(Some("other"), Role::Write);
        let ops = caller(Some("ops"), Role::Admin);
        let open = caller(None, Role::Admin);
        assert!(may_use(&app, Some("app")));
        assert!(!may_use(&other, Some("app")));
        assert!(!may_use(&app, None), "the administrators' session");
        assert!(may_use(&ops, Some("app")) && may_use(&ops, None));
        assert!(may_use(&open, Some("app")), "an open API admits everyone as admin");
        assert_eq!(grant_owner(&app).as_deref(), Some("app"));
        assert_eq!(grant_owner(&open), None);
        let e = foreign(&other, LeaseId(7), Some("app"), Use::Proclaim);
        assert_eq!(e.status(), StatusCode::FORBIDDEN);
        let text = &e.body().error;
        assert!(
            text.contains("session 7 belongs to API token \"app\"")
                && text.contains("proclaim with")
                && text.contains("\"other\""),
            "{text}"
        );
    }

    #[test]
    fn the_sessions_a_command_uses() {
        let put =
            |lease| Command::Put { key: "k".into(), value: vec![], if_mod_revision: None, lease };
        assert_eq!(leases_used(&put(Some(LeaseId(3)))), [LeaseId(3)]);
        assert!(leases_used(&put(None)).is_empty());
        assert_eq!(leases_used(&Command::Revoke { lease: LeaseId(4) }), [LeaseId(4)]);
        let op = |key: &str, lease| TxnOp::Put { key: key.into(), value: vec![], lease };
        let txn = Command::Txn {
            compare: vec![],
            success: vec![op("a", Some(LeaseId(2))), op("b", None)],
            failure: vec![op("a", Some(LeaseId(1))), op("c", Some(LeaseId(2)))],
        };
        assert_eq!(leases_used(&txn), [LeaseId(1), LeaseId(2)]);
        assert!(leases_used(&Command::Expire { lease: LeaseId(1) }).is_empty());
    }
}
