//! Changes of members in the election model: an abstract replicated log.
//!
//! The replica is not run here (it is checked on its own, [`crate::replica`]);
//! what the electors see of it is modelled: which configuration of members
//! each node's log holds, where it was written ([`tenure_core::ConfigId`]),
//! and when it commits. The electors are the real ones, told the
//! configuration as the driver tells them ([`tenure_core::Protocol::handle_electorate`]).
//!
//! * **Configurations.** The bootstrap voters are `n1, n2, n3`; `n4` is a
//!   spare that is nobody's member at first (its elector is built with the
//!   bootstrap voters and does not stand). The chain of changes
//!   ([`next_changes`]): add `n4` as a learner, promote it, then remove one
//!   voter, one of [`MembershipSpec::removable`] (a choice when there are
//!   several: two leaders may then append different removals at one index,
//!   which is what Raft's single-server change bug of 2015 needs).
//! * **A node's log** ([`Log`]): the configuration entries it holds, oldest
//!   first, each with the fencing token of the leadership that wrote it, and
//!   the token of its last entry of any kind (`last_token`: a leadership's
//!   no-op raises it). The configuration in force is the newest entry; its
//!   position is `ConfigId { token, index }` with `index` the entry's place
//!   among the configuration entries (a faithful order: two entries of one
//!   token come from one leader's log, in that order; an entry is
//!   identified by its token and index, as log matching says).
//! * **A leadership** ([`Leadership`], one per fencing token, recorded when
//!   its elector takes office): it first synchronises ([`crate::Action::Sync`]:
//!   it may take the log of a node that follows it, if fresher), then writes
//!   its no-op ([`crate::Action::WriteNoop`], once a majority of the voters
//!   of its configuration follow it, none with a fresher log), then
//!   replicates its log ([`crate::Action::Replicate`]) to any node whose
//!   elector follows its token: the node's log becomes the leader's (what
//!   the no-op's conflict truncates goes). Messages a leader sent stay in
//!   flight after it stepped down: replication of a leadership's log goes on
//!   as long as nodes follow its token.
//! * **Commits**, by Raft's rule: a position of a leadership's log commits
//!   once a majority of the voters of its newest configuration acknowledged
//!   it in that leadership (only the leadership's own entries count: its
//!   no-op and the configurations it appended); what lies below a committed
//!   position commits with it. The **own-term gate** passes when the no-op
//!   commits. A leader appends the next configuration
//!   ([`crate::Action::Append`]) only once its gate passed and its newest
//!   configuration is committed.
//! * **Telling the elector**: each time a node's log changes, the driver
//!   hands its elector the new [`Electorate`] (voters, learners, the member
//!   the change removed, whether this node stands: a voter, or the removed
//!   member while it does not know the removal committed,
//!   [`crate::Action::LearnCommit`]), before the node's copy counts for any
//!   commit; and at every start, before the first timer.
//!
//! Planted bugs ([`MemberDriver`]): the gate dropped; the elector told only
//! after the node's copy counted ([`crate::Action::Tell`]); the
//! configuration's position withheld from the elector (every electorate
//! carries [`ConfigId::BOOTSTRAP`], so the freshness rule never refuses).

use std::collections::BTreeSet;
use std::sync::Arc;
use tenure_core::{ConfigId, Electorate, FencingToken, NodeId};

/// The bootstrap voters.
pub const BOOTSTRAP_VOTERS: [NodeId; 3] = [NodeId(1), NodeId(2), NodeId(3)];

/// The spare node, a member of no configuration at first.
pub const SPARE: NodeId = NodeId(4);

/// One change of members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Change {
    /// The node joins as a learner.
    AddLearner(NodeId),
    /// The learner becomes a voter.
    Promote(NodeId),
    /// The member leaves.
    Remove(NodeId),
}

/// A configuration entry of a log: the change it makes and the fencing
/// token of the leadership that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// The leadership that wrote it.
    pub token: u64,
    /// The change.
    pub change: Change,
}

/// The members a configuration names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Members {
    /// Voters, in preference order.
    pub voters: Vec<NodeId>,
    /// Learners.
    pub learners: Vec<NodeId>,
    /// The member the last change removed, if it removed one.
    pub departing: Option<NodeId>,
}

impl Members {
    /// True if `id` votes.
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.contains(&id)
    }

    /// A majority of the voters.
    pub fn quorum(&self) -> usize {
        tenure_core::quorum(self.voters.len())
    }
}

/// What a node's log holds, for the electors' purposes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Log {
    /// The configuration entries, oldest first.
    pub configs: Vec<Entry>,
    /// The token of the log's last entry (a no-op, a configuration, or the
    /// bootstrap's 0).
    pub last_token: u64,
}

impl Log {
    /// Where its newest configuration was written.
    pub fn config_id(&self) -> ConfigId {
        self.id_at(self.configs.len())
    }

    /// The position of the configuration of the first `len` entries.
    pub fn id_at(&self, len: usize) -> ConfigId {
        match len {
            0 => ConfigId::BOOTSTRAP,
            n => ConfigId { token: FencingToken(self.configs[n - 1].token), index: n as u64 },
        }
    }

    /// The configuration of the first `len` entries.
    pub fn members_at(&self, len: usize) -> Members {
        let mut voters = BOOTSTRAP_VOTERS.to_vec();
        let mut learners = Vec::new();
        let mut departing = None;
        for entry in &self.configs[..len] {
            departing = None;
            match entry.change {
                Change::AddLearner(id) => learners.push(id),
                Change::Promote(id) => {
                    learners.retain(|&l| l != id);
                    voters.push(id);
                }
                Change::Remove(id) => {
                    voters.retain(|&v| v != id);
                    learners.retain(|&l| l != id);
                    departing = Some(id);
                }
            }
        }
        Members { voters, learners, departing }
    }

    /// The configuration in force.
    pub fn members(&self) -> Members {
        self.members_at(self.configs.len())
    }

    /// True if this log holds the configuration entry at `id`.
    pub fn holds(&self, id: ConfigId) -> bool {
        id == ConfigId::BOOTSTRAP
            || usize::try_from(id.index)
                .ok()
                .and_then(|i| i.checked_sub(1))
                .and_then(|i| self.configs.get(i))
                .is_some_and(|e| e.token == id.token.0)
    }

    /// The log's last position, as the synchronisation compares logs.
    pub fn freshness(&self) -> (u64, usize) {
        (self.last_token, self.configs.len())
    }

    /// The electorate node `me` counts over with this log: `knows_committed`
    /// says whether it knows its newest configuration committed (read only
    /// if the configuration removes `me`). With `withhold_position` (a
    /// planted bug) the position is the bootstrap's whatever the log holds.
    pub fn electorate(
        &self,
        me: NodeId,
        knows_committed: bool,
        withhold_position: bool,
    ) -> Electorate {
        let m = self.members();
        let stands = m.is_voter(me) || (m.departing == Some(me) && !knows_committed);
        // The model wipes no disk: a node belongs by its id.
        let member = m.is_voter(me) || m.learners.contains(&me) || m.departing == Some(me);
        let id = if withhold_position { ConfigId::BOOTSTRAP } else { self.config_id() };
        let last = if withhold_position { 0 } else { self.last_token.max(id.token.0) };
        Electorate {
            id,
            last_token: FencingToken(last),
            voters: m.voters,
            learners: m.learners,
            departing: m.departing.into_iter().collect(),
            stands,
            member,
        }
    }
}

/// The changes a leader may append next to a log whose configuration is
/// `members` ([`MembershipSpec::removable`]: which voters the removal may
/// take).
pub fn next_changes(members: &Members, removable: &[NodeId]) -> Vec<Change> {
    if members.departing.is_some() {
        // The chain ends with one removal.
        return Vec::new();
    }
    if !members.is_voter(SPARE) && !members.learners.contains(&SPARE) {
        return vec![Change::AddLearner(SPARE)];
    }
    if members.learners.contains(&SPARE) {
        return vec![Change::Promote(SPARE)];
    }
    removable.iter().filter(|&&id| members.is_voter(id)).map(|&id| Change::Remove(id)).collect()
}

/// One leadership's part of the log, keyed by its fencing token.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leadership {
    /// The token.
    pub token: u64,
    /// The leader.
    pub leader: NodeId,
    /// The log the leader held when its elector took office.
    pub elected_with: Log,
    /// The leadership's log: what it replicates (the leader's own log while
    /// it leads).
    pub log: Log,
    /// How many configuration entries of `log` lie below its no-op, once
    /// written (the synchronisation is over).
    pub noop_at: Option<usize>,
    /// Per node (index `id - 1`): how many configuration entries of `log`
    /// it acknowledged in this leadership, the no-op with them.
    pub acked: Vec<Option<usize>>,
    /// How many configuration entries of `log` are committed by this
    /// leadership (the no-op committed with the first `noop_at`).
    pub committed: Option<usize>,
}

impl Leadership {
    /// True once the no-op committed: the own-term gate passed.
    pub fn gate_passed(&self) -> bool {
        self.committed.is_some()
    }

    /// Counts the acknowledgements again: the highest own position (the
    /// no-op, or a configuration appended after it) that a majority of the
    /// voters of the newest configuration acknowledged, and everything
    /// below. Returns the configurations newly committed.
    pub fn recount(&mut self) -> Vec<ConfigId> {
        let Some(noop) = self.noop_at else { return Vec::new() };
        let members = self.log.members();
        let acked_at_least = |p: usize| {
            members.voters.iter().filter(|v| self.acked[index(**v)].is_some_and(|a| a >= p)).count()
                >= members.quorum()
        };
        let top = (noop..=self.log.configs.len()).rev().find(|&p| acked_at_least(p));
        let Some(top) = top else { return Vec::new() };
        if self.committed.is_some_and(|c| c >= top) {
            return Vec::new();
        }
        let from = self.committed.map_or(1, |c| c + 1);
        self.committed = Some(top);
        (from..=top).map(|len| self.log.id_at(len)).collect()
    }
}

/// Which driver the model runs: the contract, or a planted bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemberDriver {
    /// The contract: a change only after the gate; the elector told before
    /// the node's copy counts; the position passed as it is.
    Faithful,
    /// Planted bug: a new leader appends a change as soon as its no-op is
    /// written, before it commits (the own-term gate dropped: Raft's 2015
    /// single-server change bug).
    UngatedChanges,
    /// Planted bug: a node's copy of a configuration counts for commits
    /// before its elector is told ([`crate::Action::Tell`] tells it later).
    LateElectorate,
    /// Planted bug: the driver tells the elector the members but not where
    /// the configuration was written (always [`ConfigId::BOOTSTRAP`]): the
    /// freshness rule is off.
    NoPosition,
}

/// What the model explores of membership changes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MembershipSpec {
    /// The driver.
    pub driver: MemberDriver,
    /// The voters the removal at the end of the chain may take (in
    /// [`next_changes`]); several make a choice.
    pub removable: Vec<NodeId>,
}

/// The membership part of a state: every node's log and what the
/// leaderships did.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MembershipState {
    /// Per node (index `id - 1`): its log.
    pub logs: Vec<Log>,
    /// Per node: whether it knows its newest configuration committed (read
    /// only for the member a configuration removes). Forgotten on restart.
    pub knows_committed: Vec<bool>,
    /// The leaderships, by token.
    pub leaderships: Vec<Leadership>,
    /// Configurations appended so far.
    pub changes: u8,
}

impl MembershipState {
    /// The bootstrap: every log empty, nothing led.
    pub fn new(nodes: usize) -> Self {
        MembershipState {
            logs: vec![Log::default(); nodes],
            knows_committed: vec![false; nodes],
            leaderships: Vec::new(),
            changes: 0,
        }
    }

    /// The leadership of `token`, if recorded.
    pub fn leadership(&self, token: u64) -> Option<&Leadership> {
        self.leaderships.iter().find(|l| l.token == token)
    }

    /// The leadership of `token`, mutable.
    pub fn leadership_mut(&mut self, token: u64) -> Option<&mut Leadership> {
        self.leaderships.iter_mut().find(|l| l.token == token)
    }
}

/// The configurations committed, with the first leadership found that was
/// elected without one it should hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CommitRecord {
    /// Every configuration committed so far (the bootstrap's included).
    pub committed: BTreeSet<ConfigId>,
    /// A leader elected (token, node) whose log lacked a configuration
    /// committed under a lower token (the configuration).
    pub stale_leader: Option<(u64, NodeId, ConfigId)>,
}

impl CommitRecord {
    /// The record at bootstrap: its configuration is committed.
    pub fn new() -> Arc<Self> {
        Arc::new(CommitRecord {
            committed: [ConfigId::BOOTSTRAP].into_iter().collect(),
            stale_leader: None,
        })
    }
}

/// The first configuration committed under a token below `token` that
/// `log` does not hold.
pub fn missing_commit(committed: &BTreeSet<ConfigId>, token: u64, log: &Log) -> Option<ConfigId> {
    committed.iter().copied().find(|c| c.token.0 < token && !log.holds(*c))
}

fn index(id: NodeId) -> usize {
    usize::try_from(id.0 - 1).expect("node ids are small")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(token: u64, index: u64) -> ConfigId {
        ConfigId { token: FencingToken(token), index }
    }

    #[test]
    fn a_log_names_its_members_and_position() {
        let mut log = Log::default();
        assert_eq!(log.config_id(), ConfigId::BOOTSTRAP);
        assert_eq!(next_changes(&log.members(), &[NodeId(1)]), vec![Change::AddLearner(SPARE)]);
        log.configs.push(Entry { token: 2, change: Change::AddLearner(SPARE) });
        log.configs.push(Entry { token: 5, change: Change::Promote(SPARE) });
        let m = log.members();
        assert_eq!(m.voters, vec![NodeId(1), NodeId(2), NodeId(3), SPARE]);
        assert_eq!(m.quorum(), 3);
        assert_eq!(log.config_id(), at(5, 2));
        assert!(log.holds(at(2, 1)) && log.holds(at(5, 2)) && !log.holds(at(3, 2)));
        let removals = next_changes(&m, &[NodeId(1), SPARE]);
        assert_eq!(removals, vec![Change::Remove(NodeId(1)), Change::Remove(SPARE)]);
        log.configs.push(Entry { token: 5, change: Change::Remove(NodeId(1)) });
        let e = log.electorate(NodeId(1), false, false);
        assert_eq!(e.check(), Ok(()));
        assert!(e.stands && !e.is_voter(NodeId(1)) && e.departing == vec![NodeId(1)]);
        assert!(!log.electorate(NodeId(1), true, false).stands);
        assert!(log.electorate(SPARE, true, false).stands);
        assert_eq!(log.electorate(SPARE, true, true).id, ConfigId::BOOTSTRAP);
        assert!(next_changes(&log.members(), &[NodeId(2)]).is_empty());
        assert!(!Log::default().electorate(SPARE, false, false).stands);
    }

    #[test]
    fn a_leadership_commits_by_its_own_positions() {
        let mut base = Log::default();
        base.configs.push(Entry { token: 1, change: Change::AddLearner(SPARE) });
        let mut l = Leadership {
            token: 3,
            leader: NodeId(1),
            elected_with: base.clone(),
            log: base.clone(),
            noop_at: Some(1),
            acked: vec![Some(1), None, None, None],
            committed: None,
        };
        assert_eq!(l.recount(), vec![], "the leader alone is no majority");
        l.acked[3] = Some(1);
        assert_eq!(l.recount(), vec![], "a learner does not count");
        l.acked[1] = Some(1);
        assert_eq!(l.recount(), vec![at(1, 1)], "the no-op commits what lies below it");
        assert!(l.gate_passed());
        l.log.configs.push(Entry { token: 3, change: Change::Promote(SPARE) });
        l.acked[0] = Some(2);
        l.acked[1] = Some(2);
        assert_eq!(l.recount(), vec![], "two of the four voters");
        l.acked[3] = Some(2);
        assert_eq!(l.recount(), vec![at(3, 2)]);
        assert_eq!(l.recount(), vec![], "once");
        let committed: BTreeSet<ConfigId> = [at(1, 1), at(3, 2)].into_iter().collect();
        assert_eq!(missing_commit(&committed, 4, &base), Some(at(3, 2)));
        assert_eq!(missing_commit(&committed, 3, &base), None, "only lower tokens");
    }
}
