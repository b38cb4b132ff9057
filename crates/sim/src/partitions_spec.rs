//! What the partitions workload runs ([`crate::partitions`]): its size,
//! its groups, its session TTL, and the bugs tests plant in it.

use crate::elect_spec::ElectSpec;

/// Members (app processes) of the default workload.
pub const DEFAULT_MEMBERS: usize = 5;
/// Partition counts of the default workload's groups (`g0`, `g1`): member
/// `m` is in group `m % 2`, so `g0` has three members and 8 partitions,
/// `g1` two members and 12.
pub const DEFAULT_PARTITIONS: [u32; 2] = [8, 12];
/// Session TTL of the default workload, ms (as the elections').
pub const DEFAULT_TTL_MS: u64 = 2_000;
/// The default groups' stabilisation time, ms: how long a member is ready
/// before it receives partitions (shorter than the server's default, 2 s,
/// so that a run of 20 s sees many joins take effect).
pub const DEFAULT_STABILISE_MS: u64 = 500;

/// A deliberate bug, for tests that show the partition checkers can fail.
/// Never set by `tenure sim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionsBug {
    /// The members ignore their deadline: they work on their partitions
    /// until a read shows them another owner or their session is reported
    /// gone.
    IgnoreDeadline,
    /// The keeper hands a partition over without waiting for its owner to
    /// release it: it plans as if every owner key marked `release` were
    /// gone already, and grants without comparing the key's absence
    /// (`create_revision == 0`), so the grant overwrites the old owner's
    /// key in place (and keeps its epoch).
    GrantOverOwner,
    /// The nodes report each owner key's `create_revision` modulo 8 (an
    /// epoch that wraps and is reused).
    WrappingEpochs,
    /// The members stop working on a partition marked `release` but never
    /// delete its key: it is granted again only when their session ends.
    NoRelease,
    /// The keeper never asks an owner to release a partition: it only
    /// grants partitions nobody owns.
    NeverBalance,
    /// A member asked to release one partition stops and releases every
    /// partition it owns.
    ReleaseAll,
    /// A release hands a partition over by overwriting its owner key in
    /// place (the put without the delete before it): the new owner keeps
    /// the old owner's epoch.
    HandOverInPlace,
}

/// The partitions workload of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionsSpec {
    /// Members (app processes); member `m` is in group `m % groups`.
    pub members: usize,
    /// The partition count of each group (`g0`, `g1`, ...).
    pub partitions: Vec<u32>,
    /// Session TTL, ms.
    pub ttl_ms: u64,
    /// The groups' stabilisation time, ms.
    pub stabilise_ms: u64,
    /// A deliberate bug (tests only).
    pub planted: Option<PartitionsBug>,
}

impl Default for PartitionsSpec {
    fn default() -> Self {
        PartitionsSpec {
            members: DEFAULT_MEMBERS,
            partitions: DEFAULT_PARTITIONS.to_vec(),
            ttl_ms: DEFAULT_TTL_MS,
            stabilise_ms: DEFAULT_STABILISE_MS,
            planted: None,
        }
    }
}

impl PartitionsSpec {
    /// How many groups.
    pub fn groups(&self) -> usize {
        self.partitions.len()
    }

    /// The session TTL, ns.
    pub fn ttl_ns(&self) -> u64 {
        self.ttl_ms * 1_000_000
    }

    /// What a member trusts of its session after sending a renewal, ns on
    /// its own clock: the TTL less the drift margin of the elections
    /// ([`ElectSpec::margin_ns`], whose argument holds for any session).
    pub fn trusted_ns(&self, drift_ppm: u32) -> u64 {
        let sessions = ElectSpec { ttl_ms: self.ttl_ms, ..ElectSpec::default() };
        sessions.trusted_ns(drift_ppm)
    }
}

/// The name of group `g`.
pub fn group_name(g: usize) -> String {
    format!("g{g}")
}
