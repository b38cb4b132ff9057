//! Tiers: how exclusions reduce fair shares.
//!
//! Without exclusions every member's fair share is `n·w/W` of the `n`
//! assignable partitions. Exclusions can make that impossible: members that
//! together may take only `k` partitions cannot own more than `k`, however
//! large their weight. The fair answer is the weighted max-min fair
//! allocation (the lexicographically optimal base of the polymatroid "number
//! of partitions a set of members may take", Fujishige): find the set of
//! members with the fewest partitions per unit of weight (the largest such
//! set), give it exactly the partitions it may take, shared by weight, and
//! repeat with the remaining members and partitions. Each step's set is a
//! *tier*; the ratios (partitions per unit of weight) strictly grow from one
//! tier to the next, and when exclusions do not bind there is a single tier.
//!
//! The minimum ratio is found with Dinkelbach's method: for a candidate ratio
//! `a/b`, a maximum flow from the members (capacity `a·w`) through the
//! partitions they may take (capacity `b` per partition) tells whether some
//! set does worse (the flow falls short of `a·W`), and the largest source
//! side of the minimum cut is the worst such set, whose own ratio is the next
//! candidate. Partitions are grouped by the set of members excluding them,
//! so the networks have one node per distinct exclusion pattern.

use crate::flow::{runs, Network, SegmentTree, UNBOUNDED, ZERO};

/// A group of assignable partitions that the same members exclude.
pub(crate) struct ExclusionClass<'a> {
    /// How many partitions the class holds (at least one).
    pub size: u64,
    /// The ranks of the members excluding them, ascending; never all of them.
    pub excluders: &'a [u32],
}

impl ExclusionClass<'_> {
    /// Whether the member of rank `m` may take this class's partitions.
    pub(crate) fn allows(&self, m: u32) -> bool {
        self.excluders.binary_search(&m).is_err()
    }
}

/// One tier: its members share exactly its partitions by weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TierSize {
    /// Partitions of the tier.
    pub partitions: u64,
    /// Total weight of its members.
    pub weight: u64,
}

/// The tiers, most constrained first.
pub(crate) struct Tiers {
    /// The tier of each member (by rank).
    pub member_tier: Vec<u32>,
    /// The tier of each exclusion class.
    pub class_tier: Vec<u32>,
    /// Sizes of the tiers.
    pub tiers: Vec<TierSize>,
}

/// Splits the members (their weights by rank) and the exclusion classes into
/// tiers.
pub(crate) fn decompose(weights: &[u64], classes: &[ExclusionClass<'_>]) -> Tiers {
    let mut member_tier = vec![u32::MAX; weights.len()];
    let mut class_tier = vec![u32::MAX; classes.len()];
    let mut tiers = Vec::new();
    let mut members: Vec<u32> = (0..weights.len() as u32).collect();
    let mut open: Vec<u32> = (0..classes.len() as u32).collect();
    // Is member (rank) still without a tier?
    let mut remaining = vec![true; weights.len()];

    while !members.is_empty() {
        let binding = members.len() > 1
            && open
                .iter()
                .any(|&c| classes[c as usize].excluders.iter().any(|&m| remaining[m as usize]));
        let (tier_members, tier_classes) = if !binding {
            (members.clone(), open.clone())
        } else {
            worst_set(weights, classes, &members, &open)
        };
        let tier = tiers.len() as u32;
        let mut size = TierSize { partitions: 0, weight: 0 };
        for &m in &tier_members {
            member_tier[m as usize] = tier;
            remaining[m as usize] = false;
            size.weight += weights[m as usize];
        }
        for &c in &tier_classes {
            class_tier[c as usize] = tier;
            size.partitions += classes[c as usize].size;
        }
        tiers.push(size);
        members.retain(|&m| remaining[m as usize]);
        open.retain(|&c| class_tier[c as usize] == u32::MAX);
    }
    debug_assert!(open.is_empty(), "every assignable class is in some member's tier");
    Tiers { member_tier, class_tier, tiers }
}

/// The largest set of `members` with the smallest ratio of partitions they
/// may take (among `open`) to their weight, and those partitions' classes.
fn worst_set(
    weights: &[u64],
    classes: &[ExclusionClass<'_>],
    members: &[u32],
    open: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let total_weight: i128 = members.iter().map(|&m| weights[m as usize] as i128).sum();
    // Candidate ratio a/b, starting with everyone's.
    let mut a: i128 = open.iter().map(|&c| classes[c as usize].size as i128).sum();
    let mut b: i128 = total_weight;
    loop {
        // Nodes: 0 source, 1 sink, members, then classes.
        let (source, sink) = (0, 1);
        let member_node = |i: usize| 2 + i;
        let class_node = |j: usize| 2 + members.len() + j;
        let mut net = Network::new(2 + members.len() + open.len());
        for (i, &m) in members.iter().enumerate() {
            net.add_edge(source, member_node(i), a * weights[m as usize] as i128, ZERO);
        }
        // Members reach the classes they may take through a segment tree
        // over the members: one edge per run of allowed members and level.
        let leaves: Vec<usize> = (0..members.len()).map(member_node).collect();
        let tree = SegmentTree::build(&mut net, &leaves, false);
        let mut cover = Vec::new();
        for (j, &c) in open.iter().enumerate() {
            let class = &classes[c as usize];
            let excluded: Vec<usize> =
                class.excluders.iter().filter_map(|m| members.binary_search(m).ok()).collect();
            cover.clear();
            for (lo, hi) in runs(0, members.len(), &excluded) {
                tree.cover(lo, hi, &mut cover);
            }
            for &v in &cover {
                net.add_edge(v, class_node(j), UNBOUNDED, ZERO);
            }
            net.add_edge(class_node(j), sink, b * class.size as i128, ZERO);
        }
        let flow = net.max_flow(source, sink);
        let reaching = net.reaching(sink);
        let worst: Vec<u32> = members
            .iter()
            .enumerate()
            .filter(|&(i, _)| !reaching[member_node(i)])
            .map(|(_, &m)| m)
            .collect();
        let reachable: Vec<u32> = open
            .iter()
            .enumerate()
            .filter(|&(j, _)| !reaching[class_node(j)])
            .map(|(_, &c)| c)
            .collect();
        if flow == a * total_weight {
            // No set does worse than a/b: the largest set doing exactly as
            // badly is the tier (it contains the set a/b came from).
            return (worst, reachable);
        }
        // Some set does strictly worse; its ratio is the next candidate.
        a = reachable.iter().map(|&c| classes[c as usize].size as i128).sum();
        b = worst.iter().map(|&m| weights[m as usize] as i128).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_exclusions_is_one_tier() {
        let classes = [ExclusionClass { size: 10, excluders: &[] }];
        let t = decompose(&[1, 2, 3], &classes);
        assert_eq!(t.tiers, vec![TierSize { partitions: 10, weight: 6 }]);
        assert_eq!(t.member_tier, vec![0, 0, 0]);
    }

    #[test]
    fn a_restricted_member_is_its_own_tier() {
        // Member 0 may take only the 2 partitions of class 0; the others
        // share all 10. Ratio of {0}: 2/1 < 10/3.
        let classes = [
            ExclusionClass { size: 2, excluders: &[] },
            ExclusionClass { size: 8, excluders: &[0] },
        ];
        let t = decompose(&[1, 1, 1], &classes);
        assert_eq!(
            t.tiers,
            vec![TierSize { partitions: 2, weight: 1 }, TierSize { partitions: 8, weight: 2 }]
        );
        assert_eq!(t.member_tier, vec![0, 1, 1]);
        assert_eq!(t.class_tier, vec![0, 1]);
    }

    #[test]
    fn exclusions_that_do_not_bind_leave_one_tier() {
        // Member 0 may take 6 of 10 partitions but its share is 10/3.
        let classes = [
            ExclusionClass { size: 6, excluders: &[] },
            ExclusionClass { size: 4, excluders: &[0] },
        ];
        let t = decompose(&[1, 1, 1], &classes);
        assert_eq!(t.tiers, vec![TierSize { partitions: 10, weight: 3 }]);
    }

    #[test]
    fn two_members_sharing_a_few_partitions() {
        // Members 0 and 1 may take only class 0 (2 partitions); a lone check
        // of either passes (2/1 < 12/4? yes, so does the pair: 2/2).
        let classes = [
            ExclusionClass { size: 2, excluders: &[] },
            ExclusionClass { size: 10, excluders: &[0, 1] },
        ];
        let t = decompose(&[1, 1, 1, 1], &classes);
        assert_eq!(
            t.tiers,
            vec![TierSize { partitions: 2, weight: 2 }, TierSize { partitions: 10, weight: 2 }]
        );
        assert_eq!(t.member_tier, vec![0, 0, 1, 1]);
    }
}
