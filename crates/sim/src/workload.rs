//! The key-value workload: a few clients that write and read a few keys of
//! the replicated store, one operation at a time each, and the history of
//! what they asked and got back.
//!
//! A client sends its operation to the node it believes leads (one in five
//! to a random node). A node that
//! does not lead the log answers with the leader it knows (that models
//! forwarding), and the client retries there; an operation that finds no
//! leader within [`WorkloadSpec::op_timeout`] of its invocation ends. Its
//! outcome is then unknown if some node may have accepted it (the client
//! was waiting for an answer), or it was never executed (every node said it
//! does not lead). A node that accepted a write and lost its leadership
//! before it committed answers "unknown" too: a later leader may still
//! commit it.
//!
//! Every value written is unique (`v<id>`), so a read tells which write it
//! saw. Compare-and-set operations compare the key's `mod_revision` with
//! one the client observed earlier, with the value it observed with it.
//!
//! The client side is plain logic: it returns [`Action`]s (send a request,
//! wake me at) that the simulator turns into events.

use crate::elect_spec::ElectSpec;
use crate::membership::MembershipSpec;
use crate::partitions_spec::PartitionsSpec;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::collections::VecDeque;
use std::str::FromStr;
use tenure_core::NodeId;
use tenure_kv::{
    Command, Compare, CompareOp, KeyValue, LeaseId, OpResponse, Response, Target, TxnOp,
};
use tenure_partitions::group::{GroupSpec, MemberSpec};
use tenure_partitions::{MemberId, RecipeError};

/// Clients of the default workload.
pub const DEFAULT_CLIENTS: usize = 3;
/// Keys of the default workload.
pub const DEFAULT_KEYS: usize = 5;
/// Sessions of the `sessions` workload unless `tenure sim --sessions`
/// says otherwise.
pub const DEFAULT_SESSIONS: usize = 1_000;
/// The TTL of the `sessions` workload's sessions, ms.
pub const SESSIONS_TTL_MS: u64 = 10_000;
/// Bytes of a snapshot per replica message, by default.
pub const DEFAULT_SNAPSHOT_CHUNK_BYTES: usize = 4096;
/// Redirects one operation follows at most before it gives up.
pub const MAX_ATTEMPTS: u32 = 64;
/// Longest pause of a client between two operations, ns.
const MAX_THINK_NS: u64 = 20_000_000;
/// Longest wait before a client retries after a redirect, ns.
const MAX_BACKOFF_NS: u64 = 20_000_000;
/// Shortest and longest one-way delay between a client and a node, ns.
const CLIENT_LATENCY_NS: (u64, u64) = (1_000_000, 5_000_000);
/// Share of operations a client sends to a random node rather than the one
/// it believes leads (a client that lost track, or spreads its load).
const ANY_NODE: f64 = 0.2;
/// Times the final read of one key is tried before the run gives up on it.
pub const MAX_FINAL_READ_TRIES: u32 = 8;

/// A deliberate bug, for tests that show the checkers can fail. Never set
/// by `tenure sim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedBug {
    /// The state machine answers some plain puts as done without changing
    /// anything: acknowledged writes are lost.
    LoseAckedWrites,
    /// A node that does not lead answers reads from its own applied state
    /// instead of redirecting: stale reads.
    StaleFollowerReads,
    /// Node 1's state machine ignores deletes: its state departs from the
    /// others' at the same index.
    DivergentNode,
    /// A follower acknowledges a write it forwards to the leader before the
    /// leader commits it, with the answer its own store would give (the
    /// write still goes to the leader).
    EarlyForwardAck,
    /// Changes of members: the driver never hands the log's configuration
    /// to the elector (`Protocol::handle_electorate`), which counts over
    /// the bootstrap voters for ever.
    ElectorateNever,
    /// Changes of members: the driver hands an output's configuration to
    /// the elector only an election timeout after the output's messages
    /// left (an acknowledgement of the entry precedes the elector's use of
    /// it).
    ElectorateLate,
    /// Changes of members: the log store writes a snapshot without the
    /// configuration in force at its last entry, which a restart then
    /// reads back as the bootstrap list (as a snapshot file of the format
    /// before configurations, `TNRSNAP1`, is read).
    SnapshotForgetsMembers,
    /// Changes of members: the log store's replay reads configuration
    /// entries back as no-ops (a replay that knows only the entries of the
    /// format before configurations).
    ReplayDropsMembers,
    /// Changes of members: the replica's own planted bug
    /// (`tenure_replica::Config::planted_bug_ungated_changes`): a new
    /// leader may change members before it has committed an entry of its
    /// own leadership (Raft's single-server change bug of 2015), and the
    /// driver of changes proposes on a leader that is not ready yet.
    UngatedChanges,
    /// A leader whose log write failed after its new entries left early
    /// (`tenure_replica::Output::early`) keeps its token: the replica keeps
    /// no fence (`Config::planted_bug_no_lead_fence`) and the elector is
    /// not told to give the leadership up, so the rebuilt replica leads
    /// under the same token and may write other entries at positions a
    /// follower already holds.
    LeadAgainAfterFailedWrite,
    /// The driver reports a log write durable as soon as it is issued, not
    /// once it has synced (`tenure_replica::Replica::handle_persisted`): a
    /// leader counts its own copy toward a commit while a crash may still
    /// tear it away.
    CountUnsyncedCopy,
}

impl PlantedBug {
    /// True for the bugs of the changes of members (they need the
    /// `membership` scenario's driver of changes to show).
    pub fn is_membership(self) -> bool {
        matches!(
            self,
            PlantedBug::ElectorateNever
                | PlantedBug::ElectorateLate
                | PlantedBug::SnapshotForgetsMembers
                | PlantedBug::ReplayDropsMembers
                | PlantedBug::UngatedChanges
        )
    }
}

/// The workload of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Clients, each with one operation at a time.
    pub clients: usize,
    /// Keys (`k0`, `k1`, ...).
    pub keys: usize,
    /// A deliberate bug (tests only).
    pub planted: Option<PlantedBug>,
    /// Bytes of a snapshot per replica message. The default sends the
    /// workload's snapshots (under 100 bytes) whole: in several pieces, a
    /// follower that restarted (or was rebuilt after a storage failure) in
    /// the middle of a transfer is never sent the first piece again and
    /// stops catching up (a replica finding, pinned by an ignored test in
    /// `tests/sim/kv.rs`).
    pub snapshot_chunk_bytes: usize,
    /// Application elections beside the key-value clients
    /// ([`crate::elect`]), as clients after them.
    pub elect: Option<ElectSpec>,
    /// Changes of members during the run (scenario `membership`, see
    /// [`crate::membership`]): spare nodes beside the initial voters, and a
    /// driver that adds, promotes, removes and replaces members.
    pub membership: Option<MembershipSpec>,
    /// Groups of partitions beside the key-value clients
    /// ([`crate::partitions`]), as clients after them (and after the
    /// election apps).
    pub partitions: Option<PartitionsSpec>,
}

impl WorkloadSpec {
    /// The default key-value workload: 3 clients, 5 keys.
    pub fn kv() -> Self {
        WorkloadSpec {
            clients: DEFAULT_CLIENTS,
            keys: DEFAULT_KEYS,
            planted: None,
            snapshot_chunk_bytes: DEFAULT_SNAPSHOT_CHUNK_BYTES,
            elect: None,
            membership: None,
            partitions: None,
        }
    }

    /// The application-election workload: the default elections
    /// ([`ElectSpec::default`]) beside one key-value client on two keys.
    pub fn elect() -> Self {
        WorkloadSpec {
            clients: 1,
            keys: 2,
            elect: Some(ElectSpec::default()),
            ..WorkloadSpec::kv()
        }
    }

    /// The sessions workload: `sessions` app processes that only hold a
    /// session each (granted through the log, renewed every TTL/3, the
    /// apps' own crashes, pauses and cut-offs), with the default TTL
    /// ([`crate::elect_spec::DEFAULT_TTL_MS`]), beside one key-value client
    /// on two keys: the checkers of session deadlines at scale, both ways
    /// (`session-early-expiry`, `session-overrun`).
    pub fn sessions(sessions: usize) -> Self {
        let elect =
            ElectSpec { apps: sessions, names: 0, ttl_ms: SESSIONS_TTL_MS, ..ElectSpec::default() };
        WorkloadSpec { elect: Some(elect), ..WorkloadSpec::elect() }
    }

    /// The partitions workload: the default groups
    /// ([`PartitionsSpec::default`]) beside one key-value client on two keys.
    pub fn partitions() -> Self {
        WorkloadSpec {
            clients: 1,
            keys: 2,
            partitions: Some(PartitionsSpec::default()),
            ..WorkloadSpec::kv()
        }
    }

    /// How long an operation may take, from its invocation: two election
    /// timeouts (a failover and the new leader's synchronisation fit).
    pub fn op_timeout(election_timeout_ns: u64) -> u64 {
        2 * election_timeout_ns
    }
}

impl FromStr for WorkloadSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kv" => Ok(WorkloadSpec::kv()),
            "elect" => Ok(WorkloadSpec::elect()),
            "partitions" => Ok(WorkloadSpec::partitions()),
            "sessions" => Ok(WorkloadSpec::sessions(DEFAULT_SESSIONS)),
            other => Err(format!(
                "unknown workload {other:?}; the workloads are kv, elect, sessions and partitions"
            )),
        }
    }
}

impl WorkloadSpec {
    /// The apps of the `sessions` workload (sessions held, no names), if
    /// this is it.
    pub fn sessions_only(&self) -> Option<&ElectSpec> {
        self.elect.as_ref().filter(|e| e.names == 0)
    }
}

impl std::fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (&self.elect, &self.partitions) {
            _ if self.sessions_only().is_some() => "sessions",
            (Some(_), _) => "elect",
            (None, Some(_)) => "partitions",
            (None, None) => "kv",
        })
    }
}

/// The name of key `k`.
pub fn key_name(k: usize) -> String {
    format!("k{k}")
}

/// The bytes of value `id`.
pub fn value_bytes(id: u32) -> Vec<u8> {
    format!("v{id}").into_bytes()
}

/// The id of a value written by [`value_bytes`], if it is one.
pub fn value_id(bytes: &[u8]) -> Option<u32> {
    std::str::from_utf8(bytes).ok()?.strip_prefix('v')?.parse().ok()
}

/// A revision a client observed for a key, with the value it then held
/// (`None`: absent, revision 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The value's write, or `None` for an absent key.
    pub write: Option<u32>,
    /// The key's `mod_revision` (0 when absent).
    pub revision: u64,
}

impl Expected {
    /// An absent key.
    pub const ABSENT: Expected = Expected { write: None, revision: 0 };

    /// What a key-value (or its absence) says.
    pub fn of(kv: Option<&KeyValue>) -> Option<Expected> {
        match kv {
            None => Some(Expected::ABSENT),
            Some(kv) => {
                Some(Expected { write: Some(value_id(&kv.value)?), revision: kv.mod_revision })
            }
        }
    }
}

/// What an operation asks. Every operation touches one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvInput {
    /// Put value `value`.
    Put {
        /// The key.
        key: usize,
        /// The value's id.
        value: u32,
    },
    /// Put `value` if the key's `mod_revision` is `expected.revision`.
    Cas {
        /// The key.
        key: usize,
        /// The revision compared (and the value observed with it).
        expected: Expected,
        /// The value's id.
        value: u32,
    },
    /// Delete the key.
    Delete {
        /// The key.
        key: usize,
    },
    /// A transaction: if the `mod_revision` is `expected.revision`, put
    /// `value`, else get the key.
    TxnCas {
        /// The key.
        key: usize,
        /// The revision compared.
        expected: Expected,
        /// The value's id.
        value: u32,
    },
    /// A transaction that only gets the key (a read through the log).
    TxnGet {
        /// The key.
        key: usize,
    },
    /// A linearizable read served by the leader (`Replica::read`).
    Read {
        /// The key.
        key: usize,
    },
}

impl KvInput {
    /// The key it touches.
    pub fn key(&self) -> usize {
        match *self {
            KvInput::Put { key, .. }
            | KvInput::Cas { key, .. }
            | KvInput::Delete { key }
            | KvInput::TxnCas { key, .. }
            | KvInput::TxnGet { key }
            | KvInput::Read { key } => key,
        }
    }

    /// True for operations that cannot change the store.
    pub fn is_read(&self) -> bool {
        matches!(self, KvInput::TxnGet { .. } | KvInput::Read { .. })
    }

    /// What the client sends.
    pub fn request(&self) -> RequestBody {
        let key = key_name(self.key());
        let cmd = match *self {
            KvInput::Put { value, .. } => {
                Command::Put { key, value: value_bytes(value), if_mod_revision: None, lease: None }
            }
            KvInput::Cas { expected, value, .. } => Command::Put {
                key,
                value: value_bytes(value),
                if_mod_revision: Some(expected.revision),
                lease: None,
            },
            KvInput::Delete { .. } => Command::Delete { key, if_mod_revision: None },
            KvInput::TxnCas { expected, value, .. } => Command::Txn {
                compare: vec![Compare {
                    key: key.clone(),
                    target: Target::ModRevision(expected.revision),
                    op: CompareOp::Equal,
                }],
                success: vec![TxnOp::Put {
                    key: key.clone(),
                    value: value_bytes(value),
                    lease: None,
                }],
                failure: vec![TxnOp::Get { key }],
            },
            KvInput::TxnGet { .. } => {
                Command::Txn { compare: vec![], success: vec![TxnOp::Get { key }], failure: vec![] }
            }
            KvInput::Read { .. } => return RequestBody::Read { key },
        };
        RequestBody::Write(cmd)
    }
}

/// What an operation got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvOutput {
    /// The store's response to a command.
    Write(Response),
    /// A put or compare-and-set acknowledged with the store's revision
    /// only, without the key's previous value: the answer of the HTTP API's
    /// `PUT /v1/kv/{key}`, as the netns fault suite records it. The
    /// simulator's clients never get it.
    Written {
        /// The store's revision after the write (the key's new `mod_revision`).
        revision: u64,
    },
    /// A linearizable read: the key (if present) and the store's revision.
    Read {
        /// The key as read.
        kv: Option<KeyValue>,
        /// The serving store's revision.
        revision: u64,
    },
}

/// A request on the wire, client to node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Which client, operation and attempt it is.
    pub tag: Tag,
    /// What it asks.
    pub body: RequestBody,
}

/// Who a request is from: the answer goes back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// The client.
    pub client: usize,
    /// The operation (its index in the history).
    pub op: usize,
    /// The attempt (a redirect makes a new one).
    pub attempt: u32,
}

/// The body of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestBody {
    /// A command to propose.
    Write(Command),
    /// A linearizable read of one key.
    Read {
        /// The key.
        key: String,
    },
    /// A linearizable read of every key under a prefix (an election).
    Range {
        /// The prefix.
        prefix: String,
    },
    /// A session renewal, answered only by the ready leader (R1–R3 of
    /// docs/ELECTIONS.md).
    Renew {
        /// The session.
        lease: LeaseId,
    },
    /// A member's request to its group, turned into a command by the node
    /// it reaches (`tenure_partitions::recipe`, on that node's applied
    /// store), then proposed or forwarded as a write.
    Group(GroupCall),
}

/// What a member asks of its group ([`RequestBody::Group`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupCall {
    /// Join (or say anew what it is): `recipe::join`.
    Join {
        /// The group.
        group: String,
        /// The group's spec (the first member creates the group).
        spec: GroupSpec,
        /// The member (its session's lease id).
        member: MemberId,
        /// What it says about itself.
        me: MemberSpec,
    },
    /// Leave: `recipe::leave`.
    Leave {
        /// The group.
        group: String,
        /// The member.
        member: MemberId,
    },
    /// Give up partitions it stopped working on: `recipe::release_many`.
    Release {
        /// The group.
        group: String,
        /// The member.
        member: MemberId,
        /// The grants, `(partition, epoch)` each.
        grants: Vec<(u32, u64)>,
    },
}

/// An answer on the wire, node to client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The request's tag.
    pub tag: Tag,
    /// The answer.
    pub body: ReplyBody,
}

/// The body of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    /// Not accepted: this node does not lead; the leader it knows.
    Redirect(Option<NodeId>),
    /// Committed and applied: the store's encoded response.
    Done(Vec<u8>),
    /// Accepted, then leadership was lost: it may or may not commit.
    Unknown,
    /// A read served.
    Read {
        /// The key as read.
        kv: Option<KeyValue>,
        /// The store's revision.
        revision: u64,
    },
    /// A range read served.
    Range {
        /// The keys under the prefix, in order.
        kvs: Vec<KeyValue>,
        /// The store's revision.
        revision: u64,
    },
    /// A session renewed: a full TTL from when the leader answered.
    Renewed {
        /// The TTL, ms.
        ttl_ms: u64,
    },
    /// The session does not exist, or its expiry was proposed.
    SessionGone(LeaseId),
    /// A member's request refused by the recipe, nothing proposed.
    GroupRefused(RecipeError),
}

/// What became of an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Still running.
    Pending,
    /// It returned at `at_ns` (global time) with `output`.
    Returned {
        /// When the answer arrived.
        at_ns: u64,
        /// The answer.
        output: KvOutput,
    },
    /// It may or may not have taken effect.
    Unknown,
    /// No node accepted it: it did not take effect.
    NotExecuted,
}

/// One operation of the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The client.
    pub client: usize,
    /// When the client invoked it (global time, ns).
    pub call_ns: u64,
    /// What it asked.
    pub input: KvInput,
    /// What became of it.
    pub fate: Fate,
    /// One of the final reads after healing.
    pub final_read: bool,
}

/// Something the simulator must do for the workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Deliver `req` to node index `node` after `delay_ns`.
    Send {
        /// The node's index.
        node: usize,
        /// The request.
        req: Request,
        /// The one-way delay.
        delay_ns: u64,
    },
    /// Wake client `client` at global time `at_ns` (stale unless `gen` is
    /// still the client's).
    Wake {
        /// The client.
        client: usize,
        /// When.
        at_ns: u64,
        /// The client's timer generation.
        gen: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between operations.
    Idle,
    /// Working on operation `op`: `asked` while a request is out with no
    /// answer (some node may accept it), else backing off after a redirect.
    Busy { op: usize, attempt: u32, deadline: u64, asked: bool },
}

#[derive(Clone, Debug)]
struct Client {
    target: usize,
    state: State,
    /// Per key, the last value and revision this client observed.
    seen: Vec<Option<Expected>>,
    gen: u64,
}

/// The clients and their history.
#[derive(Clone, Debug)]
pub struct Workload {
    /// What runs.
    pub spec: WorkloadSpec,
    /// Every operation invoked, in invocation order.
    pub history: Vec<Record>,
    clients: Vec<Client>,
    nodes: usize,
    op_timeout_ns: u64,
    next_value: u32,
    rng: Pcg64Mcg,
    /// No new operations (final reads aside).
    stopped: bool,
    /// Keys still to read finally, with the tries made.
    final_reads: Option<VecDeque<(usize, u32)>>,
}

impl Workload {
    /// A workload on `nodes` nodes; operations time out after `op_timeout_ns`.
    pub fn new(spec: WorkloadSpec, nodes: usize, op_timeout_ns: u64, seed: u64) -> Self {
        let mut rng = Pcg64Mcg::seed_from_u64(seed ^ 0x6b76_776f_726b_6c64);
        let clients = (0..spec.clients)
            .map(|_| Client {
                target: rng.gen_range(0..nodes),
                state: State::Idle,
                seen: vec![None; spec.keys],
                gen: 0,
            })
            .collect();
        Workload {
            spec,
            history: Vec::new(),
            clients,
            nodes,
            op_timeout_ns,
            next_value: 1,
            rng,
            stopped: false,
            final_reads: None,
        }
    }

    /// Starts every client at a random time within 100 ms of `now_ns`.
    pub fn start(&mut self, now_ns: u64) -> Vec<Action> {
        (0..self.clients.len())
            .map(|c| {
                let at = now_ns + self.rng.gen_range(0..100_000_000);
                self.wake(c, at)
            })
            .collect()
    }

    /// No new operations from now on; those running finish.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// True when no operation is running.
    pub fn idle(&self) -> bool {
        self.clients.iter().all(|c| c.state == State::Idle)
    }

    /// Starts the final reads: client 0 reads every key, one after another.
    pub fn begin_final_reads(&mut self, now_ns: u64) -> Vec<Action> {
        self.final_reads = Some((0..self.spec.keys).map(|k| (k, 0)).collect());
        if self.clients.is_empty() || self.clients[0].state != State::Idle {
            return Vec::new();
        }
        vec![self.wake(0, now_ns)]
    }

    /// True once every final read returned or was given up.
    pub fn final_reads_done(&self) -> bool {
        self.final_reads.as_ref().is_some_and(VecDeque::is_empty) && self.idle()
    }

    /// Keys whose final read never returned.
    pub fn final_reads_missing(&self) -> Vec<usize> {
        (0..self.spec.keys)
            .filter(|&k| {
                !self.history.iter().any(|r| {
                    r.final_read && r.input.key() == k && matches!(r.fate, Fate::Returned { .. })
                })
            })
            .collect()
    }

    fn wake(&mut self, client: usize, at_ns: u64) -> Action {
        let c = &mut self.clients[client];
        c.gen += 1;
        Action::Wake { client, at_ns, gen: c.gen }
    }

    fn latency(&mut self) -> u64 {
        self.rng.gen_range(CLIENT_LATENCY_NS.0..=CLIENT_LATENCY_NS.1)
    }

    /// Client `client`'s timer fired at `now_ns`.
    pub fn on_wake(&mut self, client: usize, gen: u64, now_ns: u64) -> Vec<Action> {
        if self.clients.get(client).is_none_or(|c| c.gen != gen) {
            return Vec::new();
        }
        match self.clients[client].state {
            State::Idle => self.next_op(client, now_ns),
            State::Busy { op, deadline, asked, .. } if now_ns >= deadline => {
                // A request still out may have been accepted; after a
                // redirect, no node has it. The node asked may be down: the
                // next operation tries the next node (round robin, so that
                // a final read retried reaches every node in turn).
                let fate = if asked { Fate::Unknown } else { Fate::NotExecuted };
                let c = &mut self.clients[client];
                c.target = (c.target + 1) % self.nodes;
                self.finish(client, op, fate, now_ns)
            }
            State::Busy { op, attempt, deadline, asked: false } => {
                self.send(client, op, attempt + 1, deadline)
            }
            State::Busy { deadline, .. } => vec![self.wake(client, deadline)],
        }
    }

    /// Starts the client's next operation, if there is one to do.
    fn next_op(&mut self, client: usize, now_ns: u64) -> Vec<Action> {
        let (input, final_read) = if self.stopped {
            let Some(queue) = self.final_reads.as_mut().filter(|_| client == 0) else {
                return Vec::new();
            };
            let Some(&(key, _)) = queue.front() else { return Vec::new() };
            (KvInput::Read { key }, true)
        } else {
            (self.draw_op(client), false)
        };
        if !final_read && self.rng.gen_bool(ANY_NODE) {
            self.clients[client].target = self.rng.gen_range(0..self.nodes);
        }
        let op = self.history.len();
        self.history.push(Record {
            client,
            call_ns: now_ns,
            input,
            fate: Fate::Pending,
            final_read,
        });
        self.send(client, op, 1, now_ns + self.op_timeout_ns)
    }

    fn draw_op(&mut self, client: usize) -> KvInput {
        let key = self.rng.gen_range(0..self.spec.keys);
        let value = self.next_value;
        let expected = match self.clients[client].seen[key] {
            Some(e) if self.rng.gen_bool(0.8) => e,
            _ => Expected::ABSENT,
        };
        let input = match self.rng.gen_range(0..100) {
            0..=24 => KvInput::Put { key, value },
            25..=44 => KvInput::Cas { key, expected, value },
            45..=54 => KvInput::Delete { key },
            55..=69 => KvInput::TxnCas { key, expected, value },
            70..=74 => KvInput::TxnGet { key },
            _ => KvInput::Read { key },
        };
        if matches!(input, KvInput::Put { .. } | KvInput::Cas { .. } | KvInput::TxnCas { .. }) {
            self.next_value += 1;
        }
        input
    }

    fn send(&mut self, client: usize, op: usize, attempt: u32, deadline: u64) -> Vec<Action> {
        let body = self.history[op].input.request();
        let node = self.clients[client].target;
        self.clients[client].state = State::Busy { op, attempt, deadline, asked: true };
        let delay_ns = self.latency();
        let req = Request { tag: Tag { client, op, attempt }, body };
        vec![Action::Send { node, req, delay_ns }, self.wake(client, deadline)]
    }

    /// An answer arrived at `now_ns`.
    pub fn on_reply(&mut self, reply: Reply, now_ns: u64) -> Vec<Action> {
        let Tag { client, op, attempt } = reply.tag;
        let Some(c) = self.clients.get(client) else { return Vec::new() };
        let State::Busy { op: current, attempt: a, deadline, .. } = c.state else {
            return Vec::new();
        };
        if (current, a) != (op, attempt) {
            return Vec::new();
        }
        match reply.body {
            ReplyBody::Redirect(leader) => {
                if attempt >= MAX_ATTEMPTS {
                    return self.finish(client, op, Fate::NotExecuted, now_ns);
                }
                let asked = c.target;
                let target = match leader.and_then(|l| usize::try_from(l.0).ok()?.checked_sub(1)) {
                    Some(l) if l < self.nodes => l,
                    _ => self.rng.gen_range(0..self.nodes),
                };
                self.clients[client].target = target;
                self.clients[client].state = State::Busy { op, attempt, deadline, asked: false };
                // At once to a leader newly named; after a pause otherwise.
                let pause = if target != asked && leader.is_some() {
                    0
                } else {
                    self.rng.gen_range(1..=MAX_BACKOFF_NS)
                };
                vec![self.wake(client, (now_ns + pause).min(deadline))]
            }
            ReplyBody::Unknown => self.finish(client, op, Fate::Unknown, now_ns),
            ReplyBody::Done(bytes) => {
                let output = match Response::decode(&bytes) {
                    Ok(r) => KvOutput::Write(r),
                    // Not a response: kept as an invalid one, which no
                    // operation may return (the checker says so).
                    Err(e) => KvOutput::Write(Response::Invalid(
                        tenure_kv::InvalidCommand::Undecodable(e),
                    )),
                };
                self.finish(client, op, Fate::Returned { at_ns: now_ns, output }, now_ns)
            }
            ReplyBody::Read { kv, revision } => {
                let output = KvOutput::Read { kv, revision };
                self.finish(client, op, Fate::Returned { at_ns: now_ns, output }, now_ns)
            }
            // Answers to the app clients' requests; a key-value client
            // sends none.
            ReplyBody::Range { .. }
            | ReplyBody::Renewed { .. }
            | ReplyBody::SessionGone(_)
            | ReplyBody::GroupRefused(_) => Vec::new(),
        }
    }

    /// Ends operation `op` of `client` with `fate`; the client thinks, then
    /// starts the next one.
    fn finish(&mut self, client: usize, op: usize, fate: Fate, now_ns: u64) -> Vec<Action> {
        let rec = &mut self.history[op];
        if let Fate::Returned { output, .. } = &fate {
            let key = rec.input.key();
            if let Some(seen) = observed(&rec.input, output) {
                self.clients[client].seen[key] = Some(seen);
            }
        }
        if rec.final_read {
            let returned = matches!(fate, Fate::Returned { .. });
            if let Some(queue) = self.final_reads.as_mut() {
                if let Some((_, tries)) = queue.front_mut() {
                    *tries += 1;
                    if returned || *tries >= MAX_FINAL_READ_TRIES {
                        queue.pop_front();
                    }
                }
            }
        }
        self.history[op].fate = fate;
        self.clients[client].state = State::Idle;
        let think = self.rng.gen_range(0..=MAX_THINK_NS);
        vec![self.wake(client, now_ns + think)]
    }

    /// Counts of the history.
    pub fn counts(&self) -> HistoryCounts {
        let mut c = HistoryCounts { ops: self.history.len() as u64, ..HistoryCounts::default() };
        for r in &self.history {
            if r.input.is_read() {
                c.reads += 1;
            }
            match r.fate {
                Fate::Returned { .. } => c.acknowledged += 1,
                Fate::Unknown => c.unknown += 1,
                Fate::NotExecuted => c.not_executed += 1,
                Fate::Pending => c.pending += 1,
            }
        }
        c
    }
}

/// How many operations ended how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistoryCounts {
    /// Operations invoked.
    pub ops: u64,
    /// Of which reads (linearizable or through the log).
    pub reads: u64,
    /// Answered.
    pub acknowledged: u64,
    /// Outcome unknown.
    pub unknown: u64,
    /// Accepted by no node.
    pub not_executed: u64,
    /// Still running when the run ended.
    pub pending: u64,
}

/// What a client learns of `input`'s key from `output`: its value and
/// revision now (for later compare-and-set), if the output says.
fn observed(input: &KvInput, output: &KvOutput) -> Option<Expected> {
    match (input, output) {
        (
            KvInput::Put { value, .. } | KvInput::Cas { value, .. },
            KvOutput::Write(Response::Put { revision, .. }),
        ) => Some(Expected { write: Some(*value), revision: *revision }),
        (KvInput::Delete { .. }, KvOutput::Write(Response::Delete { .. })) => {
            Some(Expected::ABSENT)
        }
        (
            KvInput::TxnCas { value, .. },
            KvOutput::Write(Response::Txn { succeeded: true, revision, .. }),
        ) => Some(Expected { write: Some(*value), revision: *revision }),
        (_, KvOutput::Write(Response::Txn { responses, .. })) => match responses.first() {
            Some(OpResponse::Get { kv }) => Expected::of(kv.as_ref()),
            _ => None,
        },
        (_, KvOutput::Read { kv, .. }) => Expected::of(kv.as_ref()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_garbage_is_no_value() {
        assert_eq!(value_id(&value_bytes(42)), Some(42));
        assert_eq!(value_id(b"x1"), None);
        assert_eq!(value_id(b"v"), None);
        assert!("kv".parse::<WorkloadSpec>().is_ok());
        assert!("sql".parse::<WorkloadSpec>().unwrap_err().contains("kv"));
        let elect: WorkloadSpec = "elect".parse().unwrap();
        assert_eq!(
            (elect.to_string(), WorkloadSpec::kv().to_string()),
            ("elect".into(), "kv".into())
        );
    }

    #[test]
    fn a_client_follows_redirects_and_records_answers() {
        let mut w =
            Workload::new(WorkloadSpec { clients: 1, keys: 1, ..WorkloadSpec::kv() }, 3, 1000, 7);
        let Action::Wake { at_ns, gen, .. } = w.start(0)[0].clone() else { panic!("a wake") };
        let acts = w.on_wake(0, gen, at_ns);
        let Action::Send { req, .. } = acts[0].clone() else { panic!("a send") };
        assert_eq!(w.history.len(), 1);
        // Redirected to node 2: sent there at once.
        let acts = w.on_reply(
            Reply { tag: req.tag, body: ReplyBody::Redirect(Some(NodeId(2))) },
            at_ns + 5,
        );
        let Action::Wake { at_ns: t, gen, .. } = acts[0] else { panic!("a wake") };
        let acts = w.on_wake(0, gen, t);
        let Action::Send { node: 1, req, .. } = acts[0].clone() else { panic!("to node 2") };
        assert_eq!(req.tag.attempt, 2);
        // An answer to the old attempt is ignored; the current one counts.
        let stale = Tag { attempt: 1, ..req.tag };
        assert!(w.on_reply(Reply { tag: stale, body: ReplyBody::Unknown }, t + 1).is_empty());
        w.on_reply(Reply { tag: req.tag, body: ReplyBody::Unknown }, t + 2);
        assert_eq!(w.history[0].fate, Fate::Unknown);
        assert!(w.idle());
    }

    #[test]
    fn an_operation_times_out_unknown_if_asked_else_not_executed() {
        let mut w =
            Workload::new(WorkloadSpec { clients: 1, keys: 1, ..WorkloadSpec::kv() }, 3, 1000, 1);
        let Action::Wake { at_ns, gen, .. } = w.start(0)[0].clone() else { panic!() };
        let acts = w.on_wake(0, gen, at_ns);
        let Action::Wake { at_ns: deadline, gen, .. } = acts[1] else { panic!() };
        w.on_wake(0, gen, deadline);
        assert_eq!(w.history[0].fate, Fate::Unknown, "a request was out");
        // Next operation: redirected, then the deadline passes while backing off.
        let acts = w.on_wake(0, w.clients[0].gen, deadline + MAX_THINK_NS);
        let Action::Send { req, .. } = acts[0].clone() else { panic!() };
        w.on_reply(
            Reply { tag: req.tag, body: ReplyBody::Redirect(None) },
            deadline + MAX_THINK_NS,
        );
        let gen = w.clients[0].gen;
        w.on_wake(0, gen, deadline + MAX_THINK_NS + 2000);
        assert_eq!(w.history[1].fate, Fate::NotExecuted);
    }
}
