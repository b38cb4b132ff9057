//! One test per guarantee of `assign`, on hand-made inputs, and one test per
//! checker showing that it catches a planted violation.

mod common;

use common::*;
use tenure_partitions::{
    assign, AssignError, Assignment, Member, MemberId, Move, MAX_MEMBERS, MAX_PARTITIONS,
};

fn equal(ids: impl IntoIterator<Item = MemberId>) -> Vec<Member> {
    ids.into_iter().map(Member::new).collect()
}

fn owned(out: &Assignment) -> Vec<u32> {
    out.loads.iter().map(|l| l.owned).collect()
}

fn checked(case: &Case) -> Assignment {
    let out = case.run();
    if let Err(e) = check_all(case, &out) {
        panic!("{e}\ncase: {case:?}\noutput: {out:?}");
    }
    out
}

// ---- validation ----

#[test]
fn refuses_invalid_input_with_typed_errors() {
    let none = |n: usize| vec![None; n];
    assert_eq!(assign(0, &[], &[]), Err(AssignError::NoPartitions));
    assert_eq!(
        assign(MAX_PARTITIONS + 1, &[], &none(MAX_PARTITIONS as usize + 1)),
        Err(AssignError::TooManyPartitions { partitions: MAX_PARTITIONS + 1 })
    );
    let crowd = equal(0..MAX_MEMBERS as u64 + 1);
    assert_eq!(
        assign(4, &crowd, &none(4)),
        Err(AssignError::TooManyMembers { members: MAX_MEMBERS + 1 })
    );
    assert_eq!(
        assign(4, &[], &none(3)),
        Err(AssignError::CurrentLength { partitions: 4, actual: 3 })
    );
    assert_eq!(
        assign(4, &[Member::new(7), Member::new(3), Member::new(7)], &none(4)),
        Err(AssignError::DuplicateMember { member: 7 })
    );
    assert_eq!(
        assign(4, &[Member::new(1).with_weight(0)], &none(4)),
        Err(AssignError::ZeroWeight { member: 1 })
    );
    assert_eq!(
        assign(4, &[Member::new(1).excluding([2, 4, 9])], &none(4)),
        Err(AssignError::ExcludedOutOfRange { member: 1, partition: 4, partitions: 4 })
    );
    assert_eq!(
        assign(4, &[Member::new(1).preferring([5])], &none(4)),
        Err(AssignError::PreferredOutOfRange { member: 1, partition: 5, partitions: 4 })
    );
    assert_eq!(
        assign(4, &[Member::new(2), Member::new(1).excluding(0..4)], &none(4)),
        Err(AssignError::ExcludesEverything { member: 1, partitions: 4 })
    );
    assert_eq!(
        assign(4, &[Member::new(1).preferring([1, 3]).excluding([3])], &none(4)),
        Err(AssignError::PreferredAndExcluded { member: 1, partition: 3 })
    );
    // The message names the problem.
    let e = AssignError::ExcludesEverything { member: 1, partitions: 4 };
    assert_eq!(e.to_string(), "member 1 excludes every one of the group's 4 partitions");
}

#[test]
fn the_reported_error_does_not_depend_on_member_order() {
    let a = Member::new(5).with_weight(0);
    let b = Member::new(2).excluding([9]);
    let none = vec![None; 4];
    let first = assign(4, &[a.clone(), b.clone()], &none);
    assert_eq!(first, assign(4, &[b, a], &none));
    assert_eq!(
        first,
        Err(AssignError::ExcludedOutOfRange { member: 2, partition: 9, partitions: 4 })
    );
}

// ---- coverage and balance ----

#[test]
fn initial_assignment_is_balanced() {
    let out = checked(&Case::new(10, equal([3, 1, 2])));
    assert_eq!(owned(&out), [4, 3, 3], "the lowest id gets the +1 among equal remainders");
    assert_eq!(out.moves.len(), 10);
    assert!(out.moves.iter().all(|m| m.from.is_none()));
    assert_eq!(out.tiers.len(), 1);
}

#[test]
fn no_members_no_owners() {
    let case = Case { partitions: 3, members: vec![], current: vec![Some(1), None, Some(2)] };
    let out = checked(&case);
    assert_eq!(out.owners, [None, None, None]);
    assert_eq!(
        out.moves,
        [
            Move { partition: 0, from: Some(1), to: None },
            Move { partition: 2, from: Some(2), to: None }
        ]
    );
}

#[test]
fn more_members_than_partitions() {
    let out = checked(&Case::new(3, equal(1..=5)));
    assert_eq!(owned(&out), [1, 1, 1, 0, 0]);
}

#[test]
fn weighted_shares() {
    let members = vec![
        Member::new(1),
        Member::new(2).with_weight(2),
        Member::new(3).with_weight(3),
        Member::new(4).with_weight(4),
    ];
    assert_eq!(owned(&checked(&Case::new(100, members.clone()))), [10, 20, 30, 40]);
    // 11 partitions: shares 1.1, 2.2, 3.3, 4.4: one +1 and it goes to the
    // largest remainder (4.4), not to the lowest id.
    assert_eq!(owned(&checked(&Case::new(11, members))), [1, 2, 3, 5]);
}

#[test]
fn large_weights_do_not_overflow() {
    let members: Vec<Member> = (1..=3).map(|id| Member::new(id).with_weight(u32::MAX)).collect();
    let case = Case::new(MAX_PARTITIONS, members);
    let out = case.run();
    assert_eq!(owned(&out), [33_334, 33_333, 33_333]);
}

// ---- stickiness ----

#[test]
fn a_member_leaving_moves_exactly_its_partitions() {
    for n in 1..=30u32 {
        for m in 2..=7u64 {
            let all = Case::new(n, equal(1..=m));
            let start = checked(&all);
            for leaver in 1..=m {
                let rest = Case {
                    members: equal((1..=m).filter(|&i| i != leaver)),
                    ..all.from(&start.owners)
                };
                let out = checked(&rest);
                let had = start.owners.iter().filter(|&&o| o == Some(leaver)).count();
                assert_eq!(out.moves.len(), had, "n={n} m={m} leaver={leaver}");
                assert!(out.moves.iter().all(|mv| mv.from == Some(leaver)));
            }
        }
    }
}

#[test]
fn a_member_joining_takes_its_share_and_nothing_else_moves() {
    for n in 1..=30u32 {
        for m in 1..=7u64 {
            let start = checked(&Case::new(n, equal(1..=m)));
            let joined =
                Case { members: equal(1..=m + 1), ..Case::new(n, vec![]).from(&start.owners) };
            let out = checked(&joined);
            let taken = out.owners.iter().filter(|&&o| o == Some(m + 1)).count() as u32;
            let (lo, hi) = (n / (m as u32 + 1), n.div_ceil(m as u32 + 1));
            assert!(lo <= taken && taken <= hi, "n={n} m={m}: joiner took {taken}");
            assert_eq!(out.moves.len() as u32, taken, "n={n} m={m}");
            assert!(out.moves.iter().all(|mv| mv.to == Some(m + 1)));
        }
    }
}

#[test]
fn rerunning_on_its_own_result_moves_nothing() {
    let members = vec![
        Member::new(1).with_weight(3).in_zone("a").preferring([1, 2]),
        Member::new(2).in_zone("b").excluding([0, 5]),
        Member::new(3).with_weight(2).in_zone("a"),
    ];
    let case = Case::new(17, members);
    let out = checked(&case);
    let again = checked(&case.from(&out.owners));
    assert!(again.moves.is_empty());
    assert_eq!(again.owners, out.owners);
}

#[test]
fn ineligible_owners_count_as_absent() {
    // Member 9 is gone; its partitions go to the others, counted as moves.
    let case = Case {
        partitions: 4,
        members: equal([1, 2]),
        current: vec![Some(9), Some(1), Some(9), Some(2)],
    };
    let out = checked(&case);
    assert_eq!(out.moves.len(), 2);
    assert!(out.moves.iter().all(|m| m.from == Some(9)));
    assert_eq!(owned(&out), [2, 2]);
}

#[test]
fn large_group_join_and_leave() {
    let n = 10_000;
    let start = checked_large(&Case::new(n, equal(1..=100)));
    assert!(owned(&start).iter().all(|&c| c == 100));
    let left = checked_large(&Case {
        members: equal(2..=100),
        ..Case::new(n, vec![]).from(&start.owners)
    });
    assert_eq!(left.moves.len(), 100);
    let joined = checked_large(&Case {
        members: equal(1..=101),
        ..Case::new(n, vec![]).from(&start.owners)
    });
    assert_eq!(joined.moves.len(), 99);
    assert!(joined.moves.iter().all(|m| m.to == Some(101)));
}

/// The checks whose oracles scale (no brute force over member subsets).
fn checked_large(case: &Case) -> Assignment {
    let out = case.run();
    check_shape(case, &out).unwrap();
    check_owners_valid(case, &out).unwrap();
    check_coverage(case, &out).unwrap();
    let total: u64 = case.members.iter().map(|m| u64::from(m.weight)).sum();
    for (l, m) in out.loads.iter().zip(&case.members) {
        let share = u64::from(case.partitions) * u64::from(m.weight);
        assert!(
            u64::from(l.owned) * total >= share - share % total
                && u64::from(l.owned) * total <= share + total
        );
    }
    out
}

// ---- zones ----

#[test]
fn zones_spread_the_remainders() {
    // Zone a: 3 members of weight 3 (share 3.6 each, zone 10.8); zone b: 6
    // of weight 1 (1.2 each, zone 7.2). Plain largest remainders would give
    // all three +1s to zone a (12 > ceil 10.8).
    let mut members: Vec<Member> =
        (1..=3).map(|i| Member::new(i).with_weight(3).in_zone("a")).collect();
    members.extend((4..=9).map(|i| Member::new(i).in_zone("b")));
    let out = checked(&Case::new(18, members.clone()));
    let zone_a: u32 = out.loads[..3].iter().map(|l| l.owned).sum();
    assert_eq!(zone_a, 11);
    // Without zones, the three largest remainders win.
    let unzoned: Vec<Member> = members.into_iter().map(|m| Member { zone: None, ..m }).collect();
    let out = checked(&Case::new(18, unzoned));
    assert_eq!(owned(&out)[..3], [4, 4, 4]);
}

#[test]
fn a_moving_partition_stays_in_its_owners_zone() {
    // Member 2 (zone b) owns partitions 0..4, member 1 (zone a) 4..8;
    // members 3 (zone a) and 4 (zone b) join and take 2 each, two from
    // each old member: each gets them from the old member of its own zone.
    let zoned = |ids: &[u64]| -> Vec<Member> {
        ids.iter().map(|&i| Member::new(i).in_zone(if i % 2 == 1 { "a" } else { "b" })).collect()
    };
    let mut current = vec![Some(2); 4];
    current.extend([Some(1); 4]);
    let out = checked(&Case { partitions: 8, members: zoned(&[1, 2, 3, 4]), current });
    assert_eq!(out.moves.len(), 4);
    for m in &out.moves {
        let (from, to) = (m.from.unwrap(), m.to.unwrap());
        assert_eq!(
            from % 2,
            to % 2,
            "partition {} moved from {from} to {to}, across zones",
            m.partition
        );
    }
}

// ---- exclusions ----

#[test]
fn a_restricted_member_gets_what_it_may_take_and_the_others_share_the_rest() {
    let members =
        vec![Member::new(1).excluding(10..100), Member::new(2), Member::new(3), Member::new(4)];
    let out = checked(&Case::new(100, members));
    assert_eq!(owned(&out), [10, 30, 30, 30]);
    assert_eq!(out.tiers.len(), 2);
    assert_eq!((out.loads[0].tier, out.loads[1].tier), (0, 1));
}

#[test]
fn two_members_restricted_to_the_same_partitions_share_them() {
    let members = vec![
        Member::new(1).excluding(10..100),
        Member::new(2).excluding(10..100),
        Member::new(3),
        Member::new(4),
    ];
    let out = checked(&Case::new(100, members));
    assert_eq!(owned(&out), [5, 5, 45, 45]);
}

#[test]
fn exclusions_that_do_not_bind_keep_one_tier() {
    let members = vec![Member::new(1).excluding(0..50), Member::new(2), Member::new(3)];
    let out = checked(&Case::new(100, members));
    assert_eq!(owned(&out), [34, 33, 33]);
    assert_eq!(out.tiers.len(), 1);
}

#[test]
fn partitions_excluded_by_everyone_have_no_owner() {
    let members = vec![Member::new(1).excluding([2]), Member::new(2).excluding([2, 3])];
    let case = Case { partitions: 4, members, current: vec![None, None, Some(1), None] };
    let out = checked(&case);
    assert_eq!(out.owners[2], None);
    assert_eq!(out.owners[3], Some(1));
    assert!(out.moves.contains(&Move { partition: 2, from: Some(1), to: None }));
}

#[test]
fn an_owner_excluding_its_partition_gives_it_up() {
    let start = checked(&Case::new(6, equal([1, 2])));
    let p = start.owners.iter().position(|&o| o == Some(1)).unwrap() as u32;
    let members = vec![Member::new(1).excluding([p]), Member::new(2)];
    let out = checked(&Case { members, ..Case::new(6, vec![]).from(&start.owners) });
    // Partition p goes to 2, and 2 gives one of its own back: two moves.
    assert_eq!(out.owners[p as usize], Some(2));
    assert_eq!(out.moves.len(), 2);
    assert_eq!(owned(&out), [3, 3]);
}

// ---- preferences ----

#[test]
fn free_partitions_go_to_members_preferring_them() {
    let members = vec![Member::new(1), Member::new(2).preferring([0, 1])];
    let out = checked(&Case::new(4, members));
    assert_eq!(out.owners, [Some(2), Some(2), Some(1), Some(1)]);
}

#[test]
fn preferences_decide_among_free_partitions() {
    // Member 1 prefers the last two partitions, member 2 nothing.
    let members = vec![Member::new(1).preferring([2, 3]), Member::new(2)];
    let out = checked(&Case::new(4, members));
    assert_eq!(out.owners, [Some(2), Some(2), Some(1), Some(1)]);
}

#[test]
fn a_joining_member_receives_the_partitions_it_prefers() {
    // Member 1 owns all four; member 2 joins preferring 0 and 1: of the
    // two partitions member 1 must give up, it gives those.
    let case = Case {
        partitions: 4,
        members: vec![Member::new(1), Member::new(2).preferring([0, 1])],
        current: vec![Some(1); 4],
    };
    let out = checked(&case);
    assert_eq!(out.owners, [Some(2), Some(2), Some(1), Some(1)]);
}

#[test]
fn an_over_quota_member_gives_up_partitions_it_does_not_prefer() {
    let case = Case {
        partitions: 4,
        members: vec![Member::new(1).preferring([2, 3])],
        current: vec![None; 4],
    };
    let start = checked(&case);
    let members = vec![Member::new(1).preferring([2, 3]), Member::new(2)];
    let out = checked(&Case { members, ..case.from(&start.owners) });
    assert_eq!(out.owners, [Some(2), Some(2), Some(1), Some(1)]);
}

#[test]
fn a_partition_both_prefer_stays_with_its_owner() {
    // Member 1 owns 0 and 1 and prefers 0; member 2 joins preferring 0.
    // Giving 2 either partition leaves one partition with a member not
    // preferring it; member 1 keeps the one it prefers.
    let case = Case {
        partitions: 2,
        members: vec![Member::new(1).preferring([0])],
        current: vec![None; 2],
    };
    let start = checked(&case);
    let members = vec![Member::new(1).preferring([0]), Member::new(2).preferring([0])];
    let out = checked(&Case { members, ..case.from(&start.owners) });
    assert_eq!(out.owners, [Some(1), Some(2)]);
}

#[test]
fn preferences_never_cost_a_move() {
    // Member 2 prefers partitions member 1 owns; balance does not require
    // a move, so none happens.
    let start = checked(&Case::new(4, equal([1, 2])));
    let theirs: Vec<u32> = (0..4).filter(|&p| start.owners[p as usize] == Some(1)).collect();
    let members = vec![Member::new(1), Member::new(2).preferring(theirs)];
    let out = checked(&Case { members, ..Case::new(4, vec![]).from(&start.owners) });
    assert!(out.moves.is_empty());
}

// ---- determinism ----

#[test]
fn member_order_does_not_matter() {
    let members = vec![
        Member::new(10).with_weight(2).in_zone("x").preferring([3]),
        Member::new(4).in_zone("y").excluding([0, 1]),
        Member::new(7).with_weight(3),
        Member::new(1).in_zone("x").excluding([5]),
    ];
    let case = Case::new(23, members.clone());
    let out = checked(&case);
    let mut reversed = members;
    reversed.reverse();
    check_same(&out, &Case::new(23, reversed).run()).unwrap();
    check_same(&out, &case.run()).unwrap();
}

#[test]
fn public_types_round_trip_through_serde() {
    let members = vec![Member::new(1).with_weight(2).in_zone("a").preferring([1]).excluding([0])];
    let json = serde_json::to_string(&members).unwrap();
    assert_eq!(serde_json::from_str::<Vec<Member>>(&json).unwrap(), members);
    let out = checked(&Case::new(3, members));
    let json = serde_json::to_string(&out).unwrap();
    assert_eq!(serde_json::from_str::<Assignment>(&json).unwrap(), out);
    let err = AssignError::DuplicateMember { member: 3 };
    assert_eq!(
        serde_json::from_str::<AssignError>(&serde_json::to_string(&err).unwrap()).unwrap(),
        err
    );
}

// ---- each checker catches a planted violation ----

/// A valid case and its output to corrupt: weights, a zone, an exclusion.
fn sample() -> (Case, Assignment) {
    let members = vec![
        Member::new(1).in_zone("a"),
        Member::new(2).in_zone("a").with_weight(2),
        Member::new(3).in_zone("b").excluding([0]),
        Member::new(4).in_zone("b"),
    ];
    let case = Case::new(12, members);
    let start = case.run();
    // Re-run from a state with one member gone, so that there are moves.
    let case = Case { current: start.owners.clone(), ..case };
    let case = Case { members: case.members[..3].to_vec(), ..case };
    let out = case.run();
    check_all(&case, &out).unwrap();
    (case, out)
}

/// `out` with `owners` replaced, and moves and loads recomputed to match, so
/// that only the planted fault remains.
fn with_owners(case: &Case, out: &Assignment, owners: Vec<Option<MemberId>>) -> Assignment {
    let mut bad = out.clone();
    bad.moves = (0..case.partitions)
        .filter(|&p| case.current[p as usize] != owners[p as usize])
        .map(|p| Move { partition: p, from: case.current[p as usize], to: owners[p as usize] })
        .collect();
    bad.owners = owners;
    let c = counts(&bad);
    for l in &mut bad.loads {
        l.owned = c.get(&l.member).copied().unwrap_or(0);
    }
    bad
}

#[test]
fn check_shape_catches_a_missing_move() {
    let (case, mut out) = sample();
    out.moves.pop();
    assert!(check_shape(&case, &out).is_err());
    let (case, mut out) = sample();
    out.loads[0].owned += 1;
    assert!(check_shape(&case, &out).is_err());
}

#[test]
fn check_owners_valid_catches_an_excluded_owner() {
    let (case, out) = sample();
    let mut owners = out.owners.clone();
    owners[0] = Some(3); // member 3 excludes partition 0
    assert!(check_owners_valid(&case, &with_owners(&case, &out, owners)).is_err());
    let mut owners = out.owners.clone();
    owners[1] = Some(99);
    assert!(check_owners_valid(&case, &with_owners(&case, &out, owners)).is_err());
}

#[test]
fn check_coverage_catches_an_unowned_partition() {
    let (case, out) = sample();
    let mut owners = out.owners.clone();
    owners[5] = None;
    assert!(check_coverage(&case, &with_owners(&case, &out, owners)).is_err());
}

#[test]
fn check_balance_catches_an_overloaded_member() {
    let (case, out) = sample();
    let mut owners = out.owners.clone();
    let p = owners.iter().position(|&o| o == Some(1)).unwrap();
    owners[p] = Some(2);
    assert!(check_balance(&case, &with_owners(&case, &out, owners)).is_err());
}

#[test]
fn check_balance_catches_a_zone_out_of_bounds() {
    // 4 members of weight 1, zones a, a, b, b, 6 partitions: each member 1
    // or 2, each zone exactly 3. Giving zone a both +1s keeps every member
    // within bounds but not the zones.
    let members: Vec<Member> =
        (1..=4).map(|i| Member::new(i).in_zone(if i <= 2 { "a" } else { "b" })).collect();
    let case = Case::new(6, members);
    let out = checked(&case);
    let owners = vec![Some(1), Some(1), Some(2), Some(2), Some(3), Some(4)];
    let bad = with_owners(&case, &out, owners);
    assert!(check_owners_valid(&case, &bad).is_ok());
    let e = check_balance(&case, &bad).unwrap_err();
    assert!(e.contains("zone"), "{e}");
}

#[test]
fn check_balance_catches_wrong_tiers() {
    let members = vec![Member::new(1).excluding(2..10), Member::new(2), Member::new(3)];
    let case = Case::new(10, members);
    let out = checked(&case);
    let mut bad = out.clone();
    bad.tiers.reverse();
    assert!(check_balance(&case, &bad).is_err());
    let mut bad = out;
    bad.loads[1].ceil += 1;
    assert!(check_balance(&case, &bad).is_err());
}

#[test]
fn check_quota_choice_catches_a_plus_one_on_a_smaller_remainder() {
    // Shares 1.1, 2.2, 3.3, 4.4 of 11: the +1 belongs to member 4.
    let members = vec![
        Member::new(1),
        Member::new(2).with_weight(2),
        Member::new(3).with_weight(3),
        Member::new(4).with_weight(4),
    ];
    let case = Case::new(11, members);
    let out = checked(&case);
    let mut owners = out.owners.clone();
    let p = owners.iter().position(|&o| o == Some(4)).unwrap();
    owners[p] = Some(1);
    let bad = with_owners(&case, &out, owners);
    assert!(check_balance(&case, &bad).is_ok(), "still within floor and ceil");
    assert!(check_quota_choice(&case, &bad).is_err());
}

#[test]
fn check_quota_choice_catches_a_needless_reshuffle_of_plus_ones() {
    // 5 partitions, 2 equal members owning 3 and 2: moving the +1 to the
    // other member is balanced but costs a move.
    let case = Case {
        partitions: 5,
        members: equal([1, 2]),
        current: vec![Some(1), Some(1), Some(1), Some(2), Some(2)],
    };
    let out = checked(&case);
    let bad = with_owners(&case, &out, vec![Some(1), Some(1), Some(2), Some(2), Some(2)]);
    assert!(check_balance(&case, &bad).is_ok());
    assert!(check_quota_choice(&case, &bad).is_err());
}

#[test]
fn check_plus_one_exchanges_catches_a_plus_one_on_a_smaller_remainder() {
    // As above, with an exclusion that does not bind (so that the full
    // quota oracle does not apply and this check does).
    let members = vec![
        Member::new(1).excluding([10]),
        Member::new(2).with_weight(2),
        Member::new(3).with_weight(3),
        Member::new(4).with_weight(4),
    ];
    let case = Case::new(11, members);
    let out = checked(&case);
    assert_eq!(owned(&out), [1, 2, 3, 5]);
    let mut owners = out.owners.clone();
    let p = (0..11).find(|&p| owners[p] == Some(4) && p != 10).unwrap();
    owners[p] = Some(1);
    let bad = with_owners(&case, &out, owners);
    assert!(check_balance(&case, &bad).is_ok(), "still within floor and ceil");
    assert!(check_quota_choice(&case, &bad).is_ok(), "does not apply with exclusions");
    assert!(check_plus_one_exchanges(&case, &bad).is_err());
}

#[test]
fn check_minimal_moves_catches_a_needless_swap() {
    let (case, out) = sample();
    let mut owners = out.owners.clone();
    // Swap one partition of member 1 with one of member 2: same counts, two
    // more moves (or two fewer kept).
    let a =
        (0..owners.len()).find(|&p| owners[p] == Some(1) && case.current[p] == Some(1)).unwrap();
    let b =
        (0..owners.len()).find(|&p| owners[p] == Some(2) && case.current[p] == Some(2)).unwrap();
    owners.swap(a, b);
    let bad = with_owners(&case, &out, owners);
    assert!(check_balance(&case, &bad).is_ok());
    assert!(check_minimal_moves(&case, &bad).is_err());
}

#[test]
fn check_same_catches_a_difference() {
    let (case, out) = sample();
    let mut owners = out.owners.clone();
    let other = (1..owners.len()).find(|&p| owners[p] != owners[0]).unwrap();
    owners.swap(0, other);
    assert!(check_same(&out, &with_owners(&case, &out, owners)).is_err());
    assert!(check_same(&out, &out.clone()).is_ok());
}

#[test]
fn check_fixpoint_catches_an_unstable_result() {
    // A result that the algorithm itself would rebalance.
    let case = Case::new(4, equal([1, 2]));
    let out = checked(&case);
    let bad = with_owners(&case, &out, vec![Some(1), Some(1), Some(1), Some(1)]);
    assert!(check_fixpoint(&case, &bad).is_err());
}
