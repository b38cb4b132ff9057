//! The application-election workload (`--workload elect`, scenario
//! `elect`): a few application processes (not voters) hold sessions in the
//! replicated store and campaign in a few named elections, under every
//! fault of the run and faults of their own (crashes, pauses, being cut off
//! from tenure), with their checkers.
//!
//! An app client, as the client library of docs/ELECTIONS.md would:
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

use crate::checker::Check;
use crate::clock::NodeClock;
pub use crate::elect_spec::{ElectBug, ElectSpec, DEFAULT_APPS, DEFAULT_NAMES, DEFAULT_TTL_MS};
use crate::elect_stale::{ExpiryLedger, Stale};
use crate::stats::ElectStats;
use crate::workload::{Action, Reply, ReplyBody, Request, RequestBody, Tag, MAX_ATTEMPTS};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::time::Duration;
use tenure_core::{Instant, NodeId};
use tenure_kv::{
    campaign, campaign_outcome, resign, Command, LeaseId, Outcome, Response, Standing,
};
use tenure_replica::Position;

/// Shortest and longest pause between two reads of a waiting or leading
/// client, ns.
pub(crate) const POLL_NS: (u64, u64) = (30_000_000, 80_000_000);
/// Shortest and longest one-way delay between an app and a node, ns.
pub(crate) const LATENCY_NS: (u64, u64) = (1_000_000, 5_000_000);
/// Longest wait before a client retries after a redirect to no new leader.
const MAX_BACKOFF_NS: u64 = 20_000_000;
/// Answers a paused app keeps for when it resumes (its socket buffer).
const MAX_APP_INBOX: usize = 64;
/// Chance, per poll, that a candidate resigns (then campaigns again).
const RESIGN_CHANCE: f64 = 0.015;
/// Chance, per poll, that a candidate revokes its session (then grants a
/// new one).
const REVOKE_CHANCE: f64 = 0.005;
/// Faults of one app are this many TTLs apart, in thousandths (1 to 6 TTLs).
const FAULT_GAP_MILLI_TTL: (u64, u64) = (1_000, 6_000);
/// A fault of an app lasts this many TTLs, in thousandths (0.25 to 3).
const FAULT_LENGTH_MILLI_TTL: (u64, u64) = (250, 3_000);

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

/// What an outstanding request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Grant,
    Campaign,
    Read,
    Resign,
    Revoke,
    Renew,
}

/// A request out (or being retried after a redirect).
#[derive(Clone, Copy, Debug)]
struct Out {
    id: usize,
    kind: Kind,
    attempt: u32,
    /// It gives up then (global ns).
    timeout_ns: u64,
    /// Sent again then after a redirect (global ns).
    resend_ns: Option<u64>,
    /// When the latest attempt was sent, on the app's clock.
    sent_local: Instant,
    /// The session it is about.
    session: Option<LeaseId>,
    /// A resignation: the candidacy it ends (its key's `create_revision`).
    candidacy: Option<u64>,
    /// The node its latest attempt went to.
    node: usize,
}

/// One application process.
#[derive(Clone, Debug)]
struct App {
    name: usize,
    clock: NodeClock,
    target: usize,
    gen: u64,
    /// Crashed: restarts then (global ns).
    down_until: Option<u64>,
    /// Paused: resumes then (global ns).
    paused_until: Option<u64>,
    /// Answers that arrived while paused.
    inbox: Vec<Reply>,
    /// Cut off from every node until then (global ns).
    cut_until: u64,
    next_fault_ns: u64,
    session: Option<LeaseId>,
    /// Trusts its session until then, on its own clock.
    deadline: Option<Instant>,
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
    op: Option<Out>,
    next_op_ns: u64,
    renewal: Option<Out>,
    next_renew_ns: u64,
}

impl App {
    /// Forgets the session and everything about it.
    fn forget_session(&mut self) {
        self.session = None;
        self.deadline = None;
        self.candidate = false;
        self.first = None;
        self.created = None;
        self.resigning = None;
        self.renewal = None;
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
    apps: Vec<App>,
    /// Client index of app 0 (app clients follow the key-value clients).
    base: usize,
    nodes: usize,
    op_timeout_ns: u64,
    drift_ppm: u32,
    next_id: usize,
    rng: Pcg64Mcg,
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
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x656c_6563_7469_6f6e);
        let drift = i64::from(drift_ppm);
        let apps = (0..spec.apps)
            .map(|a| App {
                name: a % spec.names.max(1),
                clock: NodeClock::new(
                    rng.gen_range(0..1_000_000_000_000),
                    rng.gen_range(-drift..=drift),
                ),
                target: rng.gen_range(0..nodes),
                gen: 0,
                down_until: None,
                paused_until: None,
                inbox: Vec::new(),
                cut_until: 0,
                next_fault_ns: 0,
                session: None,
                deadline: None,
                candidate: false,
                first: None,
                created: None,
                resigning: None,
                leading: None,
                op: None,
                next_op_ns: 0,
                renewal: None,
                next_renew_ns: u64::MAX,
            })
            .collect();
        Elections {
            spec,
            leaderships: Vec::new(),
            stats: ElectStats { runs: 1, ..ElectStats::default() },
            settled_at: None,
            expiries: ExpiryLedger::default(),
            apps,
            base,
            nodes,
            op_timeout_ns,
            drift_ppm,
            next_id: 0,
            rng,
        }
    }

    /// A ready leader proposed an expiry as entry `pos`.
    pub fn expiry_proposed(&mut self, pos: Position) {
        self.expiries.proposed(pos);
    }

    /// A node applied `batch` (one output of its replica): counts the
    /// stale expiries decided by it, and returns them.
    pub fn entries_applied(&mut self, batch: &[Position]) -> Vec<Stale> {
        self.expiries.applied(batch, &mut self.stats)
    }

    /// The app of client index `client`, if it is one.
    pub fn app_of(&self, client: usize) -> Option<usize> {
        client.checked_sub(self.base).filter(|&a| a < self.apps.len())
    }

    fn ttl_ns(&self) -> u64 {
        self.spec.ttl_ns()
    }

    fn milli_ttl(&mut self, range: (u64, u64)) -> u64 {
        self.ttl_ns() / 1_000 * self.rng.gen_range(range.0..=range.1)
    }

    /// Starts every app within 100 ms of `now_ns`.
    pub fn start(&mut self, now_ns: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        for a in 0..self.apps.len() {
            self.apps[a].next_op_ns = now_ns + self.rng.gen_range(0..100_000_000);
            self.apps[a].next_fault_ns = now_ns + self.milli_ttl(FAULT_GAP_MILLI_TTL);
            actions.push(self.wake_at(a));
        }
        actions
    }

    /// The faults healed: from now on no app fault, no resignation or
    /// revocation; crashed apps restart and paused or cut-off ones resume.
    pub fn settle(&mut self, now_ns: u64) -> Vec<Action> {
        self.settled_at.get_or_insert(now_ns);
        let mut actions = Vec::new();
        for a in 0..self.apps.len() {
            let app = &mut self.apps[a];
            app.next_fault_ns = u64::MAX;
            app.cut_until = app.cut_until.min(now_ns);
            app.down_until = app.down_until.map(|t| t.min(now_ns));
            app.paused_until = app.paused_until.map(|t| t.min(now_ns));
            actions.extend(self.step(a, now_ns));
        }
        actions
    }

    /// App client `client`'s timer fired.
    pub fn on_wake(&mut self, client: usize, gen: u64, now_ns: u64) -> Vec<Action> {
        match self.app_of(client) {
            Some(a) if self.apps[a].gen == gen => self.step(a, now_ns),
            _ => Vec::new(),
        }
    }

    /// An answer reached app client `reply.tag.client`.
    pub fn on_reply(&mut self, reply: Reply, now_ns: u64) -> Vec<Action> {
        let Some(a) = self.app_of(reply.tag.client) else { return Vec::new() };
        let app = &mut self.apps[a];
        if app.down_until.is_some() || now_ns < app.cut_until {
            return Vec::new();
        }
        if app.paused_until.is_some() {
            if app.inbox.len() < MAX_APP_INBOX {
                app.inbox.push(reply);
            }
            return Vec::new();
        }
        self.handle_reply(a, reply, now_ns);
        self.step(a, now_ns)
    }

    /// Everything due for app `a` at `now_ns`, then its next wake.
    fn step(&mut self, a: usize, now_ns: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        if self.apps[a].down_until.is_some_and(|t| now_ns >= t) {
            self.apps[a].down_until = None;
            self.apps[a].next_op_ns = now_ns;
        }
        if self.apps[a].paused_until.is_some_and(|t| now_ns >= t) {
            self.apps[a].paused_until = None;
            // First its clock, then what queued up.
            self.check_deadline(a, now_ns);
            for reply in std::mem::take(&mut self.apps[a].inbox) {
                self.handle_reply(a, reply, now_ns);
            }
        }
        if self.apps[a].down_until.is_some() || self.apps[a].paused_until.is_some() {
            actions.push(self.wake_at(a));
            return actions;
        }
        self.check_deadline(a, now_ns);
        if now_ns >= self.apps[a].next_fault_ns && self.inject_fault(a, now_ns) {
            actions.push(self.wake_at(a));
            return actions;
        }
        self.step_renewal(a, now_ns, &mut actions);
        self.step_op(a, now_ns, &mut actions);
        actions.push(self.wake_at(a));
        actions
    }

    /// Ends app `a`'s leadership once its deadline passed on its clock.
    fn check_deadline(&mut self, a: usize, now_ns: u64) {
        if self.spec.planted == Some(ElectBug::IgnoreDeadline) {
            return;
        }
        let app = &self.apps[a];
        let Some(deadline) = app.deadline else { return };
        if app.leading.is_some() && app.clock.local(now_ns) >= deadline {
            let at = app.clock.global_at(deadline).min(now_ns);
            self.stats.deadline_stops += 1;
            self.end_leading(a, at, "its deadline passed");
        }
    }

    /// Whether app `a` may start (or resume) leading now by its deadline.
    fn trusts_session(&self, a: usize, now_ns: u64) -> bool {
        let app = &self.apps[a];
        self.spec.planted == Some(ElectBug::IgnoreDeadline)
            || app.deadline.is_some_and(|d| app.clock.local(now_ns) < d)
    }

    fn start_leading(&mut self, a: usize, token: u64, now_ns: u64) {
        let app = &self.apps[a];
        let (Some(session), None, name) = (app.session, app.leading, app.name) else { return };
        let prev = self.leaderships.iter().rev().find(|l| l.name == name);
        if prev.is_some_and(|p| p.session != session) {
            self.stats.handovers += 1;
        }
        self.stats.leaderships += 1;
        self.apps[a].leading = Some(self.leaderships.len());
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
        if let Some(l) = self.apps[a].leading.take() {
            let rec = &mut self.leaderships[l];
            rec.end_ns = Some(at_ns.max(rec.start_ns));
            rec.why = why;
        }
    }

    /// Draws a fault for app `a`; true if it stopped (crashed or paused).
    fn inject_fault(&mut self, a: usize, now_ns: u64) -> bool {
        self.apps[a].next_fault_ns = now_ns + self.milli_ttl(FAULT_GAP_MILLI_TTL);
        let length = self.milli_ttl(FAULT_LENGTH_MILLI_TTL);
        match self.rng.gen_range(0..3) {
            0 => {
                self.stats.app_crashes += 1;
                self.end_leading(a, now_ns, "it crashed");
                let app = &mut self.apps[a];
                app.forget_session();
                app.op = None;
                app.inbox.clear();
                app.down_until = Some(now_ns + length);
                true
            }
            1 => {
                self.stats.app_pauses += 1;
                self.apps[a].paused_until = Some(now_ns + length);
                true
            }
            _ => {
                self.stats.app_cutoffs += 1;
                self.apps[a].cut_until = now_ns + length;
                false
            }
        }
    }

    fn step_renewal(&mut self, a: usize, now_ns: u64, actions: &mut Vec<Action>) {
        let Some(session) = self.apps[a].session else { return };
        match self.apps[a].renewal {
            Some(r) if now_ns >= r.timeout_ns => self.apps[a].renewal = None,
            Some(r) if r.resend_ns.is_some_and(|t| now_ns >= t) => {
                self.send(a, r, now_ns, actions);
                return;
            }
            Some(_) => return,
            None => {}
        }
        if now_ns >= self.apps[a].next_renew_ns {
            let ttl = self.ttl_ns();
            self.apps[a].next_renew_ns = now_ns + ttl / 3;
            let out = self.new_out(Kind::Renew, Some(session), now_ns + ttl / 3);
            self.send(a, out, now_ns, actions);
        }
    }

    fn step_op(&mut self, a: usize, now_ns: u64, actions: &mut Vec<Action>) {
        match self.apps[a].op {
            Some(op) if now_ns >= op.timeout_ns => self.op_failed(a, op, now_ns),
            Some(op) if op.resend_ns.is_some_and(|t| now_ns >= t) => {
                return self.send(a, op, now_ns, actions);
            }
            Some(_) => return,
            None => {}
        }
        if now_ns < self.apps[a].next_op_ns {
            return;
        }
        let settled = self.settled_at.is_some();
        let app = &self.apps[a];
        let kind = match app.session {
            None => Kind::Grant,
            Some(_) if app.resigning.is_some() => Kind::Resign,
            Some(_) if !app.candidate => Kind::Campaign,
            // Only a candidacy it knows the revision of (see `resigning`).
            Some(_) if !settled && app.created.is_some() && self.rng.gen_bool(RESIGN_CHANCE) => {
                Kind::Resign
            }
            Some(_) if !settled && self.rng.gen_bool(REVOKE_CHANCE) => Kind::Revoke,
            Some(_) => Kind::Read,
        };
        let session = self.apps[a].session;
        let candidacy = self.apps[a].resigning.or(self.apps[a].created);
        match kind {
            Kind::Resign if self.apps[a].resigning.is_some() => {}
            Kind::Resign => {
                // It stops leading before it asks: its key may go at once.
                self.stats.resignations += 1;
                self.end_leading(a, now_ns, "it resigned");
                self.apps[a].candidate = false;
                self.apps[a].first = None;
                self.apps[a].created = None;
                self.apps[a].resigning = candidacy;
            }
            Kind::Revoke => {
                self.stats.revocations += 1;
                self.end_leading(a, now_ns, "it revoked its session");
                self.apps[a].forget_session();
            }
            _ => {}
        }
        let mut out = self.new_out(kind, session, now_ns + self.op_timeout_ns);
        out.candidacy = candidacy.filter(|_| kind == Kind::Resign);
        self.send(a, out, now_ns, actions);
    }

    fn new_out(&mut self, kind: Kind, session: Option<LeaseId>, timeout_ns: u64) -> Out {
        self.next_id += 1;
        Out {
            id: self.next_id,
            kind,
            attempt: 0,
            timeout_ns,
            resend_ns: None,
            sent_local: Instant::ZERO,
            session,
            candidacy: None,
            node: 0,
        }
    }

    /// Sends (a new attempt of) `out` from app `a` to its target node.
    fn send(&mut self, a: usize, mut out: Out, now_ns: u64, actions: &mut Vec<Action>) {
        out.attempt += 1;
        out.resend_ns = None;
        out.sent_local = self.apps[a].clock.local(now_ns);
        out.node = self.apps[a].target;
        let name = election_name(self.apps[a].name);
        let session = out.session.unwrap_or_default();
        let body = match out.kind {
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
            Kind::Resign => RequestBody::Write(resign(&name, session, out.candidacy)),
            Kind::Revoke => RequestBody::Write(Command::Revoke { lease: session }),
            Kind::Renew => RequestBody::Renew { lease: session },
        };
        if out.kind == Kind::Renew {
            self.apps[a].renewal = Some(out);
        } else {
            self.apps[a].op = Some(out);
        }
        if now_ns < self.apps[a].cut_until {
            return; // lost on the way
        }
        let delay_ns = self.rng.gen_range(LATENCY_NS.0..=LATENCY_NS.1);
        let tag = Tag { client: self.base + a, op: out.id, attempt: out.attempt };
        let req = Request { tag, body };
        actions.push(Action::Send { node: self.apps[a].target, req, delay_ns });
    }

    /// The next time app `a` has something to do.
    fn wake_at(&mut self, a: usize) -> Action {
        let app = &self.apps[a];
        let mut at = u64::MAX;
        if let Some(t) = app.down_until.or(app.paused_until) {
            at = t;
        } else {
            at = at.min(app.next_fault_ns);
            match app.op {
                Some(op) => at = at.min(op.timeout_ns).min(op.resend_ns.unwrap_or(u64::MAX)),
                None => at = at.min(app.next_op_ns),
            }
            if app.session.is_some() {
                match app.renewal {
                    Some(r) => at = at.min(r.timeout_ns).min(r.resend_ns.unwrap_or(u64::MAX)),
                    None => at = at.min(app.next_renew_ns),
                }
            }
            let obeys = self.spec.planted != Some(ElectBug::IgnoreDeadline);
            if let (Some(_), Some(d), true) = (app.leading, app.deadline, obeys) {
                at = at.min(app.clock.global_at(d));
            }
        }
        let client = self.base + a;
        let app = &mut self.apps[a];
        app.gen += 1;
        Action::Wake { client, at_ns: at, gen: app.gen }
    }

    fn handle_reply(&mut self, a: usize, reply: Reply, now_ns: u64) {
        let app = &self.apps[a];
        let matches = |o: &Option<Out>| {
            o.filter(|o| {
                o.id == reply.tag.op && o.attempt == reply.tag.attempt && o.resend_ns.is_none()
            })
        };
        let Some(out) = matches(&app.op).or_else(|| matches(&app.renewal)) else { return };
        match reply.body {
            ReplyBody::Redirect(leader) => {
                if out.attempt >= MAX_ATTEMPTS {
                    return self.finish_out(a, out, now_ns, None);
                }
                let asked = self.apps[a].target;
                let named = leader
                    .and_then(|l: NodeId| usize::try_from(l.0).ok()?.checked_sub(1))
                    .filter(|&l| l < self.nodes);
                // No leader named: the node after the one that answered, as
                // tenure's client moves to its next endpoint
                // (crates/client/src/cluster.rs). A random node kept apps
                // among nodes that are no members (wiped, not added again)
                // for seconds: raft membership seed 498.
                // (Unless another request moved it meanwhile, as
                // `op_failed` and tenure's client do.)
                let target = match named {
                    Some(leader) => leader,
                    None if asked == out.node => (out.node + 1) % self.nodes,
                    None => asked,
                };
                self.apps[a].target = target;
                let pause = if named.is_some() && target != asked {
                    0
                } else {
                    self.rng.gen_range(1..=MAX_BACKOFF_NS)
                };
                let again = Out { resend_ns: Some(now_ns + pause), ..out };
                if out.kind == Kind::Renew {
                    self.apps[a].renewal = Some(again);
                } else {
                    self.apps[a].op = Some(again);
                }
            }
            ReplyBody::Unknown => self.finish_out(a, out, now_ns, None),
            body => self.finish_out(a, out, now_ns, Some(body)),
        }
    }

    /// A request ended: with an answer, or unknown (`None`).
    fn finish_out(&mut self, a: usize, out: Out, now_ns: u64, body: Option<ReplyBody>) {
        if out.kind == Kind::Renew {
            self.apps[a].renewal = None;
        } else {
            self.apps[a].op = None;
            let think = self.rng.gen_range(POLL_NS.0..=POLL_NS.1);
            self.apps[a].next_op_ns = now_ns + think;
        }
        let current = out.session.is_some() && out.session == self.apps[a].session;
        match (out.kind, body) {
            (Kind::Renew, Some(ReplyBody::Renewed { .. })) if current => {
                self.renewed(a, out.sent_local, now_ns)
            }
            (_, Some(ReplyBody::SessionGone(lease))) if out.session == Some(lease) && current => {
                self.stats.sessions_lost += 1;
                self.end_leading(a, now_ns, "its session was reported gone");
                self.apps[a].forget_session();
                self.apps[a].next_op_ns = now_ns;
            }
            (Kind::Grant, Some(ReplyBody::Done(bytes))) => {
                if let Ok(Response::Granted { lease, .. }) = Response::decode(&bytes) {
                    self.granted(a, lease, out.sent_local, now_ns);
                }
            }
            // Resigned, or not that candidacy (any more): definite.
            (Kind::Resign, Some(ReplyBody::Done(_)))
                if current && self.apps[a].resigning == out.candidacy =>
            {
                self.apps[a].resigning = None
            }
            (Kind::Campaign, Some(ReplyBody::Done(bytes))) if current => {
                match Response::decode(&bytes).map(|r| campaign_outcome(&r)) {
                    Ok(Err(Outcome::AlreadyCandidate(created)))
                        if self.apps[a].resigning == Some(created) => {}
                    Ok(Ok(created) | Err(Outcome::AlreadyCandidate(created))) => {
                        self.apps[a].candidate = true;
                        self.apps[a].created = Some(created);
                        self.apps[a].next_op_ns = now_ns;
                    }
                    Ok(Err(Outcome::NoSession(_))) => {
                        self.stats.sessions_lost += 1;
                        self.apps[a].forget_session();
                        self.apps[a].next_op_ns = now_ns;
                    }
                    _ => {}
                }
            }
            // Unknown: it may have committed; the next read tells.
            (Kind::Campaign, None) if current => self.apps[a].candidate = true,
            (Kind::Read, Some(ReplyBody::Range { kvs, .. })) if current => {
                self.read(a, &kvs, now_ns)
            }
            _ => {}
        }
    }

    fn granted(&mut self, a: usize, lease: LeaseId, sent_local: Instant, now_ns: u64) {
        self.stats.grants += 1;
        let trusted = Duration::from_nanos(self.spec.trusted_ns(self.drift_ppm));
        let ttl = self.ttl_ns();
        let app = &mut self.apps[a];
        if app.session.is_some() {
            return; // a late answer to an earlier grant: that lease just expires
        }
        app.forget_session();
        app.session = Some(lease);
        app.deadline = Some(sent_local + trusted);
        app.next_renew_ns = now_ns + ttl / 3;
        app.next_op_ns = now_ns;
    }

    fn renewed(&mut self, a: usize, sent_local: Instant, now_ns: u64) {
        self.stats.renewals += 1;
        let trusted = Duration::from_nanos(self.spec.trusted_ns(self.drift_ppm));
        let app = &mut self.apps[a];
        app.deadline = app.deadline.max(Some(sent_local + trusted));
        if let (None, Some(token)) = (app.leading, app.first) {
            if self.trusts_session(a, now_ns) {
                self.stats.resumed += 1;
                self.start_leading(a, token, now_ns);
            }
        }
    }

    fn read(&mut self, a: usize, kvs: &[tenure_kv::KeyValue], now_ns: u64) {
        let app = &self.apps[a];
        let Some(session) = app.session else { return };
        let standing = Standing::from_range(&election_name(app.name), kvs);
        let position = standing.position(session);
        self.apps[a].created = position.map(|i| standing.candidates[i].create_revision);
        match position {
            None => {
                self.apps[a].candidate = false;
                self.apps[a].first = None;
                self.end_leading(a, now_ns, "a read showed its key gone");
            }
            Some(0) => {
                let token = standing.candidates[0].create_revision;
                if self.apps[a].leading.is_some_and(|l| self.leaderships[l].token != token) {
                    self.end_leading(a, now_ns, "a read showed another token");
                }
                self.apps[a].first = Some(token);
                if self.apps[a].leading.is_none() && self.trusts_session(a, now_ns) {
                    self.start_leading(a, token, now_ns);
                }
            }
            Some(_) => {
                self.apps[a].first = None;
                self.end_leading(a, now_ns, "a read showed another leader");
            }
        }
    }

    /// Op `op` of app `a` got no answer in time: the app tries the node after
    /// the one it asked (not after its target now, which its renewals may
    /// have moved to the leader meanwhile: raft membership seed 10's app
    /// went from the leader to the next node, a spare outside the cluster
    /// that held its resignation silently, every time, while its renewals
    /// kept its session and candidacy alive).
    fn op_failed(&mut self, a: usize, op: Out, now_ns: u64) {
        if self.apps[a].target == op.node {
            self.apps[a].target = (op.node + 1) % self.nodes;
        }
        self.finish_out(a, op, now_ns, None);
    }

    /// Names (indices) with a live candidate (an app that is up, holds a
    /// session and believes it campaigns) and no holder now.
    pub fn names_without_holder(&self) -> Vec<usize> {
        (0..self.spec.names)
            .filter(|&n| {
                let apps = self.apps.iter().filter(|a| a.name == n);
                let mut live = apps
                    .clone()
                    .filter(|a| a.down_until.is_none() && a.session.is_some() && a.candidate);
                live.next().is_some() && !apps.clone().any(|a| a.leading.is_some())
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
        let mut violations = Vec::new();
        for n in 0..self.spec.names {
            let mut held: Vec<&Leadership> =
                self.leaderships.iter().filter(|l| l.name == n).collect();
            held.sort_by_key(|l| l.start_ns);
            // The leadership that ends last so far.
            let mut latest: Option<&Leadership> = None;
            let mut prev: Option<&Leadership> = None;
            for &l in &held {
                let end = l.end_ns.unwrap_or(now_ns);
                if let Some(p) = latest {
                    let p_end = p.end_ns.unwrap_or(now_ns);
                    if p.session != l.session && l.start_ns < p_end {
                        let overlap = p_end.min(end) - l.start_ns;
                        self.stats.max_overlap_ns = self.stats.max_overlap_ns.max(overlap);
                        violations.push((
                            Check::ElectionOverlap,
                            format!(
                                "{}: app{} (session {}, token {}) led from {:.3} ms while app{} (session {}, token {}) led {:.3}..{:.3} ms ({}): {:.3} ms of overlap",
                                election_name(n), l.app, l.session, l.token, ms(l.start_ns),
                                p.app, p.session, p.token, ms(p.start_ns), ms(p_end), p.why, ms(overlap)
                            ),
                        ));
                    }
                }
                if let Some(p) = prev {
                    let ok = l.token > p.token || (l.token == p.token && l.session == p.session);
                    if !ok {
                        violations.push((
                            Check::ElectionToken,
                            format!(
                                "{}: app{} (session {}) led with token {} at {:.3} ms after app{} (session {}) led with token {}",
                                election_name(n), l.app, l.session, l.token, ms(l.start_ns), p.app, p.session, p.token
                            ),
                        ));
                    }
                }
                prev = Some(l);
                if latest.is_none_or(|p| p.end_ns.unwrap_or(now_ns) < end) {
                    latest = Some(l);
                }
            }
        }
        violations
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
