//! Randomized runs of the leader's lease keeper (seeded, reproducible) over
//! a real store, against a naive model that scans every lease of the store:
//! over random leaderships (new tokens and repeated ones), grants, revokes,
//! expiries applied, renewals, timer firings, failed proposals and time
//! steps, the keeper gives the same answers and holds the same deadlines.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeSet;
use std::time::Duration;
use tenure_core::Instant;
use tenure_kv::{
    Command, LeaseId, LeaseKeeper, RenewError, Response, Store, EXPIRY_RETRY_DELAY,
    MAX_EXPIRIES_PER_CALL,
};

const SEEDS: u64 = 100;
const STEPS: usize = 400;

fn below(rng: &mut Pcg64Mcg, n: u64) -> u64 {
    rng.next_u64() % n
}

#[derive(Clone, Debug)]
struct Entry {
    id: LeaseId,
    ttl: Duration,
    at: Instant,
    expiring: bool,
    queued: bool,
}

/// The keeper's rules, the obvious way: every question scans the store.
#[derive(Default)]
struct Model {
    token: Option<u64>,
    entries: Vec<Entry>,
    /// Every lease id looked at in this leadership.
    seen: BTreeSet<LeaseId>,
    in_flight: BTreeSet<LeaseId>,
    /// After a failed expiry proposal, nothing is due before then.
    paused_until: Option<Instant>,
}

impl Model {
    fn find(&mut self, id: LeaseId) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.id == id)
    }

    fn lead(&mut self, now: Instant, token: u64, store: &Store) {
        if self.token == Some(token) {
            return self.applied(now, store);
        }
        self.follow();
        self.token = Some(token);
        self.applied(now, store);
        // Every id up to the store's counter counts as looked at.
        self.seen.extend((1..=store.last_lease().0).map(LeaseId));
    }

    fn follow(&mut self) {
        *self = Model::default();
    }

    fn applied(&mut self, now: Instant, store: &Store) {
        if self.token.is_none() {
            return;
        }
        let gone: Vec<LeaseId> =
            self.in_flight.iter().copied().filter(|id| store.lease(*id).is_none()).collect();
        for id in gone {
            self.in_flight.remove(&id);
            self.entries.retain(|e| e.id != id);
        }
        for lease in store.leases() {
            if self.seen.insert(lease.id) {
                let ttl = Duration::from_millis(lease.ttl_ms);
                self.entries.push(Entry {
                    id: lease.id,
                    ttl,
                    at: now + ttl,
                    expiring: false,
                    queued: true,
                });
            }
        }
        self.seen.extend((1..=store.last_lease().0).map(LeaseId));
    }

    fn renew(&mut self, now: Instant, id: LeaseId, store: &Store) -> Result<Duration, RenewError> {
        if self.token.is_none() {
            return Err(RenewError::NotLeader);
        }
        if store.lease(id).is_none() {
            self.entries.retain(|e| e.id != id);
            self.in_flight.remove(&id);
            return Err(RenewError::NotFound(id));
        }
        self.applied(now, store);
        let e = self.find(id).expect("a lease of the store is tracked once looked at");
        if e.expiring {
            return Err(RenewError::Expiring(id));
        }
        e.at = e.at.max(now + e.ttl);
        Ok(e.ttl)
    }

    fn due(&mut self, now: Instant, store: &Store) -> Vec<LeaseId> {
        if self.paused_until.is_some_and(|until| now < until) {
            return Vec::new();
        }
        let mut due: Vec<(Instant, LeaseId)> =
            self.entries.iter().filter(|e| e.queued && e.at <= now).map(|e| (e.at, e.id)).collect();
        due.sort();
        due.truncate(MAX_EXPIRIES_PER_CALL);
        let mut out = Vec::new();
        for (_, id) in due {
            if store.lease(id).is_none() {
                self.entries.retain(|e| e.id != id);
                continue;
            }
            let e = self.find(id).unwrap();
            e.expiring = true;
            e.queued = false;
            self.in_flight.insert(id);
            out.push(id);
        }
        out
    }

    fn retry(&mut self, now: Instant, id: LeaseId) -> bool {
        self.paused_until = Some(now + EXPIRY_RETRY_DELAY);
        let queued = match self.find(id) {
            Some(e) if e.expiring && !e.queued => {
                e.at = now + EXPIRY_RETRY_DELAY;
                e.queued = true;
                true
            }
            _ => false,
        };
        if queued {
            self.in_flight.remove(&id);
        }
        queued
    }

    fn next_deadline(&self) -> Option<Instant> {
        let at = self.entries.iter().filter(|e| e.queued).map(|e| e.at).min()?;
        Some(self.paused_until.map_or(at, |until| at.max(until)))
    }

    fn remaining(&self, now: Instant, id: LeaseId) -> Option<Duration> {
        self.entries.iter().find(|e| e.id == id && !e.expiring).map(|e| e.at.saturating_since(now))
    }
}

#[derive(Default, Debug)]
struct Seen {
    leads: usize,
    releads: usize,
    renewed: usize,
    not_leader: usize,
    not_found: usize,
    expiring: usize,
    due_some: usize,
    dropped_ended: usize,
    retried: usize,
    expiries_applied: usize,
}

fn grant(store: &mut Store, rng: &mut Pcg64Mcg) {
    let ttl_ms = [500, 1_000, 500 + below(rng, 2_000)][below(rng, 3) as usize];
    assert!(matches!(
        store.execute(&Command::Grant { ttl_ms, owner: None }),
        Response::Granted { .. }
    ));
}

fn some_id(rng: &mut Pcg64Mcg, store: &Store) -> LeaseId {
    LeaseId(below(rng, store.last_lease().0 + 3))
}

fn check(
    step: usize,
    now: Instant,
    keeper: &LeaseKeeper,
    model: &Model,
    store: &Store,
) -> Result<(), String> {
    let fail = |what: String| Err(format!("step {step}: {what} differs"));
    if keeper.token() != model.token {
        return fail("token".into());
    }
    if keeper.next_deadline() != model.next_deadline() {
        return fail(format!(
            "next_deadline {:?} {:?}",
            keeper.next_deadline(),
            model.next_deadline()
        ));
    }
    if keeper.len() != model.entries.len() || keeper.in_flight() != model.in_flight.len() {
        return fail("len or in_flight".into());
    }
    for n in 0..store.last_lease().0 + 2 {
        let id = LeaseId(n);
        if keeper.remaining(now, id) != model.remaining(now, id) {
            return fail(format!("remaining of {id}"));
        }
    }
    Ok(())
}

fn run(seed: u64, seen: &mut Seen) -> Result<(), String> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let (mut keeper, mut model, mut store) = (LeaseKeeper::new(), Model::default(), Store::new());
    for _ in 0..below(&mut rng, 2 * MAX_EXPIRIES_PER_CALL as u64) {
        grant(&mut store, &mut rng);
    }
    let mut now = Instant::ZERO;
    let mut token = 1;
    let mut proposed: Vec<LeaseId> = Vec::new();
    for step in 0..STEPS {
        match below(&mut rng, 20) {
            0 | 1 => {
                // A leadership: mostly the one already held (the caller
                // calls on every step), sometimes a new one.
                if below(&mut rng, 3) == 0 || keeper.token().is_none() {
                    token += 1;
                    seen.leads += 1;
                    proposed.clear();
                } else {
                    seen.releads += 1;
                }
                keeper.lead(now, token, &store).map_err(|e| format!("lead: {e}"))?;
                model.lead(now, token, &store);
            }
            2 => {
                keeper.follow();
                model.follow();
                proposed.clear();
            }
            3 | 4 => {
                // Grants applied; the keeper looks now or later.
                for _ in 0..=below(&mut rng, 3) {
                    grant(&mut store, &mut rng);
                }
                if below(&mut rng, 2) == 0 {
                    keeper.applied(now, &store).map_err(|e| format!("applied: {e}"))?;
                    model.applied(now, &store);
                }
            }
            5 => {
                let lease = some_id(&mut rng, &store);
                store.execute(&Command::Revoke { lease });
            }
            6 => {
                // An expiry this leader proposed is applied.
                if let Some(lease) = proposed.pop() {
                    store.execute(&Command::Expire { lease });
                    seen.expiries_applied += 1;
                    keeper.applied(now, &store).map_err(|e| format!("applied: {e}"))?;
                    model.applied(now, &store);
                }
            }
            7..=10 => {
                let id = some_id(&mut rng, &store);
                let answer = keeper.renew(now, id, &store);
                if answer != model.renew(now, id, &store) {
                    return Err(format!("step {step}: renew {id} answered {answer:?}"));
                }
                match answer {
                    Ok(_) => seen.renewed += 1,
                    Err(RenewError::NotLeader) => seen.not_leader += 1,
                    Err(RenewError::NotFound(_)) => seen.not_found += 1,
                    Err(RenewError::Expiring(_)) => seen.expiring += 1,
                    // No checkpoint is taken in these runs: nothing is
                    // marked silent.
                    Err(RenewError::Silent(_)) => return Err(format!("step {step}: {id} silent")),
                }
            }
            11..=13 => {
                if let Some(next) = model.next_deadline().filter(|&d| d > now) {
                    now = next;
                }
                let before = model.entries.len();
                let due = keeper.due(now, &store);
                if due != model.due(now, &store) {
                    return Err(format!("step {step}: due at {now:?} returned {due:?}"));
                }
                if model.entries.len() < before {
                    seen.dropped_ended += 1;
                }
                if !due.is_empty() {
                    seen.due_some += 1;
                }
                proposed.extend(due);
            }
            14 => {
                if !proposed.is_empty() {
                    let id = proposed.swap_remove(below(&mut rng, proposed.len() as u64) as usize);
                    let answer = keeper.retry(now, id);
                    if answer != model.retry(now, id) {
                        return Err(format!("step {step}: retry {id} answered {answer}"));
                    }
                    seen.retried += usize::from(answer);
                }
            }
            _ => now = now + Duration::from_millis(below(&mut rng, 400)),
        }
        check(step, now, &keeper, &model, &store)?;
    }
    Ok(())
}

#[test]
fn the_lease_keeper_answers_as_a_naive_model_does() {
    let mut seen = Seen::default();
    let failures: Vec<String> = (0..SEEDS)
        .filter_map(|seed| run(seed, &mut seen).err().map(|e| format!("seed {seed}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let counts = [
        seen.leads,
        seen.releads,
        seen.renewed,
        seen.not_leader,
        seen.not_found,
        seen.expiring,
        seen.due_some,
        seen.dropped_ended,
        seen.retried,
        seen.expiries_applied,
    ];
    assert!(
        counts.iter().all(|&n| n > SEEDS as usize / 10),
        "a path was hardly exercised: {seen:?}"
    );
    eprintln!("{seen:?}");
}
