//! What a store-led server knows about leadership, and how it becomes the
//! [`Leadership`] its API publishes.
//!
//! Two inputs: this server's own candidacy ([`Local`], from the campaign
//! loop) and the election as the store tells it ([`Seen`], from an observe
//! stream). The leader's node id and HTTP address come from its candidate
//! value, [`CandidateValue`].
//!
//! Roles: **leader** while this server's leadership is valid (the leading
//! context not cancelled and the session's deadline not passed);
//! **candidate** while it campaigns and no leader is known (or the store
//! already names this server, before its own wait has confirmed it: for a
//! few milliseconds); **follower** otherwise: another server leads and this one waits in the queue behind
//! it, or this one is not campaigning (the pause after a loss, or
//! stopping). The **term** is the store's fencing token: the largest token
//! this server has seen (it never goes back, like a term), and the
//! `fencing_token` is the current leader's token.

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{FencingToken, NodeId, Role, Term};
use tenure_elect::CancellationToken;
use tenure_elect::{Election, Leading, Observed};
use tenure_node::Leadership;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// The value a store-led server campaigns with: who it is and where its API
/// listens, as JSON `{"id":N,"http":"host:port"}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CandidateValue {
    /// The server's node id (`--id`).
    pub id: u64,
    /// The address of its HTTP API that others can reach.
    pub http: String,
}

impl CandidateValue {
    /// The JSON form.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a candidate value encodes")
    }

    /// Parses a leader's value; None (with a warning) when it is not one.
    fn parse(value: &str, token: u64) -> Option<CandidateValue> {
        match serde_json::from_str::<CandidateValue>(value) {
            Ok(v) if v.id > 0 => Some(v),
            Ok(_) | Err(_) => {
                warn!(
                    token,
                    value = %value.chars().take(200).collect::<String>(),
                    "the election's leader campaigns with a value that is not a store-led \
                     server's {{\"id\":N,\"http\":\"host:port\"}}: its node id is unknown \
                     (is another program campaigning in this election?)"
                );
                None
            }
        }
    }
}

/// This server's own candidacy.
#[derive(Clone, Debug)]
pub(crate) enum Local {
    /// Not campaigning: before the first campaign, in the pause after a
    /// loss or a failure, or stopping.
    Idle,
    /// A session and a candidacy are being set up or wait in the queue.
    Campaigning,
    /// Elected: valid while [`Leading::is_valid`].
    Leading(Leading),
}

impl Local {
    /// The token of a leadership valid now.
    pub(crate) fn valid_token(&self) -> Option<u64> {
        match self {
            Local::Leading(l) if l.is_valid() => Some(l.token),
            _ => None,
        }
    }
}

/// The election as the store last told it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Nothing heard yet (or the observe stream is being reopened).
    #[default]
    Unknown,
    /// No candidate leads.
    NoLeader,
    /// A candidate leads with `token`; its id and address when its value parsed.
    Leader { token: u64, value: Option<CandidateValue> },
}

/// What the API publishes: the leadership and the leader's HTTP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) leadership: Leadership,
    pub(crate) leader_http: Option<String>,
}

impl View {
    /// Before anything is known.
    pub(crate) fn initial() -> View {
        let leadership =
            Leadership { leader: None, term: Term(0), fencing_token: None, role: Role::Follower };
        View { leadership, leader_http: None }
    }
}

/// The view from this server's identity `me`, the token of its valid
/// leadership (if any), whether it campaigns, what the store said and the
/// term so far.
pub(crate) fn compute(
    me: &CandidateValue,
    leading: Option<u64>,
    campaigning: bool,
    seen: &Seen,
    term: Term,
) -> View {
    let (leader, token, http, role) = match (leading, seen) {
        (Some(token), _) => (Some(me.id), Some(token), Some(me.http.clone()), Role::Leader),
        (None, Seen::Leader { token, value }) => {
            let (id, http) = value.as_ref().map(|v| (v.id, v.http.clone())).unzip();
            // Named by the store before its own wait confirmed it: about to lead.
            let role = match value.as_ref() == Some(me) && campaigning {
                true => Role::Candidate,
                false => Role::Follower,
            };
            (id, Some(*token), http, role)
        }
        (None, Seen::NoLeader | Seen::Unknown) => {
            let role = if campaigning { Role::Candidate } else { Role::Follower };
            (None, None, None, role)
        }
    };
    let leadership = Leadership {
        leader: leader.map(NodeId),
        term: Term(term.0.max(token.unwrap_or(0))),
        fencing_token: token.map(FencingToken),
        role,
    };
    View { leadership, leader_http: http }
}

/// Publishes the view on every change of `local` or `seen` until `stop`:
/// `view` always, `leadership` only when the leadership itself changed.
pub(crate) async fn publish(
    me: CandidateValue,
    mut local: watch::Receiver<Local>,
    mut seen: watch::Receiver<Seen>,
    view: watch::Sender<View>,
    leadership: Arc<watch::Sender<Leadership>>,
    stop: CancellationToken,
) {
    loop {
        let (token, campaigning) = {
            let l = local.borrow_and_update();
            (l.valid_token(), matches!(*l, Local::Campaigning))
        };
        let term = view.borrow().leadership.term;
        let next = compute(&me, token, campaigning, &seen.borrow_and_update(), term);
        let changed = leadership.send_if_modified(|l| {
            let changed = *l != next.leadership;
            *l = next.leadership.clone();
            changed
        });
        if changed {
            let l = &next.leadership;
            let leader = l.leader.map_or_else(|| "none".to_string(), |n| n.to_string());
            let token = l.fencing_token.map(|t| t.0);
            info!(%leader, address = ?next.leader_http, ?token, role = %l.role, "leadership");
        }
        view.send_replace(next);
        tokio::select! {
            _ = stop.cancelled() => return,
            r = local.changed() => if r.is_err() { return },
            r = seen.changed() => match r {
                Ok(()) => check_id(&me, &seen.borrow()),
                Err(_) => return,
            },
        }
    }
}

/// Pause before an observe stream that failed is opened again; it doubles
/// while streams fail without telling anything, up to [`OBSERVE_RETRY_MAX`].
pub const OBSERVE_RETRY: Duration = Duration::from_millis(500);
/// Longest pause between observe attempts.
pub const OBSERVE_RETRY_MAX: Duration = Duration::from_secs(5);

/// Observes `election` into `seen` until `stop`; a stream that fails or ends
/// is opened again after a pause (the state it then sends first replaces
/// what was seen).
pub(crate) async fn observe(
    election: Election,
    seen: watch::Sender<Seen>,
    stop: CancellationToken,
) {
    let mut pause = OBSERVE_RETRY;
    while !stop.is_cancelled() {
        match election.observe() {
            Ok(mut stream) => loop {
                let next = tokio::select! {
                    _ = stop.cancelled() => return,
                    n = stream.next() => n,
                };
                match next {
                    Some(Ok(event)) => {
                        see(&seen, event);
                        pause = OBSERVE_RETRY;
                    }
                    Some(Err(e)) => {
                        warn!(election = %election.name(), error = %e, "observing failed");
                        break;
                    }
                    None => {
                        warn!(election = %election.name(), "the store ended the observe stream");
                        break;
                    }
                }
            },
            Err(e) => warn!(election = %election.name(), error = %e, "cannot observe"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(OBSERVE_RETRY_MAX);
    }
}

/// One observed change into `seen`.
fn see(seen: &watch::Sender<Seen>, event: Observed) {
    debug!(?event, "observed");
    let next = match event {
        Observed::Leader { token, value, .. } => {
            let value = CandidateValue::parse(&value, token);
            Seen::Leader { token, value }
        }
        Observed::NoLeader { .. } => Seen::NoLeader,
        // The state follows.
        Observed::Missed { .. } => return,
    };
    seen.send_if_modified(|s| {
        let changed = *s != next;
        *s = next;
        changed
    });
}

/// Warns when the store names a leader with this server's id but another
/// address: two servers run with one `--id`, and every view of who leads
/// is ambiguous.
fn check_id(me: &CandidateValue, seen: &Seen) {
    if let Seen::Leader { token, value: Some(v) } = seen {
        if v.id == me.id && v.http != me.http {
            warn!(
                id = me.id,
                token,
                other = %v.http,
                "another server campaigns with this server's node id: give each a distinct --id"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> CandidateValue {
        CandidateValue { id: 2, http: "127.0.0.1:8002".into() }
    }

    fn other(token: u64) -> Seen {
        Seen::Leader { token, value: Some(CandidateValue { id: 3, http: "h:3".into() }) }
    }

    #[test]
    fn the_value_round_trips_and_a_foreign_value_names_no_leader() {
        let v = me();
        assert_eq!(v.encode(), r#"{"id":2,"http":"127.0.0.1:8002"}"#);
        assert_eq!(CandidateValue::parse(&v.encode(), 1), Some(v));
        assert_eq!(CandidateValue::parse("pid 42", 1), None);
        assert_eq!(CandidateValue::parse(r#"{"id":0,"http":"h:1"}"#, 1), None);
        let seen = Seen::Leader { token: 9, value: None };
        let view = compute(&me(), None, true, &seen, Term(3));
        assert_eq!(view.leadership.leader, None);
        assert_eq!(view.leadership.fencing_token, Some(FencingToken(9)));
        assert_eq!(view.leadership.term, Term(9));
    }

    #[test]
    fn roles_follow_the_own_leadership_and_the_observed_leader() {
        // Leading: itself, with its own token, whatever the store said last.
        let v = compute(&me(), Some(12), false, &other(7), Term(7));
        assert_eq!(v.leadership.role, Role::Leader);
        assert_eq!(v.leadership.leader, Some(NodeId(2)));
        assert_eq!(
            (v.leadership.term, v.leader_http.as_deref()),
            (Term(12), Some("127.0.0.1:8002"))
        );
        // Queued behind another leader: follower, the leader's address.
        let v = compute(&me(), None, true, &other(7), Term(7));
        assert_eq!((v.leadership.role, v.leadership.leader), (Role::Follower, Some(NodeId(3))));
        assert_eq!(v.leader_http.as_deref(), Some("h:3"));
        // Campaigning, no leader: candidate; the term stays.
        let v = compute(&me(), None, true, &Seen::NoLeader, Term(7));
        assert_eq!((v.leadership.role, v.leadership.term), (Role::Candidate, Term(7)));
        assert_eq!(v.leadership.fencing_token, None);
        // Named by the store, not yet confirmed: candidate.
        let named = Seen::Leader { token: 8, value: Some(me()) };
        let v = compute(&me(), None, true, &named, Term(7));
        assert_eq!((v.leadership.role, v.leadership.leader), (Role::Candidate, Some(NodeId(2))));
        // Not campaigning, no leader: follower.
        let v = compute(&me(), None, false, &Seen::Unknown, Term(7));
        assert_eq!(v.leadership.role, Role::Follower);
    }
}
