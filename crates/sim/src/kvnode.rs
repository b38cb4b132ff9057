//! A node's side of the key-value workload: the real replica
//! (`tenure_replica::Replica`) over the real store (`tenure_kv::Store`),
//! its log on the simulated disk, and the client requests it is working on.

use crate::disk::SimDisk;
use crate::workload::{value_id, PlantedBug, Tag};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use tenure_core::Instant;
use tenure_core::{FencingToken, NodeId};
use tenure_kv::{Command, LeaseId, LeaseKeeper, Response, Store};
use tenure_partitions::GroupKeeper;
use tenure_replica::router::{CallerId, Router};
use tenure_replica::{Change, Position, ProposalId, ReadId, Replica, StateMachine};

/// The store as the simulator runs it: the real one, unless a test plants
/// a bug ([`PlantedBug`]).
#[derive(Clone, Debug)]
pub struct SimStore {
    /// The store.
    pub store: Store,
    bug: Option<PlantedBug>,
    node: NodeId,
}

impl SimStore {
    /// An empty store on node `node`.
    pub fn new(node: NodeId, bug: Option<PlantedBug>) -> Self {
        SimStore { store: Store::new(), bug, node }
    }
}

impl StateMachine for SimStore {
    fn apply(&mut self, pos: Position, command: &[u8]) -> Vec<u8> {
        match (self.bug, Command::decode(command)) {
            (
                Some(PlantedBug::LoseAckedWrites),
                Ok(Command::Put { value, if_mod_revision: None, .. }),
            ) if value_id(&value).is_some_and(|v| v % 4 == 0) => {
                // Answers as if done, changes nothing.
                let mut scratch = self.store.clone();
                return scratch.apply(pos, command);
            }
            (Some(PlantedBug::DivergentNode), Ok(Command::Delete { .. }))
                if self.node == NodeId(1) =>
            {
                let revision = self.store.revision();
                return Response::Delete { revision, prev: None }.encode();
            }
            _ => {}
        }
        self.store.apply(pos, command)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.store.restore(snapshot)
    }
}

/// A node's replica, its log on disk, and the client requests it holds.
#[derive(Debug, Default)]
pub struct KvHost {
    /// The replica; `None` while the node is down (or its log could not be
    /// restored).
    pub replica: Option<Replica<SimStore>>,
    /// The replica's log: survives crashes.
    pub disk: SimDisk,
    /// A write failed: the replica takes no part until rebuilt.
    pub stalled: bool,
    /// Leaderships the elector announced, not yet told to the replica.
    pub views: Vec<(Option<NodeId>, Option<FencingToken>)>,
    /// The elector's latest leadership (told again to a rebuilt replica).
    pub view: (Option<NodeId>, Option<FencingToken>),
    /// The router of clients' requests (the node's own, `tenure_replica::
    /// router`): proposed here as the ready leader, forwarded to the
    /// leader, or held. `None` until the replica first starts, and after a
    /// crash (it is volatile).
    pub router: Option<Router>,
    /// When the router was last asked to end what waited too long (local
    /// time): every [`EXPIRY_CHECK_INTERVAL`] at most, as a node does.
    ///
    /// [`EXPIRY_CHECK_INTERVAL`]: tenure_replica::router::EXPIRY_CHECK_INTERVAL
    pub router_expired_at: Option<Instant>,
    /// The clients' requests the router holds, by the id it answers: the
    /// request's tag, and the key of a read.
    pub callers: BTreeMap<CallerId, (Tag, Option<String>)>,
    /// The last id given to a request.
    pub next_caller: CallerId,
    /// Global time the log's last write is synced: later outputs' messages
    /// leave no earlier (writes are synced in order).
    pub synced_at: u64,
    /// The node crashes during its next log write (a fault).
    pub crash_at_write: bool,
    /// The leader's side of sessions (application elections only).
    pub keeper: LeaseKeeper,
    /// Range reads and renewals waiting for their confirmation round.
    pub elect_reads: BTreeMap<ReadId, (Tag, ElectRead)>,
    /// Expiries this node proposed as leader, in flight.
    pub expiries: BTreeMap<ProposalId, Vec<LeaseId>>,
    /// Lease checkpoints this node proposed as leader, in flight, with the
    /// silent leases each clears.
    pub checkpoints: BTreeMap<ProposalId, Vec<LeaseId>>,
    /// Silent leases whose renewal came: the next checkpoint clears them.
    pub clears_wanted: BTreeSet<LeaseId>,
    /// Changes of members this node proposed as leader, in flight.
    pub changes: BTreeMap<ProposalId, Change>,
    /// The leader's side of groups of partitions (the partitions workload
    /// only; `runner/partitions.rs`).
    pub groups: GroupKeeper,
    /// The leadership the group keeper plans for (the replica's ready
    /// leadership when last looked at).
    pub groups_token: Option<FencingToken>,
    /// The group keeper's transactions in flight.
    pub group_proposals: BTreeSet<ProposalId>,
    /// The store's revision at the group keeper's last plan.
    pub groups_planned_at: u64,
    /// When the group keeper asked to plan again.
    pub groups_next_check: Option<Instant>,
    /// A plan is due: a new leadership, or the transactions in flight are
    /// all done.
    pub groups_due: bool,
    /// Bumped whenever the replica is (re)built: an electorate of an
    /// earlier replica, still on its way to the elector, is dropped.
    pub electorate_epoch: u64,
    /// The last electorate the replica's outputs carried, numbered.
    pub electorate_seq: u64,
    /// The number of the last electorate handed to the elector: an older
    /// one arriving later is dropped (a newer one was handed).
    pub electorate_handed: u64,
}

/// What an application-election request waiting for a read round asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElectRead {
    /// The keys under a prefix.
    Range(String),
    /// A renewal of a session.
    Renew(LeaseId),
}

impl KvHost {
    /// Forgets everything volatile: the node crashed.
    pub fn crash(&mut self) {
        self.replica = None;
        self.stalled = false;
        self.views.clear();
        self.view = (None, None);
        self.router = None;
        self.callers.clear();
        self.crash_at_write = false;
        self.forget_leadership();
    }

    /// The replica is new (restarted, rebuilt) or stopped: nothing of the
    /// lease keeper's leadership survives.
    pub fn forget_leadership(&mut self) {
        self.keeper.follow();
        self.elect_reads.clear();
        self.expiries.clear();
        self.checkpoints.clear();
        self.clears_wanted.clear();
        self.changes.clear();
        self.groups.follow();
        self.groups_token = None;
        self.group_proposals.clear();
        self.groups_planned_at = 0;
        self.groups_next_check = None;
        self.groups_due = false;
    }
}
