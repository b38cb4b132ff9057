//! The forger: a stranger on the network that, at random times, delivers
//! frames to a node as if another voter had sent them (the transport's sender
//! id is whatever the forger claims). It is not a node: it has no state the
//! checkers watch, casts no vote and never leads. It models a peer that is
//! buggy or malicious, or a stranger on a cluster that runs without TLS.
//!
//! The forger eavesdrops (with TLS off every frame is readable): it knows
//! every node's term, role, known leader, last LSN and clock, and it reads
//! the poll and election messages the nodes send, so its frames can answer
//! them. It never forges what no rule can refuse without authentication —
//! a vote or promise in a term the cluster really uses, an acknowledgement
//! of a heartbeat really sent, a frame from the leader a node follows —
//! only the frames of the attacks below. Resignations, transfers and claims
//! speak for a bystander: a voter that neither leads, nor is any node's
//! known leader, nor was posed as leading by the forger within two
//! election timeouts (nodes may still hold a lease on it); the simulator
//! withholds such a frame if, by the time it arrives, its bystander has
//! become the destination's leader (see [`Frame::from_bystander`]). What
//! each attack must leave intact is in [`Promise`] and [`crate::hostile`].
//!
//! # Attacks
//!
//! * [`Attack::MaxTerm`]: every message kind that carries a term, with a term
//!   at or near `u64::MAX`, anywhere from [`FORGED_TERM_FLOOR`] up (for Paxos
//!   ballots of the claimed sender's rank).
//! * [`Attack::RisingTerm`]: a leader heartbeat (raft `Heartbeat`, ranked
//!   `Lead`, Paxos `Commit`) from a voter that does not lead, in a term
//!   above everyone's, to every other node, every few heartbeats.
//! * [`Attack::HugeEcho`]: heartbeat acknowledgements (raft
//!   `HeartbeatResponse`, ranked `LeadAck`, Paxos `CommitAck`) to a leader,
//!   in its term, echoing a send time of `u64::MAX` or in the future (and,
//!   ranked, a `LeadAck` counter above any `Lead` sent).
//! * [`Attack::ForgedResign`]: a `Resign` from a voter that is neither
//!   leading nor the leader the destination follows, naming a successor.
//! * [`Attack::ForgedTransfer`]: a transfer campaign by a voter that no
//!   leader named: raft `Vote { transfer: true }`, ranked `Elect { transfer:
//!   Some(_) }`, Paxos `Prepare { handover: Some(_) }`.
//! * [`Attack::ForgedClaim`]: claims of what the sender saw, with huge
//!   numbers: ranked `Elect` claims with huge LSNs and vote delays; the
//!   other protocols' counterparts are Paxos poll answers with huge
//!   committed slots, heartbeat evidence and busy times, and raft pre-vote
//!   refusals claiming a huge lease.
//!
//! # Bound
//!
//! The forger sends at most `frames_per_second` frames per second of
//! simulated time, itself at most [`MAX_FORGED_FRAMES_PER_SECOND`]: after a
//! burst of `k` frames (one per destination of a forged broadcast) its next
//! burst comes at least `k / frames_per_second` seconds later.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tenure_core::paxos::{BALLOT_NODES, LOW_BALL};
use tenure_core::{Instant, Lsn, Message, NodeId, PaxosMessage, ProtocolKind, RankedMessage};
use tenure_core::{Role, Term};

/// The most forged frames per second of simulated time a forger may send.
pub const MAX_FORGED_FRAMES_PER_SECOND: u32 = 200;
/// Forged frames per second unless told otherwise.
pub const DEFAULT_FORGED_FRAMES_PER_SECOND: u32 = 50;
/// The lowest term a [`Attack::MaxTerm`] frame carries: `2^63`, the first
/// term above the largest a node may ever reach (`2^63 - 1`). Terms the
/// forger sends in its other attacks stay far below it, so a node that ever
/// holds a term at or above it was moved by a max-term frame.
pub const FORGED_TERM_FLOOR: u64 = 1 << 63;
/// Shortest and longest delay of a forged frame, in nanoseconds.
const FORGED_LATENCY_NS: (u64, u64) = (1_000_000, 5_000_000);
/// Seeds the forger's own random stream from the run's seed, so that its
/// choices do not shift the draws of the network and the fault schedule.
const FORGER_SEED_SALT: u64 = 0xF0_4E_D0_F7_A1_5E_5E_ED;

/// One kind of forged frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// Any term-carrying message with a term at or near `u64::MAX`.
    MaxTerm,
    /// Leader heartbeats from a non-leader in a term above everyone's.
    RisingTerm,
    /// Heartbeat acknowledgements echoing `u64::MAX` or the future.
    HugeEcho,
    /// `Resign` from a node that does not lead.
    ForgedResign,
    /// Transfer campaigns by a node no leader named.
    ForgedTransfer,
    /// Claims with huge LSNs, slots, leases or delays.
    ForgedClaim,
}

impl Attack {
    /// Every attack, in the order `--forger all` names them.
    pub const ALL: [Attack; 6] = [
        Attack::MaxTerm,
        Attack::RisingTerm,
        Attack::HugeEcho,
        Attack::ForgedResign,
        Attack::ForgedTransfer,
        Attack::ForgedClaim,
    ];

    /// The name used by `--forger`.
    pub fn name(self) -> &'static str {
        match self {
            Attack::MaxTerm => "max-term",
            Attack::RisingTerm => "rising-term",
            Attack::HugeEcho => "huge-echo",
            Attack::ForgedResign => "forged-resign",
            Attack::ForgedTransfer => "forged-transfer",
            Attack::ForgedClaim => "forged-claim",
        }
    }

    /// What the core promises under this attack (see [`Promise`]).
    pub fn promise(self) -> Promise {
        match self {
            Attack::MaxTerm | Attack::HugeEcho | Attack::ForgedResign => Promise::Refused,
            Attack::ForgedTransfer | Attack::ForgedClaim => Promise::LeaderKept,
            Attack::RisingTerm => Promise::SafetyWhileRunning,
        }
    }

    fn index(self) -> usize {
        Attack::ALL.iter().position(|&a| a == self).expect("listed")
    }
}

impl fmt::Display for Attack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the cluster must show under an attack, weakest first. Under every
/// attack, while it runs and after, every safety checker stays green; and
/// under all but [`Promise::SafetyWhileRunning`], once the forger stops, a
/// stable leader within the usual liveness bound and no node ever in a
/// forged term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Promise {
    /// A stranger wins these without authentication (every node follows a
    /// leader that does not exist: what TLS is for): safety only while they
    /// run. Once they stop, the forged leader is a crashed one.
    SafetyWhileRunning,
    /// Followers' leases refuse these frames, so a stable leader keeps its
    /// office while they arrive; but to a node that is electing they look
    /// like a real candidate's, so an election may be held up until they
    /// stop.
    LeaderKept,
    /// The core refuses these frames: they change nothing. While they
    /// arrive the cluster recovers from every fault within the liveness
    /// bound, and a stable leader keeps its office.
    Refused,
}

impl Promise {
    /// A short description, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Promise::SafetyWhileRunning => "safety while running",
            Promise::LeaderKept => "leader kept, liveness once stopped",
            Promise::Refused => "refused: no effect",
        }
    }
}

/// A bad `--forger` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownAttack(pub String);

impl fmt::Display for UnknownAttack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Attack::ALL.iter().map(|a| a.name()).collect();
        write!(f, "unknown attack {:?}; use all or a list of: {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownAttack {}

impl FromStr for Attack {
    type Err = UnknownAttack;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Attack::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| UnknownAttack(s.into()))
    }
}

/// Which attacks a forger mounts, and how fast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgerSpec {
    /// The attacks; each burst draws one of them. Never empty.
    pub attacks: Vec<Attack>,
    /// Forged frames per second, at most [`MAX_FORGED_FRAMES_PER_SECOND`].
    pub frames_per_second: u32,
}

impl ForgerSpec {
    /// Every attack at the default rate.
    pub fn all() -> Self {
        ForgerSpec::only(&Attack::ALL)
    }

    /// The given attacks at the default rate.
    pub fn only(attacks: &[Attack]) -> Self {
        let mut attacks = attacks.to_vec();
        attacks.sort_unstable();
        attacks.dedup();
        assert!(!attacks.is_empty(), "a forger needs an attack");
        ForgerSpec { attacks, frames_per_second: DEFAULT_FORGED_FRAMES_PER_SECOND }
    }

    /// What the cluster must show under all of these attacks together: the
    /// weakest of their promises.
    pub fn promise(&self) -> Promise {
        self.attacks.iter().map(|a| a.promise()).min().unwrap_or(Promise::Refused)
    }
}

impl FromStr for ForgerSpec {
    type Err = UnknownAttack;
    /// `all`, or attack names separated by commas.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "all" {
            return Ok(ForgerSpec::all());
        }
        let attacks = s.split(',').map(str::trim).map(str::parse).collect::<Result<Vec<_>, _>>()?;
        if attacks.is_empty() {
            return Err(UnknownAttack(s.into()));
        }
        Ok(ForgerSpec::only(&attacks))
    }
}

impl fmt::Display for ForgerSpec {
    /// `all` or the comma-separated attack names (as `--forger` takes them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.attacks == Attack::ALL {
            return f.write_str("all");
        }
        let names: Vec<&str> = self.attacks.iter().map(|a| a.name()).collect();
        f.write_str(&names.join(","))
    }
}

/// What the forger sees of one node (index `i`, id `i + 1`) at one moment.
#[derive(Clone, Copy, Debug)]
pub struct NodeView {
    /// The node's id.
    pub id: NodeId,
    /// False while crashed: nothing else is known.
    pub up: bool,
    /// Its term (Paxos: highest promised ballot).
    pub term: Term,
    /// Its role.
    pub role: Role,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// The last LSN it issued or accepted.
    pub lsn: Option<Lsn>,
    /// Its clock now.
    pub local_now: Instant,
}

/// One forged frame: deliver `msg` to node index `to` as sent by `from`,
/// `delay_ns` from now.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Destination index.
    pub to: usize,
    /// The voter the frame claims to come from.
    pub from: NodeId,
    /// The message.
    pub msg: Message,
    /// Delay before delivery.
    pub delay_ns: u64,
    /// The frame speaks for a bystander (forged resignations, transfers
    /// and claims): if `from` has become the destination's leader by the
    /// time it arrives (it was a candidate about to win), the simulator
    /// withholds it — a frame from the leader a node follows is another
    /// attack, one no rule can refuse without authentication.
    pub from_bystander: bool,
}

/// What the forger read off the wire: per node index, its latest poll or
/// election message, so that forged answers can match it.
#[derive(Clone, Debug, Default)]
struct Sniffed {
    /// Raft: the term of the node's latest `PreVote`.
    pre_vote: Option<Term>,
    /// Ranked: the send time of the node's latest `Elect`.
    elect_sent_at: Option<u64>,
    /// Paxos: the attempt of the node's latest poll.
    poll_attempt: Option<u64>,
}

/// Forged frames sent, per attack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ForgedCounts {
    /// Frames per attack, in the order of [`Attack::ALL`].
    pub per_attack: [u64; 6],
}

impl ForgedCounts {
    /// All frames.
    pub fn total(&self) -> u64 {
        self.per_attack.iter().sum()
    }

    /// Frames of `attack`.
    pub fn of(&self, attack: Attack) -> u64 {
        self.per_attack[attack.index()]
    }

    /// Adds another count.
    pub fn add(&mut self, other: &ForgedCounts) {
        for (a, b) in self.per_attack.iter_mut().zip(other.per_attack) {
            *a += b;
        }
    }
}

/// A running forger.
#[derive(Clone, Debug)]
pub struct Forger {
    spec: ForgerSpec,
    protocol: ProtocolKind,
    rng: Pcg64Mcg,
    sniffed: Vec<Sniffed>,
    /// Rising term: the forged leader, its term and its last heartbeat counter.
    rising: Option<(NodeId, Term, u64)>,
    /// Per node index: when (global time) the forger last posed as that node
    /// leading, in a rising-term heartbeat.
    posed_as_leader: Vec<Option<u64>>,
    /// The nodes' election timeout: how long a follower's lease on a leader,
    /// forged or not, lasts.
    election_timeout_ns: u64,
    /// Frames sent so far.
    pub sent: ForgedCounts,
    /// Bursts sent so far.
    pub bursts: u64,
}

impl Forger {
    /// A forger of `spec` against a cluster of `nodes` nodes running
    /// `protocol` with `election_timeout`, drawing from its own stream seeded
    /// by the run's `seed`.
    pub fn new(
        spec: ForgerSpec,
        protocol: ProtocolKind,
        nodes: usize,
        election_timeout: Duration,
        seed: u64,
    ) -> Self {
        assert!(!spec.attacks.is_empty(), "a forger needs an attack");
        assert!(
            (1..=MAX_FORGED_FRAMES_PER_SECOND).contains(&spec.frames_per_second),
            "forged frames per second must be within 1..={MAX_FORGED_FRAMES_PER_SECOND}"
        );
        Forger {
            spec,
            protocol,
            rng: Pcg64Mcg::seed_from_u64(seed ^ FORGER_SEED_SALT),
            sniffed: vec![Sniffed::default(); nodes],
            rising: None,
            posed_as_leader: vec![None; nodes],
            election_timeout_ns: u64::try_from(election_timeout.as_nanos()).unwrap_or(u64::MAX),
            sent: ForgedCounts::default(),
            bursts: 0,
        }
    }

    /// The attacks and rate.
    pub fn spec(&self) -> &ForgerSpec {
        &self.spec
    }

    /// Delay before the first burst: up to one second.
    pub fn first_delay_ns(&mut self) -> u64 {
        self.rng.gen_range(0..=1_000_000_000)
    }

    /// Reads a message node index `from` sent.
    pub fn sniff(&mut self, from: usize, msg: &Message) {
        let Some(s) = self.sniffed.get_mut(from) else { return };
        match msg {
            Message::PreVote { term, .. } => s.pre_vote = Some(*term),
            Message::Ranked(RankedMessage::Elect { sent_at_nanos, .. }) => {
                s.elect_sent_at = Some(*sent_at_nanos)
            }
            Message::Paxos(PaxosMessage::Prepare { ballot, attempt, .. })
                if *ballot == LOW_BALL =>
            {
                s.poll_attempt = Some(*attempt)
            }
            _ => {}
        }
    }

    /// One burst at global time `now_ns`: the frames to deliver, and the
    /// delay before the next burst (which keeps the rate within
    /// `frames_per_second`).
    pub fn burst(&mut self, now_ns: u64, view: &[NodeView]) -> (Vec<Frame>, u64) {
        let attack = *self.spec.attacks.choose(&mut self.rng).expect("not empty");
        let mut frames = Vec::new();
        if view.len() >= 2 {
            // Nodes may still hold a lease on a leader the forger posed as
            // for an election timeout after its last forged heartbeat (twice
            // that, for drifting clocks): frames from it are a leader's.
            let window = self.election_timeout_ns.saturating_mul(2);
            let posed: Vec<NodeId> = (0..view.len())
                .filter(|&i| self.posed_as_leader[i].is_some_and(|t| now_ns < t + window))
                .map(|i| view[i].id)
                .collect();
            let mut ctx = Ctx {
                rng: &mut self.rng,
                view,
                protocol: self.protocol,
                posed: &posed,
                out: &mut frames,
            };
            match attack {
                Attack::MaxTerm => ctx.huge_terms(&self.sniffed),
                Attack::RisingTerm => {
                    if let Some(i) = ctx.rising_term(&mut self.rising) {
                        self.posed_as_leader[i] = Some(now_ns);
                    }
                }
                Attack::HugeEcho => ctx.huge_echo(),
                Attack::ForgedResign => ctx.forged_resign(),
                Attack::ForgedTransfer => ctx.forged_transfer(),
                Attack::ForgedClaim => ctx.forged_claim(&self.sniffed),
            }
            if matches!(attack, Attack::ForgedResign | Attack::ForgedTransfer | Attack::ForgedClaim)
            {
                ctx.mark_bystander_frames();
            }
        }
        let k = frames.len().max(1) as u64;
        self.sent.per_attack[attack.index()] += frames.len() as u64;
        self.bursts += 1;
        let spacing = k * 1_000_000_000 / u64::from(self.spec.frames_per_second);
        let gap = self.rng.gen_range(spacing..=2 * spacing);
        (frames, gap)
    }
}

/// The simulator numbers voters `1..=n`: a voter's index in per-node
/// tables is its id minus one.
fn index(id: NodeId) -> usize {
    usize::try_from(id.0 - 1).expect("a small id")
}

/// `id`'s smallest Paxos ballot above `above`, if there is one.
fn ballot_above(above: Term, id: NodeId) -> Option<Term> {
    let counter = (above.0 / BALLOT_NODES).checked_add(1)?;
    counter.checked_mul(BALLOT_NODES)?.checked_add(id.0).map(Term)
}

/// The random parts of one max-term frame to node `y`: the huge term `t`, a
/// random number `r` for the other fields and a coin `flag`.
struct Draw {
    t: Term,
    r: u64,
    flag: bool,
    y: NodeView,
}

/// Raft message `kind` (of 7) carrying the huge term.
fn huge_raft(kind: u32, d: &Draw) -> Message {
    let Draw { t, r, flag, y } = *d;
    match kind {
        0 => Message::PreVote { term: t, freshness: tenure_core::Freshness::BOOTSTRAP },
        1 => Message::PreVoteResponse {
            term: t,
            proposed: Term(y.term.0.saturating_add(1)),
            granted: flag,
            lease_remaining_ms: None,
        },
        2 => {
            Message::Vote { term: t, transfer: flag, freshness: tenure_core::Freshness::BOOTSTRAP }
        }
        3 => Message::VoteResponse { term: t, granted: flag },
        4 => Message::Heartbeat { term: t, counter: r % 1000, sent_at_nanos: r },
        5 => Message::HeartbeatResponse { term: t, ok: flag, echo_sent_at_nanos: r },
        _ => Message::Resign { term: t, successor: flag.then_some(y.id) },
    }
}

/// Ranked message `kind` (of 5) carrying the huge term; a `Vote` echoes `echo`.
fn huge_ranked(kind: u32, d: &Draw, echo: u64) -> RankedMessage {
    let Draw { t, r, flag, y } = *d;
    match kind {
        0 => RankedMessage::Elect {
            term: t,
            claim: flag.then_some(Lsn { term: t, counter: r % 1000 }),
            sent_at_nanos: y.local_now.as_nanos(),
            transfer: (r % 2 == 0).then_some(t),
            vote_in_nanos: r % 1_000_000_000,
            freshness: tenure_core::Freshness::BOOTSTRAP,
            leaving: false,
            stands: true,
        },
        1 => RankedMessage::Vote { term: t, echo_sent_at_nanos: echo },
        2 => RankedMessage::Lead { term: t, counter: r % 1000, sent_at_nanos: r },
        3 => RankedMessage::LeadAck { term: t, ok: flag, counter: r % 1000, echo_sent_at_nanos: r },
        _ => RankedMessage::Resign { term: t, successor: flag.then_some(y.id) },
    }
}

/// Paxos message `kind` (of 9) carrying the huge term: `b`, a huge ballot of
/// the claimed sender's rank, where the sender's own ballot goes.
fn huge_paxos(kind: u32, d: &Draw, b: Term) -> PaxosMessage {
    let Draw { t, r, flag, y } = *d;
    let slot = r % 10;
    match kind {
        0 => PaxosMessage::Prepare {
            ballot: b,
            attempt: r % 100,
            handover: flag.then_some(b),
            freshness: tenure_core::Freshness::BOOTSTRAP,
        },
        1 => PaxosMessage::PrepareAck {
            ballot: t,
            attempt: r % 100,
            committed: slot,
            accepted_slot: slot,
        },
        2 => PaxosMessage::PrepareNack {
            ballot: if flag { LOW_BALL } else { y.term },
            attempt: r % 100,
            promised: t,
            committed: slot,
            heartbeat: None,
            busy_ms: None,
        },
        3 => PaxosMessage::Accept { ballot: b, slot, freshness: tenure_core::Freshness::BOOTSTRAP },
        4 => PaxosMessage::AcceptAck { ballot: t, slot },
        5 => PaxosMessage::AcceptNack { ballot: y.term, promised: t },
        6 => PaxosMessage::Commit { ballot: b, slot, heartbeat: r % 1000, sent_at_nanos: r },
        7 => {
            PaxosMessage::CommitAck { ballot: y.term, ok: flag, promised: t, echo_sent_at_nanos: r }
        }
        _ => PaxosMessage::Resign { ballot: b, successor: flag.then_some(y.id) },
    }
}

/// Builds the frames of one burst.
struct Ctx<'a> {
    rng: &'a mut Pcg64Mcg,
    view: &'a [NodeView],
    protocol: ProtocolKind,
    /// Voters the forger recently posed as leading (rising term).
    posed: &'a [NodeId],
    out: &'a mut Vec<Frame>,
}

impl Ctx<'_> {
    fn send(&mut self, to: usize, from: NodeId, msg: Message) {
        let delay_ns = self.rng.gen_range(FORGED_LATENCY_NS.0..=FORGED_LATENCY_NS.1);
        self.out.push(Frame { to, from, msg, delay_ns, from_bystander: false });
    }

    fn n(&self) -> usize {
        self.view.len()
    }

    /// Marks the frames sent so far as speaking for a bystander.
    fn mark_bystander_frames(&mut self) {
        self.out.iter_mut().for_each(|f| f.from_bystander = true);
    }

    /// A random node index.
    fn any(&mut self) -> usize {
        self.rng.gen_range(0..self.n())
    }

    /// A random voter other than node index `not`.
    fn other_than(&mut self, not: usize) -> NodeId {
        let k = self.rng.gen_range(1..self.n());
        self.view[(not + k) % self.n()].id
    }

    /// The highest term any running node holds.
    fn highest_term(&self) -> Term {
        self.view.iter().filter(|v| v.up).map(|v| v.term).max().unwrap_or_default()
    }

    /// Indices of running nodes in the leader role.
    fn leaders(&self) -> Vec<usize> {
        (0..self.n()).filter(|&i| self.view[i].up && self.view[i].role == Role::Leader).collect()
    }

    /// A random voter that is not in the leader role (any voter if all are).
    fn non_leader(&mut self) -> NodeId {
        let ids: Vec<NodeId> =
            self.view.iter().filter(|v| v.role != Role::Leader).map(|v| v.id).collect();
        match ids.choose(self.rng) {
            Some(&id) => id,
            None => self.view[self.any()].id,
        }
    }

    /// A voter that neither leads, nor is anyone's known leader, nor was
    /// recently posed as leading by the forger (nodes may still hold a lease
    /// on it), if any.
    fn bystander(&mut self) -> Option<NodeId> {
        let led: Vec<NodeId> = self.view.iter().filter_map(|v| v.leader).collect();
        let free: Vec<NodeId> = self
            .view
            .iter()
            .filter(|v| v.role != Role::Leader && !led.contains(&v.id))
            .filter(|v| !self.posed.contains(&v.id))
            .map(|v| v.id)
            .collect();
        free.choose(self.rng).copied()
    }

    /// A term at or near `u64::MAX`, never below [`FORGED_TERM_FLOOR`].
    fn huge(&mut self) -> u64 {
        match self.rng.gen_range(0..5) {
            0 => u64::MAX,
            1 => u64::MAX - 1,
            2 => FORGED_TERM_FLOOR,
            3 => FORGED_TERM_FLOOR + 1,
            _ => self.rng.gen_range(FORGED_TERM_FLOOR..=u64::MAX),
        }
    }

    /// A huge Paxos ballot of `from` (at least [`FORGED_TERM_FLOOR`], its
    /// counter part a multiple of [`BALLOT_NODES`]).
    fn huge_ballot(&mut self, from: NodeId) -> Term {
        Term((self.huge() & !(BALLOT_NODES - 1)) | from.0)
    }

    // ---- Attacks ----

    /// One message of a random term-carrying kind, with a huge term, to a
    /// random node. A ranked `Vote` echoes the destination's latest `Elect`
    /// (read off the wire), so that it would count if its term were taken.
    fn huge_terms(&mut self, sniffed: &[Sniffed]) {
        let to = self.any();
        let from = self.other_than(to);
        let d = Draw {
            t: Term(self.huge()),
            r: self.rng.gen(),
            flag: self.rng.gen_bool(0.5),
            y: self.view[to],
        };
        let msg = match self.protocol {
            ProtocolKind::Raft => huge_raft(self.rng.gen_range(0..7), &d),
            ProtocolKind::Ranked => {
                let echo = sniffed[to].elect_sent_at.unwrap_or(d.r);
                huge_ranked(self.rng.gen_range(0..5), &d, echo).into()
            }
            ProtocolKind::Paxos => {
                let b = self.huge_ballot(from);
                huge_paxos(self.rng.gen_range(0..9), &d, b).into()
            }
        };
        self.send(to, from, msg);
    }

    /// A heartbeat from a voter that does not lead, in a term above
    /// everyone's (a new one each time the cluster caught up), to every
    /// other node. Returns the index of the node it posed as.
    fn rising_term(&mut self, rising: &mut Option<(NodeId, Term, u64)>) -> Option<usize> {
        let max = self.highest_term();
        let (from, term, counter) = match *rising {
            Some((from, term, counter)) if term > max => (from, term, counter + 1),
            _ => {
                let from = self.non_leader();
                let term = match self.protocol {
                    ProtocolKind::Paxos => ballot_above(max, from),
                    ProtocolKind::Raft | ProtocolKind::Ranked => max.0.checked_add(1).map(Term),
                };
                let term = term?;
                (from, term, 1)
            }
        };
        *rising = Some((from, term, counter));
        let sent_at_nanos = self.view[index(from)].local_now.as_nanos();
        let msg = match self.protocol {
            ProtocolKind::Raft => Message::Heartbeat { term, counter, sent_at_nanos },
            ProtocolKind::Ranked => RankedMessage::Lead { term, counter, sent_at_nanos }.into(),
            ProtocolKind::Paxos => {
                PaxosMessage::Commit { ballot: term, slot: 0, heartbeat: counter, sent_at_nanos }
                    .into()
            }
        };
        for to in (0..self.n()).filter(|&i| self.view[i].id != from) {
            self.send(to, from, msg.clone());
        }
        Some(index(from))
    }

    /// Acknowledgements of a leader's heartbeats, in its term, from some of
    /// the other voters, echoing `u64::MAX` or a send time in the future.
    fn huge_echo(&mut self) {
        let leaders = self.leaders();
        let to = match leaders.choose(self.rng) {
            Some(&l) => l,
            None => self.any(),
        };
        let y = self.view[to];
        let mut others: Vec<NodeId> =
            self.view.iter().map(|v| v.id).filter(|&v| v != y.id).collect();
        others.shuffle(self.rng);
        let k = self.rng.gen_range(1..=others.len());
        for &from in &others[..k] {
            let ahead = Duration::from_millis(self.rng.gen_range(1..=100_000));
            let echo = match self.rng.gen_range(0..3) {
                0 => u64::MAX,
                _ => (y.local_now + ahead).as_nanos(),
            };
            let msg = match self.protocol {
                ProtocolKind::Raft => {
                    Message::HeartbeatResponse { term: y.term, ok: true, echo_sent_at_nanos: echo }
                }
                ProtocolKind::Ranked => {
                    let sent = y.lsn.map_or(0, |l| l.counter);
                    let counter = match self.rng.gen_range(0..3) {
                        0 => u64::MAX,
                        _ => sent.saturating_add(self.rng.gen_range(1..=1000)),
                    };
                    RankedMessage::LeadAck {
                        term: y.term,
                        ok: true,
                        counter,
                        echo_sent_at_nanos: echo,
                    }
                    .into()
                }
                ProtocolKind::Paxos => PaxosMessage::CommitAck {
                    ballot: y.term,
                    ok: true,
                    promised: y.term,
                    echo_sent_at_nanos: echo,
                }
                .into(),
            };
            self.send(to, from, msg);
        }
    }

    /// A `Resign` from a voter that neither leads nor is anyone's known
    /// leader, to every other node, naming a successor (mostly) or none.
    fn forged_resign(&mut self) {
        let Some(from) = self.bystander() else { return };
        let named = self.view[self.any()].id;
        let successor = (self.rng.gen_bool(0.8) && named != from).then_some(named);
        let bump = u64::from(self.rng.gen_bool(0.2));
        for to in (0..self.n()).filter(|&i| self.view[i].id != from) {
            let y = self.view[to];
            let term = Term(y.term.0.saturating_add(bump));
            let msg = match self.protocol {
                ProtocolKind::Raft => Message::Resign { term, successor },
                ProtocolKind::Ranked => RankedMessage::Resign { term, successor }.into(),
                ProtocolKind::Paxos => {
                    // A Paxos Resign counts only with a ballot of the sender's rank.
                    let Some(ballot) = ballot_above(y.term, from) else { continue };
                    PaxosMessage::Resign { ballot, successor }.into()
                }
            };
            self.send(to, from, msg);
        }
    }

    /// A transfer campaign by a voter no leader named (the simulator never
    /// transfers), to every other node.
    fn forged_transfer(&mut self) {
        let Some(from) = self.bystander() else { return };
        let max = self.highest_term();
        let attempt = self.rng.gen_range(1..1000);
        let sent_at_nanos = self.view[index(from)].local_now.as_nanos();
        for to in (0..self.n()).filter(|&i| self.view[i].id != from) {
            let y = self.view[to];
            let msg = match self.protocol {
                ProtocolKind::Raft => {
                    let Some(term) = max.0.checked_add(1) else { continue };
                    Message::Vote {
                        term: Term(term),
                        transfer: true,
                        freshness: tenure_core::Freshness::BOOTSTRAP,
                    }
                }
                ProtocolKind::Ranked => RankedMessage::Elect {
                    term: y.term,
                    claim: y.lsn,
                    sent_at_nanos,
                    transfer: Some(y.term),
                    vote_in_nanos: 0,
                    freshness: tenure_core::Freshness::BOOTSTRAP,
                    leaving: false,
                    stands: true,
                }
                .into(),
                ProtocolKind::Paxos => {
                    let Some(ballot) = ballot_above(max, from) else { continue };
                    PaxosMessage::Prepare {
                        ballot,
                        attempt,
                        handover: Some(y.term),
                        freshness: tenure_core::Freshness::BOOTSTRAP,
                    }
                    .into()
                }
            };
            self.send(to, from, msg);
        }
    }

    /// Claims with huge numbers, from a voter that neither leads nor is
    /// anyone's known leader, to every other node: ranked `Elect`s with
    /// huge LSNs and vote delays; Paxos poll answers with huge evidence and
    /// busy times; raft pre-vote refusals claiming a huge lease. Answers
    /// match the destination's latest poll, read off the wire.
    fn forged_claim(&mut self, sniffed: &[Sniffed]) {
        let Some(from) = self.bystander() else { return };
        for to in (0..self.n()).filter(|&i| self.view[i].id != from) {
            let y = self.view[to];
            let huge = |rng: &mut Pcg64Mcg| match rng.gen_range(0..3) {
                0 => u64::MAX,
                1 => u64::MAX - 1,
                _ => rng.gen_range(1 << 32..=u64::MAX),
            };
            let msg = match self.protocol {
                ProtocolKind::Ranked => {
                    let lsn_term =
                        if self.rng.gen_bool(0.5) { y.term } else { Term(huge(self.rng)) };
                    RankedMessage::Elect {
                        term: y.term,
                        claim: Some(Lsn { term: lsn_term, counter: huge(self.rng) }),
                        sent_at_nanos: self.rng.gen(),
                        transfer: None,
                        vote_in_nanos: if self.rng.gen_bool(0.5) { huge(self.rng) } else { 0 },
                        freshness: tenure_core::Freshness::BOOTSTRAP,
                        leaving: false,
                        stands: true,
                    }
                    .into()
                }
                ProtocolKind::Paxos => {
                    let attempt = sniffed[to].poll_attempt.unwrap_or(1);
                    let strong = self.rng.gen_bool(0.5);
                    PaxosMessage::PrepareNack {
                        ballot: LOW_BALL,
                        attempt,
                        promised: y.term,
                        committed: if strong { huge(self.rng) } else { 0 },
                        heartbeat: Some(Lsn { term: y.term, counter: huge(self.rng) }),
                        busy_ms: self.rng.gen_bool(0.5).then(|| huge(self.rng)),
                    }
                    .into()
                }
                ProtocolKind::Raft => {
                    let proposed = sniffed[to].pre_vote.unwrap_or(Term(y.term.0.saturating_add(1)));
                    Message::PreVoteResponse {
                        term: y.term,
                        proposed,
                        granted: false,
                        lease_remaining_ms: Some(huge(self.rng)),
                    }
                }
            };
            self.send(to, from, msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ET: Duration = Duration::from_secs(1);

    fn view(n: usize, leader: usize) -> Vec<NodeView> {
        (0..n)
            .map(|i| NodeView {
                id: NodeId(i as u64 + 1),
                up: true,
                term: Term(16 * 3 + leader as u64),
                role: if i == leader { Role::Leader } else { Role::Follower },
                leader: Some(NodeId(leader as u64 + 1)),
                lsn: Some(Lsn { term: Term(3), counter: 7 }),
                local_now: Instant::from_nanos(5_000_000_000),
            })
            .collect()
    }

    #[test]
    fn specs_parse_and_print_as_the_cli_takes_them() {
        assert_eq!("all".parse::<ForgerSpec>(), Ok(ForgerSpec::all()));
        let s: ForgerSpec = "huge-echo,max-term".parse().expect("valid");
        assert_eq!(s.attacks, vec![Attack::MaxTerm, Attack::HugeEcho]);
        assert_eq!(s.to_string(), "max-term,huge-echo");
        assert_eq!(ForgerSpec::all().to_string(), "all");
        let err = "max-term,nonsense".parse::<ForgerSpec>().unwrap_err();
        assert!(err.to_string().contains("nonsense") && err.to_string().contains("rising-term"));
        assert_eq!(ForgerSpec::all().promise(), Promise::SafetyWhileRunning);
        let some = ForgerSpec::only(&[Attack::MaxTerm, Attack::ForgedClaim]);
        assert_eq!(some.promise(), Promise::LeaderKept);
        assert_eq!(ForgerSpec::only(&[Attack::HugeEcho]).promise(), Promise::Refused);
    }

    #[test]
    fn max_term_frames_carry_only_forged_terms_and_claim_another_voter() {
        for protocol in ProtocolKind::ALL {
            let mut f = Forger::new(ForgerSpec::only(&[Attack::MaxTerm]), protocol, 5, ET, 1);
            for _ in 0..500 {
                let (frames, _) = f.burst(0, &view(5, 2));
                for fr in frames {
                    assert_ne!(fr.from, NodeId(fr.to as u64 + 1), "a node never hears itself");
                    assert!(fr.msg.term().0 >= FORGED_TERM_FLOOR, "{protocol}: {:?}", fr.msg);
                    if let Message::Paxos(
                        PaxosMessage::Prepare { ballot, .. }
                        | PaxosMessage::Accept { ballot, .. }
                        | PaxosMessage::Commit { ballot, .. }
                        | PaxosMessage::Resign { ballot, .. },
                    ) = fr.msg
                    {
                        assert_eq!(ballot.0 % BALLOT_NODES, fr.from.0, "ballot of the sender");
                    }
                }
            }
        }
    }

    #[test]
    fn resigns_transfers_and_claims_never_claim_a_leader() {
        for protocol in ProtocolKind::ALL {
            for attack in [Attack::ForgedResign, Attack::ForgedTransfer, Attack::ForgedClaim] {
                let mut f = Forger::new(ForgerSpec::only(&[attack]), protocol, 5, ET, 2);
                for _ in 0..200 {
                    let (frames, _) = f.burst(0, &view(5, 2));
                    assert!(!frames.is_empty());
                    assert!(frames.iter().all(|fr| fr.from != NodeId(3)), "{protocol} {attack}");
                }
            }
        }
    }

    #[test]
    fn nobody_speaks_for_a_leader_the_forger_posed_as_while_leases_on_it_may_run() {
        let spec = ForgerSpec::only(&[Attack::RisingTerm, Attack::ForgedResign]);
        let mut f = Forger::new(spec, ProtocolKind::Raft, 5, ET, 5);
        let (mut posed, mut checked) = (None, 0);
        for k in 0..400u64 {
            let now = k * 10_000_000;
            let (frames, _) = f.burst(now, &view(5, 2));
            match frames.first().map(|fr| &fr.msg) {
                Some(Message::Heartbeat { .. }) => posed = Some((frames[0].from, now)),
                Some(Message::Resign { .. }) => {
                    if let Some((x, at)) = posed.filter(|&(_, at)| now < at + 2_000_000_000) {
                        assert!(
                            frames.iter().all(|fr| fr.from != x),
                            "resign from {x:?} posed at {at}"
                        );
                        checked += 1;
                    }
                }
                _ => {}
            }
        }
        assert!(checked > 10, "{checked}");
    }

    #[test]
    fn huge_echoes_go_to_the_leader_in_its_term() {
        for protocol in ProtocolKind::ALL {
            let mut f = Forger::new(ForgerSpec::only(&[Attack::HugeEcho]), protocol, 5, ET, 3);
            let v = view(5, 1);
            for _ in 0..200 {
                let (frames, _) = f.burst(0, &v);
                for fr in frames {
                    assert_eq!(fr.to, 1);
                    let echo = match fr.msg {
                        Message::HeartbeatResponse { echo_sent_at_nanos, ok: true, .. }
                        | Message::Ranked(RankedMessage::LeadAck {
                            echo_sent_at_nanos,
                            ok: true,
                            ..
                        })
                        | Message::Paxos(PaxosMessage::CommitAck {
                            echo_sent_at_nanos,
                            ok: true,
                            ..
                        }) => echo_sent_at_nanos,
                        m => panic!("not an acknowledgement: {m:?}"),
                    };
                    assert!(echo > v[1].local_now.as_nanos());
                    assert_eq!(fr.msg.term(), v[1].term);
                }
            }
        }
    }

    #[test]
    fn the_rate_stays_within_the_bound() {
        let mut spec = ForgerSpec::all();
        spec.frames_per_second = 40;
        let mut f = Forger::new(spec, ProtocolKind::Raft, 5, ET, 4);
        let (mut frames, mut ns) = (0u64, 0u64);
        while ns < 60_000_000_000 {
            let (fr, gap) = f.burst(ns, &view(5, 0));
            frames += fr.len() as u64;
            ns += gap;
        }
        // At most 40 per second over the minute, plus one burst.
        assert!(frames <= 40 * 60 + 4, "{frames}");
        assert!(frames >= 40 * 60 / 3, "{frames}: the forger is not idle");
        assert_eq!(f.sent.total(), frames);
    }
}
