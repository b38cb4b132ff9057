//! An application process of the session workloads ([`crate::elect`],
//! [`crate::partitions`]): what every app client does whatever it uses its
//! session for.
//!
//! * **Its session.** It grants one through the log, renews it every TTL/3
//!   by sending a renewal to the node it believes leads, and keeps a
//!   deadline on its **own drifting clock**: the send time of its latest
//!   successful renewal (or of its grant) plus `TTL − margin`
//!   ([`crate::elect_spec::ElectSpec::margin_ns`] says why the margin
//!   suffices). What the session guards (a leadership, partitions) is the
//!   workload's: it asks [`Apps::lapsed`] and [`Apps::trusts`].
//! * **Its requests.** One operation at a time beside the renewal, each to
//!   the node it targets; a redirect naming a leader sends it there at
//!   once, one naming none to the node after the one that answered, as
//!   tenure's client walks its endpoints (`crates/client/src/cluster.rs`);
//!   no answer in time sends its next request to the next node.
//! * **Its faults**, from its own random stream, every 1 to 6 TTLs: a crash
//!   (its session and requests forgotten; it restarts later), a pause (it
//!   handles nothing; answers queue up, and on resume its clock comes
//!   first), or being cut off from every node (what it sends is lost).
//!
//! Everything is plain logic returning [`Action`]s; every random choice
//! comes from one generator per workload, drawn in the order of the calls.

use crate::clock::NodeClock;
use crate::workload::{Action, Reply, ReplyBody, Request, RequestBody, Tag, MAX_ATTEMPTS};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeSet;
use std::time::Duration;
use tenure_core::{Instant, NodeId};
use tenure_kv::LeaseId;

/// Shortest and longest pause between two reads of an app, ns.
pub(crate) const POLL_NS: (u64, u64) = (30_000_000, 80_000_000);
/// Shortest and longest one-way delay between an app and a node, ns.
pub(crate) const LATENCY_NS: (u64, u64) = (1_000_000, 5_000_000);
/// Longest wait before an app retries after a redirect to no new leader.
const MAX_BACKOFF_NS: u64 = 20_000_000;
/// Answers a paused app keeps for when it resumes (its socket buffer).
const MAX_APP_INBOX: usize = 64;
/// Faults of one app are this many TTLs apart, in thousandths (1 to 6 TTLs).
const FAULT_GAP_MILLI_TTL: (u64, u64) = (1_000, 6_000);
/// A fault of an app lasts this many TTLs, in thousandths (0.25 to 3).
const FAULT_LENGTH_MILLI_TTL: (u64, u64) = (250, 3_000);
/// Apps start within this long of the workload's start, ns.
const START_SPREAD_NS: u64 = 100_000_000;

/// A request out (or being retried after a redirect).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Out<K> {
    pub(crate) id: usize,
    /// What it is, in the workload's terms.
    pub(crate) kind: K,
    pub(crate) attempt: u32,
    /// It gives up then (global ns).
    pub(crate) timeout_ns: u64,
    /// Sent again then after a redirect (global ns).
    pub(crate) resend_ns: Option<u64>,
    /// When the latest attempt was sent, on the app's clock.
    pub(crate) sent_local: Instant,
    /// The session it is about.
    pub(crate) session: Option<LeaseId>,
    /// The node its latest attempt went to.
    pub(crate) node: usize,
}

/// The kind of a renewal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Renew;

/// Which request of an app an answer is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answered<K> {
    /// Its operation.
    Op(Out<K>),
    /// Its renewal.
    Renewal(Out<Renew>),
}

/// What an ended request leaves for the workload to do.
#[derive(Clone, Debug)]
pub(crate) enum Ended<K> {
    /// A renewal of the current session succeeded: the deadline moved.
    Renewed,
    /// The current session was reported gone: the app forgot it (its
    /// session, deadline and renewal) and grants a new one next.
    SessionGone,
    /// An operation ended with an answer, or without one (`None`: unknown).
    /// `current`: it was about the session the app holds now.
    Op {
        /// The operation.
        out: Out<K>,
        /// The answer.
        body: Option<ReplyBody>,
        /// About the current session.
        current: bool,
    },
    /// Nothing more to do.
    Nothing,
}

/// A fault of an app, drawn by [`Apps::fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// It crashed: its session, requests and queued answers are forgotten.
    Crash,
    /// It is paused.
    Pause,
    /// It is cut off from every node (it keeps running).
    CutOff,
}

/// One application process, as far as its session and requests go.
#[derive(Clone, Debug)]
pub(crate) struct Proc<K> {
    pub(crate) clock: NodeClock,
    /// The node it sends to.
    pub(crate) target: usize,
    gen: u64,
    /// When its timers in the event queue fire (global ns).
    wakes: BTreeSet<u64>,
    /// Crashed: restarts then (global ns).
    pub(crate) down_until: Option<u64>,
    /// Paused: resumes then (global ns).
    pub(crate) paused_until: Option<u64>,
    /// Answers that arrived while paused.
    inbox: Vec<Reply>,
    /// Cut off from every node until then (global ns).
    pub(crate) cut_until: u64,
    next_fault_ns: u64,
    pub(crate) session: Option<LeaseId>,
    /// Trusts its session until then, on its own clock.
    pub(crate) deadline: Option<Instant>,
    pub(crate) op: Option<Out<K>>,
    /// Its next operation is due then (global ns).
    pub(crate) next_op_ns: u64,
    renewal: Option<Out<Renew>>,
    next_renew_ns: u64,
}

impl<K> Proc<K> {
    /// Forgets its session, its deadline and its renewal.
    pub(crate) fn forget_session(&mut self) {
        self.session = None;
        self.deadline = None;
        self.renewal = None;
    }

    /// Up (not crashed) and not paused.
    pub(crate) fn running(&self) -> bool {
        self.down_until.is_none() && self.paused_until.is_none()
    }
}

/// The app processes of one workload, their shared random stream and the
/// numbering of their requests.
#[derive(Clone, Debug)]
pub(crate) struct Apps<K> {
    procs: Vec<Proc<K>>,
    /// The workload's random stream (its own choices draw from it too).
    pub(crate) rng: Pcg64Mcg,
    /// Client index of app 0.
    base: usize,
    nodes: usize,
    next_id: usize,
    /// How long an operation may take, ns.
    pub(crate) op_timeout_ns: u64,
    ttl_ns: u64,
    /// What an app trusts of its session after a renewal, ns on its clock.
    trusted_ns: u64,
}

impl<K: Copy> Apps<K> {
    /// `count` apps, clients `base..`, on `nodes` nodes, with sessions of
    /// `ttl_ns` of which they trust `trusted_ns`; clocks drift within
    /// `drift_ppm`; `rng` is the workload's stream.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        count: usize,
        base: usize,
        nodes: usize,
        op_timeout_ns: u64,
        ttl_ns: u64,
        trusted_ns: u64,
        drift_ppm: u32,
        seed: u64,
    ) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let drift = i64::from(drift_ppm);
        let procs = (0..count)
            .map(|_| Proc {
                clock: NodeClock::new(
                    rng.gen_range(0..1_000_000_000_000),
                    rng.gen_range(-drift..=drift),
                ),
                target: rng.gen_range(0..nodes),
                gen: 0,
                wakes: BTreeSet::new(),
                down_until: None,
                paused_until: None,
                inbox: Vec::new(),
                cut_until: 0,
                next_fault_ns: 0,
                session: None,
                deadline: None,
                op: None,
                next_op_ns: 0,
                renewal: None,
                next_renew_ns: u64::MAX,
            })
            .collect();
        Apps { procs, rng, base, nodes, next_id: 0, op_timeout_ns, ttl_ns, trusted_ns }
    }

    /// How many apps.
    pub(crate) fn len(&self) -> usize {
        self.procs.len()
    }

    /// App `a`.
    pub(crate) fn proc(&self, a: usize) -> &Proc<K> {
        &self.procs[a]
    }

    /// App `a`, to change.
    pub(crate) fn proc_mut(&mut self, a: usize) -> &mut Proc<K> {
        &mut self.procs[a]
    }

    /// The app of client index `client`, if it is one.
    pub(crate) fn of(&self, client: usize) -> Option<usize> {
        client.checked_sub(self.base).filter(|&a| a < self.procs.len())
    }

    /// A random stretch of `range` thousandths of the session TTL, ns.
    pub(crate) fn milli_ttl(&mut self, range: (u64, u64)) -> u64 {
        self.ttl_ns / 1_000 * self.rng.gen_range(range.0..=range.1)
    }

    /// Starts every app within 100 ms of `now_ns`.
    pub(crate) fn start(&mut self, now_ns: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        for a in 0..self.procs.len() {
            self.procs[a].next_op_ns = now_ns + self.rng.gen_range(0..START_SPREAD_NS);
            self.procs[a].next_fault_ns = now_ns + self.milli_ttl(FAULT_GAP_MILLI_TTL);
            actions.extend(self.wake_at(a, false));
        }
        actions
    }

    /// The faults healed: app `a` has no more faults of its own; if it is
    /// crashed, paused or cut off, that ends now (its next step restarts
    /// or resumes it).
    pub(crate) fn settle(&mut self, a: usize, now_ns: u64) {
        let app = &mut self.procs[a];
        app.next_fault_ns = u64::MAX;
        app.cut_until = app.cut_until.min(now_ns);
        app.down_until = app.down_until.map(|t| t.min(now_ns));
        app.paused_until = app.paused_until.map(|t| t.min(now_ns));
    }

    /// The app whose timer fired at `now_ns`. Every timer wakes it: a step
    /// does only what is due, so one that fires early costs a look.
    pub(crate) fn woken(&mut self, client: usize, now_ns: u64) -> Option<usize> {
        let a = self.of(client)?;
        let wakes = &mut self.procs[a].wakes;
        *wakes = wakes.split_off(&now_ns.saturating_add(1));
        Some(a)
    }

    /// An answer reaches app `a`: lost if it is down or cut off, queued if
    /// it is paused; else given back to handle now.
    pub(crate) fn accept(&mut self, a: usize, reply: Reply, now_ns: u64) -> Option<Reply> {
        let app = &mut self.procs[a];
        if app.down_until.is_some() || now_ns < app.cut_until {
            return None;
        }
        if app.paused_until.is_some() {
            if app.inbox.len() < MAX_APP_INBOX {
                app.inbox.push(reply);
            }
            return None;
        }
        Some(reply)
    }

    /// The start of a step of app `a`: a crashed app whose time came
    /// restarts (its next operation due now); a paused one resumes, and
    /// the answers it queued are given back (handle them after its clock).
    pub(crate) fn wake_up(&mut self, a: usize, now_ns: u64) -> Option<Vec<Reply>> {
        let app = &mut self.procs[a];
        if app.down_until.is_some_and(|t| now_ns >= t) {
            app.down_until = None;
            app.next_op_ns = now_ns;
        }
        if app.paused_until.is_some_and(|t| now_ns >= t) {
            app.paused_until = None;
            return Some(std::mem::take(&mut app.inbox));
        }
        None
    }

    /// Whether a fault of app `a` is due.
    pub(crate) fn fault_due(&self, a: usize, now_ns: u64) -> bool {
        now_ns >= self.procs[a].next_fault_ns
    }

    /// Draws a fault for app `a` and does what it does to the process (a
    /// crash forgets the session, the operation and the queued answers);
    /// the workload does what it means for what the session guarded.
    pub(crate) fn fault(&mut self, a: usize, now_ns: u64) -> Fault {
        self.procs[a].next_fault_ns = now_ns + self.milli_ttl(FAULT_GAP_MILLI_TTL);
        let length = self.milli_ttl(FAULT_LENGTH_MILLI_TTL);
        let app = &mut self.procs[a];
        match self.rng.gen_range(0..3) {
            0 => {
                app.forget_session();
                app.op = None;
                app.inbox.clear();
                app.down_until = Some(now_ns + length);
                Fault::Crash
            }
            1 => {
                app.paused_until = Some(now_ns + length);
                Fault::Pause
            }
            _ => {
                app.cut_until = now_ns + length;
                Fault::CutOff
            }
        }
    }

    /// When app `a`'s deadline passed (global ns, at most now), if it has.
    pub(crate) fn lapsed(&self, a: usize, now_ns: u64) -> Option<u64> {
        let app = &self.procs[a];
        let deadline = app.deadline?;
        (app.clock.local(now_ns) >= deadline).then(|| app.clock.global_at(deadline).min(now_ns))
    }

    /// Whether app `a` trusts its session now (its deadline has not passed).
    pub(crate) fn trusts(&self, a: usize, now_ns: u64) -> bool {
        let app = &self.procs[a];
        app.deadline.is_some_and(|d| app.clock.local(now_ns) < d)
    }

    /// A grant answered: app `a` takes the session unless it holds one (a
    /// late answer to an earlier grant: that lease just expires). True if
    /// it took it (the workload forgets what it held under the old one).
    pub(crate) fn granted(
        &mut self,
        a: usize,
        lease: LeaseId,
        sent_local: Instant,
        now_ns: u64,
    ) -> bool {
        let trusted = Duration::from_nanos(self.trusted_ns);
        let ttl = self.ttl_ns;
        let app = &mut self.procs[a];
        if app.session.is_some() {
            return false;
        }
        app.forget_session();
        app.session = Some(lease);
        app.deadline = Some(sent_local + trusted);
        app.next_renew_ns = now_ns + ttl / 3;
        app.next_op_ns = now_ns;
        true
    }

    /// Renews app `a`'s session when due, or sends its renewal again.
    pub(crate) fn step_renewal(&mut self, a: usize, now_ns: u64, actions: &mut Vec<Action>) {
        let Some(session) = self.procs[a].session else { return };
        match self.procs[a].renewal {
            Some(r) if now_ns >= r.timeout_ns => self.procs[a].renewal = None,
            Some(r) if r.resend_ns.is_some_and(|t| now_ns >= t) => {
                return self.send_renewal(a, r, now_ns, actions);
            }
            Some(_) => return,
            None => {}
        }
        if now_ns >= self.procs[a].next_renew_ns {
            let ttl = self.ttl_ns;
            self.procs[a].next_renew_ns = now_ns + ttl / 3;
            let out = self.new_out(Renew, Some(session), now_ns + ttl / 3);
            self.send_renewal(a, out, now_ns, actions);
        }
    }

    /// A new request of `kind` about `session`, giving up at `timeout_ns`.
    pub(crate) fn new_out<T>(
        &mut self,
        kind: T,
        session: Option<LeaseId>,
        timeout_ns: u64,
    ) -> Out<T> {
        self.next_id += 1;
        Out {
            id: self.next_id,
            kind,
            attempt: 0,
            timeout_ns,
            resend_ns: None,
            sent_local: Instant::ZERO,
            session,
            node: 0,
        }
    }

    fn send_renewal(&mut self, a: usize, out: Out<Renew>, now_ns: u64, actions: &mut Vec<Action>) {
        let out = self.stamp(a, out, now_ns);
        self.procs[a].renewal = Some(out);
        let body = RequestBody::Renew { lease: out.session.unwrap_or_default() };
        self.transmit(a, out.id, out.attempt, body, now_ns, actions);
    }

    /// Sends (a new attempt of) operation `out` of app `a` to its target
    /// node, asking `body`.
    pub(crate) fn send_op(
        &mut self,
        a: usize,
        out: Out<K>,
        body: RequestBody,
        now_ns: u64,
        actions: &mut Vec<Action>,
    ) {
        let out = self.stamp(a, out, now_ns);
        self.procs[a].op = Some(out);
        self.transmit(a, out.id, out.attempt, body, now_ns, actions);
    }

    fn stamp<T>(&self, a: usize, mut out: Out<T>, now_ns: u64) -> Out<T> {
        out.attempt += 1;
        out.resend_ns = None;
        out.sent_local = self.procs[a].clock.local(now_ns);
        out.node = self.procs[a].target;
        out
    }

    fn transmit(
        &mut self,
        a: usize,
        id: usize,
        attempt: u32,
        body: RequestBody,
        now_ns: u64,
        actions: &mut Vec<Action>,
    ) {
        if now_ns < self.procs[a].cut_until {
            return; // lost on the way
        }
        let delay_ns = self.rng.gen_range(LATENCY_NS.0..=LATENCY_NS.1);
        let tag = Tag { client: self.base + a, op: id, attempt };
        let req = Request { tag, body };
        actions.push(Action::Send { node: self.procs[a].target, req, delay_ns });
    }

    /// An answer reached app `a` (accepted, see [`Apps::accept`]): a
    /// redirect sends the request again (to the leader it names at once,
    /// else to the next node after a pause); anything else ends it.
    pub(crate) fn reply(&mut self, a: usize, reply: Reply, now_ns: u64) -> Option<Ended<K>> {
        let which = self.answered(a, reply.tag)?;
        match reply.body {
            ReplyBody::Redirect(leader) => {
                let given_up = self.redirect(a, which, leader, now_ns)?;
                Some(self.finish(a, given_up, now_ns, None))
            }
            ReplyBody::Unknown => Some(self.finish(a, which, now_ns, None)),
            body => Some(self.finish(a, which, now_ns, Some(body))),
        }
    }

    /// The request of app `a` that `tag` answers, if it still waits.
    fn answered(&self, a: usize, tag: Tag) -> Option<Answered<K>> {
        let app = &self.procs[a];
        let waits = |id: usize, attempt: u32, resend: Option<u64>| {
            id == tag.op && attempt == tag.attempt && resend.is_none()
        };
        if let Some(o) = app.op.filter(|o| waits(o.id, o.attempt, o.resend_ns)) {
            return Some(Answered::Op(o));
        }
        let r = app.renewal.filter(|r| waits(r.id, r.attempt, r.resend_ns))?;
        Some(Answered::Renewal(r))
    }

    /// A redirect naming `leader` (or none) answered `which`: it is sent
    /// again later; given back when it has been redirected too often.
    fn redirect(
        &mut self,
        a: usize,
        which: Answered<K>,
        leader: Option<NodeId>,
        now_ns: u64,
    ) -> Option<Answered<K>> {
        let (attempt, node) = match which {
            Answered::Op(o) => (o.attempt, o.node),
            Answered::Renewal(r) => (r.attempt, r.node),
        };
        if attempt >= MAX_ATTEMPTS {
            return Some(which);
        }
        let asked = self.procs[a].target;
        let named = leader
            .and_then(|l: NodeId| usize::try_from(l.0).ok()?.checked_sub(1))
            .filter(|&l| l < self.nodes);
        // No leader named: the node after the one that answered, as
        // tenure's client moves to its next endpoint
        // (crates/client/src/cluster.rs). A random node kept apps among
        // nodes that are no members (wiped, not added again) for seconds:
        // raft membership seed 498. (Unless another request moved it
        // meanwhile, as `op_failed` and tenure's client do.)
        let target = match named {
            Some(leader) => leader,
            None if asked == node => (node + 1) % self.nodes,
            None => asked,
        };
        self.procs[a].target = target;
        let pause = if named.is_some() && target != asked {
            0
        } else {
            self.rng.gen_range(1..=MAX_BACKOFF_NS)
        };
        let resend_ns = Some(now_ns + pause);
        match which {
            Answered::Op(o) => self.procs[a].op = Some(Out { resend_ns, ..o }),
            Answered::Renewal(r) => self.procs[a].renewal = Some(Out { resend_ns, ..r }),
        }
        None
    }

    /// Request `which` of app `a` ended, with `body` or unknown (`None`).
    fn finish(
        &mut self,
        a: usize,
        which: Answered<K>,
        now_ns: u64,
        body: Option<ReplyBody>,
    ) -> Ended<K> {
        let session = match which {
            Answered::Op(o) => o.session,
            Answered::Renewal(r) => r.session,
        };
        if matches!(which, Answered::Renewal(_)) {
            self.procs[a].renewal = None;
        } else {
            self.procs[a].op = None;
            let think = self.rng.gen_range(POLL_NS.0..=POLL_NS.1);
            self.procs[a].next_op_ns = now_ns + think;
        }
        let trusted = Duration::from_nanos(self.trusted_ns);
        let app = &mut self.procs[a];
        let current = session.is_some() && session == app.session;
        match (which, body) {
            (Answered::Renewal(r), Some(ReplyBody::Renewed { .. })) if current => {
                app.deadline = app.deadline.max(Some(r.sent_local + trusted));
                Ended::Renewed
            }
            (_, Some(ReplyBody::SessionGone(lease))) if session == Some(lease) && current => {
                app.forget_session();
                app.next_op_ns = now_ns;
                Ended::SessionGone
            }
            (Answered::Op(out), body) => Ended::Op { out, body, current },
            (Answered::Renewal(_), _) => Ended::Nothing,
        }
    }

    /// Operation `op` of app `a` got no answer in time: the app tries the
    /// node after the one it asked (not after its target now, which its
    /// renewals may have moved to the leader meanwhile: raft membership
    /// seed 10's app went from the leader to the next node, a spare outside
    /// the cluster that held its resignation silently, every time, while
    /// its renewals kept its session and candidacy alive).
    pub(crate) fn op_failed(&mut self, a: usize, op: Out<K>, now_ns: u64) -> Ended<K> {
        if self.procs[a].target == op.node {
            self.procs[a].target = (op.node + 1) % self.nodes;
        }
        self.finish(a, Answered::Op(op), now_ns, None)
    }

    /// The next time app `a` has something to do, as a wake of its timer;
    /// `watch_deadline`: its deadline too (it holds something it guards).
    /// None when a timer of its in the queue fires no later (its step then
    /// sets the next one): a new timer per step, the older ones left stale,
    /// overflowed the event queue with 100,000 apps (a million timers, ten
    /// per app, mostly the same request's timeout again after each
    /// redirect).
    pub(crate) fn wake_at(&mut self, a: usize, watch_deadline: bool) -> Option<Action> {
        let app = &self.procs[a];
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
            if let (Some(d), true) = (app.deadline, watch_deadline) {
                at = at.min(app.clock.global_at(d));
            }
        }
        let client = self.base + a;
        let app = &mut self.procs[a];
        if app.wakes.first().is_some_and(|&w| w <= at) {
            return None;
        }
        app.gen += 1;
        app.wakes.insert(at);
        Some(Action::Wake { client, at_ns: at, gen: app.gen })
    }
}

/// The workload's side of its apps ([`crate::elect`],
/// [`crate::partitions`]): what their sessions guard and what they ask.
/// The steps every app takes are [`step`], [`on_wake`], [`on_reply`] and
/// [`settle`].
pub(crate) trait Role {
    /// What an operation is, in the workload's terms.
    type Kind: Copy;
    /// The apps.
    fn apps(&self) -> &Apps<Self::Kind>;
    /// The apps, to change.
    fn apps_mut(&mut self) -> &mut Apps<Self::Kind>;
    /// Stops what app `a`'s session guards if its deadline passed.
    fn check_deadline(&mut self, a: usize, now_ns: u64);
    /// `fault` hit app `a` ([`Apps::fault`] did the process's part).
    fn faulted(&mut self, a: usize, fault: Fault, now_ns: u64);
    /// A request of app `a` ended.
    fn ended(&mut self, a: usize, ended: Ended<Self::Kind>, now_ns: u64);
    /// App `a`'s next operation (its last one is done and the next due).
    fn next_op(&mut self, a: usize, now_ns: u64) -> Self::Kind;
    /// What operation `out` of app `a` asks.
    fn body(&self, a: usize, out: Out<Self::Kind>) -> RequestBody;
    /// Whether app `a` must wake at its deadline (its session guards
    /// something now).
    fn watches_deadline(&self, a: usize) -> bool;
}

/// A timer of app client `client` fired (any of them: see
/// [`Apps::woken`]).
pub(crate) fn on_wake<R: Role>(r: &mut R, client: usize, now_ns: u64) -> Vec<Action> {
    match r.apps_mut().woken(client, now_ns) {
        Some(a) => step(r, a, now_ns),
        None => Vec::new(),
    }
}

/// An answer reached app client `reply.tag.client`.
pub(crate) fn on_reply<R: Role>(r: &mut R, reply: Reply, now_ns: u64) -> Vec<Action> {
    let Some(a) = r.apps().of(reply.tag.client) else { return Vec::new() };
    let Some(reply) = r.apps_mut().accept(a, reply, now_ns) else { return Vec::new() };
    handle_reply(r, a, reply, now_ns);
    step(r, a, now_ns)
}

/// The faults healed: no app has faults of its own any more; crashed apps
/// restart, paused and cut-off ones resume.
pub(crate) fn settle<R: Role>(r: &mut R, now_ns: u64) -> Vec<Action> {
    let mut actions = Vec::new();
    for a in 0..r.apps().len() {
        r.apps_mut().settle(a, now_ns);
        actions.extend(step(r, a, now_ns));
    }
    actions
}

/// Everything due for app `a` at `now_ns`, then its next wake.
pub(crate) fn step<R: Role>(r: &mut R, a: usize, now_ns: u64) -> Vec<Action> {
    let mut actions = Vec::new();
    if let Some(inbox) = r.apps_mut().wake_up(a, now_ns) {
        // First its clock, then what queued up.
        r.check_deadline(a, now_ns);
        for reply in inbox {
            handle_reply(r, a, reply, now_ns);
        }
    }
    if !r.apps().proc(a).running() {
        actions.extend(wake_at(r, a));
        return actions;
    }
    r.check_deadline(a, now_ns);
    if r.apps().fault_due(a, now_ns) {
        let fault = r.apps_mut().fault(a, now_ns);
        r.faulted(a, fault, now_ns);
        if fault != Fault::CutOff {
            actions.extend(wake_at(r, a));
            return actions;
        }
    }
    r.apps_mut().step_renewal(a, now_ns, &mut actions);
    step_op(r, a, now_ns, &mut actions);
    actions.extend(wake_at(r, a));
    actions
}

fn handle_reply<R: Role>(r: &mut R, a: usize, reply: Reply, now_ns: u64) {
    if let Some(ended) = r.apps_mut().reply(a, reply, now_ns) {
        r.ended(a, ended, now_ns);
    }
}

/// App `a`'s operation: given up at its timeout, sent again after a
/// redirect, or, once done and the next one due, the next one.
fn step_op<R: Role>(r: &mut R, a: usize, now_ns: u64, actions: &mut Vec<Action>) {
    match r.apps().proc(a).op {
        Some(op) if now_ns >= op.timeout_ns => {
            let ended = r.apps_mut().op_failed(a, op, now_ns);
            r.ended(a, ended, now_ns);
        }
        Some(op) if op.resend_ns.is_some_and(|t| now_ns >= t) => {
            let body = r.body(a, op);
            return r.apps_mut().send_op(a, op, body, now_ns, actions);
        }
        Some(_) => return,
        None => {}
    }
    if now_ns < r.apps().proc(a).next_op_ns {
        return;
    }
    // The session it holds now (an operation may end it, a revocation).
    let session = r.apps().proc(a).session;
    let kind = r.next_op(a, now_ns);
    let timeout = now_ns + r.apps().op_timeout_ns;
    let out = r.apps_mut().new_out(kind, session, timeout);
    let body = r.body(a, out);
    r.apps_mut().send_op(a, out, body, now_ns, actions);
}

fn wake_at<R: Role>(r: &mut R, a: usize) -> Option<Action> {
    let watch = r.watches_deadline(a);
    r.apps_mut().wake_at(a, watch)
}

/// One holder's stretch of holding something (an election's name, a
/// partition) on the global timeline, as the checkers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    /// The holder's session.
    pub(crate) session: LeaseId,
    /// Its fencing token (a name's) or epoch (a partition's).
    pub(crate) token: u64,
    /// When it began (global ns).
    pub(crate) start_ns: u64,
    /// When it ended (global ns); `None`: it still holds.
    pub(crate) end_ns: Option<u64>,
}

/// A rule broken between two stretches of one thing (indices into the
/// stretches given to [`clashes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clash {
    /// `later` began while `earlier`, another session's, still held (until
    /// `earlier_end_ns`): they overlap by `overlap_ns`.
    Overlap {
        /// The stretch that held.
        earlier: usize,
        /// The stretch that began.
        later: usize,
        /// When `earlier` ended (or now).
        earlier_end_ns: u64,
        /// How long both held.
        overlap_ns: u64,
    },
    /// `later`'s token is not above `earlier`'s, the stretch before it (and
    /// it is not the same session going on with the same token).
    Token {
        /// The stretch before.
        earlier: usize,
        /// The stretch after.
        later: usize,
    },
}

/// The broken rules among the stretches of one thing, sorted by start
/// (those still open end at `now_ns`): no two sessions hold at once, and
/// tokens strictly increase from one holder to the next.
pub(crate) fn clashes(spans: &[Span], now_ns: u64) -> Vec<Clash> {
    let mut found = Vec::new();
    let end = |s: &Span| s.end_ns.unwrap_or(now_ns);
    // The stretch that ends last so far.
    let mut latest: Option<usize> = None;
    for (k, l) in spans.iter().enumerate() {
        if let Some(e) = latest {
            let p = &spans[e];
            if p.session != l.session && l.start_ns < end(p) {
                let overlap_ns = end(p).min(end(l)) - l.start_ns;
                found.push(Clash::Overlap {
                    earlier: e,
                    later: k,
                    earlier_end_ns: end(p),
                    overlap_ns,
                });
            }
        }
        if let Some(p) = k.checked_sub(1).map(|p| &spans[p]) {
            if !(l.token > p.token || (l.token == p.token && l.session == p.session)) {
                found.push(Clash::Token { earlier: k - 1, later: k });
            }
        }
        if latest.is_none_or(|e| end(&spans[e]) < end(l)) {
            latest = Some(k);
        }
    }
    found
}
