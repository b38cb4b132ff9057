//! The application-election workload (`--workload elect`, scenario
//! `elect`): a few application processes (not voters) hold sessions in the
//! replicated store and campaign in a few named elections, under every
//! fault of the run and faults of their own (crashes, pauses, being cut off
//! from tenure), with their checkers.
//!
//! An app client, as the client library of docs/ELECTIONS.md would (its
//! session, requests and faults are those of every app, [`crate::app`]):
//!
//! * grants a session (`Command::Grant` through the log), campaigns
//!   (`tenure_kv::campaign`), and learns whether it leads by linearizable
//!   reads of the election's prefix (polling; no herd is the server's
//!   concern, not the simulator's);
//! * renews every TTL/3 by sending a renewal to the node it believes leads
//!   (a node that is not the ready leader answers with the leader it knows,
//!   and the client retries there);
//! * keeps a deadline on its **own drifting clock**: the send time of its
//!   latest successful renewal (or of its grant) plus `TTL − margin`, where
//!   the margin is [`ElectSpec::margin_ns`] (see there why it suffices);
//! * considers itself leader from the moment a read showed its key first
//!   until its deadline passes, it resigns or revokes (sometimes), or its
//!   session is reported gone. A successful renewal after its deadline
//!   passed gives the leadership back without a read if its key was first
//!   at its last read: the lease still existed when the renewal was
//!   answered, so no expiry of it ever commits (docs/ELECTIONS.md) and
//!   nobody can have led since. (This makes a server that renews a lease
//!   whose expiry it proposed visible to the checkers.)
//!
//! The checkers ([`Elections::check`]), on the global (real) timeline:
//! no two holders of a name whose leadership intervals overlap; fencing
//! tokens strictly increasing across successive holders of a name; and,
//! once the faults healed ([`Elections::settle`]), within the protocol's
//! liveness bound plus a TTL (and the client's own delays), every name
//! with a live candidate has a holder ([`Elections::names_without_holder`]).

use crate::app::{self, clashes, Apps, Clash, Ended, Fault, Out, Role, Span};
pub(crate) use crate::app::{LATENCY_NS, POLL_NS};
use crate::checker::Check;
pub use crate::elect_spec::{ElectBug, ElectSpec, DEFAULT_APPS, DEFAULT_NAMES, DEFAULT_TTL_MS};
use crate::elect_stale::{ExpiryLedger, Stale};
use crate::stats::ElectStats;
use crate::workload::{Action, Reply, ReplyBody, RequestBody};
use rand::Rng;
use std::collections::HashMap;
use tenure_core::Instant;
use tenure_kv::{
    campaign, campaign_outcome, resign, Command, LeaseId, Outcome, Response, Standing,
};
use tenure_replica::Position;

/// Chance, per poll, that a candidate resigns (then campaigns again).
const RESIGN_CHANCE: f64 = 0.015;
/// Chance, per poll, that a candidate revokes its session (then grants a
/// new one).
const REVOKE_CHANCE: f64 = 0.005;

/// The name of election `n`.
pub fn election_name(n: usize) -> String {
    format!("e{n}")
}

/// One leadership of a name by an app, on the global timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// The election.
    pub name: usize,
    /// The app.
    pub app: usize,
    /// Its session.
    pub session: LeaseId,
    /// Its fencing token (its key's `create_revision`).
    pub token: u64,
    /// When it began leading (global ns).
    pub start_ns: u64,
    /// When it stopped (global ns); `None` while it leads.
    pub end_ns: Option<u64>,
    /// Why it stopped.
    pub why: &'static str,
}

/// What an app's operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Grant,
    Campaign,
    Read,
    /// Ends the candidacy of that token (its key's `create_revision`).
    Resign(Option<u64>),
    Revoke,
}

/// What an app knows of its election, beside its session ([`crate::app`]).
#[derive(Clone, Debug)]
struct App {
    name: usize,
    /// Believes it is a candidate of its name.
    candidate: bool,
    /// Its key's token if its key was first at its last read (this session).
    first: Option<u64>,
    /// Its key's `create_revision`, as its campaign or its last read told
    /// (this session): the candidacy a resignation ends.
    created: Option<u64>,
    /// A candidacy it resigned without a definite answer yet: the
    /// resignation may still reach the log, so the app never takes that
    /// candidacy for its own again (a campaign answered "already a
    /// candidate since it"); it resigns it again until the answer is
    /// definite, then campaigns anew.
    resigning: Option<u64>,
    /// The index of its current leadership in [`Elections::leaderships`].
    leading: Option<usize>,
}

impl App {
    /// Forgets everything about the session.
    fn forget_session(&mut self) {
        self.candidate = false;
        self.first = None;
        self.created = None;
        self.resigning = None;
    }
}

/// The app clients, their leaderships and their counts.
#[derive(Clone, Debug)]
pub struct Elections {
    /// What runs.
    pub spec: ElectSpec,
    /// Every leadership, in the order they began.
    pub leaderships: Vec<Leadership>,
    /// Counts (the nodes add theirs: expiries, refused renewals).
    pub stats: ElectStats,
    /// Global time the faults healed ([`Elections::settle`]).
    pub settled_at: Option<u64>,
    /// What became of the expiries the nodes proposed (stale ones counted
    /// in [`Elections::stats`]).
    expiries: ExpiryLedger,
    apps: Apps<Kind>,
    roles: Vec<App>,
    /// The app each lease was granted to (and taken by); pruned of leases
    /// their apps no longer hold once it has twice as many as there are
    /// apps.
    holders: HashMap<LeaseId, usize>,
    /// Per app, the session it held when that session's expiry committed,
    /// and when (global ns): a renewal answered later must not stretch its
    /// deadline past it.
    expired_at: Vec<Option<(LeaseId, u64)>>,
    /// Early expiries found when a renewal was answered, for
    /// [`Elections::check`].
    early: Vec<String>,
}

impl Elections {
    /// The apps of `spec` on `nodes` nodes, as clients `base..`; requests
    /// time out after `op_timeout_ns`; clocks drift within `drift_ppm`.
    pub fn new(
        spec: ElectSpec,
        base: usize,
        nodes: usize,
        op_timeout_ns: u64,
        drift_ppm: u32,
        seed: u64,
    ) -> Self {
        let apps = Apps::new(
            spec.apps,
            base,
            nodes,
            op_timeout_ns,
            spec.ttl_ns(),
            spec.trusted_ns(drift_ppm),
            drift_ppm,
            seed ^ 0x656c_6563_7469_6f6e,
        );
        let roles = (0..spec.apps)
            .map(|a| App {
                name: a % spec.names.max(1),
                candidate: false,
                first: None,
                created: None,
                resigning: None,
                leading: None,
            })
            .collect();
        let expired_at = vec![None; spec.apps];
        Elections {
            spec,
            leaderships: Vec::new(),
            stats: ElectStats { runs: 1, ..ElectStats::default() },
            settled_at: None,
            expiries: ExpiryLedger::default(),
            apps,
            roles,
            holders: HashMap::new(),
            expired_at,
            early: Vec::new(),
        }
    }

    /// Whether the apps only hold sessions (no names: the `sessions`
    /// workload).
    fn sessions_only(&self) -> bool {
        self.spec.names == 0
    }

    /// A ready leader proposed the expiry of `leases` as entry `pos`.
    pub fn expiry_proposed(&mut self, pos: Position, leases: &[LeaseId]) {
        self.expiries.proposed(pos, leases);
    }

    /// A node applied `batch` (one output of its replica) at `now_ns`:
    /// counts the stale expiries decided by it and returns them, with what
    /// is wrong about the expiries that committed: a session expired while
    /// its holder still trusted it (`session-early-expiry`).
    pub fn entries_applied(
        &mut self,
        batch: &[Position],
        now_ns: u64,
    ) -> (Vec<Stale>, Vec<String>) {
        let decided = self.expiries.applied(batch, &mut self.stats);
        let mut early = Vec::new();
        for lease in decided.expired {
            let Some(&a) = self.holders.get(&lease) else { continue };
            if self.apps.proc(a).session != Some(lease) {
                self.holders.remove(&lease);
                continue;
            }
            self.stats.held_expiries += 1;
            self.expired_at[a] = Some((lease, now_ns));
            if self.apps.trusts(a, now_ns) {
                let until = self.trusted_until(a);
                early.push(format!(
                    "session {lease} of app{a} expired at {:.3} ms while its holder trusted it until {:.3} ms",
                    ms(now_ns),
                    ms(until)
                ));
            }
        }
        (decided.stale, early)
    }

    /// Until when app `a` trusts its session, global ns (0 without one).
    fn trusted_until(&self, a: usize) -> u64 {
        let p = self.apps.proc(a);
        p.deadline.map_or(0, |d| p.clock.global_at(d))
    }

    /// The app of client index `client`, if it is one.
    pub fn app_of(&self, client: usize) -> Option<usize> {
        self.apps.of(client)
    }

    /// Starts every app within 100 ms of `now_ns`.
    pub fn start(&mut self, now_ns: u64) -> Vec<Action> {
        self.apps.start(now_ns)
    }

    /// The faults healed: from now on no app fault, no resignation or
    /// revocation; crashed apps restart and paused or cut-off ones resume.
    pub fn settle(&mut self, now_ns: u64) -> Vec<Action> {
        self.settled_at.get_or_insert(now_ns);
        app::settle(self, now_ns)
    }

    /// App client `client`'s timer fired.
    pub fn on_wake(&mut self, client: usize, now_ns: u64) -> Vec<Action> {
        app::on_wake(self, client, now_ns)
    }

    /// An answer reached app client `reply.tag.client`.
    pub fn on_reply(&mut self, reply: Reply, now_ns: u64) -> Vec<Action> {
        app::on_reply(self, reply, now_ns)
    }

    /// Whether app `a` may start (or resume) leading now by its deadline.
    fn trusts_session(&self, a: usize, now_ns: u64) -> bool {
        self.spec.planted == Some(ElectBug::IgnoreDeadline) || self.apps.trusts(a, now_ns)
    }

    fn start_leading(&mut self, a: usize, token: u64, now_ns: u64) {
        let (session, leading, name) =
            (self.apps.proc(a).session, self.roles[a].leading, self.roles[a].name);
        let (Some(session), None) = (session, leading) else { return };
        let prev = self.leaderships.iter().rev().find(|l| l.name == name);
        if prev.is_some_and(|p| p.session != session) {
            self.stats.handovers += 1;
        }
        self.stats.leaderships += 1;
        self.roles[a].leading = Some(self.leaderships.len());
        self.leaderships.push(Leadership {
            name,
            app: a,
            session,
            token,
            start_ns: now_ns,
            end_ns: None,
            why: "",
        });
    }

    fn end_leading(&mut self, a: usize, at_ns: u64, why: &'static str) {
        if let Some(l) = self.roles[a].leading.take() {
            let rec = &mut self.leaderships[l];
            rec.end_ns = Some(at_ns.max(rec.start_ns));
            rec.why = why;
        }
    }

    fn granted(&mut self, a: usize, lease: LeaseId, sent_local: Instant, now_ns: u64) {
        self.stats.grants += 1;
        if self.apps.granted(a, lease, sent_local, now_ns) {
            self.roles[a].forget_session();
            if self.holders.len() >= 2 * self.roles.len().max(1) {
                let apps = &self.apps;
                self.holders.retain(|&l, &mut a| apps.proc(a).session == Some(l));
            }
            self.holders.insert(lease, a);
        }
    }

    fn renewed(&mut self, a: usize, now_ns: u64) {
        self.stats.renewals += 1;
        let session = self.apps.proc(a).session;
        if let Some((_, expired)) = self.expired_at[a].filter(|&(l, _)| session == Some(l)) {
            let until = self.trusted_until(a);
            if until > expired {
                self.early.push(format!(
                    "session {} of app{a} renewed at {:.3} ms, trusted until {:.3} ms, but its expiry committed at {:.3} ms",
                    session.unwrap_or_default(),
                    ms(now_ns),
                    ms(until),
                    ms(expired)
                ));
            }
        }
        if let (None, Some(token)) = (self.roles[a].leading, self.roles[a].first) {
            if self.trusts_session(a, now_ns) {
                self.stats.resumed += 1;
                self.start_leading(a, token, now_ns);
            }
        }
    }

    fn read(&mut self, a: usize, kvs: &[tenure_kv::KeyValue], now_ns: u64) {
        let Some(session) = self.apps.proc(a).session else { return };
        let standing = Standing::from_range(&election_name(self.roles[a].name), kvs);
        let position = standing.position(session);
        self.roles[a].created = position.map(|i| standing.candidates[i].create_revision);
        match position {
            None => {
                self.roles[a].candidate = false;
                self.roles[a].first = None;
                self.end_leading(a, now_ns, "a read showed its key gone");
            }
            Some(0) => {
                let token = standing.candidates[0].create_revision;
                if self.roles[a].leading.is_some_and(|l| self.leaderships[l].token != token) {
                    self.end_leading(a, now_ns, "a read showed another token");
                }
                self.roles[a].first = Some(token);
                if self.roles[a].leading.is_none() && self.trusts_session(a, now_ns) {
                    self.start_leading(a, token, now_ns);
                }
            }
            Some(_) => {
                self.roles[a].first = None;
                self.end_leading(a, now_ns, "a read showed another leader");
            }
        }
    }

    /// Names (indices) with a live candidate (an app that is up, holds a
    /// session and believes it campaigns) and no holder now.
    pub fn names_without_holder(&self) -> Vec<usize> {
        (0..self.spec.names)
            .filter(|&n| {
                let apps = (0..self.roles.len()).filter(|&a| self.roles[a].name == n);
                let mut live = apps.clone().filter(|&a| {
                    let p = self.apps.proc(a);
                    p.down_until.is_none() && p.session.is_some() && self.roles[a].candidate
                });
                live.next().is_some() && !apps.clone().any(|a| self.roles[a].leading.is_some())
            })
            .collect()
    }

    /// Closes the leaderships still open at `now_ns` (at their deadline if
    /// it passed) and checks them all: no overlap between holders of a
    /// name, tokens strictly increasing across holders. Returns the
    /// violations; fills in the stats.
    pub fn check(&mut self, now_ns: u64) -> Vec<(Check, String)> {
        for a in 0..self.apps.len() {
            self.check_deadline(a, now_ns);
            self.end_leading(a, now_ns, "the run ended");
        }
        let mut violations: Vec<(Check, String)> =
            self.early.drain(..).map(|what| (Check::SessionEarlyExpiry, what)).collect();
        for n in 0..self.spec.names {
            let mut held: Vec<&Leadership> =
                self.leaderships.iter().filter(|l| l.name == n).collect();
            held.sort_by_key(|l| l.start_ns);
            let spans: Vec<Span> = held
                .iter()
                .map(|l| Span {
                    session: l.session,
                    token: l.token,
                    start_ns: l.start_ns,
                    end_ns: l.end_ns,
                })
                .collect();
            for clash in clashes(&spans, now_ns) {
                violations.push(match clash {
                    Clash::Overlap { earlier, later, earlier_end_ns, overlap_ns } => {
                        let (p, l) = (held[earlier], held[later]);
                        self.stats.max_overlap_ns = self.stats.max_overlap_ns.max(overlap_ns);
                        (
                            Check::ElectionOverlap,
                            format!(
                                "{}: app{} (session {}, token {}) led from {:.3} ms while app{} (session {}, token {}) led {:.3}..{:.3} ms ({}): {:.3} ms of overlap",
                                election_name(n), l.app, l.session, l.token, ms(l.start_ns),
                                p.app, p.session, p.token, ms(p.start_ns), ms(earlier_end_ns), p.why, ms(overlap_ns)
                            ),
                        )
                    }
                    Clash::Token { earlier, later } => {
                        let (p, l) = (held[earlier], held[later]);
                        (
                            Check::ElectionToken,
                            format!(
                                "{}: app{} (session {}) led with token {} at {:.3} ms after app{} (session {}) led with token {}",
                                election_name(n), l.app, l.session, l.token, ms(l.start_ns), p.app, p.session, p.token
                            ),
                        )
                    }
                });
            }
        }
        violations
    }
}

impl Role for Elections {
    type Kind = Kind;

    fn apps(&self) -> &Apps<Kind> {
        &self.apps
    }

    fn apps_mut(&mut self) -> &mut Apps<Kind> {
        &mut self.apps
    }

    /// Ends app `a`'s leadership once its deadline passed on its clock.
    fn check_deadline(&mut self, a: usize, now_ns: u64) {
        if self.spec.planted == Some(ElectBug::IgnoreDeadline) || self.roles[a].leading.is_none() {
            return;
        }
        if let Some(at) = self.apps.lapsed(a, now_ns) {
            self.stats.deadline_stops += 1;
            self.end_leading(a, at, "its deadline passed");
        }
    }

    fn faulted(&mut self, a: usize, fault: Fault, now_ns: u64) {
        match fault {
            Fault::Crash => {
                self.stats.app_crashes += 1;
                self.end_leading(a, now_ns, "it crashed");
                self.roles[a].forget_session();
            }
            Fault::Pause => self.stats.app_pauses += 1,
            Fault::CutOff => self.stats.app_cutoffs += 1,
        }
    }

    fn next_op(&mut self, a: usize, now_ns: u64) -> Kind {
        let settled = self.settled_at.is_some();
        let role = &self.roles[a];
        // Only a candidacy it knows the revision of (see `resigning`).
        let candidacy = role.resigning.or(role.created);
        let session = self.apps.proc(a).session;
        match session {
            None => Kind::Grant,
            // Nothing to ask but its renewals (see `park`); a harmless read
            // should a stray answer wake it.
            Some(_) if self.sessions_only() => Kind::Read,
            Some(_) if role.resigning.is_some() => Kind::Resign(candidacy),
            Some(_) if !role.candidate => Kind::Campaign,
            Some(_)
                if !settled && role.created.is_some() && self.apps.rng.gen_bool(RESIGN_CHANCE) =>
            {
                // It stops leading before it asks: its key may go at once.
                self.stats.resignations += 1;
                self.end_leading(a, now_ns, "it resigned");
                let role = &mut self.roles[a];
                role.candidate = false;
                role.first = None;
                role.created = None;
                role.resigning = candidacy;
                Kind::Resign(candidacy)
            }
            Some(_) if !settled && self.apps.rng.gen_bool(REVOKE_CHANCE) => {
                self.stats.revocations += 1;
                self.end_leading(a, now_ns, "it revoked its session");
                self.roles[a].forget_session();
                self.apps.proc_mut(a).forget_session();
                Kind::Revoke
            }
            Some(_) => Kind::Read,
        }
    }

    fn body(&self, a: usize, out: Out<Kind>) -> RequestBody {
        let name = election_name(self.roles[a].name);
        let session = out.session.unwrap_or_default();
        match out.kind {
            Kind::Grant => {
                RequestBody::Write(Command::Grant { ttl_ms: self.spec.ttl_ms, owner: None })
            }
            Kind::Campaign => RequestBody::Write(
                campaign(&name, session, format!("app{a}").as_bytes())
                    .expect("the workload's names and values are valid"),
            ),
            Kind::Read => RequestBody::Range { prefix: tenure_kv::prefix(&name) },
            // Guarded by the candidacy's token, as tenure's client sends it:
            // an attempt that lands after the app campaigned again ends nothing.
            Kind::Resign(candidacy) => RequestBody::Write(resign(&name, session, candidacy)),
            Kind::Revoke => RequestBody::Write(Command::Revoke { lease: session }),
        }
    }

    fn watches_deadline(&self, a: usize) -> bool {
        self.spec.planted != Some(ElectBug::IgnoreDeadline) && self.roles[a].leading.is_some()
    }

    fn ended(&mut self, a: usize, ended: Ended<Kind>, now_ns: u64) {
        self.op_ended(a, ended, now_ns);
        self.park(a);
    }
}

impl Elections {
    /// In the `sessions` workload an app that holds a session asks nothing
    /// but its renewals: its next operation is due never (a lost session,
    /// a crash's restart make it due again, to grant a new one).
    fn park(&mut self, a: usize) {
        if self.sessions_only() && self.apps.proc(a).session.is_some() {
            self.apps.proc_mut(a).next_op_ns = u64::MAX;
        }
    }

    fn op_ended(&mut self, a: usize, ended: Ended<Kind>, now_ns: u64) {
        let (out, body, current) = match ended {
            Ended::Renewed => return self.renewed(a, now_ns),
            Ended::SessionGone => {
                self.stats.sessions_lost += 1;
                self.end_leading(a, now_ns, "its session was reported gone");
                self.roles[a].forget_session();
                return;
            }
            Ended::Nothing => return,
            Ended::Op { out, body, current } => (out, body, current),
        };
        match (out.kind, body) {
            (Kind::Grant, Some(ReplyBody::Done(bytes))) => {
                if let Ok(Response::Granted { lease, .. }) = Response::decode(&bytes) {
                    self.granted(a, lease, out.sent_local, now_ns);
                }
            }
            // Resigned, or not that candidacy (any more): definite.
            (Kind::Resign(c), Some(ReplyBody::Done(_)))
                if current && self.roles[a].resigning == c =>
            {
                self.roles[a].resigning = None
            }
            (Kind::Campaign, Some(ReplyBody::Done(bytes))) if current => {
                match Response::decode(&bytes).map(|r| campaign_outcome(&r)) {
                    Ok(Err(Outcome::AlreadyCandidate(created)))
                        if self.roles[a].resigning == Some(created) => {}
                    Ok(Ok(created) | Err(Outcome::AlreadyCandidate(created))) => {
                        self.roles[a].candidate = true;
                        self.roles[a].created = Some(created);
                        self.apps.proc_mut(a).next_op_ns = now_ns;
                    }
                    Ok(Err(Outcome::NoSession(_))) => {
                        self.stats.sessions_lost += 1;
                        self.roles[a].forget_session();
                        self.apps.proc_mut(a).forget_session();
                        self.apps.proc_mut(a).next_op_ns = now_ns;
                    }
                    _ => {}
                }
            }
            // Unknown: it may have committed; the next read tells.
            (Kind::Campaign, None) if current => self.roles[a].candidate = true,
            (Kind::Read, Some(ReplyBody::Range { kvs, .. })) if current => {
                self.read(a, &kvs, now_ns)
            }
            _ => {}
        }
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_covers_the_drift_both_ways() {
        let spec = ElectSpec::default();
        let drift = 50_000; // the core's default bound, 5 %
        let trusted = spec.trusted_ns(drift) as f64;
        // The slowest client clock stretches what it trusts by 1/(1-δ); the
        // fastest leader clock shrinks the TTL by 1/(1+δ).
        let client_stops = trusted / 0.95;
        let earliest_expiry = spec.ttl_ns() as f64 / 1.05;
        assert!(client_stops < earliest_expiry, "{client_stops} >= {earliest_expiry}");
        assert!(spec.margin_ns(drift) < spec.ttl_ns() / 5, "the margin leaves most of the TTL");
        assert_eq!(spec.margin_ns(0), 1_000_000);
    }

    fn leadership(name: usize, app: usize, token: u64, start: u64, end: u64) -> Leadership {
        Leadership {
            name,
            app,
            session: LeaseId(app as u64 + 1),
            token,
            start_ns: start,
            end_ns: Some(end),
            why: "test",
        }
    }

    fn checked(leaderships: Vec<Leadership>) -> Vec<Check> {
        let mut e = Elections::new(ElectSpec::default(), 0, 3, 1, 0, 1);
        e.leaderships = leaderships;
        e.check(1_000).into_iter().map(|(c, _)| c).collect()
    }

    #[test]
    fn the_checker_sees_overlaps_and_tokens_that_go_back() {
        assert!(checked(vec![leadership(0, 0, 5, 0, 10), leadership(0, 1, 7, 10, 20)]).is_empty());
        // Other names do not overlap each other.
        assert!(checked(vec![leadership(0, 0, 5, 0, 10), leadership(1, 1, 7, 5, 20)]).is_empty());
        assert_eq!(
            checked(vec![leadership(0, 0, 5, 0, 10), leadership(0, 1, 7, 9, 20)]),
            vec![Check::ElectionOverlap]
        );
        // A long leadership overlapping a later one, not the next.
        assert_eq!(
            checked(vec![
                leadership(0, 0, 5, 0, 100),
                leadership(0, 1, 7, 1, 2),
                leadership(0, 2, 9, 50, 60)
            ]),
            vec![Check::ElectionOverlap, Check::ElectionOverlap]
        );
        assert_eq!(
            checked(vec![leadership(0, 0, 7, 0, 10), leadership(0, 1, 7, 10, 20)]),
            vec![Check::ElectionToken]
        );
        // The same session resuming with its token is no new leadership.
        assert!(checked(vec![leadership(0, 0, 7, 0, 10), leadership(0, 0, 7, 15, 20)]).is_empty());
    }
}
