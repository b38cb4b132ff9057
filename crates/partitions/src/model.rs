//! The inputs, outputs and errors of [`assign`](crate::assign).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A member's identifier (in tenure, the id of the member's session).
pub type MemberId = u64;

/// The largest partition count a group may have.
pub const MAX_PARTITIONS: u32 = 100_000;

/// The largest number of members a group may have.
pub const MAX_MEMBERS: usize = 10_000;

/// A live, ready member that may own partitions.
///
/// `preferred` and `excluded` are sets of partition indices: their order
/// and repetitions never matter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The member's identifier, unique in the group.
    pub id: MemberId,
    /// Its weight (at least 1): its fair share of the partitions is
    /// proportional to it.
    pub weight: u32,
    /// Its zone (e.g. an availability zone or rack), if the group uses
    /// zones. Members without one form a zone of their own.
    pub zone: Option<String>,
    /// Partitions it would rather own: given one of them when that costs
    /// nothing else (see the crate documentation).
    pub preferred: BTreeSet<u32>,
    /// Partitions it must never own.
    pub excluded: BTreeSet<u32>,
}

impl Member {
    /// A member of weight 1, without zone, preferences or exclusions.
    pub fn new(id: MemberId) -> Self {
        Member { id, weight: 1, zone: None, preferred: BTreeSet::new(), excluded: BTreeSet::new() }
    }

    /// The same member with weight `weight`.
    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// The same member in zone `zone`.
    pub fn in_zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// The same member, also preferring `partitions`.
    pub fn preferring(mut self, partitions: impl IntoIterator<Item = u32>) -> Self {
        self.preferred.extend(partitions);
        self
    }

    /// The same member, also excluding `partitions`.
    pub fn excluding(mut self, partitions: impl IntoIterator<Item = u32>) -> Self {
        self.excluded.extend(partitions);
        self
    }
}

/// One partition changing hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The partition.
    pub partition: u32,
    /// Its owner in the current assignment, as given (possibly a member that
    /// is no longer eligible), or `None` if it had none.
    pub from: Option<MemberId>,
    /// Its new owner, or `None` if no eligible member may own it.
    pub to: Option<MemberId>,
}

/// A member's load in the new assignment, with the bounds it is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberLoad {
    /// The member.
    pub member: MemberId,
    /// How many partitions it owns.
    pub owned: u32,
    /// The floor of its fair share: it owns at least this many.
    pub floor: u32,
    /// The ceiling of its fair share: it owns at most this many.
    pub ceil: u32,
    /// Its tier, an index into [`Assignment::tiers`]. Its fair share is
    /// `tier.partitions · weight / tier.weight`.
    pub tier: u32,
}

/// A set of members that share a set of partitions by weight: see the crate
/// documentation. Without exclusions that bind there is exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tier {
    /// How many partitions the tier's members share.
    pub partitions: u32,
    /// The total weight of the tier's members.
    pub weight: u64,
}

/// The result of [`assign`](crate::assign).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The owner of each partition (index = partition), `None` only for
    /// partitions that every member excludes (or when there are no members).
    pub owners: Vec<Option<MemberId>>,
    /// Every partition whose owner differs from the current assignment's,
    /// by ascending partition.
    pub moves: Vec<Move>,
    /// One entry per member, by ascending id.
    pub loads: Vec<MemberLoad>,
    /// The tiers, most constrained first (partitions per unit of weight
    /// strictly increasing).
    pub tiers: Vec<Tier>,
}

/// Why [`assign`](crate::assign) refused its input. A refusal changes
/// nothing: the function is pure.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum AssignError {
    /// The partition count is 0.
    #[error("a group needs at least one partition")]
    NoPartitions,
    /// The partition count is above [`MAX_PARTITIONS`].
    #[error("{partitions} partitions is more than the limit of {MAX_PARTITIONS}")]
    TooManyPartitions {
        /// The partition count given.
        partitions: u32,
    },
    /// More than [`MAX_MEMBERS`] members.
    #[error("{members} members is more than the limit of {MAX_MEMBERS}")]
    TooManyMembers {
        /// The number of members given.
        members: usize,
    },
    /// The current assignment does not have one entry per partition.
    #[error("the current assignment has {actual} entries for {partitions} partitions")]
    CurrentLength {
        /// The partition count given.
        partitions: u32,
        /// The length of the current assignment given.
        actual: usize,
    },
    /// Two members have the same id (the smallest such id is reported).
    #[error("member {member} is listed more than once")]
    DuplicateMember {
        /// The repeated id.
        member: MemberId,
    },
    /// A member has weight 0.
    #[error("member {member} has weight 0 (weights start at 1)")]
    ZeroWeight {
        /// The member.
        member: MemberId,
    },
    /// A member excludes a partition the group does not have.
    #[error("member {member} excludes partition {partition}, outside the group's 0..{partitions}")]
    ExcludedOutOfRange {
        /// The member.
        member: MemberId,
        /// The smallest such partition.
        partition: u32,
        /// The group's partition count.
        partitions: u32,
    },
    /// A member prefers a partition the group does not have.
    #[error("member {member} prefers partition {partition}, outside the group's 0..{partitions}")]
    PreferredOutOfRange {
        /// The member.
        member: MemberId,
        /// The smallest such partition.
        partition: u32,
        /// The group's partition count.
        partitions: u32,
    },
    /// A member excludes every partition of the group: it could never own
    /// anything, so it should not be a member.
    #[error("member {member} excludes every one of the group's {partitions} partitions")]
    ExcludesEverything {
        /// The member.
        member: MemberId,
        /// The group's partition count.
        partitions: u32,
    },
    /// A member both prefers and excludes a partition.
    #[error("member {member} both prefers and excludes partition {partition}")]
    PreferredAndExcluded {
        /// The member.
        member: MemberId,
        /// The smallest such partition.
        partition: u32,
    },
}
