//! The node's record of leadership changes and why they happened, as this
//! node saw them: the leader timeline of the dashboard (`GET /v1/timeline`).
//!
//! The election core says *that* the leader changed; the cause is pieced
//! together here from what else this node saw in between:
//!
//! - the old leader resigned ([`Event::LeaderResigned`], or this node
//!   resigned itself): a **transfer**, or a **graceful stop** when the old
//!   leader's connection closes within [`GRACEFUL_STOP_WINDOW`] of the change
//!   (it resigned because it was stopping, then exited);
//! - this node led and stepped down for want of a majority: **quorum lost**;
//! - a death notice said the old leader's process died
//!   ([`Event::LeaderDied`], docs/SPIES.md), or its connection is down and
//!   reconnecting is refused:
//!   **crash** (its host answers, nothing listens: the process is gone);
//! - the old leader went silent and its host does not answer either (the
//!   connection stays open, or reconnecting times out): **partition** (the
//!   network drops its messages, or the whole host is down);
//! - anything else (a higher term while the leader was heard): **election**;
//! - no leader known before: **startup**.
//!
//! Crash and partition are inferred from the connection, not known: a host
//! that is down looks like a partition. The record is this node's view; another node
//! may have lost the leader earlier or later.

use crate::transport::Net;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;
use tenure_core::{Event, Instant, NodeId, Reason, Role, Term};

/// Leadership changes remembered (oldest dropped first).
pub const TIMELINE_LEN: usize = 64;

/// How soon after a handover the resigning leader's connection must close
/// for the change to count as a graceful stop rather than a transfer.
pub const GRACEFUL_STOP_WINDOW: Duration = Duration::from_secs(2);

/// Why the leader changed, as far as this node can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The first leader this node knew of.
    Startup,
    /// The old leader handed leadership over and stayed up.
    Transfer,
    /// The old leader handed leadership over and exited.
    GracefulStop,
    /// The old leader's process is gone: reconnecting to it is refused.
    Crash,
    /// The old leader went silent and its host does not answer.
    Partition,
    /// This node led and stepped down: it no longer heard from a majority.
    QuorumLost,
    /// A new term while the old leader was still heard (a higher term, a
    /// disrupted election).
    Election,
}

impl Cause {
    /// The cause as the API names it (`"graceful_stop"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Startup => "startup",
            Cause::Transfer => "transfer",
            Cause::GracefulStop => "graceful_stop",
            Cause::Crash => "crash",
            Cause::Partition => "partition",
            Cause::QuorumLost => "quorum_lost",
            Cause::Election => "election",
        }
    }
}

/// One change of leader, as this node saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeaderChange {
    /// The new leader's term.
    pub term: Term,
    /// The new leader.
    pub leader: NodeId,
    /// The leader this node knew before, if any.
    pub previous: Option<NodeId>,
    /// Wall-clock time this node learned of the new leader (ms since the Unix epoch).
    pub at_unix_ms: u64,
    /// How long this node knew no leader before (from losing the old one, or
    /// from last hearing it when it went silent); `None` for a direct switch.
    pub no_leader_ms: Option<u64>,
    /// Why.
    pub cause: Cause,
    /// The cause in a sentence, for people.
    pub detail: String,
}

/// What the timeline needs to know of the link to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkView {
    /// Whether a connection to the peer is up.
    pub connected: bool,
    /// Whether the last attempt to connect was refused (nothing listens).
    pub refused: bool,
    /// Milliseconds since a frame from the peer last arrived, if ever.
    pub silent_ms: Option<u64>,
}

/// A handover whose old leader may still exit (then it was a graceful stop).
#[derive(Clone, Copy, Debug)]
struct PendingStop {
    term: Term,
    old_leader: NodeId,
    until_unix_ms: u64,
}

/// The record: fed every core event, in order, with the time.
#[derive(Debug)]
pub struct Timeline {
    me: NodeId,
    election_timeout: Duration,
    changes: VecDeque<LeaderChange>,
    /// The leader known now.
    leader: Option<NodeId>,
    /// The last leader known (kept while none is).
    last_leader: Option<NodeId>,
    /// When this node lost the last leader, while it knows none.
    lost_at: Option<Instant>,
    /// The leader that resigned since the last change, if one did.
    resigned: Option<NodeId>,
    /// This node stepped down for want of a majority since the last change.
    quorum_lost: bool,
    /// The leader a death notice reported dead since the last change.
    died: Option<NodeId>,
    pending_stop: Option<PendingStop>,
}

impl Timeline {
    /// An empty record for node `me`, whose followers wait `election_timeout`.
    pub fn new(me: NodeId, election_timeout: Duration) -> Self {
        Timeline {
            me,
            election_timeout,
            changes: VecDeque::with_capacity(TIMELINE_LEN),
            leader: None,
            last_leader: None,
            lost_at: None,
            resigned: None,
            quorum_lost: false,
            died: None,
            pending_stop: None,
        }
    }

    /// Takes in one core event seen at `now` (`unix_ms` on the wall clock);
    /// `link` tells how the connection to a peer stands.
    pub fn observe(
        &mut self,
        event: &Event,
        now: Instant,
        unix_ms: u64,
        link: impl Fn(NodeId) -> Option<LinkView>,
    ) {
        match event {
            Event::LeaderResigned { leader, .. } => self.resigned = Some(*leader),
            Event::RoleChanged { role: Role::Follower, reason: Reason::Resigned, .. } => {
                self.resigned = Some(self.me);
            }
            Event::RoleChanged { role: Role::Follower, reason: Reason::QuorumLost, .. } => {
                self.quorum_lost = true;
            }
            // A death notice (not wired into the node yet) is classified as
            // the election that follows it.
            Event::LeaderDied { leader, .. } => self.died = Some(*leader),
            Event::RoleChanged { .. } | Event::Halted { .. } => {}
            Event::LeaderChanged { leader: None, .. } => {
                if self.leader.take().is_some() {
                    self.lost_at = Some(now);
                }
            }
            Event::LeaderChanged { leader: Some(new), term, .. } => {
                self.changed(*new, *term, now, unix_ms, &link);
            }
        }
        self.settle(unix_ms, &link);
    }

    /// The changes, oldest first, with pending graceful stops settled as of
    /// `unix_ms`.
    pub fn changes(
        &mut self,
        unix_ms: u64,
        link: impl Fn(NodeId) -> Option<LinkView>,
    ) -> Vec<LeaderChange> {
        self.settle(unix_ms, &link);
        self.changes.iter().cloned().collect()
    }

    fn changed(
        &mut self,
        new: NodeId,
        term: Term,
        now: Instant,
        unix_ms: u64,
        link: &impl Fn(NodeId) -> Option<LinkView>,
    ) {
        let previous = self.last_leader;
        let gap_ms = self.lost_at.take().map(|t| millis(now.saturating_since(t)));
        let (cause, detail, silent_ms) = self.classify(previous, link);
        let no_leader_ms = match (gap_ms, silent_ms) {
            (Some(g), Some(s)) => Some(g.max(s)),
            (g, s) => g.or(s),
        };
        if cause == Cause::Transfer {
            if let Some(old_leader) = previous.filter(|p| *p != self.me) {
                let until_unix_ms = unix_ms.saturating_add(millis(GRACEFUL_STOP_WINDOW));
                self.pending_stop = Some(PendingStop { term, old_leader, until_unix_ms });
            }
        }
        if self.changes.len() == TIMELINE_LEN {
            self.changes.pop_front();
        }
        self.changes.push_back(LeaderChange {
            term,
            leader: new,
            previous,
            at_unix_ms: unix_ms,
            no_leader_ms,
            cause,
            detail,
        });
        self.leader = Some(new);
        self.last_leader = Some(new);
        self.resigned = None;
        self.quorum_lost = false;
        self.died = None;
    }

    /// The cause of a change away from `previous`, a sentence, and (for a
    /// leader that went silent) how long it has been silent.
    fn classify(
        &self,
        previous: Option<NodeId>,
        link: &impl Fn(NodeId) -> Option<LinkView>,
    ) -> (Cause, String, Option<u64>) {
        let Some(old) = previous else {
            return (Cause::Startup, "the first leader this node knew of".into(), None);
        };
        if old == self.me && self.quorum_lost {
            let why = format!(
                "this node (node {old}) stepped down: it had not heard from a majority within its lease"
            );
            return (Cause::QuorumLost, why, None);
        }
        if self.resigned == Some(old) {
            return (Cause::Transfer, format!("node {old} handed leadership over"), None);
        }
        if old == self.me {
            return (Cause::Election, "this node stepped down for a higher term".into(), None);
        }
        if self.died == Some(old) {
            let why = format!(
                "node {old} died: a death notice (docs/SPIES.md) said so, no timeout was waited"
            );
            return (Cause::Crash, why, link(old).and_then(|v| v.silent_ms));
        }
        let view = link(old);
        let silent_ms = view.and_then(|v| v.silent_ms);
        match view {
            Some(v) if !v.connected && v.refused => {
                let why = format!(
                    "node {old} is down: its connection closed and reconnecting is refused"
                );
                (Cause::Crash, why, silent_ms)
            }
            Some(v)
                if !v.connected
                    || v.silent_ms.is_none_or(|s| s >= millis(self.election_timeout)) =>
            {
                let why = format!(
                    "node {old} went silent and its host does not answer (a network partition, or the host is down)"
                );
                (Cause::Partition, why, silent_ms)
            }
            _ => (Cause::Election, format!("a new term while node {old} was still heard"), None),
        }
    }

    /// Turns a pending transfer into a graceful stop if the old leader's
    /// connection closed within the window, or drops it once the window is
    /// over and the old leader is still up.
    fn settle(&mut self, unix_ms: u64, link: &impl Fn(NodeId) -> Option<LinkView>) {
        let Some(p) = self.pending_stop else { return };
        let view = link(p.old_leader);
        let exited = view.is_some_and(|v| {
            // When it went silent (on this clock), if it did.
            let silent_since = v.silent_ms.map(|s| unix_ms.saturating_sub(s));
            !v.connected && silent_since.is_none_or(|t| t <= p.until_unix_ms)
        });
        if exited {
            if let Some(c) = self.changes.iter_mut().rev().find(|c| c.term == p.term) {
                c.cause = Cause::GracefulStop;
                c.detail = format!("node {} handed leadership over and exited", p.old_leader);
            }
            self.pending_stop = None;
        } else if unix_ms > p.until_unix_ms {
            self.pending_stop = None;
        }
    }
}

/// The links of `net` as the timeline sees them at `now`.
pub(crate) fn link_view(net: &Net, now: Instant, peer: NodeId) -> Option<LinkView> {
    let link = net.link(peer)?;
    Some(LinkView {
        connected: link.connected(),
        refused: link.refused(),
        silent_ms: link.last_heard_nanos().map(|t| now.as_nanos().saturating_sub(t) / 1_000_000),
    })
}

/// The wall clock in milliseconds since the Unix epoch (0 if it is set before 1970).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, millis)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::FencingToken;

    const ME: NodeId = NodeId(3);
    const ET: Duration = Duration::from_millis(1000);

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn leader(id: u64, term: u64) -> Event {
        Event::LeaderChanged {
            leader: Some(NodeId(id)),
            term: Term(term),
            fencing_token: Some(FencingToken::for_term(Term(term))),
        }
    }

    fn none(term: u64) -> Event {
        Event::LeaderChanged { leader: None, term: Term(term), fencing_token: None }
    }

    fn up(_: NodeId) -> Option<LinkView> {
        Some(LinkView { connected: true, refused: false, silent_ms: Some(5) })
    }

    fn closed(silent_ms: u64) -> impl Fn(NodeId) -> Option<LinkView> {
        move |_| Some(LinkView { connected: false, refused: true, silent_ms: Some(silent_ms) })
    }

    fn started(t: &mut Timeline) {
        t.observe(&leader(1, 1), at(0), 0, up);
    }

    #[test]
    fn the_first_leader_is_a_startup() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        let c = t.changes(0, up);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].cause, c[0].leader, c[0].previous), (Cause::Startup, NodeId(1), None));
    }

    #[test]
    fn a_leader_that_refuses_connections_crashed_and_the_gap_counts_from_its_silence() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        t.observe(&none(1), at(5_000), 5_000, closed(900));
        t.observe(&leader(2, 2), at(5_050), 5_050, closed(950));
        let c = t.changes(5_050, closed(950));
        assert_eq!(
            (c[1].cause, c[1].previous, c[1].term),
            (Cause::Crash, Some(NodeId(1)), Term(2))
        );
        // Silent for 950 ms, leaderless here for 50: the cluster had none for 950.
        assert_eq!(c[1].no_leader_ms, Some(950));
    }

    #[test]
    fn a_silent_leader_whose_host_does_not_answer_is_partitioned_but_a_heard_one_is_not() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        let silent =
            |_| Some(LinkView { connected: false, refused: false, silent_ms: Some(1_200) });
        t.observe(&leader(2, 2), at(5_000), 5_000, silent);
        t.observe(&leader(1, 3), at(6_000), 6_000, up);
        let c = t.changes(6_000, up);
        assert_eq!(c[1].cause, Cause::Partition);
        assert_eq!(c[1].no_leader_ms, Some(1_200));
        assert_eq!((c[2].cause, c[2].no_leader_ms), (Cause::Election, None));
    }

    #[test]
    fn a_resignation_is_a_transfer_while_the_old_leader_stays_up() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        let resigned =
            Event::LeaderResigned { leader: NodeId(1), term: Term(1), successor: Some(NodeId(2)) };
        t.observe(&resigned, at(100), 100, up);
        t.observe(&none(1), at(100), 100, up);
        t.observe(&leader(2, 2), at(104), 104, up);
        // Still up after the window: a transfer for good, even if it stops later.
        assert_eq!(t.changes(3_000, up)[1].cause, Cause::Transfer);
        assert_eq!(t.changes(9_000, closed(10))[1].cause, Cause::Transfer);
        assert_eq!(t.changes(9_000, up)[1].no_leader_ms, Some(4));
    }

    #[test]
    fn a_resignation_followed_by_the_old_leader_exiting_is_a_graceful_stop() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        let resigned = Event::LeaderResigned { leader: NodeId(1), term: Term(1), successor: None };
        t.observe(&resigned, at(100), 100, up);
        t.observe(&leader(2, 2), at(104), 104, up);
        assert_eq!(t.changes(110, up)[1].cause, Cause::Transfer);
        // Read long after: it went silent 3 s ago, 20 ms after the change.
        let c = t.changes(3_124, closed(3_000));
        assert_eq!(c[1].cause, Cause::GracefulStop);
        assert!(c[1].detail.contains("exited"), "{}", c[1].detail);
    }

    #[test]
    fn an_old_leader_that_exits_after_the_window_was_transferred_from() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        let resigned = Event::LeaderResigned { leader: NodeId(1), term: Term(1), successor: None };
        t.observe(&resigned, at(100), 100, up);
        t.observe(&leader(2, 2), at(104), 104, up);
        // First read 5 s later: silent for 1 s only, so it exited 4 s after.
        assert_eq!(t.changes(5_104, closed(1_000))[1].cause, Cause::Transfer);
    }

    #[test]
    fn a_leader_that_loses_its_quorum_records_why_and_its_own_resignation_is_a_transfer() {
        let mut t = Timeline::new(ME, ET);
        t.observe(&leader(3, 1), at(0), 0, up);
        let stepped =
            Event::RoleChanged { role: Role::Follower, term: Term(1), reason: Reason::QuorumLost };
        t.observe(&stepped, at(100), 100, up);
        t.observe(&none(1), at(100), 100, up);
        t.observe(&leader(3, 2), at(2_000), 2_000, up);
        let resign =
            Event::RoleChanged { role: Role::Follower, term: Term(2), reason: Reason::Resigned };
        t.observe(&resign, at(2_500), 2_500, up);
        t.observe(&leader(1, 3), at(2_510), 2_510, up);
        let c = t.changes(2_510, up);
        assert_eq!((c[1].cause, c[1].no_leader_ms), (Cause::QuorumLost, Some(1_900)));
        assert_eq!(c[2].cause, Cause::Transfer);
    }

    #[test]
    fn a_leader_reported_dead_crashed_whatever_its_connection_says() {
        let mut t = Timeline::new(ME, ET);
        started(&mut t);
        t.observe(&Event::LeaderDied { leader: NodeId(1), term: Term(1) }, at(100), 100, up);
        t.observe(&none(1), at(100), 100, up);
        t.observe(&leader(2, 2), at(120), 120, up);
        let c = t.changes(120, up);
        assert_eq!(c[1].cause, Cause::Crash);
        assert!(c[1].detail.contains("death notice"), "{}", c[1].detail);
    }

    #[test]
    fn the_record_is_bounded() {
        let mut t = Timeline::new(ME, ET);
        for term in 1..=(TIMELINE_LEN as u64 + 10) {
            t.observe(&leader(1 + term % 2, term), at(term), term, up);
        }
        let c = t.changes(0, up);
        assert_eq!(c.len(), TIMELINE_LEN);
        assert_eq!(c.last().map(|c| c.term), Some(Term(TIMELINE_LEN as u64 + 10)));
    }
}
