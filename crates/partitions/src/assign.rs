//! The assignment: validation, the quotas, the network, and reading the
//! result back.
//!
//! **Quotas.** Each member's count is the floor of its share of its tier, or
//! that plus one. The `+1`s of a tier are a set of members of minimum total
//! weight, the weight of a member being, lexicographically, `(tier weight -
//! remainder, not sticky, rank)` (sticky: the member now owns more than its
//! floor among the partitions it may keep), among the sets meeting the
//! zones' bounds. Those sets are the bases of a matroid (a partition
//! matroid with lower and upper bounds), so the greedy choice
//! (`Problem::greedy_quotas`) is optimal. Exclusions can make it
//! unreachable (a set of members may take fewer partitions than their
//! floors plus their `+1`s); then the flow chooses the `+1`s itself, with
//! the weight's first two components as costs (no rank: the flow needs one
//! phase per distinct cost).
//!
//! **Flow.** Partitions are grouped into *classes* of interchangeable
//! partitions: the same members exclude them, the same members prefer them
//! and they have the same current owner. A minimum-cost flow sends every
//! assignable partition from the source through its class to a member, and
//! from the member to the sink:
//!
//! ```text
//! source -> class -> member ------------------------------------------------> quota -> sink
//!                 \-> hub (exclusions, previous owner's zone) -> member tree -/
//! ```
//!
//! A class reaches its current owner (keep), the members preferring it, and
//! a *hub* shared by all classes with the same exclusions and the same
//! previous owner's zone. A hub reaches the members of its tier allowed to
//! take its partitions through a segment tree over all members, ordered by
//! (tier, zone, id): one edge per tree node covering a run of allowed
//! members, with the runs split at the previous owner's zone. Members are
//! only linked to the partitions of their own tier. With quotas chosen, a
//! member's edge to the sink has its quota as capacity. When the flow must
//! choose them, the edge goes through the member's zone (within its tier)
//! and is split into the floor (free) and the `+1` (capacity 1, costly),
//! and likewise the zone's edge to the sink.
//!
//! The costs (`Cost`) are compared lexicographically, component by
//! component:
//!
//! 0. `PLUS`: units above a floor, member's or zone's. A flow meeting every
//!    floor exists (the fractional fair shares are one), so the optimum
//!    meets every floor: each member owns floor or ceil of its share, each
//!    zone likewise.
//! 1. `REMAINDER`, 2. `NOT_STICKY`: the weight of a `+1` (above).
//! 3. `MOVES`: a partition not kept by its current owner.
//! 4. `NOT_PREFERRED`: a partition whose new owner does not prefer it.
//! 5. `PREFERRED_LOST`: a partition taken from a current owner preferring it.
//! 6. `CROSS_ZONE`: a partition moving from a current owner to a member of
//!    another zone.
//!
//! Components 0 to 2 are zero when the quotas are given.

use std::collections::{BTreeMap, BTreeSet};

use crate::flow::{runs, Cost, Network, SegmentTree, ZERO};
use crate::model::{
    AssignError, Assignment, Member, MemberId, MemberLoad, Move, Tier, MAX_MEMBERS, MAX_PARTITIONS,
};
use crate::tiers::{decompose, ExclusionClass, Tiers};

const PLUS: usize = 0;
const REMAINDER: usize = 1;
const NOT_STICKY: usize = 2;
const MOVES: usize = 3;
const NOT_PREFERRED: usize = 4;
const PREFERRED_LOST: usize = 5;
const CROSS_ZONE: usize = 6;

/// "No member" / "no zone" in the rank- and id-indexed tables.
const NONE: u32 = u32::MAX;

fn cost(parts: &[(usize, i64)]) -> Cost {
    let mut c = ZERO;
    for &(k, v) in parts {
        c[k] += v;
    }
    c
}

/// Assigns the `partitions` partitions of a group to its eligible `members`,
/// starting from `current` (the owner of each partition, one entry per
/// partition; owners that are not among `members` count as absent).
///
/// The result is a pure function of its inputs: the order of `members` does
/// not matter, and neither clocks nor randomness are involved. See the crate
/// documentation for the guarantees.
///
/// # Errors
///
/// [`AssignError`] when the input is invalid; nothing is assigned then.
pub fn assign(
    partitions: u32,
    members: &[Member],
    current: &[Option<MemberId>],
) -> Result<Assignment, AssignError> {
    let members = validate(partitions, members, current)?;
    Ok(solve(partitions, &members, current))
}

/// Checks the input; returns the members sorted by id.
fn validate<'a>(
    partitions: u32,
    members: &'a [Member],
    current: &[Option<MemberId>],
) -> Result<Vec<&'a Member>, AssignError> {
    if partitions == 0 {
        return Err(AssignError::NoPartitions);
    }
    if partitions > MAX_PARTITIONS {
        return Err(AssignError::TooManyPartitions { partitions });
    }
    if members.len() > MAX_MEMBERS {
        return Err(AssignError::TooManyMembers { members: members.len() });
    }
    if current.len() != partitions as usize {
        return Err(AssignError::CurrentLength { partitions, actual: current.len() });
    }
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.id);
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0].id == pair[1].id) {
        return Err(AssignError::DuplicateMember { member: pair[0].id });
    }
    for m in &sorted {
        if m.weight == 0 {
            return Err(AssignError::ZeroWeight { member: m.id });
        }
        if let Some(&partition) = m.excluded.range(partitions..).next() {
            return Err(AssignError::ExcludedOutOfRange { member: m.id, partition, partitions });
        }
        if let Some(&partition) = m.preferred.range(partitions..).next() {
            return Err(AssignError::PreferredOutOfRange { member: m.id, partition, partitions });
        }
        if m.excluded.len() == partitions as usize {
            return Err(AssignError::ExcludesEverything { member: m.id, partitions });
        }
        if let Some(&partition) = m.preferred.intersection(&m.excluded).next() {
            return Err(AssignError::PreferredAndExcluded { member: m.id, partition });
        }
    }
    Ok(sorted)
}

/// For each partition, the ranks of the members whose set holds it
/// (ascending), as offsets into one array.
fn by_partition<'a>(
    n: usize,
    sets: impl Iterator<Item = &'a BTreeSet<u32>> + Clone,
) -> (Vec<usize>, Vec<u32>) {
    let mut start = vec![0usize; n + 1];
    for set in sets.clone() {
        for &p in set {
            start[p as usize + 1] += 1;
        }
    }
    for p in 0..n {
        start[p + 1] += start[p];
    }
    let mut cursor = start.clone();
    let mut ranks = vec![0u32; start[n]];
    for (rank, set) in sets.enumerate() {
        for &p in set {
            ranks[cursor[p as usize]] = rank as u32;
            cursor[p as usize] += 1;
        }
    }
    (start, ranks)
}

/// A class of interchangeable partitions.
struct Class<'a> {
    exclusion: u32,
    owner: u32,
    preferrers: &'a [u32],
    partitions: Vec<u32>,
}

/// Where a class's edge leads.
enum Target {
    Member(u32),
    Hub(usize),
}

/// Everything derived from the input; members are identified by rank (their
/// index once sorted by id).
struct Problem<'a> {
    n: usize,
    count: usize,
    ids: Vec<MemberId>,
    zone_of: Vec<u32>,
    exclusion_of: Vec<u32>,
    exclusion_classes: Vec<ExclusionClass<'a>>,
    tiers: Tiers,
    classes: Vec<Class<'a>>,
    /// Per member: the floor and the remainder of its share of its tier.
    floors: Vec<u64>,
    remainders: Vec<u64>,
    /// Per member: partitions it owns now and may keep.
    keepable: Vec<u64>,
    /// Per member: its zone within its tier (an index of `zones`).
    member_zone: Vec<usize>,
    /// Per zone within a tier: (tier, floor, remainder) of its share.
    zones: Vec<(u32, u64, u64)>,
    assignable: u64,
}

impl<'a> Problem<'a> {
    fn new(
        members: &[&Member],
        current: &[Option<MemberId>],
        excluders: (&[usize], &'a [u32]),
        preferrers: (&[usize], &'a [u32]),
    ) -> Self {
        let n = current.len();
        let count = members.len();
        let ids: Vec<MemberId> = members.iter().map(|m| m.id).collect();
        let weights: Vec<u64> = members.iter().map(|m| u64::from(m.weight)).collect();
        let zone_ids: BTreeMap<Option<&str>, u32> = members
            .iter()
            .map(|m| m.zone.as_deref())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .enumerate()
            .map(|(i, z)| (z, i as u32))
            .collect();
        let zone_of: Vec<u32> = members.iter().map(|m| zone_ids[&m.zone.as_deref()]).collect();

        // Exclusion classes of the assignable partitions.
        let (excl_start, excl_ranks) = excluders;
        let mut exclusion_of = vec![NONE; n];
        let mut exclusion_classes: Vec<ExclusionClass<'a>> = Vec::new();
        let mut exclusion_ids: BTreeMap<&'a [u32], u32> = BTreeMap::new();
        let mut unexcluded = NONE;
        for p in 0..n {
            let excluders = &excl_ranks[excl_start[p]..excl_start[p + 1]];
            if excluders.len() == count {
                continue; // every member excludes it (or there are none)
            }
            let id = if excluders.is_empty() && unexcluded != NONE {
                unexcluded
            } else {
                let next = exclusion_classes.len() as u32;
                let id = *exclusion_ids.entry(excluders).or_insert(next);
                if id == next {
                    exclusion_classes.push(ExclusionClass { size: 0, excluders });
                }
                if excluders.is_empty() {
                    unexcluded = id;
                }
                id
            };
            exclusion_classes[id as usize].size += 1;
            exclusion_of[p] = id;
        }
        let assignable = exclusion_classes.iter().map(|c| c.size).sum();
        let tiers = decompose(&weights, &exclusion_classes);

        // Fair shares of members and of zones within tiers.
        let share = |tier: u32, weight: u64| -> (u64, u64) {
            let t = tiers.tiers[tier as usize];
            let numerator = u128::from(t.partitions) * u128::from(weight);
            let denominator = u128::from(t.weight);
            ((numerator / denominator) as u64, (numerator % denominator) as u64)
        };
        let (floors, remainders): (Vec<u64>, Vec<u64>) =
            (0..count).map(|r| share(tiers.member_tier[r], weights[r])).unzip();
        let mut zone_index: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let mut zone_weight: Vec<(u32, u64)> = Vec::new();
        let member_zone: Vec<usize> = (0..count)
            .map(|r| {
                let key = (tiers.member_tier[r], zone_of[r]);
                let next = zone_index.len();
                let z = *zone_index.entry(key).or_insert(next);
                if z == next {
                    zone_weight.push((key.0, 0));
                }
                zone_weight[z].1 += weights[r];
                z
            })
            .collect();
        let zones = zone_weight
            .iter()
            .map(|&(tier, weight)| {
                let (floor, remainder) = share(tier, weight);
                (tier, floor, remainder)
            })
            .collect();

        // Current owners, by rank (NONE: no owner or not eligible).
        let owner_of: Vec<u32> = current
            .iter()
            .map(|c| c.and_then(|id| ids.binary_search(&id).ok()).map_or(NONE, |r| r as u32))
            .collect();

        // Classes of interchangeable partitions. Plain ones (no exclusions,
        // no preferences) are looked up by owner, the others in a map.
        let (pref_start, pref_ranks) = preferrers;
        let mut classes: Vec<Class<'a>> = Vec::new();
        let mut plain = vec![NONE; count + 1];
        let mut keyed: BTreeMap<(u32, u32, &'a [u32]), u32> = BTreeMap::new();
        let mut keepable = vec![0u64; count];
        for p in 0..n {
            let exclusion = exclusion_of[p];
            if exclusion == NONE {
                continue;
            }
            let owner = owner_of[p];
            let preferrers = &pref_ranks[pref_start[p]..pref_start[p + 1]];
            if owner != NONE
                && exclusion_classes[exclusion as usize].allows(owner)
                && tiers.member_tier[owner as usize] == tiers.class_tier[exclusion as usize]
            {
                keepable[owner as usize] += 1;
            }
            let slot = (exclusion == unexcluded && preferrers.is_empty())
                .then_some(if owner == NONE { count } else { owner as usize });
            let known = match slot {
                Some(slot) => (plain[slot] != NONE).then_some(plain[slot]),
                None => keyed.get(&(exclusion, owner, preferrers)).copied(),
            };
            let id = known.unwrap_or_else(|| {
                let id = classes.len() as u32;
                classes.push(Class { exclusion, owner, preferrers, partitions: Vec::new() });
                match slot {
                    Some(slot) => plain[slot] = id,
                    None => {
                        keyed.insert((exclusion, owner, preferrers), id);
                    }
                }
                id
            });
            classes[id as usize].partitions.push(p as u32);
        }

        Problem {
            n,
            count,
            ids,
            zone_of,
            exclusion_of,
            exclusion_classes,
            tiers,
            classes,
            floors,
            remainders,
            keepable,
            member_zone,
            zones,
            assignable,
        }
    }

    /// The weight of giving member `r` a `+1` (smaller is better).
    fn plus_weight(&self, r: usize) -> (u64, bool, usize) {
        let tier_weight = self.tiers.tiers[self.tiers.member_tier[r] as usize].weight;
        let sticky = self.keepable[r] > self.floors[r];
        (tier_weight - self.remainders[r], !sticky, r)
    }

    /// The quotas with the `+1`s chosen greedily by weight, each taken if the
    /// zones' bounds still allow a complete choice: optimal when the
    /// exclusions do not interfere (see the module documentation).
    fn greedy_quotas(&self) -> Vec<u32> {
        let mut quotas: Vec<u32> = self.floors.iter().map(|&f| f as u32).collect();
        // Per zone: `+1`s it must take (its floor minus its members'), taken.
        let mut must = vec![0u64; self.zones.len()];
        for (z, &(_, floor, _)) in self.zones.iter().enumerate() {
            must[z] = floor;
        }
        for r in 0..self.count {
            must[self.member_zone[r]] -= self.floors[r];
        }
        let mut taken = vec![0u64; self.zones.len()];
        // Per tier: how many zones may still take one `+1` beyond `must`.
        let mut optional = vec![0u64; self.tiers.tiers.len()];
        for (t, size) in self.tiers.tiers.iter().enumerate() {
            optional[t] = size.partitions;
        }
        for r in 0..self.count {
            optional[self.tiers.member_tier[r] as usize] -= self.floors[r];
        }
        for (z, &(tier, _, _)) in self.zones.iter().enumerate() {
            optional[tier as usize] -= must[z];
        }
        let mut candidates: Vec<usize> =
            (0..self.count).filter(|&r| self.remainders[r] > 0).collect();
        candidates.sort_by_key(|&r| (self.tiers.member_tier[r], self.plus_weight(r)));
        for r in candidates {
            let z = self.member_zone[r];
            let tier = self.tiers.member_tier[r] as usize;
            if taken[z] < must[z] {
                taken[z] += 1;
                quotas[r] += 1;
            } else if taken[z] == must[z] && self.zones[z].2 > 0 && optional[tier] > 0 {
                optional[tier] -= 1;
                taken[z] += 1;
                quotas[r] += 1;
            }
        }
        quotas
    }

    /// The minimum-cost flow, with the given quotas or choosing them;
    /// returns the owner (rank) of each partition and the flow's value.
    fn flow(&self, quotas: Option<&[u32]>) -> (Vec<u32>, i128) {
        let (count, tiers, zone_of) = (self.count, &self.tiers, &self.zone_of);
        // Hubs: one per (exclusion class, previous owner's zone).
        let mut hubs: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let class_hub: Vec<usize> = self
            .classes
            .iter()
            .map(|c| {
                let zone = if c.owner == NONE { NONE } else { zone_of[c.owner as usize] };
                let next = hubs.len();
                *hubs.entry((c.exclusion, zone)).or_insert(next)
            })
            .collect();
        let mut hub_keys = vec![(0, 0); hubs.len()];
        for (&key, &h) in &hubs {
            hub_keys[h] = key;
        }

        let (source, sink) = (0, 1);
        let class_base = 2;
        let hub_base = class_base + self.classes.len();
        let member_base = hub_base + hubs.len();
        let zone_base = member_base + count;
        let zone_nodes = if quotas.is_some() { 0 } else { self.zones.len() };
        let mut net = Network::new(zone_base + zone_nodes);
        let mut class_edges: Vec<Vec<(usize, Target)>> = Vec::with_capacity(self.classes.len());
        for (c, class) in self.classes.iter().enumerate() {
            let node = class_base + c;
            let size = class.partitions.len() as i128;
            net.add_edge(source, node, size, ZERO);
            let exclusion = &self.exclusion_classes[class.exclusion as usize];
            let tier = tiers.class_tier[class.exclusion as usize];
            let in_tier = |m: u32| tiers.member_tier[m as usize] == tier && exclusion.allows(m);
            let owner = class.owner;
            let owner_prefers = owner != NONE && class.preferrers.binary_search(&owner).is_ok();
            let mut edges = Vec::new();
            if owner != NONE && in_tier(owner) {
                let c = cost(&[(NOT_PREFERRED, i64::from(!owner_prefers))]);
                let e = net.add_edge(node, member_base + owner as usize, size, c);
                edges.push((e, Target::Member(owner)));
            }
            for &m in class.preferrers {
                if m == owner || !in_tier(m) {
                    continue;
                }
                let cross = owner != NONE && zone_of[m as usize] != zone_of[owner as usize];
                let c = cost(&[
                    (MOVES, 1),
                    (PREFERRED_LOST, i64::from(owner_prefers)),
                    (CROSS_ZONE, i64::from(cross)),
                ]);
                edges.push((
                    net.add_edge(node, member_base + m as usize, size, c),
                    Target::Member(m),
                ));
            }
            let h = class_hub[c];
            let c =
                cost(&[(MOVES, 1), (NOT_PREFERRED, 1), (PREFERRED_LOST, i64::from(owner_prefers))]);
            edges.push((net.add_edge(node, hub_base + h, size, c), Target::Hub(h)));
            class_edges.push(edges);
        }
        // Hubs reach the members of their tier they may serve through a
        // segment tree over the members ordered by (tier, zone, rank): one
        // edge per tree node covering a run of allowed members, split at the
        // previous owner's zone (inside: no cross-zone cost).
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by_key(|&r| (tiers.member_tier[r], zone_of[r], r));
        let mut position = vec![0usize; count];
        for (i, &r) in order.iter().enumerate() {
            position[r] = i;
        }
        let mut tier_range = vec![(0usize, 0usize); tiers.tiers.len()];
        let mut zone_range: BTreeMap<(u32, u32), (usize, usize)> = BTreeMap::new();
        for (i, &r) in order.iter().enumerate().rev() {
            let t = tiers.member_tier[r];
            tier_range[t as usize] = (i, tier_range[t as usize].1.max(i + 1));
            let z = zone_range.entry((t, zone_of[r])).or_insert((i, i + 1));
            z.0 = i;
        }
        let leaves: Vec<usize> = order.iter().map(|&r| member_base + r).collect();
        let tree = SegmentTree::build(&mut net, &leaves, true);
        let mut allowed_runs: BTreeMap<u32, Vec<(usize, usize)>> = BTreeMap::new();
        let mut hub_edges: Vec<Vec<(usize, usize)>> = Vec::with_capacity(hubs.len());
        let mut cover = Vec::new();
        for (h, &(exclusion, zone)) in hub_keys.iter().enumerate() {
            let class = &self.exclusion_classes[exclusion as usize];
            let tier = tiers.class_tier[exclusion as usize];
            let runs_here = allowed_runs.entry(exclusion).or_insert_with(|| {
                let mut excluded: Vec<usize> = class
                    .excluders
                    .iter()
                    .filter(|&&m| tiers.member_tier[m as usize] == tier)
                    .map(|&m| position[m as usize])
                    .collect();
                excluded.sort_unstable();
                let (lo, hi) = tier_range[tier as usize];
                runs(lo, hi, &excluded)
            });
            // The previous owner's zone within the tier (empty if none).
            let (zlo, zhi) = if zone == NONE {
                (0, usize::MAX)
            } else {
                zone_range.get(&(tier, zone)).copied().unwrap_or((0, 0))
            };
            let mut edges = Vec::new();
            for &(lo, hi) in runs_here.iter() {
                let pieces =
                    [(lo, hi.min(zlo), 1), (lo.max(zlo), hi.min(zhi), 0), (lo.max(zhi), hi, 1)];
                for (plo, phi, cross) in pieces {
                    cover.clear();
                    tree.cover(plo, phi, &mut cover);
                    let c = cost(&[(CROSS_ZONE, cross)]);
                    for &v in &cover {
                        edges.push((net.add_edge(hub_base + h, v, class.size as i128, c), v));
                    }
                }
            }
            hub_edges.push(edges);
        }
        match quotas {
            Some(quotas) => {
                for (r, &q) in quotas.iter().enumerate() {
                    if q > 0 {
                        net.add_edge(member_base + r, sink, i128::from(q), ZERO);
                    }
                }
            }
            None => {
                for r in 0..count {
                    let (node, zone) = (member_base + r, zone_base + self.member_zone[r]);
                    if self.floors[r] > 0 {
                        net.add_edge(node, zone, i128::from(self.floors[r]), ZERO);
                    }
                    if self.remainders[r] > 0 {
                        // No rank: one phase of the flow per distinct cost.
                        let (shortfall, not_sticky, _) = self.plus_weight(r);
                        let c = cost(&[
                            (PLUS, 1),
                            (REMAINDER, shortfall as i64),
                            (NOT_STICKY, i64::from(not_sticky)),
                        ]);
                        net.add_edge(node, zone, 1, c);
                    }
                }
                for (z, &(_, floor, remainder)) in self.zones.iter().enumerate() {
                    if floor > 0 {
                        net.add_edge(zone_base + z, sink, i128::from(floor), ZERO);
                    }
                    if remainder > 0 {
                        net.add_edge(zone_base + z, sink, 1, cost(&[(PLUS, 1)]));
                    }
                }
            }
        }

        let flow = net.min_cost_max_flow(source, sink);

        // Read the flow back: within a class, the lowest-numbered partitions
        // go along the first edges (the current owner's first).
        let mut owners: Vec<u32> = vec![NONE; self.n];
        let mut hub_queues: Vec<Vec<u32>> = vec![Vec::new(); hubs.len()];
        for (class, edges) in self.classes.iter().zip(&class_edges) {
            let mut next = 0;
            for (e, target) in edges {
                let f = net.flow(*e) as usize;
                let chunk = &class.partitions[next..next + f];
                next += f;
                match *target {
                    Target::Member(m) => chunk.iter().for_each(|&p| owners[p as usize] = m),
                    Target::Hub(h) => hub_queues[h].extend_from_slice(chunk),
                }
            }
        }
        // Hubs hand their partitions to tree nodes, tree nodes to their
        // children, down to the members.
        let mut arrivals: Vec<Vec<u32>> = vec![Vec::new(); net.nodes()];
        for (queue, edges) in hub_queues.iter().zip(&hub_edges) {
            let mut next = 0;
            for &(e, v) in edges {
                let f = net.flow(e) as usize;
                arrivals[v].extend_from_slice(&queue[next..next + f]);
                next += f;
            }
        }
        for &(v, children) in tree.internal() {
            let here = std::mem::take(&mut arrivals[v]);
            let mut next = 0;
            for (e, child) in children {
                let f = net.flow(e) as usize;
                arrivals[child].extend_from_slice(&here[next..next + f]);
                next += f;
            }
        }
        for r in 0..count {
            for &p in &arrivals[member_base + r] {
                owners[p as usize] = r as u32;
            }
        }
        (owners, flow)
    }
}

fn solve(partitions: u32, members: &[&Member], current: &[Option<MemberId>]) -> Assignment {
    let n = partitions as usize;
    let excluders = by_partition(n, members.iter().map(|m| &m.excluded));
    let preferrers = by_partition(n, members.iter().map(|m| &m.preferred));
    let problem = Problem::new(
        members,
        current,
        (&excluders.0, &excluders.1),
        (&preferrers.0, &preferrers.1),
    );
    let assignable = i128::from(problem.assignable);
    let quotas = problem.greedy_quotas();
    let (mut owners, mut flow) = problem.flow(Some(&quotas));
    if flow < assignable {
        // Exclusions make the greedy choice of `+1`s unreachable: let the
        // flow choose them.
        (owners, flow) = problem.flow(None);
    }
    debug_assert_eq!(flow, assignable, "the fair shares are reachable");
    // Coverage must never depend on the arithmetic above: should a
    // partition be left over, the lowest-ranked member allowed takes it.
    for (p, owner) in owners.iter_mut().enumerate() {
        if *owner == NONE && problem.exclusion_of[p] != NONE {
            let class = &problem.exclusion_classes[problem.exclusion_of[p] as usize];
            *owner = (0..problem.count as u32).find(|&m| class.allows(m)).unwrap_or(NONE);
        }
    }

    let ids = &problem.ids;
    let owners: Vec<Option<MemberId>> =
        owners.iter().map(|&r| (r != NONE).then(|| ids[r as usize])).collect();
    let moves = owners
        .iter()
        .zip(current)
        .enumerate()
        .filter(|(_, (new, old))| new != old)
        .map(|(p, (&to, &from))| Move { partition: p as u32, from, to })
        .collect();
    let mut owned = vec![0u32; problem.count];
    for owner in owners.iter().flatten() {
        if let Ok(r) = ids.binary_search(owner) {
            owned[r] += 1;
        }
    }
    let loads = (0..problem.count)
        .map(|r| MemberLoad {
            member: ids[r],
            owned: owned[r],
            floor: problem.floors[r] as u32,
            ceil: problem.floors[r] as u32 + u32::from(problem.remainders[r] > 0),
            tier: problem.tiers.member_tier[r],
        })
        .collect();
    let tiers = problem
        .tiers
        .tiers
        .iter()
        .map(|t| Tier { partitions: t.partitions as u32, weight: t.weight })
        .collect();
    Assignment { owners, moves, loads, tiers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_chooses_the_plus_ones_when_the_greedy_choice_is_unreachable() {
        // Six partitions, four members of weight 1: shares of 1.5. Members 1
        // and 2 may take only partitions 0..3 (a ratio of 1.5 too: one
        // tier). The greedy gives the two +1s to the lowest ids, 1 and 2,
        // who cannot take four partitions among three.
        let members = [
            Member::new(1).excluding(3..6),
            Member::new(2).excluding(3..6),
            Member::new(3),
            Member::new(4),
        ];
        let sorted: Vec<&Member> = members.iter().collect();
        let current = vec![None; 6];
        let excluders = by_partition(6, sorted.iter().map(|m| &m.excluded));
        let preferrers = by_partition(6, sorted.iter().map(|m| &m.preferred));
        let problem = Problem::new(
            &sorted,
            &current,
            (&excluders.0, &excluders.1),
            (&preferrers.0, &preferrers.1),
        );
        assert_eq!(problem.tiers.tiers.len(), 1);
        let quotas = problem.greedy_quotas();
        assert_eq!(quotas, [2, 2, 1, 1]);
        assert!(problem.flow(Some(&quotas)).1 < 6, "unreachable");
        let out = assign(6, &members, &current).unwrap();
        let owned: Vec<u32> = out.loads.iter().map(|l| l.owned).collect();
        assert_eq!(owned[0] + owned[1], 3);
        assert!(owned.iter().all(|&c| c == 1 || c == 2), "{owned:?}");
        assert!(out.owners.iter().all(Option::is_some));
    }

    #[test]
    fn greedy_quotas_respect_zone_bounds() {
        // Zone a: members of weight 3 (3.6 each); zone b: weight 1 (1.2).
        let mut members: Vec<Member> =
            (1..=3).map(|i| Member::new(i).with_weight(3).in_zone("a")).collect();
        members.extend((4..=9).map(|i| Member::new(i).in_zone("b")));
        let sorted: Vec<&Member> = members.iter().collect();
        let current = vec![None; 18];
        let excluders = by_partition(18, sorted.iter().map(|m| &m.excluded));
        let preferrers = by_partition(18, sorted.iter().map(|m| &m.preferred));
        let problem = Problem::new(
            &sorted,
            &current,
            (&excluders.0, &excluders.1),
            (&preferrers.0, &preferrers.1),
        );
        // Two +1s in zone a (11 of 10.8), one in zone b (7 of 7.2).
        assert_eq!(problem.greedy_quotas(), [4, 4, 3, 2, 1, 1, 1, 1, 1]);
    }
}
