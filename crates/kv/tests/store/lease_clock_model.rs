//! Randomized runs of the leader's lease clock (seeded, reproducible)
//! against a naive model that scans a vector: over random starts, stops,
//! grants, renewals, lease ends, expiries, failed proposals and time steps
//! (some landing exactly on a deadline, some just before), the clock gives
//! the same answers and holds the same deadlines as the model.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::time::Duration;
use tenure_core::Instant;
use tenure_kv::{
    LeaseClock, LeaseId, RenewError, TrackError, EXPIRY_RETRY_DELAY, MAX_EXPIRIES_PER_CALL,
    MAX_LEASES,
};

const SEEDS: u64 = 100;
const STEPS: usize = 400;

fn below(rng: &mut Pcg64Mcg, n: u64) -> u64 {
    rng.next_u64() % n
}

/// A lease in the model.
#[derive(Clone, Debug)]
struct ModelLease {
    id: LeaseId,
    ttl: Duration,
    /// The deadline, or the retry time once queued again.
    at: Instant,
    expiring: bool,
    /// Whether `due` may return it (live, or given back by `retry`).
    queued: bool,
}

/// The lease clock's rules, written the obvious way: every question scans.
#[derive(Default)]
struct Model {
    running: bool,
    leases: Vec<ModelLease>,
}

impl Model {
    fn find(&mut self, id: LeaseId) -> Option<&mut ModelLease> {
        self.leases.iter_mut().find(|l| l.id == id)
    }

    fn start(&mut self, now: Instant, leases: &[(LeaseId, u64)]) -> Result<(), TrackError> {
        self.stop();
        self.running = true;
        for &(id, ttl_ms) in leases {
            if let Err(e) = self.granted(now, id, ttl_ms) {
                self.stop();
                return Err(e);
            }
        }
        Ok(())
    }

    fn stop(&mut self) {
        self.running = false;
        self.leases.clear();
    }

    fn granted(&mut self, now: Instant, id: LeaseId, ttl_ms: u64) -> Result<(), TrackError> {
        if !self.running {
            return Ok(());
        }
        if self.find(id).is_some() {
            return Err(TrackError::Duplicate(id));
        }
        if self.leases.len() >= MAX_LEASES {
            return Err(TrackError::TooManyLeases);
        }
        let ttl = Duration::from_millis(ttl_ms);
        self.leases.push(ModelLease { id, ttl, at: now + ttl, expiring: false, queued: true });
        Ok(())
    }

    fn ended(&mut self, id: LeaseId) {
        self.leases.retain(|l| l.id != id);
    }

    fn renew(&mut self, now: Instant, id: LeaseId) -> Result<Duration, RenewError> {
        if !self.running {
            return Err(RenewError::NotLeader);
        }
        let lease = self.find(id).ok_or(RenewError::NotFound(id))?;
        if lease.expiring {
            return Err(RenewError::Expiring(id));
        }
        lease.at = lease.at.max(now + lease.ttl);
        Ok(lease.ttl)
    }

    fn due(&mut self, now: Instant) -> Vec<LeaseId> {
        let mut due: Vec<(Instant, LeaseId)> =
            self.leases.iter().filter(|l| l.queued && l.at <= now).map(|l| (l.at, l.id)).collect();
        due.sort();
        due.truncate(MAX_EXPIRIES_PER_CALL);
        for &(_, id) in &due {
            let lease = self.find(id).unwrap();
            lease.expiring = true;
            lease.queued = false;
        }
        due.into_iter().map(|(_, id)| id).collect()
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.leases.iter().filter(|l| l.queued).map(|l| l.at).min()
    }

    fn retry(&mut self, now: Instant, id: LeaseId) -> bool {
        match self.find(id) {
            Some(lease) if lease.expiring && !lease.queued => {
                lease.at = now + EXPIRY_RETRY_DELAY;
                lease.queued = true;
                true
            }
            _ => false,
        }
    }

    fn in_flight(&self) -> usize {
        self.leases.iter().filter(|l| l.expiring && !l.queued).count()
    }
}

/// What the runs did, so that the test shows it exercised every path.
#[derive(Default, Debug)]
struct Seen {
    starts: usize,
    stops: usize,
    grants: usize,
    duplicate_grants: usize,
    renewed: usize,
    renew_not_leader: usize,
    renew_not_found: usize,
    renew_expiring: usize,
    due_some: usize,
    due_on_the_deadline: usize,
    due_just_before: usize,
    due_full: usize,
    retried: usize,
    retry_refused: usize,
    ended_live: usize,
    ended_expiring: usize,
}

/// The lease ids the store would hold, and the next id it grants.
struct Store {
    leases: Vec<(LeaseId, u64)>,
    next: u64,
}

impl Store {
    fn grant(&mut self, rng: &mut Pcg64Mcg) -> (LeaseId, u64) {
        self.next += 1;
        let lease = (LeaseId(self.next), ttl(rng));
        self.leases.push(lease);
        lease
    }
}

/// A TTL in milliseconds: often one of a few values, so that many leases
/// share a deadline.
fn ttl(rng: &mut Pcg64Mcg) -> u64 {
    match below(rng, 4) {
        0 => 500,
        1 => 1_000,
        _ => 500 + below(rng, 3_000),
    }
}

/// An id near the ones granted: some held, some ended, some never granted.
fn some_id(rng: &mut Pcg64Mcg, store: &Store) -> LeaseId {
    LeaseId(below(rng, store.next + 3))
}

fn check(step: usize, clock: &LeaseClock, model: &Model) -> Result<(), String> {
    let fail = |what: &str| Err(format!("step {step}: {what} differs"));
    if clock.is_running() != model.running {
        return fail("is_running");
    }
    if clock.next_deadline() != model.next_deadline() {
        return fail("next_deadline");
    }
    if clock.len() != model.leases.len() || clock.in_flight() != model.in_flight() {
        return fail("len or in_flight");
    }
    for l in &model.leases {
        let deadline = (!l.expiring).then_some(l.at);
        if clock.deadline(l.id) != deadline || clock.is_expiring(l.id) != l.expiring {
            return fail(&format!("lease {}", l.id));
        }
    }
    Ok(())
}

fn run(seed: u64, seen: &mut Seen) -> Result<(), String> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let (mut clock, mut model) = (LeaseClock::new(), Model::default());
    let mut store = Store { leases: Vec::new(), next: 0 };
    // A batch of leases granted before the first leadership, often more
    // than one call's worth sharing a TTL.
    for _ in 0..below(&mut rng, 3 * MAX_EXPIRIES_PER_CALL as u64) {
        store.grant(&mut rng);
    }
    let mut now = Instant::ZERO;
    // Expiries proposed and not yet applied nor failed.
    let mut in_flight: Vec<LeaseId> = Vec::new();
    for step in 0..STEPS {
        match below(&mut rng, 20) {
            0 => {
                let leases = store.leases.clone();
                let answer = clock.start(now, leases.iter().map(|&(id, ttl)| (id, ttl, None)));
                if answer != model.start(now, &leases) {
                    return Err(format!("step {step}: start answered {answer:?}"));
                }
                in_flight.clear();
                seen.starts += 1;
            }
            1 => {
                clock.stop();
                model.stop();
                in_flight.clear();
                seen.stops += 1;
            }
            2 | 3 => {
                // A grant applied; now and then a duplicate (a caller bug).
                let (id, ttl_ms) = if below(&mut rng, 8) == 0 && !store.leases.is_empty() {
                    store.leases[below(&mut rng, store.leases.len() as u64) as usize]
                } else {
                    store.grant(&mut rng)
                };
                let answer = clock.granted(now, id, ttl_ms);
                if answer != model.granted(now, id, ttl_ms) {
                    return Err(format!("step {step}: granted {id} answered {answer:?}"));
                }
                match answer {
                    Err(TrackError::Duplicate(_)) => seen.duplicate_grants += 1,
                    _ => seen.grants += 1,
                }
            }
            4..=8 => {
                let id = some_id(&mut rng, &store);
                let answer = clock.renew(now, id);
                if answer != model.renew(now, id) {
                    return Err(format!("step {step}: renew {id} answered {answer:?}"));
                }
                match answer {
                    Ok(_) => seen.renewed += 1,
                    Err(RenewError::NotLeader) => seen.renew_not_leader += 1,
                    Err(RenewError::NotFound(_)) => seen.renew_not_found += 1,
                    Err(RenewError::Expiring(_)) => seen.renew_expiring += 1,
                    // No checkpoint is taken in these runs: nothing is silent.
                    Err(RenewError::Silent(_)) => return Err(format!("step {step}: silent")),
                }
            }
            9 | 10 => {
                // A revoke applied (a random id: some are not held), or an
                // expiry in flight applied.
                let id = if below(&mut rng, 2) == 0 && !in_flight.is_empty() {
                    in_flight.swap_remove(below(&mut rng, in_flight.len() as u64) as usize)
                } else {
                    some_id(&mut rng, &store)
                };
                match (clock.is_expiring(id), clock.deadline(id).is_some()) {
                    (true, _) => seen.ended_expiring += 1,
                    (false, true) => seen.ended_live += 1,
                    _ => {}
                }
                clock.ended(id);
                model.ended(id);
                store.leases.retain(|&(l, _)| l != id);
                in_flight.retain(|&l| l != id);
            }
            11 => {
                // An expiry proposal failed while still leading, or a retry
                // of a lease that is not in flight.
                let id = if below(&mut rng, 4) > 0 && !in_flight.is_empty() {
                    in_flight.swap_remove(below(&mut rng, in_flight.len() as u64) as usize)
                } else {
                    some_id(&mut rng, &store)
                };
                let answer = clock.retry(now, id);
                if answer != model.retry(now, id) {
                    return Err(format!("step {step}: retry {id} answered {answer}"));
                }
                if answer {
                    seen.retried += 1;
                } else {
                    seen.retry_refused += 1;
                }
            }
            12..=15 => {
                // The timer: sometimes exactly at the next deadline, sometimes
                // a nanosecond before it.
                let before = below(&mut rng, 3) == 0;
                let mut jumped = false;
                if let Some(next) = model.next_deadline().filter(|&d| d > now) {
                    now = if before { next - Duration::from_nanos(1) } else { next };
                    jumped = true;
                }
                let due = clock.due(now);
                if due != model.due(now) {
                    return Err(format!("step {step}: due at {now:?} returned {due:?}"));
                }
                match (jumped, before, due.is_empty()) {
                    (true, true, true) => seen.due_just_before += 1,
                    (true, false, false) => seen.due_on_the_deadline += 1,
                    _ => {}
                }
                if !due.is_empty() {
                    seen.due_some += 1;
                }
                if due.len() == MAX_EXPIRIES_PER_CALL {
                    seen.due_full += 1;
                }
                in_flight.extend(due);
            }
            _ => {
                now = now + Duration::from_millis(below(&mut rng, 400));
            }
        }
        check(step, &clock, &model)?;
    }
    Ok(())
}

#[test]
fn the_lease_clock_answers_as_a_naive_model_does() {
    let mut seen = Seen::default();
    let failures: Vec<String> = (0..SEEDS)
        .filter_map(|seed| run(seed, &mut seen).err().map(|e| format!("seed {seed}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let runs = SEEDS as usize;
    let counts = [
        seen.starts,
        seen.stops,
        seen.grants,
        seen.duplicate_grants,
        seen.renewed,
        seen.renew_not_leader,
        seen.renew_not_found,
        seen.renew_expiring,
        seen.due_some,
        seen.due_on_the_deadline,
        seen.due_just_before,
        seen.due_full,
        seen.retried,
        seen.retry_refused,
        seen.ended_live,
        seen.ended_expiring,
    ];
    assert!(counts.iter().all(|&n| n > runs / 10), "a path was hardly exercised: {seen:?}");
    eprintln!("{seen:?}");
}
