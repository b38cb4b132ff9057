//! The election model: three real electors (any [`ProtocolKind`]), a network that
//! loses, duplicates and reorders, crash/restart from durable state, and ghost
//! records for the properties.

use crate::elector::Elector;
use crate::membership::{
    missing_commit, next_changes, Change, Entry, Leadership, MemberDriver, MembershipSpec,
    MembershipState,
};
use crate::network::{Envelope, Network};
use crate::rng::ModelRng;
use stateright::{Model, Property};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{
    Config, ConfigId, Event, HardState, Instant, NodeId, Output, Protocol, ProtocolKind, Role, Term,
};

/// Nodes in the modelled cluster (with changes of members, one more: the
/// spare [`crate::membership::SPARE`]).
pub const NODE_COUNT: usize = 3;

/// Heartbeat interval of every node.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);

/// Election timeout of every node.
pub const ELECTION_TIMEOUT: Duration = Duration::from_millis(420);

/// The clock-drift bound given to the core: zero. The model's clocks are
/// unrelated to each other anyway (any drift at all), and the lease arithmetic
/// is not what is checked here; a zero bound keeps the core's drift
/// corrections exact, so every instant in the model stays a whole millisecond
/// (which [`IDLE_MARGIN`] relies on).
pub const CLOCK_DRIFT_PPM: u32 = 0;

/// How long before its timer an idling node stops ([`Action::Idle`]). Every
/// instant in the model is a whole millisecond, so one millisecond before a
/// deadline is the latest moment at which the timer has not fired.
pub const IDLE_MARGIN: Duration = Duration::from_millis(1);

/// What a node's storage gives back when it restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// The last [`HardState`] handed out in [`Output::persist`]: the contract.
    Faithful,
    /// Planted bug: the vote was not persisted; restart loads
    /// `HardState { term, voted_for: None }`.
    ForgetVote,
    /// Planted bug: nothing was persisted; restart loads `HardState::default()`.
    ForgetAll,
}

impl Durability {
    /// The state a restarting node is built from, given what it last persisted.
    fn load(self, persisted: HardState) -> HardState {
        match self {
            Durability::Faithful => persisted,
            Durability::ForgetVote => HardState { term: persisted.term, voted_for: None },
            Durability::ForgetAll => HardState::default(),
        }
    }
}

/// The depth of [`Bounds::reelection`] (see [`Bounds::max_depth`]: every
/// state within ten steps of the elected leader is checked): the deepest
/// whose breadth-first frontier fits in 16 GB for every protocol (one more
/// would need about three times the memory).
pub const REELECTION_DEPTH: usize = 12;

/// The depth of [`Bounds::reelection_ci`] (every state within eight steps is
/// checked): each re-election witness is reached within it in every protocol.
pub const REELECTION_CI_DEPTH: usize = 10;

/// The term bound of the Paxos checks: ballots are `counter * 65536 + id`
/// ([`tenure_core::paxos::BALLOT_NODES`]), and this is the highest ballot of
/// counter 3, so three ballot counters above the start, as `max_term: 3` is
/// three Raft terms.
pub const PAXOS_MAX_TERM: u64 = 4 * tenure_core::paxos::BALLOT_NODES - 1;

/// Limits that keep the state space finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bounds {
    /// States in which any node's term exceeds this are not explored.
    pub max_term: u64,
    /// Clock steps ([`Action::Timeout`] and [`Action::Idle`]) each node may
    /// take, across restarts. A node's clock advances only by these steps, so
    /// this bounds every clock.
    pub clock_steps_per_node: u8,
    /// Clock steps the node that leads when the exploration starts may take
    /// (a model [resuming](ElectionModel::resuming_after) from an elected
    /// leader; of two leaders, the one of the higher term), instead of
    /// [`Bounds::clock_steps_per_node`]: with few, the old leader stalls or
    /// crashes soon after it was elected. `None`: as every other node.
    pub leader_clock_steps: Option<u8>,
    /// Crash-and-restart actions, in total.
    pub restarts: u8,
    /// Deaths a spy reports, in total ([`Action::Kill`]: the node is down
    /// until [`Action::Revive`], and a death notice about it goes to every
    /// other node, [`Action::Notify`]).
    pub kills: u8,
    /// Leadership transfers a leader may start, in total.
    pub transfers: u8,
    /// Extra copies of envelopes in flight the network may make, in total.
    pub duplicates: u8,
    /// Period of each node's [`ModelRng`] (distinct candidacy jitters).
    pub rng_period: u8,
    /// Configurations leaders may append, in total ([`Action::Append`];
    /// only with changes of members, [`ElectionModel::with_members`]).
    pub changes: u8,
    /// The depth, in stateright's terms, beyond which the checker does not
    /// go (`None`: until every reachable state is visited). The initial state
    /// has depth 1, and the breadth-first checker checks and expands states
    /// of depth below `max_depth` only; it generates (and counts) those at
    /// `max_depth` without checking them. So every state within
    /// `max_depth - 2` steps of the initial state is checked.
    pub max_depth: Option<usize>,
}

impl Bounds {
    /// Bounds for the debug-profile tests: a few seconds unoptimised.
    pub const QUICK: Bounds = Bounds {
        max_term: 3,
        clock_steps_per_node: 2,
        leader_clock_steps: None,
        restarts: 1,
        kills: 0,
        transfers: 0,
        duplicates: 1,
        rng_period: 1,
        changes: 0,
        max_depth: Some(8),
    };

    /// Bounds for the release binary: no depth bound at all, so every
    /// interleaving of every reachable state is explored; each clock advances
    /// once (one timeout or idle per node) and one crash-restart may happen
    /// anywhere. About six million states, a few minutes.
    pub const DEEP: Bounds = Bounds {
        max_term: 3,
        clock_steps_per_node: 1,
        leader_clock_steps: None,
        restarts: 1,
        kills: 0,
        transfers: 0,
        duplicates: 0,
        rng_period: 1,
        changes: 0,
        max_depth: None,
    };
}

impl Bounds {
    /// The debug-profile tests' bounds for a fresh cluster of `protocol`: the
    /// smallest that still elect a leader from the fresh cluster, within a
    /// few seconds (release) to a few tens of seconds (debug) on one thread.
    pub const fn quick(protocol: ProtocolKind) -> Bounds {
        match protocol {
            ProtocolKind::Raft => Bounds::QUICK,
            ProtocolKind::Ranked => Bounds::RANKED_QUICK,
            ProtocolKind::Paxos => Bounds::PAXOS_QUICK,
        }
    }

    /// The debug-profile tests' bounds from a contested election of
    /// `protocol` ([`crate::check::contested_prefix`] finds it within these
    /// term and clock bounds; the depth counts from the contested state).
    pub const fn contested(protocol: ProtocolKind) -> Bounds {
        match protocol {
            ProtocolKind::Raft => Bounds { max_depth: Some(6), ..Bounds::QUICK },
            ProtocolKind::Ranked => {
                Bounds { restarts: 1, duplicates: 1, max_depth: Some(8), ..Bounds::RANKED_QUICK }
            }
            // Rival Paxos candidates need a second clock step on one node (its
            // first poll meets the start-up leases); from there, six steps
            // elect one of them.
            ProtocolKind::Paxos => Bounds {
                clock_steps_per_node: 2,
                restarts: 0,
                max_depth: Some(6),
                ..Bounds::PAXOS_QUICK
            },
        }
    }

    /// The debug-profile tests' bounds from an elected, settled leader
    /// ([`crate::check::elected_model`]: the clock steps count from the
    /// elected state, the depth too): small ones found to reach both
    /// re-election witnesses ([`crate::check::Start::witnesses`]). Raft's
    /// contested term takes nine steps, three clock steps of one follower and
    /// two of the other while the old leader is silent; ranked's, eight with
    /// a restart; Paxos's rival candidates, seven: the old leader's heartbeat
    /// is refused by a follower that has promised a higher ballot.
    pub const fn elected(protocol: ProtocolKind) -> Bounds {
        let base = Bounds::reelection(protocol);
        match protocol {
            ProtocolKind::Raft => {
                Bounds { leader_clock_steps: Some(0), restarts: 0, max_depth: Some(11), ..base }
            }
            ProtocolKind::Ranked => Bounds { clock_steps_per_node: 2, max_depth: Some(10), ..base },
            ProtocolKind::Paxos => {
                Bounds { clock_steps_per_node: 1, restarts: 0, max_depth: Some(10), ..base }
            }
        }
    }

    /// The re-election check of the release binary (`--elected`, and the
    /// second run of its default): from an elected, settled leader
    /// ([`crate::check::elected_model`]), every interleaving of up to ten
    /// steps ([`REELECTION_DEPTH`]) in which each follower takes up to three
    /// clock steps, the old leader one (one more heartbeat round, or one
    /// late timer), any node may crash and restart once, and terms may rise
    /// two above the leader's (raft: it leads term 1; ranked: term 2; Paxos:
    /// ballot 65,537, counter 1 of `counter * 65536 + id`). Breadth-first: a few
    /// million states and a few minutes per protocol, 4 to 12 GB.
    pub const fn reelection(protocol: ProtocolKind) -> Bounds {
        Bounds {
            max_term: match protocol {
                ProtocolKind::Raft => 3,
                ProtocolKind::Ranked => 4,
                ProtocolKind::Paxos => PAXOS_MAX_TERM,
            },
            clock_steps_per_node: 3,
            leader_clock_steps: Some(1),
            restarts: 1,
            kills: 0,
            transfers: 0,
            duplicates: 0,
            rng_period: 1,
            changes: 0,
            max_depth: Some(REELECTION_DEPTH),
        }
    }

    /// [`Bounds::reelection`] to depth [`REELECTION_CI_DEPTH`]: what CI runs
    /// (`tenure-model --ci`), about a million states and twenty seconds per
    /// protocol in the release profile.
    pub const fn reelection_ci(protocol: ProtocolKind) -> Bounds {
        Bounds { max_depth: Some(REELECTION_CI_DEPTH), ..Bounds::reelection(protocol) }
    }

    /// The check of death notices ([`crate::check::Start::Spy`], `--spy`):
    /// from an elected, settled leader, nodes may die twice in all
    /// ([`Action::Kill`]) and come back ([`Action::Revive`]); a spy's notice
    /// about each death goes to each other node ([`Action::Notify`]), and is
    /// dropped by the driver if the node came back meanwhile; each follower
    /// takes at most one clock step and the old leader none, and every state
    /// within ten steps is checked. A failover on notices needs seven steps
    /// (the death, two notices, and the election's two exchanges with their
    /// answers); one on timers fits too (raft, Paxos: a follower's timer and
    /// the other's idle step), and both may interleave.
    /// [`LEADER_ON_NOTICE`] marks a leader elected with no timer fired at
    /// all, which only notices can do (see [`ElectionModel::silent_spies`]).
    pub const fn spy(protocol: ProtocolKind) -> Bounds {
        Bounds {
            clock_steps_per_node: 1,
            leader_clock_steps: Some(0),
            restarts: 0,
            kills: 2,
            max_depth: Some(12),
            ..Bounds::reelection(protocol)
        }
    }

    /// [`Bounds::spy`] to depth [`REELECTION_CI_DEPTH`] (every state within
    /// eight steps): what CI runs (`--ci`), about a second per protocol.
    pub const fn spy_ci(protocol: ProtocolKind) -> Bounds {
        Bounds { max_depth: Some(REELECTION_CI_DEPTH), ..Bounds::spy(protocol) }
    }

    /// The check of changes of members ([`crate::check::member_model`],
    /// `--membership`): from a settled leader whose gate passed, one
    /// change beyond the start's (`start_changes` configurations the start
    /// appended), each follower two clock steps, the old leader none (it
    /// goes silent: a failover), terms two above the leader's, every state
    /// within `depth - 2` steps.
    pub const fn members(protocol: ProtocolKind, start_changes: u8, depth: usize) -> Bounds {
        Bounds {
            clock_steps_per_node: 2,
            leader_clock_steps: Some(0),
            restarts: 0,
            changes: start_changes + 1,
            max_depth: Some(depth),
            ..Bounds::reelection(protocol)
        }
    }

    /// [`Bounds::spy`] for the debug-profile tests: one death, every state
    /// within eight steps (a failover on notices needs seven).
    pub const fn spy_quick(protocol: ProtocolKind) -> Bounds {
        Bounds { kills: 1, max_depth: Some(10), ..Bounds::spy(protocol) }
    }

    /// The release binary's default bounds from the fresh cluster for
    /// `protocol`: no depth bound, except for Paxos ([`Bounds::PAXOS_DEEP`]).
    pub const fn deep(protocol: ProtocolKind) -> Bounds {
        match protocol {
            ProtocolKind::Raft => Bounds::DEEP,
            ProtocolKind::Ranked => Bounds::RANKED_DEEP,
            ProtocolKind::Paxos => Bounds::PAXOS_DEEP,
        }
    }

    /// Ranked, fresh cluster, debug-profile tests. A ranked election takes a
    /// poll (ELECT to all), a wait and a VOTE round, and the start-up leases
    /// must run out first: each node needs two clock steps and the first
    /// leader appears at depth 10. Restarts and duplicates are left to the
    /// contested and elected checks (with them this bound would take minutes
    /// unoptimised).
    pub const RANKED_QUICK: Bounds = Bounds {
        max_term: 3,
        clock_steps_per_node: 2,
        leader_clock_steps: None,
        restarts: 0,
        kills: 0,
        transfers: 0,
        duplicates: 0,
        rng_period: 1,
        changes: 0,
        max_depth: Some(10),
    };

    /// Ranked, release: every interleaving with two clock steps per node (one
    /// step never elects: see [`Bounds::RANKED_QUICK`]) and one restart.
    pub const RANKED_DEEP: Bounds = Bounds {
        max_term: 3,
        clock_steps_per_node: 2,
        leader_clock_steps: None,
        restarts: 1,
        kills: 0,
        transfers: 0,
        duplicates: 0,
        rng_period: 1,
        changes: 0,
        max_depth: None,
    };

    /// Paxos, fresh cluster, debug-profile tests: a poll that meets the
    /// start-up lease of the other nodes, then a second node's poll, Prepare
    /// and Accept elect at depth 10 with one clock step per node. Ballots
    /// are `counter * 65536 + id`, so a term bound of [`PAXOS_MAX_TERM`] is three ballot
    /// counters, as `max_term: 3` is three Raft terms.
    pub const PAXOS_QUICK: Bounds = Bounds {
        max_term: PAXOS_MAX_TERM,
        clock_steps_per_node: 1,
        leader_clock_steps: None,
        restarts: 1,
        kills: 0,
        transfers: 0,
        duplicates: 0,
        rng_period: 1,
        changes: 0,
        max_depth: Some(10),
    };

    /// Paxos, release: one clock step per node and one restart, as
    /// [`Bounds::DEEP`] for Raft, breadth-first to depth 17 (every state
    /// within 15 steps is checked: about 7 million states, 2 minutes, 7 GB).
    /// Without a depth bound this space did not close within 11 minutes
    /// (30 million states and counting).
    pub const PAXOS_DEEP: Bounds = Bounds { max_depth: Some(17), ..Bounds::PAXOS_QUICK };
}

/// One node: its live elector, its durable storage and its clock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// The elector running now (rebuilt from `durable` on restart). Shared
    /// between states: a step changes one node's elector, and the states
    /// before and after it share the other two.
    pub elector: Arc<Elector>,
    /// The elector's role (`status().role`, which allocates), kept current
    /// after every step.
    pub role: Role,
    /// The leader the elector follows (itself too) and that leader's
    /// fencing token, when it knows both: whose log the node's replica
    /// takes. Kept current after every step.
    pub follows: Option<(NodeId, u64)>,
    /// The last [`HardState`] written to storage.
    pub durable: HardState,
    /// The node's clock. It advances only when the node's timer fires.
    pub now: Instant,
    /// Clock steps taken so far.
    pub clock_steps: u8,
    /// True while the node is dead ([`Action::Kill`]): it takes no steps
    /// and nothing is delivered to it until [`Action::Revive`].
    pub down: bool,
    /// Starts of the node so far (its first is 0): a restart or a revival
    /// makes a new incarnation, and a death notice names the one that died.
    pub incarnation: u8,
}

/// A spy's death notice on its way to a node's driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Notice {
    /// The node reported dead.
    pub about: NodeId,
    /// Its incarnation that died.
    pub incarnation: u8,
    /// The node told.
    pub to: NodeId,
}

/// Records kept by the model, not by the nodes, of everything that ever happened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Every `(term, node)` such that the node was leader in that term at some point.
    pub leaders: BTreeSet<(Term, NodeId)>,
    /// Every vote granted, as `(voter, term, candidate)`: from persisted state
    /// (including self-votes) and from vote grants on the wire ([`tenure_core::Message::vote_grant`]).
    pub votes: BTreeSet<(NodeId, Term, NodeId)>,
    /// The highest term each node has had.
    pub max_term: Vec<Term>,
    /// Set when a node's term went below its `max_term`.
    pub term_regressed: Option<(NodeId, Term, Term)>,
    /// Set when the core panicked (a failed debug assertion) during a step.
    pub core_panic: Option<String>,
    /// Set when a core was given a death notice.
    pub notice_taken: bool,
    /// Set when a node took office after a death notice with no node's
    /// timer having fired in the exploration (no clock step taken): only a
    /// notice can have made it stand.
    pub leader_on_notice: bool,
    /// With changes of members: every configuration committed so far,
    /// with the lowest fencing token of a leadership under which it
    /// committed (which may be above the token that wrote it: a leader
    /// commits what it synchronised from an earlier one).
    pub committed: BTreeMap<ConfigId, u64>,
    /// With changes of members: a leader elected (its token, itself)
    /// whose log lacked a configuration committed under a lower token.
    pub stale_leader: Option<(u64, NodeId, ConfigId)>,
    /// With changes of members: two different configurations committed
    /// at one index.
    pub forked_commit: Option<(ConfigId, ConfigId)>,
    /// Set when a leader took office in the exploration holding a
    /// configuration a change made (not the bootstrap's).
    pub leader_in_new_config: bool,
    /// With changes of members: set when a leader appended a change to a
    /// configuration to which another leader had appended a different
    /// change (sibling configurations, see [`crate::membership`]).
    pub siblings: bool,
    /// With changes of members: set when a node stood for election
    /// (pre-candidate or candidate) holding a configuration at an index
    /// where a different one committed: the loser of two siblings.
    pub sibling_stood: bool,
    /// With changes of members: set when a node restarted holding a
    /// configuration a change made (not the bootstrap's), so that its new
    /// elector was handed a changed electorate.
    pub restarted_in_new_config: bool,
}

/// A state of the whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionState {
    /// Node `i` has id `i + 1`.
    pub nodes: Vec<Node>,
    /// Every message ever sent; see [`crate::network`].
    pub network: Network,
    /// Restarts taken so far.
    pub restarts: u8,
    /// Deaths so far ([`Action::Kill`]).
    pub kills: u8,
    /// Death notices on their way ([`Action::Notify`]).
    pub notices: BTreeSet<Notice>,
    /// Leadership transfers taken so far.
    pub transfers: u8,
    /// Duplicates made so far.
    pub duplicates: u8,
    /// What the properties are checked against.
    pub ghost: Arc<Ghost>,
    /// With changes of members: every node's log and the leaderships.
    pub members: Option<Arc<MembershipState>>,
}

/// A step of the system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The node's timer fires: its clock jumps to `poll_timeout()`.
    Timeout(NodeId),
    /// Time passes on the node up to just before its timer fires
    /// ([`IDLE_MARGIN`] before `poll_timeout()`), with no input: messages
    /// delivered next arrive late, after the leases the node granted when it
    /// set that timer have run out.
    Idle(NodeId),
    /// A message in flight is delivered (and leaves the network).
    Deliver(Envelope),
    /// The network makes one more copy of a message in flight.
    Duplicate(Envelope),
    /// A message in flight is lost. Only a prefix takes this step (see
    /// [`crate::check::deposed_prefix`]): an exploration never does, since
    /// a message never delivered is a message lost.
    Lose(Envelope),
    /// The node crashes and restarts from its durable state (atomically: a node
    /// that is down simply takes no steps, which any interleaving already covers).
    Restart(NodeId),
    /// The node dies (and is down: no steps, no deliveries) until revived;
    /// a spy reports its death to every other node ([`Action::Notify`]).
    Kill(NodeId),
    /// A dead node starts again from its durable state, as a new incarnation.
    Revive(NodeId),
    /// A death notice reaches its node's driver, which gives it to the core
    /// ([`tenure_core::Protocol::handle_peer_dead`]) only if it names the
    /// dead node's current incarnation; a notice about an incarnation that
    /// has since restarted is dropped (the driver's incarnation check).
    Notify(Notice),
    /// The leader `from` hands leadership to `to`.
    Transfer {
        /// The current leader.
        from: NodeId,
        /// The designated successor.
        to: NodeId,
    },
    /// A new leader, synchronising, takes the fresher log of `from`, a
    /// voter that follows it (see [`crate::membership`]).
    Sync {
        /// The new leader.
        leader: NodeId,
        /// The node whose log it takes.
        from: NodeId,
    },
    /// A new leader ends its synchronisation and writes its no-op.
    WriteNoop(NodeId),
    /// A node that follows the leadership of `token` takes its log.
    Replicate {
        /// The leadership's fencing token.
        token: u64,
        /// The node.
        to: NodeId,
    },
    /// A leader appends a configuration.
    Append {
        /// The leader.
        leader: NodeId,
        /// The change.
        change: Change,
    },
    /// The member a committed configuration removes learns that it
    /// committed: it no longer stands.
    LearnCommit(NodeId),
    /// The elector is told the configuration its node's log holds (only
    /// with [`MemberDriver::LateElectorate`]; otherwise it is told at once).
    Tell(NodeId),
}

/// What one input did to a node ([`ElectionModel`]'s `step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stepped {
    /// The input was refused (a transfer the core turned down): no step.
    Refused,
    /// The node's decision state did not change and it output nothing.
    Ignored,
    /// Anything else.
    Taken,
}

/// The model of a three-node cluster running the real election core.
#[derive(Clone, Debug)]
pub struct ElectionModel {
    /// The protocol every node runs.
    pub protocol: ProtocolKind,
    /// Exploration limits.
    pub bounds: Bounds,
    /// What restarts load.
    pub durability: Durability,
    /// Steps taken from the fresh cluster to reach the initial state.
    prefix: Vec<Action>,
    /// True when a delivery the receiver ignores is not a step of the
    /// exploration: its successor would differ from its predecessor only by
    /// one envelope fewer in flight, and a state with more envelopes in
    /// flight can do everything one with fewer can (it may simply never
    /// deliver them; no property reads the network), so the successor adds no
    /// behaviour. Off only where a concrete run is replayed or built
    /// ([`ElectionModel::exact`]), which may deliver such a message.
    prune_ignored: bool,
    /// True when each node's clock-step budget counts from the end of
    /// `prefix` ([`ElectionModel::resuming_after`]), false when the prefix's
    /// clock steps count against it.
    fresh_clock_budget: bool,
    /// With a fresh clock budget: the node that leads when the exploration
    /// starts (its budget is [`Bounds::leader_clock_steps`]).
    leader_at_start: Option<usize>,
    /// The highest term any node had when the exploration starts (after
    /// `prefix`): [`CONTESTED_TERM`] counts only terms above it.
    base_term: Term,
    /// False when no death notice is ever delivered
    /// ([`ElectionModel::silent_spies`]).
    spies_speak: bool,
    configs: Vec<Config>,
    /// Changes of members ([`ElectionModel::with_members`]).
    pub membership: Option<MembershipSpec>,
    /// With changes of members: configurations committed when the
    /// exploration starts.
    base_committed: usize,
}

/// The bootstrap voters, in preference order.
fn voters() -> Vec<NodeId> {
    (1..=NODE_COUNT as u64).map(NodeId).collect()
}

fn index(id: NodeId) -> usize {
    usize::try_from(id.0 - 1).expect("node ids are small")
}

impl ElectionModel {
    /// A model of the Raft protocol with the given bounds and storage behaviour.
    pub fn new(bounds: Bounds, durability: Durability) -> Self {
        Self::of(ProtocolKind::Raft, bounds, durability)
    }

    /// A model of `protocol` with the given bounds and storage behaviour.
    pub fn of(protocol: ProtocolKind, bounds: Bounds, durability: Durability) -> Self {
        Self::build(protocol, bounds, durability, None)
    }

    /// A model of `protocol` with changes of members: the three bootstrap
    /// voters and the spare `n4`, whose logs hold configurations as
    /// [`crate::membership`] says, explored as `spec` says (storage faithful).
    pub fn with_members(protocol: ProtocolKind, bounds: Bounds, spec: MembershipSpec) -> Self {
        Self::build(protocol, bounds, Durability::Faithful, Some(spec))
    }

    fn build(
        protocol: ProtocolKind,
        bounds: Bounds,
        durability: Durability,
        membership: Option<MembershipSpec>,
    ) -> Self {
        let nodes = NODE_COUNT + usize::from(membership.is_some());
        let configs = (1..=nodes as u64)
            .map(|id| {
                let mut cfg =
                    Config::new(NodeId(id), voters(), HEARTBEAT_INTERVAL, ELECTION_TIMEOUT);
                cfg.clock_drift_ppm = CLOCK_DRIFT_PPM;
                // The spare is no bootstrap voter: it joins a running cluster.
                assert_eq!(
                    cfg.validate_settings_for(protocol),
                    Ok(()),
                    "the model's configuration"
                );
                cfg
            })
            .collect();
        ElectionModel {
            protocol,
            bounds,
            durability,
            prefix: Vec::new(),
            prune_ignored: true,
            fresh_clock_budget: false,
            leader_at_start: None,
            base_term: Term(0),
            spies_speak: true,
            configs,
            membership,
            base_committed: 1,
        }
    }

    /// The ids of the modelled nodes.
    pub(crate) fn ids(&self) -> Vec<NodeId> {
        (1..=self.configs.len() as u64).map(NodeId).collect()
    }

    /// The driver of changes of members, if there are any.
    pub(crate) fn member_driver(&self) -> Option<MemberDriver> {
        self.membership.as_ref().map(|m| m.driver)
    }

    /// The same model, exploring from the state that `prefix` leads to from the
    /// fresh cluster instead of from the fresh cluster itself. Panics if a step
    /// of `prefix` is not possible (it is replayed by [`Model::next_state`]).
    pub fn starting_after(mut self, prefix: Vec<Action>) -> Self {
        self.prefix = prefix;
        let start = self.replay_prefix();
        self.base_term = start.ghost.max_term.iter().copied().max().unwrap_or_default();
        if start.members.is_some() {
            self.base_committed = start.ghost.committed.len();
        }
        self
    }

    /// The same model, taking every delivery as a step, including those the
    /// receiver ignores (see `prune_ignored`): for replaying or building a
    /// concrete run, not for exploring.
    pub fn exact(mut self) -> Self {
        self.prune_ignored = false;
        self
    }

    /// Like [`ElectionModel::starting_after`], but each node's clock-step
    /// budget ([`Bounds::clock_steps_per_node`]) counts from the state that
    /// `prefix` leads to: the prefix may take any number of clock steps, and
    /// every node may take the bound's number of steps after it (the node
    /// leading then, [`Bounds::leader_clock_steps`] if set). Panics if a
    /// step of `prefix` is not possible.
    pub fn resuming_after(mut self, prefix: Vec<Action>) -> Self {
        self.fresh_clock_budget = true;
        self = self.starting_after(prefix);
        let start = self.replay_prefix();
        // The leader of the highest term, if a deposed one has not heard of
        // it yet.
        self.leader_at_start = start
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.role == Role::Leader)
            .max_by_key(|(_, n)| n.elector.hard_state().term)
            .map(|(i, _)| i);
        self
    }

    /// The same model, in which deaths are never reported: no
    /// [`Action::Notify`] is ever enabled. A control for the checks with
    /// deaths ([`Bounds::kills`]): what they reach only with notices, this
    /// model does not reach.
    pub fn silent_spies(mut self) -> Self {
        self.spies_speak = false;
        self
    }

    /// The clock steps node `i` may take in all (see [`Bounds::leader_clock_steps`]).
    fn clock_limit(&self, i: usize) -> u8 {
        match self.bounds.leader_clock_steps {
            Some(steps) if self.leader_at_start == Some(i) => steps,
            _ => self.bounds.clock_steps_per_node,
        }
    }

    /// The state `self.prefix` leads to from the fresh cluster. Panics if a
    /// step is not enabled there.
    fn replay_prefix(&self) -> ElectionState {
        let (unbounded_clocks, exact);
        let replayer = if self.fresh_clock_budget {
            let bounds =
                Bounds { clock_steps_per_node: u8::MAX, leader_clock_steps: None, ..self.bounds };
            let model = ElectionModel { bounds, prefix: Vec::new(), ..self.clone() };
            unbounded_clocks = ElectionModel { leader_at_start: None, ..model }.exact();
            &unbounded_clocks
        } else {
            exact = ElectionModel { prefix: Vec::new(), ..self.clone() }.exact();
            &exact
        };
        let mut state = self.fresh_state();
        for action in &self.prefix {
            let mut enabled = Vec::new();
            replayer.actions(&state, &mut enabled);
            // A loss is never offered (see `Action::Lose`), but a prefix may
            // take one of a message in flight.
            let lost = matches!(action, Action::Lose(_));
            assert!(lost || enabled.contains(action), "prefix step {action:?} is not enabled");
            state =
                replayer.next_state(&state, action.clone()).expect("prefix step changes the state");
        }
        if self.fresh_clock_budget {
            for node in &mut state.nodes {
                node.clock_steps = 0;
            }
        }
        state
    }

    /// The fresh cluster: every node a follower in term 0 at time zero.
    fn fresh_state(&self) -> ElectionState {
        let nodes = (0..self.configs.len())
            .map(|i| Node {
                elector: Arc::new(self.start_node(i, HardState::default(), Instant::ZERO)),
                role: Role::Follower,
                follows: None,
                durable: HardState::default(),
                now: Instant::ZERO,
                clock_steps: 0,
                down: false,
                incarnation: 0,
            })
            .collect();
        let mut state = ElectionState {
            nodes,
            network: Network::new(),
            restarts: 0,
            kills: 0,
            notices: BTreeSet::new(),
            transfers: 0,
            duplicates: 0,
            ghost: Arc::new(Ghost {
                max_term: vec![Term(0); self.configs.len()],
                committed: match self.membership {
                    Some(_) => [(ConfigId::BOOTSTRAP, 0)].into(),
                    None => BTreeMap::new(),
                },
                ..Ghost::default()
            }),
            members: self
                .membership
                .as_ref()
                .map(|_| Arc::new(MembershipState::new(self.configs.len()))),
        };
        // Each new elector's startup output (events only) is drained, as a
        // restart drains it: the first input of a node is then ignored if
        // it changes nothing.
        for i in 0..self.configs.len() {
            self.step(&mut state, i, |_, _| true);
        }
        state
    }

    fn start_node(&self, i: usize, state: HardState, now: Instant) -> Elector {
        Elector::new(
            self.protocol,
            self.configs[i].clone(),
            state,
            ModelRng::new(self.bounds.rng_period),
            now,
        )
    }

    /// Runs one input on node `i`, then handles its output by the contract:
    /// persist first, then send; all in this one step, so a crash (a separate
    /// step) falls either before the input or after both.
    fn step(
        &self,
        state: &mut ElectionState,
        i: usize,
        input: impl FnOnce(&mut Elector, Instant) -> bool,
    ) -> Stepped {
        let id = NodeId(i as u64 + 1);
        let now = state.nodes[i].now;
        let mut elector = Elector::clone(&state.nodes[i].elector);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let accepted = input(&mut elector, now);
            (accepted, elector.take_output())
        }));
        let output: Output = match outcome {
            Ok((false, _)) => return Stepped::Refused,
            Ok((true, output)) => output,
            Err(payload) => {
                let msg = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "non-string panic".to_string());
                Arc::make_mut(&mut state.ghost).core_panic = Some(format!("{id:?}: {msg}"));
                return Stepped::Taken;
            }
        };
        // Decided before the drained elector replaces the old one (equality
        // leaves out what is only reported, see `crate::elector`).
        let ignored = output.is_empty() && elector == *state.nodes[i].elector;
        if let Some(reason) = output.events.iter().find_map(|e| match e {
            Event::Halted { reason } => Some(reason),
            _ => None,
        }) {
            // The core stopped itself on a broken invariant: as bad as a panic.
            Arc::make_mut(&mut state.ghost).core_panic = Some(format!("{id:?} halted: {reason}"));
        }
        if let Some(hs) = output.persist {
            state.nodes[i].durable = hs;
            if let Some(candidate) = hs.voted_for {
                record_vote(&mut state.ghost, (id, hs.term, candidate));
            }
        }
        for (to, msg) in output.messages {
            if let Some(term) = msg.vote_grant() {
                record_vote(&mut state.ghost, (id, term, to));
            }
            state.network.send(Envelope { from: id, to, msg });
        }
        state.nodes[i].elector = Arc::new(elector);
        self.observe(state, i);
        if ignored {
            Stepped::Ignored
        } else {
            Stepped::Taken
        }
    }

    /// The driver of `notice.to` gets `notice`: it gives it to the core if it
    /// names the dead node's current incarnation, and drops it if the node
    /// came back since.
    fn notify(&self, state: &mut ElectionState, notice: Notice) {
        let dead = &state.nodes[index(notice.about)];
        if dead.down && dead.incarnation == notice.incarnation {
            Arc::make_mut(&mut state.ghost).notice_taken = true;
            self.step(state, index(notice.to), |e, now| {
                e.handle_peer_dead(now, notice.about);
                true
            });
        }
    }

    /// Node `i` starts again from its durable state (a restart or a
    /// revival), as a new incarnation.
    fn start_again(&self, state: &mut ElectionState, i: usize) {
        let node = &mut state.nodes[i];
        if self.bounds.kills > 0 {
            // Read only by death notices: without deaths, restarts that
            // differ only in their count are one state.
            node.incarnation = node.incarnation.wrapping_add(1);
        }
        let loaded = self.durability.load(node.durable);
        node.elector = Arc::new(self.start_node(i, loaded, node.now));
        // The new elector's startup output (events only) is drained by a no-op step.
        self.step(state, i, |_, _| true);
        if let Some(members) = &mut state.members {
            // The replica forgets its commit index: the node learns again
            // what committed. The driver tells the new elector the
            // configuration its log holds before its first timer.
            Arc::make_mut(members).knows_committed[i] = false;
            let changed = !members.logs[i].configs.is_empty();
            self.tell(state, i);
            if changed && !state.ghost.restarted_in_new_config {
                Arc::make_mut(&mut state.ghost).restarted_in_new_config = true;
            }
        }
    }

    /// Updates the ghost records from node `i`'s new state.
    fn observe(&self, state: &mut ElectionState, i: usize) {
        let id = NodeId(i as u64 + 1);
        let elector = &state.nodes[i].elector;
        let term = elector.hard_state().term;
        let status = elector.status();
        let role = status.role;
        state.nodes[i].role = role;
        state.nodes[i].follows = status.leader.zip(status.fencing_token.map(|t| t.0));
        // The ghost is shared between states: copied only when it changes.
        let ghost = &state.ghost;
        let max = ghost.max_term[i];
        let regressed = term < max && ghost.term_regressed.is_none();
        let led = role == Role::Leader && !ghost.leaders.contains(&(term, id));
        let no_timer = state.nodes.iter().all(|n| n.clock_steps == 0);
        let on_notice = led && ghost.notice_taken && no_timer;
        if regressed || term > max || led {
            let ghost = Arc::make_mut(&mut state.ghost);
            if regressed {
                ghost.term_regressed = Some((id, max, term));
            }
            ghost.max_term[i] = max.max(term);
            if led {
                ghost.leaders.insert((term, id));
            }
            if on_notice {
                ghost.leader_on_notice = true;
            }
        }
        if led && state.members.is_some() {
            self.took_office(state, i);
        }
        if matches!(role, Role::PreCandidate | Role::Candidate) && !state.ghost.sibling_stood {
            let lost = state.members.as_ref().is_some_and(|m| {
                let log = &m.logs[i];
                state.ghost.committed.keys().any(|c| {
                    let at = usize::try_from(c.index).expect("small");
                    at >= 1 && log.configs.len() >= at && log.id_at(at) != *c
                })
            });
            if lost {
                Arc::make_mut(&mut state.ghost).sibling_stood = true;
            }
        }
    }
}

/// The driver's part in changes of members (see [`crate::membership`]).
impl ElectionModel {
    /// Hands node `i`'s elector the configuration its log holds (a no-op
    /// for the elector if it already counts over it).
    fn tell(&self, state: &mut ElectionState, i: usize) {
        let Some(members) = &state.members else { return };
        let id = NodeId(i as u64 + 1);
        let withhold = self.member_driver() == Some(MemberDriver::NoPosition);
        let electorate = members.logs[i].electorate(id, members.knows_committed[i], withhold);
        if *state.nodes[i].elector.electorate() != electorate {
            self.step(state, i, |e, now| {
                e.handle_electorate(now, electorate);
                true
            });
        }
    }

    /// Node `i`'s log changed: its elector is told now, unless the planted
    /// bug [`MemberDriver::LateElectorate`] tells it later ([`Action::Tell`]).
    fn log_changed(&self, state: &mut ElectionState, i: usize) {
        if self.member_driver() != Some(MemberDriver::LateElectorate) {
            self.tell(state, i);
        }
    }

    /// Node `i`'s elector just took office: its leadership is recorded with
    /// the log it holds, which must hold every configuration committed
    /// under a lower token.
    fn took_office(&self, state: &mut ElectionState, i: usize) {
        let id = NodeId(i as u64 + 1);
        let Some((leader, token)) = state.nodes[i].follows.filter(|&(l, _)| l == id) else {
            return;
        };
        let members = state.members.as_mut().expect("with members");
        if members.leadership(token).is_some() {
            return;
        }
        let log = members.logs[i].clone();
        let new_config = !log.configs.is_empty();
        let missing = missing_commit(&state.ghost.committed, token, &log);
        let n = members.logs.len();
        Arc::make_mut(members).leaderships.push(Leadership {
            token,
            leader,
            elected_with: log.clone(),
            log,
            noop_at: None,
            acked: vec![None; n],
            committed: None,
        });
        if new_config || missing.is_some() {
            let ghost = Arc::make_mut(&mut state.ghost);
            ghost.leader_in_new_config |= new_config;
            if let Some(c) = missing.filter(|_| ghost.stale_leader.is_none()) {
                ghost.stale_leader = Some((token, leader, c));
            }
        }
    }

    /// Recounts the acknowledgements of the leadership of `token` and
    /// records what committed.
    fn recount(&self, state: &mut ElectionState, token: u64) {
        let members = Arc::make_mut(state.members.as_mut().expect("with members"));
        let Some(l) = members.leadership_mut(token) else { return };
        let newly = l.recount();
        if newly.is_empty() {
            return;
        }
        let ghost = Arc::make_mut(&mut state.ghost);
        for c in newly {
            if let Some(other) = ghost.committed.keys().find(|o| o.index == c.index && **o != c) {
                ghost.forked_commit.get_or_insert((*other, c));
            }
            let under = ghost.committed.entry(c).or_insert(token);
            *under = (*under).min(token);
            let under = *under;
            // Raft's leader completeness: an entry committed under `under`
            // is held by every leader of a later token, those elected
            // before it committed too.
            let stale = members
                .leaderships
                .iter()
                .find(|l| l.token > under && !l.elected_with.holds(c))
                .map(|l| (l.token, l.leader, c));
            if ghost.stale_leader.is_none() {
                ghost.stale_leader = stale;
            }
        }
    }

    /// The membership actions enabled in `state`.
    fn member_actions(&self, state: &ElectionState, actions: &mut Vec<Action>) {
        let (Some(members), Some(spec)) = (&state.members, &self.membership) else { return };
        let up = |i: usize| !state.nodes[i].down;
        let follows = |i: usize, leader: NodeId, token: u64| {
            up(i) && state.nodes[i].follows == Some((leader, token))
        };
        for (i, node) in state.nodes.iter().enumerate() {
            let id = NodeId(i as u64 + 1);
            if !up(i) {
                continue;
            }
            let log = &members.logs[i];
            // A leader of its own token, with its leadership recorded.
            let leading = node.role == Role::Leader;
            let own = node.follows.filter(|&(l, _)| leading && l == id);
            if let Some(l) = own.and_then(|(_, token)| members.leadership(token)) {
                let cfg = log.members();
                if l.noop_at.is_none() {
                    let mut promised = 0;
                    for &v in &cfg.voters {
                        let j = index(v);
                        if v == id {
                            promised += 1;
                        } else if follows(j, id, l.token) {
                            if members.logs[j].freshness() > log.freshness() {
                                actions.push(Action::Sync { leader: id, from: v });
                            } else {
                                promised += 1;
                            }
                        }
                    }
                    if promised >= cfg.quorum() {
                        actions.push(Action::WriteNoop(id));
                    }
                } else {
                    let gated = spec.driver != MemberDriver::UngatedChanges;
                    let may_change = (l.gate_passed() || !gated)
                        && members.changes < self.bounds.changes
                        && state.ghost.committed.contains_key(&log.config_id());
                    if may_change {
                        for change in next_changes(&cfg, &spec.removable) {
                            actions.push(Action::Append { leader: id, change });
                        }
                    }
                }
            }
            let m = log.members();
            let committed = state.ghost.committed.contains_key(&log.config_id());
            if m.departing == Some(id) && committed && !members.knows_committed[i] {
                actions.push(Action::LearnCommit(id));
            }
            if spec.driver == MemberDriver::LateElectorate {
                let told = log.electorate(id, members.knows_committed[i], false);
                if *node.elector.electorate() != told {
                    actions.push(Action::Tell(id));
                }
            }
        }
        for l in &members.leaderships {
            let Some(_) = l.noop_at else { continue };
            let len = l.log.configs.len();
            for (j, log) in members.logs.iter().enumerate() {
                let to = NodeId(j as u64 + 1);
                let stale = *log != l.log || l.acked[j] != Some(len);
                if to != l.leader && stale && follows(j, l.leader, l.token) {
                    actions.push(Action::Replicate { token: l.token, to });
                }
            }
        }
    }

    /// Takes a membership action; `None` if it is not enabled.
    fn member_step(&self, next: &mut ElectionState, action: Action) -> Option<()> {
        let mut enabled = Vec::new();
        self.member_actions(next, &mut enabled);
        if !enabled.contains(&action) {
            return None;
        }
        match action {
            Action::Sync { leader, from } => {
                let (i, token) = (index(leader), next.nodes[index(leader)].follows?.1);
                let m = members(next);
                let log = m.logs[index(from)].clone();
                m.logs[i] = log.clone();
                m.leadership_mut(token)?.log = log;
                self.log_changed(next, i);
            }
            Action::WriteNoop(leader) => {
                let (i, token) = (index(leader), next.nodes[index(leader)].follows?.1);
                let m = members(next);
                m.logs[i].last_token = token;
                let log = m.logs[i].clone();
                let l = m.leadership_mut(token)?;
                l.noop_at = Some(log.configs.len());
                l.acked[i] = Some(log.configs.len());
                l.log = log;
                self.recount(next, token);
            }
            Action::Replicate { token, to } => {
                let j = index(to);
                let m = members(next);
                let log = m.leadership(token)?.log.clone();
                let len = log.configs.len();
                m.logs[j] = log;
                // Told first, then counted (the contract); the planted bug
                // counts first and tells later.
                self.log_changed(next, j);
                members(next).leadership_mut(token)?.acked[j] = Some(len);
                self.recount(next, token);
            }
            Action::Append { leader, change } => {
                let (i, token) = (index(leader), next.nodes[index(leader)].follows?.1);
                let m = members(next);
                m.changes += 1;
                let parent = m.logs[i].configs.clone();
                let sibling = |log: &crate::membership::Log| {
                    log.configs.len() > parent.len()
                        && log.configs[..parent.len()] == parent[..]
                        && log.configs[parent.len()].change != change
                };
                let siblings =
                    m.logs.iter().chain(m.leaderships.iter().map(|l| &l.log)).any(sibling);
                m.logs[i].configs.push(Entry { token, change });
                let log = m.logs[i].clone();
                let len = log.configs.len();
                m.leadership_mut(token)?.log = log;
                self.log_changed(next, i);
                members(next).leadership_mut(token)?.acked[i] = Some(len);
                self.recount(next, token);
                if siblings && !next.ghost.siblings {
                    Arc::make_mut(&mut next.ghost).siblings = true;
                }
            }
            Action::LearnCommit(id) => {
                members(next).knows_committed[index(id)] = true;
                self.tell(next, index(id));
            }
            Action::Tell(id) => self.tell(next, index(id)),
            _ => return None,
        }
        Some(())
    }
}

impl Model for ElectionModel {
    type State = ElectionState;
    type Action = Action;

    fn init_states(&self) -> Vec<ElectionState> {
        vec![self.replay_prefix()]
    }

    fn actions(&self, state: &ElectionState, actions: &mut Vec<Action>) {
        if state.ghost.core_panic.is_some() {
            // The core's state after a panic is meaningless; stop here.
            return;
        }
        for (i, node) in state.nodes.iter().enumerate() {
            let id = NodeId(i as u64 + 1);
            if node.down {
                actions.push(Action::Revive(id));
                continue;
            }
            if state.kills < self.bounds.kills {
                actions.push(Action::Kill(id));
            }
            let deadline = node.elector.poll_timeout();
            if node.clock_steps < self.clock_limit(i) && deadline != Instant::MAX {
                actions.push(Action::Timeout(id));
                if deadline - IDLE_MARGIN > node.now {
                    actions.push(Action::Idle(id));
                }
            }
        }
        let up = |id: NodeId| !state.nodes[index(id)].down;
        let deliverable = state.network.distinct().filter(|e| up(e.to));
        actions.extend(deliverable.cloned().map(Action::Deliver));
        if self.spies_speak {
            let notices = state.notices.iter().filter(|n| up(n.to)).copied();
            actions.extend(notices.map(Action::Notify));
        }
        if state.duplicates < self.bounds.duplicates {
            actions.extend(state.network.distinct().cloned().map(Action::Duplicate));
        }
        if state.restarts < self.bounds.restarts {
            actions.extend(self.ids().into_iter().filter(|&id| up(id)).map(Action::Restart));
        }
        if state.transfers < self.bounds.transfers {
            for (i, node) in state.nodes.iter().enumerate() {
                if node.role == Role::Leader && !node.down {
                    let from = NodeId(i as u64 + 1);
                    for to in self.ids().into_iter().filter(|&to| to != from) {
                        actions.push(Action::Transfer { from, to });
                    }
                }
            }
        }
        if state.members.is_some() {
            self.member_actions(state, actions);
        }
    }

    fn next_state(&self, last: &ElectionState, action: Action) -> Option<ElectionState> {
        let mut next = last.clone();
        match action {
            Action::Timeout(id) => {
                let i = index(id);
                let deadline = next.nodes[i].elector.poll_timeout();
                let node = &mut next.nodes[i];
                node.now = node.now.max(deadline);
                node.clock_steps += 1;
                self.step(&mut next, i, |e, now| {
                    e.handle_timeout(now);
                    true
                });
            }
            Action::Idle(id) => {
                let node = &mut next.nodes[index(id)];
                let until = node.elector.poll_timeout() - IDLE_MARGIN;
                if until <= node.now {
                    return None;
                }
                node.now = until;
                node.clock_steps += 1;
            }
            Action::Deliver(env) => {
                if !next.network.take(&env) {
                    return None;
                }
                let Envelope { from, to, msg } = env;
                let stepped = self.step(&mut next, index(to), |e, now| {
                    e.handle_message(now, from, msg);
                    true
                });
                if stepped == Stepped::Ignored && self.prune_ignored {
                    // Subsumed by `last`, see `ElectionModel::prune_ignored`.
                    return None;
                }
            }
            Action::Duplicate(env) => {
                next.duplicates += 1;
                next.network.send(env);
            }
            Action::Lose(env) => {
                if !next.network.take(&env) {
                    return None;
                }
            }
            Action::Restart(id) => {
                next.restarts += 1;
                self.start_again(&mut next, index(id));
            }
            Action::Kill(id) => kill(&mut next, id),
            Action::Revive(id) => {
                let i = index(id);
                next.nodes[i].down = false;
                self.start_again(&mut next, i);
            }
            Action::Notify(notice) => {
                if !next.notices.remove(&notice) {
                    return None;
                }
                self.notify(&mut next, notice);
            }
            Action::Transfer { from, to } => {
                next.transfers += 1;
                let stepped = self
                    .step(&mut next, index(from), |e, now| e.transfer_leadership(now, to).is_ok());
                if stepped == Stepped::Refused {
                    return None;
                }
            }
            Action::Sync { .. }
            | Action::WriteNoop(_)
            | Action::Replicate { .. }
            | Action::Append { .. }
            | Action::LearnCommit(_)
            | Action::Tell(_) => self.member_step(&mut next, action)?,
        }
        Some(next)
    }

    fn within_boundary(&self, state: &ElectionState) -> bool {
        state.ghost.max_term.iter().all(|t| t.0 <= self.bounds.max_term)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_LEADER_PER_TERM, |_, s: &ElectionState| {
                one_leader_per_term(&s.ghost)
            }),
            Property::always(ONE_VOTE_PER_TERM, |_, s: &ElectionState| one_vote_per_term(&s.ghost)),
            Property::always(TERMS_NEVER_DECREASE, |_, s: &ElectionState| {
                s.ghost.term_regressed.is_none()
            }),
            Property::always(CORE_ASSERTIONS_HOLD, |_, s: &ElectionState| {
                s.ghost.core_panic.is_none()
            }),
            Property::sometimes(LEADER_ELECTED, |_, s: &ElectionState| !s.ghost.leaders.is_empty()),
            Property::sometimes(CONTESTED_TERM, |m: &Self, s: &ElectionState| {
                contested(&s.ghost, m.base_term)
            }),
            Property::sometimes(RIVAL_CANDIDATES, |_, s: &ElectionState| {
                let candidates = s.nodes.iter().filter(|n| n.role == Role::Candidate);
                candidates.count() >= 2
            }),
            Property::sometimes(LEADERS_IN_TWO_TERMS, |_, s: &ElectionState| {
                let terms: BTreeSet<Term> = s.ghost.leaders.iter().map(|&(t, _)| t).collect();
                terms.len() >= 2
            }),
            Property::sometimes(LEADER_ON_NOTICE, |_, s: &ElectionState| s.ghost.leader_on_notice),
            Property::always(LEADER_HOLDS_COMMITTED_CONFIGS, |_, s: &ElectionState| {
                s.ghost.stale_leader.is_none()
            }),
            Property::always(COMMITTED_CONFIGS_FORM_A_CHAIN, |_, s: &ElectionState| {
                s.ghost.forked_commit.is_none()
            }),
            Property::sometimes(CHANGE_COMMITTED, |m: &Self, s: &ElectionState| {
                s.members.is_some() && s.ghost.committed.len() > m.base_committed
            }),
            Property::sometimes(LEADER_IN_NEW_CONFIG, |_, s: &ElectionState| {
                s.ghost.leader_in_new_config
            }),
            Property::sometimes(SIBLING_CONFIGS, |_, s: &ElectionState| s.ghost.siblings),
            Property::sometimes(SIBLING_STOOD, |_, s: &ElectionState| s.ghost.sibling_stood),
            Property::sometimes(RESTARTED_IN_NEW_CONFIG, |_, s: &ElectionState| {
                s.ghost.restarted_in_new_config
            }),
        ]
    }
}

/// The membership part of `state`, for a change.
fn members(state: &mut ElectionState) -> &mut MembershipState {
    Arc::make_mut(state.members.as_mut().expect("with members"))
}

/// Node `id` dies: it is down until revived, and a spy's notice about its
/// incarnation sets out to every other node.
fn kill(state: &mut ElectionState, id: NodeId) {
    let i = index(id);
    state.kills += 1;
    state.nodes[i].down = true;
    let incarnation = state.nodes[i].incarnation;
    let ids = (1..=state.nodes.len() as u64).map(NodeId);
    for to in ids.filter(|&to| to != id) {
        state.notices.insert(Notice { about: id, incarnation, to });
    }
}

/// Safety: no two nodes were ever leader in the same term.
pub const ONE_LEADER_PER_TERM: &str = "at most one leader per term";
/// Safety: no node ever granted votes to two candidates in one term, across restarts.
pub const ONE_VOTE_PER_TERM: &str = "at most one vote per node and term";
/// Safety: a node's term never went down, across restarts.
pub const TERMS_NEVER_DECREASE: &str = "terms never decrease";
/// Safety: no debug assertion in the core fired.
pub const CORE_ASSERTIONS_HOLD: &str = "core debug assertions hold";
/// Reachability: some node becomes leader (the model is not vacuous).
pub const LEADER_ELECTED: &str = "a leader is elected";
/// Reachability: two nodes stand as candidates in the same term (one above
/// every term of the state the exploration starts from).
pub const CONTESTED_TERM: &str = "two candidates stand in one term";
/// Reachability: two nodes are candidates at the same time (in any terms).
/// Under Paxos this is how an election is contested: each ballot names its
/// one proposer, so two candidates never stand in one term
/// ([`CONTESTED_TERM`] is unreachable there).
pub const RIVAL_CANDIDATES: &str = "two nodes are candidates at once";
/// Reachability: leaders are elected in two different terms.
pub const LEADERS_IN_TWO_TERMS: &str = "leaders are elected in two terms";
/// Reachability: after a node died, a leader is elected on the death notice
/// a spy sent, no node's timer having fired in the exploration (so nobody
/// stood on a timeout): only checks with deaths ([`Bounds::kills`]) that
/// start from an elected leader with a fresh clock budget
/// ([`ElectionModel::resuming_after`]) can reach it.
pub const LEADER_ON_NOTICE: &str = "a leader is elected on a death notice, no timer fired";

/// Safety, with changes of members: every leader took office holding (in
/// its log) every configuration committed under a token below its own, and
/// no configuration commits under a lower token after a leader that lacks
/// it was elected (Raft's leader completeness: "committed under" a token
/// is committed by the leadership of that token, which may be later than
/// the token that wrote the entry). This is what the electors' freshness rule is for
/// (`docs/MEMBERSHIP.md`: the electors elect only a node whose
/// configuration is at least the newest committed one).
pub const LEADER_HOLDS_COMMITTED_CONFIGS: &str =
    "every leader holds every configuration committed under a lower token";
/// Safety, with changes of members: no two different configurations
/// commit at one index.
pub const COMMITTED_CONFIGS_FORM_A_CHAIN: &str = "committed configurations form a chain";
/// Reachability, with changes of members: a configuration commits that was
/// not committed when the exploration started.
pub const CHANGE_COMMITTED: &str = "a change of members commits";
/// Reachability, with changes of members: a leader takes office in the
/// exploration holding a configuration that a change made (from the
/// bootstrap voters: after a change appended in the exploration; from four
/// voters: after `n4` was promoted, or a voter removed).
pub const LEADER_IN_NEW_CONFIG: &str = "a leader is elected in a changed configuration";
/// Reachability, with changes of members: two leaders appended different
/// changes to one configuration (sibling configurations: they name
/// different members, and each leader's gate may have passed).
pub const SIBLING_CONFIGS: &str = "two leaders append different changes to one configuration";
/// Reachability, with changes of members: a node stands for election
/// (pre-candidate or candidate) holding a configuration at an index where
/// a different one committed (it holds the sibling that lost): the run in
/// which comparing configuration positions alone elected a second leader
/// (see [`tenure_core::Freshness`]).
pub const SIBLING_STOOD: &str = "a node stands holding a sibling of a committed configuration";
/// Reachability, with changes of members: a node restarts holding a
/// configuration a change made (from the bootstrap voters: one appended in
/// the exploration), and its new elector is handed that electorate.
pub const RESTARTED_IN_NEW_CONFIG: &str = "a node restarts holding a changed configuration";

/// The safety properties, whose discovery is a counterexample.
pub const SAFETY_PROPERTIES: [&str; 6] = [
    ONE_LEADER_PER_TERM,
    ONE_VOTE_PER_TERM,
    TERMS_NEVER_DECREASE,
    CORE_ASSERTIONS_HOLD,
    LEADER_HOLDS_COMMITTED_CONFIGS,
    COMMITTED_CONFIGS_FORM_A_CHAIN,
];

/// The reachability properties, whose discovery is an example.
pub const REACHABILITY_PROPERTIES: [&str; 10] = [
    LEADER_ELECTED,
    CONTESTED_TERM,
    RIVAL_CANDIDATES,
    LEADERS_IN_TWO_TERMS,
    LEADER_ON_NOTICE,
    CHANGE_COMMITTED,
    LEADER_IN_NEW_CONFIG,
    SIBLING_CONFIGS,
    SIBLING_STOOD,
    RESTARTED_IN_NEW_CONFIG,
];

/// Adds `vote` to the ghost's votes, copying the ghost only if it is new.
fn record_vote(ghost: &mut Arc<Ghost>, vote: (NodeId, Term, NodeId)) {
    if !ghost.votes.contains(&vote) {
        Arc::make_mut(ghost).votes.insert(vote);
    }
}

fn one_leader_per_term(ghost: &Ghost) -> bool {
    // Sorted by term: two leaders of one term are adjacent.
    let leaders: Vec<_> = ghost.leaders.iter().collect();
    leaders.windows(2).all(|w| w[0].0 != w[1].0)
}

/// True if two nodes voted for themselves (stood as candidates) in one term
/// above `base`.
fn contested(ghost: &Ghost, base: Term) -> bool {
    let mut candidacies = ghost
        .votes
        .iter()
        .filter(|&&(voter, term, cand)| voter == cand && term > base)
        .map(|&(_, term, _)| term);
    let mut seen = BTreeSet::new();
    candidacies.any(|term| !seen.insert(term))
}

fn one_vote_per_term(ghost: &Ghost) -> bool {
    // Sorted by (voter, term): two votes of one voter in one term are adjacent.
    let votes: Vec<_> = ghost.votes.iter().collect();
    votes.windows(2).all(|w| (w[0].0, w[0].1) != (w[1].0, w[1].1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::Message;

    #[test]
    fn ghost_checks_detect_duplicates() {
        let mut g = Ghost::default();
        g.leaders.insert((Term(1), NodeId(1)));
        g.leaders.insert((Term(2), NodeId(2)));
        assert!(one_leader_per_term(&g));
        g.leaders.insert((Term(2), NodeId(3)));
        assert!(!one_leader_per_term(&g));

        g.votes.insert((NodeId(1), Term(1), NodeId(1)));
        g.votes.insert((NodeId(1), Term(2), NodeId(2)));
        g.votes.insert((NodeId(2), Term(2), NodeId(2)));
        assert!(one_vote_per_term(&g));
        assert!(!contested(&g, Term(0)));
        g.votes.insert((NodeId(3), Term(2), NodeId(3)));
        assert!(contested(&g, Term(1)));
        assert!(!contested(&g, Term(2)), "only terms above the start count");
        g.votes.insert((NodeId(1), Term(2), NodeId(3)));
        assert!(!one_vote_per_term(&g));
    }

    #[test]
    fn a_timeout_then_deliveries_elect_node_one() {
        let model = ElectionModel::new(Bounds::QUICK, Durability::Faithful).exact();
        let mut s = model.init_states().remove(0);
        s = model.next_state(&s, Action::Timeout(NodeId(1))).expect("timeout");
        // Nodes 2 and 3 refuse while the lease they hold from their startup runs.
        s = model.next_state(&s, Action::Idle(NodeId(2))).expect("idle");
        s = model.next_state(&s, Action::Idle(NodeId(3))).expect("idle");
        // Deliver until node 1 leads; every step is a real core step.
        for _ in 0..10 {
            let pending: Vec<Envelope> = s.network.distinct().cloned().collect();
            for env in pending {
                s = model.next_state(&s, Action::Deliver(env)).expect("delivery");
            }
        }
        assert!(s.ghost.leaders.contains(&(Term(1), NodeId(1))), "{:?}\n{:#?}", s.ghost, s.network);
        assert_eq!(s.nodes[0].durable, HardState { term: Term(1), voted_for: Some(NodeId(1)) });
    }

    #[test]
    fn a_notice_about_a_node_that_came_back_is_dropped() {
        let bounds = Bounds { kills: 1, ..Bounds::QUICK };
        let model = ElectionModel::new(bounds, Durability::Faithful).exact();
        let mut s = model.init_states().remove(0);
        s = model.next_state(&s, Action::Kill(NodeId(1))).expect("a death");
        assert!(s.nodes[0].down);
        let to_n2 = Notice { about: NodeId(1), incarnation: 0, to: NodeId(2) };
        let to_n3 = Notice { to: NodeId(3), ..to_n2 };
        assert_eq!(s.notices, [to_n2, to_n3].into_iter().collect());
        let mut enabled = Vec::new();
        model.actions(&s, &mut enabled);
        assert!(enabled.contains(&Action::Revive(NodeId(1))));
        assert!(!enabled.contains(&Action::Kill(NodeId(2))), "one death in these bounds");
        assert!(!enabled.iter().any(|a| matches!(a, Action::Timeout(NodeId(1)))), "{enabled:?}");
        // Told while the node is down: the core takes the notice.
        let told = model.next_state(&s, Action::Notify(to_n2)).expect("a notice");
        assert!(told.ghost.notice_taken);
        assert_eq!(told.nodes[1].elector.counters().death_notices, 1);
        // Told after it came back (a new incarnation): the driver drops it.
        s = model.next_state(&s, Action::Revive(NodeId(1))).expect("a revival");
        assert_eq!((s.nodes[0].down, s.nodes[0].incarnation), (false, 1));
        let dropped = model.next_state(&s, Action::Notify(to_n3)).expect("a delivery");
        assert!(!dropped.ghost.notice_taken);
        assert_eq!(dropped.nodes[2].elector.counters().death_notices, 0);
        assert_eq!(dropped.notices, [to_n2].into_iter().collect());
    }

    #[test]
    fn an_ignored_delivery_is_no_step_unless_exact() {
        let model = ElectionModel::new(Bounds::QUICK, Durability::Faithful);
        let mut s = model.init_states().remove(0);
        // A refusal of a vote nobody asked for: n1 only counts it.
        let stale = Envelope {
            from: NodeId(2),
            to: NodeId(1),
            msg: Message::VoteResponse { term: Term(0), granted: false },
        };
        s.network.send(stale.clone());
        assert_eq!(model.next_state(&s, Action::Deliver(stale.clone())), None);
        let exact = model.clone().exact().next_state(&s, Action::Deliver(stale));
        let exact = exact.expect("the exact model delivers it");
        assert!(exact.network.is_empty());
        assert_eq!((&exact.nodes, &exact.ghost), (&s.nodes, &s.ghost), "nothing else changed");
        // A delivery that is answered is a step.
        s = model.next_state(&s, Action::Timeout(NodeId(1))).expect("timeout");
        let pre_vote = s.network.distinct().find(|e| e.to == NodeId(2)).cloned().expect("pre-vote");
        let answered = model.next_state(&s, Action::Deliver(pre_vote)).expect("a step");
        assert!(answered.network.distinct().any(|e| e.to == NodeId(1)), "n2 answers");
    }
}
