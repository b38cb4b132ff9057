//! Checkers of the guarantees of `assign`, written against the public API
//! only, with their own (brute-force, small-input) oracles: none of them
//! reuses the crate's flow code. Each returns `Err` with a description of
//! the first violation it finds.

// Each test binary uses its own subset of the helpers.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use tenure_partitions::{assign, Assignment, Member, MemberId};

/// One input of `assign`.
#[derive(Clone, Debug)]
pub struct Case {
    pub partitions: u32,
    pub members: Vec<Member>,
    pub current: Vec<Option<MemberId>>,
}

impl Case {
    pub fn new(partitions: u32, members: Vec<Member>) -> Self {
        Case { partitions, members, current: vec![None; partitions as usize] }
    }

    pub fn run(&self) -> Assignment {
        assign(self.partitions, &self.members, &self.current).expect("valid input")
    }

    /// The same group, starting from `owners`.
    pub fn from(&self, owners: &[Option<MemberId>]) -> Case {
        Case { current: owners.to_vec(), ..self.clone() }
    }

    fn member(&self, id: MemberId) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    fn may_own(&self, m: &Member, p: u32) -> bool {
        !m.excluded.contains(&p)
    }

    /// Partitions that at least one member may own.
    pub fn assignable(&self) -> Vec<bool> {
        (0..self.partitions).map(|p| self.members.iter().any(|m| self.may_own(m, p))).collect()
    }

    /// Members sorted by id.
    fn sorted(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self.members.iter().collect();
        v.sort_by_key(|m| m.id);
        v
    }

    fn has_exclusions(&self) -> bool {
        self.members.iter().any(|m| !m.excluded.is_empty())
    }
}

/// How many partitions each member owns in `out.owners`.
pub fn counts(out: &Assignment) -> BTreeMap<MemberId, u32> {
    let mut c = BTreeMap::new();
    for id in out.owners.iter().flatten() {
        *c.entry(*id).or_insert(0) += 1;
    }
    c
}

/// Moves between two owner vectors.
pub fn moves_between(from: &[Option<MemberId>], to: &[Option<MemberId>]) -> usize {
    from.iter().zip(to).filter(|(a, b)| a != b).count()
}

/// The output is well formed: one owner entry per partition, the moves are
/// exactly the changed entries (ascending, with their old and new owners),
/// and the loads list every member once, by id, with its true count.
pub fn check_shape(case: &Case, out: &Assignment) -> Result<(), String> {
    if out.owners.len() != case.partitions as usize {
        return Err(format!(
            "{} owner entries for {} partitions",
            out.owners.len(),
            case.partitions
        ));
    }
    let expected: Vec<(u32, Option<MemberId>, Option<MemberId>)> = (0..case.partitions)
        .filter(|&p| case.current[p as usize] != out.owners[p as usize])
        .map(|p| (p, case.current[p as usize], out.owners[p as usize]))
        .collect();
    let got: Vec<(u32, Option<MemberId>, Option<MemberId>)> =
        out.moves.iter().map(|m| (m.partition, m.from, m.to)).collect();
    if expected != got {
        return Err(format!("moves {got:?} but the owners changed as {expected:?}"));
    }
    let ids: Vec<MemberId> = case.sorted().iter().map(|m| m.id).collect();
    let listed: Vec<MemberId> = out.loads.iter().map(|l| l.member).collect();
    if ids != listed {
        return Err(format!("loads list {listed:?}, members are {ids:?}"));
    }
    let c = counts(out);
    for l in &out.loads {
        let real = c.get(&l.member).copied().unwrap_or(0);
        if l.owned != real {
            return Err(format!("member {} reported owning {} but owns {real}", l.member, l.owned));
        }
    }
    Ok(())
}

/// Every owner is a member that does not exclude its partition.
pub fn check_owners_valid(case: &Case, out: &Assignment) -> Result<(), String> {
    for (p, owner) in out.owners.iter().enumerate() {
        if let Some(id) = owner {
            match case.member(*id) {
                None => return Err(format!("partition {p} owned by {id}, not a member")),
                Some(m) if !case.may_own(m, p as u32) => {
                    return Err(format!("partition {p} owned by {id}, which excludes it"))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Every assignable partition is owned; no other is.
pub fn check_coverage(case: &Case, out: &Assignment) -> Result<(), String> {
    for (p, assignable) in case.assignable().into_iter().enumerate() {
        match (assignable, out.owners[p]) {
            (true, None) => return Err(format!("assignable partition {p} has no owner")),
            (false, Some(id)) => {
                return Err(format!("partition {p}, excluded by all, owned by {id}"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// A tier of the oracle: members (by id) and partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleTier {
    pub members: BTreeSet<MemberId>,
    pub partitions: BTreeSet<u32>,
    pub weight: u64,
}

/// The tiers by brute force over all member subsets (at most 16 members):
/// repeatedly, the union of the member sets with the fewest partitions they
/// may take per unit of weight, with those partitions.
pub fn oracle_tiers(case: &Case) -> Result<Vec<OracleTier>, String> {
    let members = case.sorted();
    if members.len() > 16 {
        return Err("the tier oracle handles at most 16 members".into());
    }
    let allowed: Vec<u32> = (0..case.partitions)
        .map(|p| {
            members
                .iter()
                .enumerate()
                .filter(|(_, m)| case.may_own(m, p))
                .fold(0u32, |mask, (i, _)| mask | 1 << i)
        })
        .collect();
    let mut open: Vec<u32> = (0..case.partitions).filter(|&p| allowed[p as usize] != 0).collect();
    let mut rest: u32 = if members.is_empty() { 0 } else { (1u32 << members.len()) - 1 };
    let mut tiers = Vec::new();
    while rest != 0 {
        // (partitions, weight) of the best ratio, and the union of its sets.
        let mut best: Option<(u64, u64)> = None;
        let mut union = 0u32;
        let mut s = rest;
        while s != 0 {
            let f = open.iter().filter(|&&p| allowed[p as usize] & s != 0).count() as u64;
            let w: u64 = (0..members.len())
                .filter(|i| s >> i & 1 == 1)
                .map(|i| u64::from(members[i].weight))
                .sum();
            match best {
                Some((bf, bw)) if f * bw > bf * w => {}
                Some((bf, bw)) if f * bw == bf * w => union |= s,
                _ => {
                    best = Some((f, w));
                    union = s;
                }
            }
            s = (s - 1) & rest;
        }
        let partitions: BTreeSet<u32> =
            open.iter().copied().filter(|&p| allowed[p as usize] & union != 0).collect();
        open.retain(|p| !partitions.contains(p));
        let ids: BTreeSet<MemberId> =
            (0..members.len()).filter(|i| union >> i & 1 == 1).map(|i| members[i].id).collect();
        let weight = (0..members.len())
            .filter(|i| union >> i & 1 == 1)
            .map(|i| u64::from(members[i].weight))
            .sum();
        tiers.push(OracleTier { members: ids, partitions, weight });
        rest &= !union;
    }
    Ok(tiers)
}

fn floor_ceil(partitions: u64, weight: u64, total: u64) -> (u64, u64) {
    let num = partitions * weight;
    (num / total, num.div_ceil(total))
}

/// Balance: the tiers are the oracle's; each member owns only partitions of
/// its tier, floor or ceil of its share of the tier (as reported in its
/// load); each zone within a tier floor or ceil of the zone's share.
pub fn check_balance(case: &Case, out: &Assignment) -> Result<(), String> {
    let tiers = oracle_tiers(case)?;
    let got: Vec<(u32, u64)> = out.tiers.iter().map(|t| (t.partitions, t.weight)).collect();
    let want: Vec<(u32, u64)> =
        tiers.iter().map(|t| (t.partitions.len() as u32, t.weight)).collect();
    if got != want {
        return Err(format!("tiers {got:?}, expected {want:?}"));
    }
    let c = counts(out);
    for (i, tier) in tiers.iter().enumerate() {
        let mut zones: BTreeMap<Option<&str>, (u64, u64)> = BTreeMap::new(); // weight, owned
        for &id in &tier.members {
            let m = case.member(id).expect("member");
            let load =
                out.loads.iter().find(|l| l.member == id).ok_or(format!("no load for {id}"))?;
            let owned = u64::from(c.get(&id).copied().unwrap_or(0));
            let (lo, hi) =
                floor_ceil(tier.partitions.len() as u64, u64::from(m.weight), tier.weight);
            if load.tier != i as u32 || (u64::from(load.floor), u64::from(load.ceil)) != (lo, hi) {
                return Err(format!(
                    "member {id}: load says tier {} [{}, {}], expected tier {i} [{lo}, {hi}]",
                    load.tier, load.floor, load.ceil
                ));
            }
            if owned < lo || owned > hi {
                return Err(format!("member {id} owns {owned}, outside [{lo}, {hi}]"));
            }
            let z = zones.entry(m.zone.as_deref()).or_insert((0, 0));
            z.0 += u64::from(m.weight);
            z.1 += owned;
        }
        for (p, owner) in out.owners.iter().enumerate() {
            if let Some(id) = owner {
                if tier.members.contains(id) != tier.partitions.contains(&(p as u32)) {
                    return Err(format!("partition {p} owned by {id} crosses tier {i}"));
                }
            }
        }
        for (zone, (weight, owned)) in zones {
            let (lo, hi) = floor_ceil(tier.partitions.len() as u64, weight, tier.weight);
            if owned < lo || owned > hi {
                return Err(format!(
                    "zone {zone:?} of tier {i} owns {owned}, outside [{lo}, {hi}]"
                ));
            }
        }
    }
    Ok(())
}

/// Without exclusions (so any count vector within the bounds is reachable):
/// the set of members given a `+1` minimises, lexicographically, (1) the sum
/// of `W - remainder` over them (largest remainders first), then (2) the
/// moves needed, over every choice meeting the member and zone bounds.
/// Brute force over all subsets (at most 16 members).
pub fn check_quota_choice(case: &Case, out: &Assignment) -> Result<(), String> {
    if case.has_exclusions() || case.members.is_empty() {
        return Ok(());
    }
    let members = case.sorted();
    if members.len() > 16 {
        return Err("the quota oracle handles at most 16 members".into());
    }
    let n = u64::from(case.partitions);
    let total: u64 = members.iter().map(|m| u64::from(m.weight)).sum();
    let floors: Vec<u64> = members.iter().map(|m| n * u64::from(m.weight) / total).collect();
    let rems: Vec<u64> = members.iter().map(|m| n * u64::from(m.weight) % total).collect();
    let extra = n - floors.iter().sum::<u64>();
    // Partitions each member may keep: those it owns now.
    let keepable: Vec<u64> = members
        .iter()
        .map(|m| case.current.iter().filter(|&&o| o == Some(m.id)).count() as u64)
        .collect();
    let zones: BTreeSet<Option<&str>> = members.iter().map(|m| m.zone.as_deref()).collect();
    let score = |set: u32| -> Option<(u64, u64)> {
        if u64::from(set.count_ones()) != extra {
            return None;
        }
        if (0..members.len()).any(|i| set >> i & 1 == 1 && rems[i] == 0) {
            return None;
        }
        for z in &zones {
            let zw: u64 = members
                .iter()
                .filter(|m| m.zone.as_deref() == *z)
                .map(|m| u64::from(m.weight))
                .sum();
            let owned: u64 = (0..members.len())
                .filter(|&i| members[i].zone.as_deref() == *z)
                .map(|i| floors[i] + u64::from(set >> i & 1))
                .sum();
            let (lo, hi) = floor_ceil(n, zw, total);
            if owned < lo || owned > hi {
                return None;
            }
        }
        let shortfall: u64 =
            (0..members.len()).filter(|i| set >> i & 1 == 1).map(|i| total - rems[i]).sum();
        let kept: u64 =
            (0..members.len()).map(|i| keepable[i].min(floors[i] + u64::from(set >> i & 1))).sum();
        Some((shortfall, n - kept))
    };
    let best = (0..1u32 << members.len()).filter_map(score).min().ok_or("no valid quota choice")?;
    let c = counts(out);
    let got_set = (0..members.len())
        .filter(|&i| u64::from(c.get(&members[i].id).copied().unwrap_or(0)) > floors[i])
        .fold(0u32, |s, i| s | 1 << i);
    let got = score(got_set).ok_or(format!("the +1s {got_set:#b} break a bound"))?;
    let moves = out.moves.len() as u64;
    if got.0 != best.0 {
        return Err(format!(
            "the +1s {got_set:#b} cost {} in remainders, the best {}",
            got.0, best.0
        ));
    }
    if moves != best.1 {
        return Err(format!("{moves} moves; the best choice of +1s needs {}", best.1));
    }
    Ok(())
}

/// The fewest moves that reach the output's counts from the current
/// assignment, by a plain successive-shortest-path min-cost flow over single
/// partitions (Bellman-Ford; small inputs only).
pub fn oracle_min_moves(case: &Case, out: &Assignment) -> usize {
    let members = case.sorted();
    let c = counts(out);
    let assignable = case.assignable();
    let parts: Vec<u32> = (0..case.partitions).filter(|&p| assignable[p as usize]).collect();
    // Partitions excluded by everyone move iff someone owns them now.
    let forced = (0..case.partitions)
        .filter(|&p| !assignable[p as usize] && case.current[p as usize].is_some())
        .count();
    // Nodes: 0 source, 1 sink, partitions, members.
    let (s, t) = (0usize, 1usize);
    let pn = |i: usize| 2 + i;
    let mn = |j: usize| 2 + parts.len() + j;
    let nodes = 2 + parts.len() + members.len();
    let mut to = Vec::new();
    let mut cap: Vec<i64> = Vec::new();
    let mut cost: Vec<i64> = Vec::new();
    let mut from = Vec::new();
    let mut add = |u: usize, v: usize, c: i64, w: i64| {
        from.extend([u, v]);
        to.extend([v, u]);
        cap.extend([c, 0]);
        cost.extend([w, -w]);
    };
    for (i, &p) in parts.iter().enumerate() {
        add(s, pn(i), 1, 0);
        for (j, m) in members.iter().enumerate() {
            if case.may_own(m, p) {
                add(pn(i), mn(j), 1, i64::from(case.current[p as usize] != Some(m.id)));
            }
        }
    }
    for (j, m) in members.iter().enumerate() {
        add(mn(j), t, i64::from(c.get(&m.id).copied().unwrap_or(0)), 0);
    }
    let mut total = 0i64;
    loop {
        let mut dist = vec![i64::MAX; nodes];
        let mut via = vec![usize::MAX; nodes];
        dist[s] = 0;
        let mut changed = true;
        while changed {
            changed = false;
            for e in 0..to.len() {
                if cap[e] > 0 && dist[from[e]] != i64::MAX && dist[from[e]] + cost[e] < dist[to[e]]
                {
                    dist[to[e]] = dist[from[e]] + cost[e];
                    via[to[e]] = e;
                    changed = true;
                }
            }
        }
        if dist[t] == i64::MAX {
            break;
        }
        let mut v = t;
        while v != s {
            let e = via[v];
            cap[e] -= 1;
            cap[e ^ 1] += 1;
            v = from[e];
        }
        total += dist[t];
    }
    total as usize + forced
}

/// The number of moves is the minimum for the output's counts.
pub fn check_minimal_moves(case: &Case, out: &Assignment) -> Result<(), String> {
    let best = oracle_min_moves(case, out);
    if out.moves.len() != best {
        return Err(format!("{} moves where {best} reach the same counts", out.moves.len()));
    }
    Ok(())
}

/// Two results of what should be the same computation are identical.
pub fn check_same(a: &Assignment, b: &Assignment) -> Result<(), String> {
    if a != b {
        let first = (0..a.owners.len().min(b.owners.len())).find(|&p| a.owners[p] != b.owners[p]);
        return Err(format!("results differ (first differing partition: {first:?})"));
    }
    Ok(())
}

/// Running `assign` again from its own result moves nothing.
pub fn check_fixpoint(case: &Case, out: &Assignment) -> Result<(), String> {
    let again = case.from(&out.owners).run();
    if !again.moves.is_empty() {
        return Err(format!("{} moves when re-run on its own result", again.moves.len()));
    }
    Ok(())
}

/// Whether some assignment gives each member exactly `counts` partitions
/// and owns every assignable partition (augmenting paths, small inputs).
pub fn feasible(case: &Case, counts: &BTreeMap<MemberId, u32>) -> bool {
    let members = case.sorted();
    let assignable = case.assignable();
    let parts: Vec<u32> = (0..case.partitions).filter(|&p| assignable[p as usize]).collect();
    if counts.values().map(|&c| c as usize).sum::<usize>() != parts.len() {
        return false;
    }
    // Each member is `count` slots; match partitions to slots.
    let slots: Vec<usize> = members
        .iter()
        .enumerate()
        .flat_map(|(j, m)| std::iter::repeat_n(j, counts.get(&m.id).copied().unwrap_or(0) as usize))
        .collect();
    let mut slot_of: Vec<Option<usize>> = vec![None; slots.len()]; // slot -> partition index
    fn augment(
        i: usize,
        parts: &[u32],
        slots: &[usize],
        allowed: &dyn Fn(u32, usize) -> bool,
        slot_of: &mut Vec<Option<usize>>,
        seen: &mut Vec<bool>,
    ) -> bool {
        for s in 0..slots.len() {
            if seen[s] || !allowed(parts[i], slots[s]) {
                continue;
            }
            seen[s] = true;
            if slot_of[s].is_none_or(|other| augment(other, parts, slots, allowed, slot_of, seen)) {
                slot_of[s] = Some(i);
                return true;
            }
        }
        false
    }
    let allowed = |p: u32, j: usize| case.may_own(members[j], p);
    (0..parts.len())
        .all(|i| augment(i, &parts, &slots, &allowed, &mut slot_of, &mut vec![false; slots.len()]))
}

/// With exclusions (where the full oracle of `check_quota_choice` does not
/// apply): no single exchange of a `+1` from member `a` to member `b` of the
/// same tier, keeping the zones' bounds and reachable despite the
/// exclusions, would give it to a strictly better candidate (larger
/// remainder, or equal remainder and `b` sticky while `a` is not). At most
/// 8 members.
pub fn check_plus_one_exchanges(case: &Case, out: &Assignment) -> Result<(), String> {
    if !case.has_exclusions() || case.members.len() > 8 {
        return Ok(());
    }
    let members = case.sorted();
    let c = counts(out);
    let tiers = oracle_tiers(case)?;
    for tier in &tiers {
        let n = tier.partitions.len() as u64;
        let info = |id: MemberId| {
            let m = case.member(id).expect("member");
            let rem = n * u64::from(m.weight) % tier.weight;
            let floor = n * u64::from(m.weight) / tier.weight;
            let keepable = tier
                .partitions
                .iter()
                .filter(|&&p| case.current[p as usize] == Some(id) && case.may_own(m, p))
                .count() as u64;
            let owned = u64::from(c.get(&id).copied().unwrap_or(0));
            // (weight of a +1: smaller is better), has a +1
            ((tier.weight - rem, keepable <= floor), owned > floor, rem > 0)
        };
        for &a in &tier.members {
            let (wa, a_plus, _) = info(a);
            if !a_plus {
                continue;
            }
            for &b in &tier.members {
                let (wb, b_plus, b_can) = info(b);
                if b_plus || !b_can || wb >= wa {
                    continue;
                }
                let mut swapped = c.clone();
                *swapped.entry(a).or_insert(0) -= 1;
                *swapped.entry(b).or_insert(0) += 1;
                let zone = |id: MemberId| case.member(id).and_then(|m| m.zone.clone());
                let zones_ok = zone(a) == zone(b) || {
                    let zone_total =
                        |z: &Option<String>, counts: &BTreeMap<MemberId, u32>| -> (u64, u64) {
                            tier.members
                                .iter()
                                .filter(|&&id| zone(id) == *z)
                                .map(|&id| {
                                    (
                                        u64::from(case.member(id).unwrap().weight),
                                        u64::from(counts.get(&id).copied().unwrap_or(0)),
                                    )
                                })
                                .fold((0, 0), |(w, o), (x, y)| (w + x, o + y))
                        };
                    [zone(a), zone(b)].iter().all(|z| {
                        let (w, owned) = zone_total(z, &swapped);
                        let (lo, hi) = floor_ceil(n, w, tier.weight);
                        lo <= owned && owned <= hi
                    })
                };
                if zones_ok && feasible(case, &swapped) {
                    return Err(format!(
                        "the +1 of member {a} ({wa:?}) could go to the better member {b} ({wb:?})"
                    ));
                }
            }
        }
    }
    let _ = members;
    Ok(())
}

/// Every check on one output.
pub fn check_all(case: &Case, out: &Assignment) -> Result<(), String> {
    check_shape(case, out)?;
    check_owners_valid(case, out)?;
    check_coverage(case, out)?;
    check_balance(case, out)?;
    check_quota_choice(case, out)?;
    check_plus_one_exchanges(case, out)?;
    check_minimal_moves(case, out)?;
    check_fixpoint(case, out)?;
    Ok(())
}
