//! Who belongs to the cluster: the voters, whose majority commits entries and
//! whose promises a new leader collects, and the learners, which receive the
//! log without counting. A configuration is an entry of the log
//! ([`crate::Payload::Members`]); a node uses the newest one its log holds, as
//! soon as it holds it (before it commits), and a snapshot carries the one in
//! force at its last entry. Before any such entry, the voters are the
//! bootstrap list of [`crate::Config::voters`]. `docs/MEMBERSHIP.md` states
//! the rules and why they keep every committed entry.

use crate::entry::{Index, Position};
use serde::{Deserialize, Serialize};
use std::fmt;
use tenure_core::{ConfigId, DirectoryId, Electorate, NodeId};

/// One member of the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Member {
    /// Its node id.
    pub id: NodeId,
    /// Where its peers reach it (`host:port`); empty when the bootstrap list
    /// gave no address (the runtime's own peer list has it).
    pub address: String,
    /// The identity of the data directory it was added with: a node that
    /// comes back with another directory is not this member. `None` for the
    /// members of the bootstrap list, named before anyone saw their disks.
    pub directory: Option<DirectoryId>,
    /// For a learner: the leader promotes it once it has caught up and
    /// stayed caught up ([`crate::Config::auto_promote_after`]); false: it
    /// waits for an operator's promotion.
    pub auto_promote: bool,
}

impl Member {
    /// A member known only by its id (the bootstrap list).
    pub fn bare(id: NodeId) -> Member {
        Member { id, address: String::new(), directory: None, auto_promote: false }
    }
}

/// The members a configuration entry names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Members {
    /// Those whose majority decides, in preference order.
    pub voters: Vec<Member>,
    /// Those that receive the log and do not count.
    pub learners: Vec<Member>,
}

impl Members {
    /// The bootstrap configuration: these voters, no learners.
    pub fn bootstrap(voters: &[NodeId]) -> Members {
        Members { voters: voters.iter().copied().map(Member::bare).collect(), learners: Vec::new() }
    }

    /// The voters' ids, in order.
    pub fn voter_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.voters.iter().map(|m| m.id)
    }

    /// True if `id` votes.
    pub fn is_voter(&self, id: NodeId) -> bool {
        self.voters.iter().any(|m| m.id == id)
    }

    /// True if `id` is a learner.
    pub fn is_learner(&self, id: NodeId) -> bool {
        self.learners.iter().any(|m| m.id == id)
    }

    /// Every member, voters first.
    pub fn all(&self) -> impl Iterator<Item = &Member> {
        self.voters.iter().chain(self.learners.iter())
    }

    /// The member `id`, voter or learner.
    pub fn get(&self, id: NodeId) -> Option<&Member> {
        self.all().find(|m| m.id == id)
    }

    /// How many voters make a majority.
    pub fn quorum(&self) -> usize {
        tenure_core::quorum(self.voters.len())
    }

    /// The members after `change`, or why it cannot be made. Checks only the
    /// members themselves; the leader checks the rest (one change at a time,
    /// health).
    pub fn after(&self, change: &Change) -> Result<Members, ChangeError> {
        let mut next = self.clone();
        match change {
            Change::AddLearner(m) => {
                if m.id.0 == 0 {
                    return Err(ChangeError::ZeroId);
                }
                if self.get(m.id).is_some() {
                    return Err(ChangeError::DuplicateId(m.id));
                }
                if !m.address.is_empty() {
                    if let Some(o) = self.all().find(|o| o.address == m.address) {
                        return Err(ChangeError::DuplicateAddress(m.address.clone(), o.id));
                    }
                }
                if let Some(d) = m.directory {
                    if let Some(o) = self.all().find(|o| o.directory == Some(d)) {
                        return Err(ChangeError::DuplicateDirectory(d, o.id));
                    }
                }
                if self.voters.len() + self.learners.len() >= MAX_MEMBERS {
                    return Err(ChangeError::TooMany(MAX_MEMBERS));
                }
                next.learners.push(m.clone());
            }
            Change::Promote(id) => {
                let Some(at) = self.learners.iter().position(|m| m.id == *id) else {
                    return Err(if self.is_voter(*id) {
                        ChangeError::AlreadyVoter(*id)
                    } else {
                        ChangeError::NotMember(*id)
                    });
                };
                if self.voters.len() >= tenure_core::MAX_VOTERS {
                    return Err(ChangeError::TooManyVoters(tenure_core::MAX_VOTERS));
                }
                let m = next.learners.remove(at);
                next.voters.push(m);
            }
            Change::Remove(id) => {
                if let Some(at) = self.learners.iter().position(|m| m.id == *id) {
                    next.learners.remove(at);
                } else if let Some(at) = self.voters.iter().position(|m| m.id == *id) {
                    if self.voters.len() == 1 {
                        return Err(ChangeError::LastVoter(*id));
                    }
                    next.voters.remove(at);
                } else {
                    return Err(ChangeError::NotMember(*id));
                }
            }
        }
        Ok(next)
    }
}

impl fmt::Display for Members {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids = |ms: &[Member]| ms.iter().map(|m| m.id.to_string()).collect::<Vec<_>>().join(",");
        write!(f, "voters [{}] learners [{}]", ids(&self.voters), ids(&self.learners))
    }
}

/// Most members (voters and learners) a configuration holds.
pub const MAX_MEMBERS: usize = 2 * tenure_core::MAX_VOTERS;

/// The configuration in force: the members and the entry that named them
/// ([`Position::ZERO`] for the bootstrap list).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Membership {
    /// The entry that holds it.
    pub at: Position,
    /// Who belongs.
    pub members: Members,
}

impl Membership {
    /// The bootstrap configuration: these voters, before any configuration
    /// entry.
    pub fn bootstrap(voters: &[NodeId]) -> Membership {
        Membership { at: Position::ZERO, members: Members::bootstrap(voters) }
    }

    /// What node `me`'s elector counts over while this configuration is in
    /// force: its voters and learners, the member of `previous` (the
    /// configuration before it, when the log still knows it) that it
    /// removes, and whether `me` stands: as a voter, or as the removed
    /// member while the entry is not known to be committed (`commit`, this
    /// node's commit index), to commit its own removal.
    ///
    /// `me` is this node as an identity ([`Identity`]): a node whose disk
    /// was wiped and that came back under its id is not the member an entry
    /// naming its old directory names, even while it replays the old
    /// configurations: it does not stand and grants no support
    /// ([`Electorate::member`]).
    pub fn electorate(
        &self,
        me: Identity,
        previous: Option<&Members>,
        commit: Index,
    ) -> Electorate {
        let departing: Vec<NodeId> = previous
            .map(|p| p.all().map(|m| m.id).filter(|&id| self.members.get(id).is_none()).collect())
            .unwrap_or_default();
        let committed = self.at.index <= commit;
        let named = |ms: &Members| ms.get(me.id).is_some_and(|m| me.is(m));
        let voter = self.members.voters.iter().any(|m| m.id == me.id && me.is(m));
        let leaving = departing.contains(&me.id) && previous.is_some_and(named);
        Electorate {
            id: ConfigId { token: self.at.token, index: self.at.index },
            // At least the configuration's own; the replica gives the token
            // of its log's last entry.
            last_token: self.at.token,
            voters: self.members.voter_ids().collect(),
            learners: self.members.learners.iter().map(|m| m.id).collect(),
            stands: voter || (leaving && !committed),
            member: named(&self.members) || leaving,
            departing,
        }
    }
}

/// A node as a configuration names it: its id and its data directory's
/// identity. An entry of its id names it if the entry names no directory
/// (the bootstrap list, or a member added before its directory was known;
/// a leader names every member's directory it knows when it writes a
/// configuration) or names this one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The node id.
    pub id: NodeId,
    /// Its data directory's identity, when known.
    pub directory: Option<DirectoryId>,
}

impl Identity {
    /// A node known by its id alone.
    pub fn of(id: NodeId) -> Identity {
        Identity { id, directory: None }
    }

    /// Whether `member` (an entry of this node's id) names this node.
    pub fn is(&self, member: &Member) -> bool {
        member.id == self.id
            && match (member.directory, self.directory) {
                (Some(named), Some(mine)) => named == mine,
                _ => true,
            }
    }
}

/// One change of the members: a configuration entry differs from the one
/// before it by one of these, so that a majority of the voters before and a
/// majority after always share a node.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Change {
    /// A new learner (it receives the log, then may be promoted).
    AddLearner(Member),
    /// A learner becomes a voter.
    Promote(NodeId),
    /// A voter or learner leaves.
    Remove(NodeId),
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddLearner(m) => write!(f, "add node {} as a learner", m.id),
            Change::Promote(id) => write!(f, "promote node {id}"),
            Change::Remove(id) => write!(f, "remove node {id}"),
        }
    }
}

/// Why a change of members was refused. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error, Serialize, Deserialize)]
pub enum ChangeError {
    /// Node id 0 is reserved.
    #[error("node id 0 is not allowed: node ids are positive integers")]
    ZeroId,
    /// The id is a member already.
    #[error("node {0} is a member already")]
    DuplicateId(NodeId),
    /// Another member has this address.
    #[error("the address {0} is node {1}'s already")]
    DuplicateAddress(String, NodeId),
    /// Another member has this data directory.
    #[error("the data directory {0} is node {1}'s already")]
    DuplicateDirectory(DirectoryId, NodeId),
    /// Not a member.
    #[error("node {0} is not a member")]
    NotMember(NodeId),
    /// Promoting a voter.
    #[error("node {0} is a voter already")]
    AlreadyVoter(NodeId),
    /// The only voter cannot leave.
    #[error("node {0} is the last voter: add and promote another node first")]
    LastVoter(NodeId),
    /// Too many members.
    #[error("a cluster holds at most {0} members, voters and learners")]
    TooMany(usize),
    /// Too many voters.
    #[error("a cluster has at most {0} voters")]
    TooManyVoters(usize),
    /// This node does not lead, or has not committed an entry of its own
    /// leadership yet (a change must wait for that: two changes across a
    /// leader change could otherwise elect two leaders).
    #[error("this node does not lead the log, or not yet ({})", leader_text(*.leader))]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// A change is in progress: its entry is not committed yet.
    #[error("another change is in progress ({0}); retry once it has committed")]
    Pending(String),
    /// Too few voters of the new configuration answer the leader.
    #[error(
        "refused: after this change {healthy} of its {voters} voters would be reachable \
         ({names}), fewer than the {quorum} it needs; bring the others back first"
    )]
    Unhealthy {
        /// Voters of the new configuration that answered lately.
        healthy: usize,
        /// Voters of the new configuration.
        voters: usize,
        /// A majority of them.
        quorum: usize,
        /// Who answered, for the operator.
        names: String,
    },
    /// A learner asked to be promoted has not caught up.
    #[error("node {0} has not caught up with the log yet; it is promoted once it has")]
    Behind(NodeId),
}

/// The longest peer address a member may have: a DNS name (253 bytes), a
/// colon and a port.
pub const MAX_ADDRESS_LEN: usize = 260;

/// Why `address` cannot be a member's peer address, if it cannot: it must
/// be HOST:PORT that the other members can dial, a host (a name, an IP
/// address, `[IPv6]`) that is not an unspecified IP, and a port from 1 to
/// 65535. The answer completes "the address ...".
pub fn address_problem(address: &str) -> Option<String> {
    if address.len() > MAX_ADDRESS_LEN {
        return Some(format!("is longer than {MAX_ADDRESS_LEN} bytes"));
    }
    if address.is_empty() || address.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("is empty or holds spaces".into());
    }
    if address.contains('/') || address.contains('@') {
        return Some("is not HOST:PORT (no scheme or path)".into());
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        return Some("has no port".into());
    };
    if !matches!(port.parse::<u16>(), Ok(p) if p > 0) {
        return Some("has no port from 1 to 65535".into());
    }
    let ip = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if host.is_empty() || (host.contains(':') && ip == host) || ip.contains(['[', ']']) {
        return Some("has no host (an IPv6 address goes in brackets: [::1]:7001)".into());
    }
    if ip.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
        return Some("is an unspecified address, which no node can dial".into());
    }
    None
}

fn leader_text(leader: Option<NodeId>) -> String {
    match leader {
        Some(l) => format!("the leader is node {l}"),
        None => "no leader is known".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, address: &str) -> Member {
        Member {
            id: NodeId(id),
            address: address.into(),
            directory: Some(DirectoryId(id as u128)),
            auto_promote: false,
        }
    }

    #[test]
    fn a_change_names_what_is_wrong_and_changes_nothing() {
        let m = Members { voters: vec![member(1, "a:1"), member(2, "b:1")], learners: vec![] };
        assert_eq!(
            m.after(&Change::AddLearner(member(2, "c:1"))),
            Err(ChangeError::DuplicateId(NodeId(2)))
        );
        assert_eq!(
            m.after(&Change::AddLearner(member(3, "a:1"))),
            Err(ChangeError::DuplicateAddress("a:1".into(), NodeId(1)))
        );
        let mut same_dir = member(3, "c:1");
        same_dir.directory = Some(DirectoryId(2));
        assert_eq!(
            m.after(&Change::AddLearner(same_dir)),
            Err(ChangeError::DuplicateDirectory(DirectoryId(2), NodeId(2)))
        );
        assert_eq!(m.after(&Change::Promote(NodeId(1))), Err(ChangeError::AlreadyVoter(NodeId(1))));
        assert_eq!(m.after(&Change::Promote(NodeId(9))), Err(ChangeError::NotMember(NodeId(9))));
        assert_eq!(m.after(&Change::Remove(NodeId(9))), Err(ChangeError::NotMember(NodeId(9))));
        let one = Members { voters: vec![member(1, "a:1")], learners: vec![] };
        assert_eq!(one.after(&Change::Remove(NodeId(1))), Err(ChangeError::LastVoter(NodeId(1))));
    }

    #[test]
    fn the_electorate_names_who_counts_who_follows_and_who_stands() {
        let three = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let boot = Membership::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let e = boot.electorate(Identity::of(NodeId(2)), None, 0);
        assert_eq!(e.id, ConfigId::BOOTSTRAP);
        assert!(e.stands && e.departing.is_empty() && e.learners.is_empty());
        let with_four = three.after(&Change::AddLearner(member(4, "d:1"))).unwrap();
        let at = |index| Position { token: tenure_core::FencingToken(2), index };
        let m = Membership { at: at(7), members: with_four.clone() };
        let e = m.electorate(Identity::of(NodeId(4)), Some(&three), 0);
        assert_eq!(e.learners, [NodeId(4)]);
        assert!(!e.stands, "a learner never stands");
        assert_eq!(e.id, ConfigId { token: tenure_core::FencingToken(2), index: 7 });
        // Node 1 removed: it stands until it knows the removal committed.
        let without_one = with_four.after(&Change::Remove(NodeId(1))).unwrap();
        let m = Membership { at: at(9), members: without_one };
        let e = m.electorate(Identity::of(NodeId(1)), Some(&with_four), 8);
        assert_eq!(e.departing, [NodeId(1)]);
        assert!(e.stands && !e.is_voter(NodeId(1)));
        assert!(!m.electorate(Identity::of(NodeId(1)), Some(&with_four), 9).stands);
        assert!(m.electorate(Identity::of(NodeId(2)), Some(&with_four), 9).stands);
        assert!(m.electorate(Identity::of(NodeId(2)), None, 9).departing.is_empty());
        // Node 4 wiped and back under its id (another directory): not the
        // learner the entry names.
        let m = Membership { at: at(7), members: with_four };
        let wiped = Identity { id: NodeId(4), directory: Some(DirectoryId(40)) };
        let e = m.electorate(wiped, Some(&three), 0);
        assert!(!e.member && !e.stands);
        let same = Identity { id: NodeId(4), directory: Some(DirectoryId(4)) };
        assert!(m.electorate(same, Some(&three), 0).member);
    }

    #[test]
    fn add_promote_remove() {
        let m = Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]);
        let m = m.after(&Change::AddLearner(member(4, "d:1"))).unwrap();
        assert!(m.is_learner(NodeId(4)) && !m.is_voter(NodeId(4)));
        assert_eq!(m.quorum(), 2);
        let m = m.after(&Change::Promote(NodeId(4))).unwrap();
        assert!(m.is_voter(NodeId(4)) && m.learners.is_empty());
        assert_eq!(m.quorum(), 3);
        let m = m.after(&Change::Remove(NodeId(1))).unwrap();
        assert_eq!(m.voter_ids().collect::<Vec<_>>(), [NodeId(2), NodeId(3), NodeId(4)]);
        assert_eq!(m.to_string(), "voters [2,3,4] learners []");
    }
}
