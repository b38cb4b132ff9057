//! # tenure-partitions: who owns which partition
//!
//! A named group has `N` partitions (`0..N`) and members (application
//! processes, each holding a session). [`assign`] computes which member owns
//! each partition from the group's partition count, its eligible members and
//! the current assignment. It is a pure, deterministic function of those
//! inputs, so every replica of tenure's state machine computes the same
//! result: no clock, no randomness, no hash-map iteration order, and the
//! order in which the members are listed does not matter (they are sorted by
//! id first). Where a group lives in tenure's key-value store is
//! [`group`]; the leader's keeper that turns the assignment into
//! transactions, with a fencing epoch per grant, is [`keeper`]
//! (docs/PARTITIONS.md).
//!
//! ```
//! use tenure_partitions::{assign, Member};
//!
//! let members = [Member::new(1), Member::new(2), Member::new(3)];
//! let first = assign(10, &members, &[None; 10]).unwrap();
//! assert_eq!(first.loads.iter().map(|l| l.owned).collect::<Vec<_>>(), [4, 3, 3]);
//!
//! // Member 3 leaves: only its 3 partitions move.
//! let second = assign(10, &members[..2], &first.owners).unwrap();
//! assert_eq!(second.moves.len(), 3);
//! assert!(second.moves.iter().all(|m| m.from == Some(3)));
//! ```
//!
//! ## Inputs
//!
//! A [`Member`] has an id, a weight (at least 1), an optional zone, and sets
//! of preferred and excluded partitions. The current assignment has one
//! entry per partition; an owner that is not among the members counts as
//! absent, and one that now excludes its partition must give it up. Invalid
//! input is refused with an [`AssignError`]: no or too many partitions
//! ([`MAX_PARTITIONS`]), too many members ([`MAX_MEMBERS`]), a current
//! assignment of the wrong length, a repeated member id, a weight of 0, a
//! preferred or excluded partition out of range, a member excluding every
//! partition or both preferring and excluding one.
//!
//! ## Guarantees
//!
//! Call a partition *assignable* if at least one member does not exclude it,
//! and let `n` be their number.
//!
//! 1. **Coverage.** Every assignable partition has exactly one owner, a
//!    member that does not exclude it. The others have none.
//!
//! 2. **Balance.** The members are split into *tiers* ([`Assignment::tiers`],
//!    [`MemberLoad::tier`]), and the assignable partitions likewise; the
//!    members of a tier own exactly the partitions of that tier. A member of
//!    weight `w` in a tier of `p` partitions and total weight `W` owns
//!    `floor(p·w/W)` or `ceil(p·w/W)` partitions ([`MemberLoad::floor`],
//!    [`MemberLoad::ceil`]).
//!
//!    Without exclusions, or when they do not bind, there is a single tier
//!    (all members, all `n` assignable partitions): every member owns the
//!    floor or the ceiling of its weighted fair share `n·w/W`.
//!
//!    When exclusions make that impossible, the fractional shares are the
//!    weighted max-min fair ones. The first tier is the largest set of
//!    members that may together take the fewest partitions per unit of
//!    weight: it gets exactly the partitions its members may take, shared
//!    by weight. The next tier is found the same way among the remaining
//!    members and partitions, and so on. The ratio of partitions to weight
//!    strictly grows from one tier to the next, so a member gets less than
//!    `n·w/W` only when it and the members it competes with may not take
//!    more, and everyone else shares the rest by weight. For example, with
//!    four members of weight 1 and 100 partitions, two of which may take
//!    only partitions 0..10: those two own 5 each, the other two 45 each.
//!
//! 3. **Zones.** Within a tier, the members of a zone (members without a zone
//!    form one zone) together own the floor or the ceiling of the zone's
//!    share `p·w(zone)/W`. Members and zones can always be held to these
//!    bounds at once.
//!
//! 4. **Remainders.** Which members get the ceiling rather than the floor
//!    (a `+1`): the largest remainders of `p·w/W` first; among equal
//!    remainders, members that now own more than their floor (counting the
//!    partitions they may keep) first, which is exactly the choice needing
//!    the fewest moves when there are no exclusions; then the lowest ids;
//!    all within the zones' bounds (precisely: the set of `+1`s has the
//!    smallest total of these criteria, compared in that order, among the
//!    sets meeting the zones' bounds). If exclusions make that set
//!    unreachable (rare: some members may take only about as many
//!    partitions as their shares), the set has the smallest total of the
//!    first two criteria among the reachable ones, and remaining ties go to
//!    fewer moves and then to the later criteria below, not necessarily to
//!    the lowest ids.
//!
//! 5. **Minimal moves.** Given the resulting counts, the number of moves
//!    (partitions whose owner changes, including partitions gaining an owner
//!    or losing one) is the minimum possible from the current assignment.
//!    Consequences, for members of equal weight without zones or
//!    exclusions: a member leaving a balanced group moves exactly its own
//!    partitions; a member joining a balanced group takes
//!    `floor(N/M)` or `ceil(N/M)` partitions and no other partition moves;
//!    and calling [`assign`] again on its own result moves nothing (this
//!    last one holds always).
//!
//! 6. **Preferences.** Among assignments equal on all of the above, the
//!    number of partitions owned by a member preferring them is the largest
//!    possible; then the number of preferred partitions taken from a
//!    current owner is the smallest (an over-quota member gives up the
//!    partitions it does not prefer first).
//!
//! 7. **Zone locality.** Among assignments equal on all of the above, the
//!    number of partitions moving from a current (still eligible) owner to a
//!    member of a different zone is the smallest: a partition that must
//!    move stays in its owner's zone when it can. Partitions whose owner
//!    left have no zone to stay in.
//!
//! Remaining ties are broken deterministically: among interchangeable
//! partitions, the lowest-numbered ones stay with their owner.
//!
//! ## Method and cost
//!
//! The `+1`s are chosen greedily (the sets meeting the zones' bounds form a
//! matroid, so the greedy choice is optimal). One minimum-cost flow then
//! gives every member its count and minimises the moves, then the
//! preference and locality criteria, as lexicographically ranked cost
//! components. Its nodes are classes of interchangeable partitions (same
//! excluders, same preferrers, same current owner), the members, and a
//! segment tree over the members through which partitions reach the members
//! allowed to take them, so a class excluded by `k` members costs
//! `O(k log M)` edges rather than `M`. Tiers come from a few maximum flows
//! over the distinct exclusion patterns, only when some member excludes an
//! assignable partition. When exclusions make the greedy `+1`s unreachable,
//! the flow chooses them instead, with one phase per distinct remainder.
//!
//! Reading the input is linear in its size (partitions, members,
//! preferences and exclusions). On two cores, 10,000 partitions over 100
//! members take well under a millisecond; 100,000 partitions over 10,000
//! members tens of milliseconds, and about 150 ms when each member excludes
//! a partition (`README.md`, `cargo bench -p tenure-partitions`).

#![deny(missing_docs)]

mod assign;
mod flow;
pub mod group;
pub mod keeper;
mod model;
pub mod recipe;
mod tiers;
mod txn;

pub use assign::assign;
pub use group::{Group, GroupError, GroupKeys, GroupSpec, MemberSpec, Ownership};
pub use keeper::{GroupKeeper, Look, Plan};
pub use model::{
    AssignError, Assignment, Member, MemberId, MemberLoad, Move, Tier, MAX_MEMBERS, MAX_PARTITIONS,
};
pub use recipe::RecipeError;
