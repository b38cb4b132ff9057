//! What the driver task and every [`crate::NodeHandle`] share: the election
//! core under a mutex, the transport state, the published leadership, and the
//! channels that carry commands and the stop request to the driver.

use crate::clock::Clock;
use crate::config::NodeConfig;
use crate::error::TransferError;
use crate::metrics::{DriverLag, LeaderTracker};
use crate::spy::{NoticeError, NoticeOutcome};
use crate::status::{Leadership, LeadershipEvent};
use crate::sync::lock;
use crate::timeline::Timeline;
use crate::transport::{Net, Roster};
use rand_pcg::Pcg64Mcg;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tenure_core::{Electorate, NodeId, Protocol};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// The election core as this crate instantiates it.
pub(crate) type Elector = tenure_core::Elector<Pcg64Mcg>;

/// A command from a [`crate::NodeHandle`] to the driver.
pub(crate) enum Command {
    /// Hand leadership to `to`.
    Transfer {
        /// The successor.
        to: NodeId,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), TransferError>>,
    },
    /// An external notice: `peer`'s incarnation `incarnation` is dead.
    NotifyDead {
        /// The peer.
        peer: NodeId,
        /// Its incarnation.
        incarnation: u64,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<NoticeOutcome, NoticeError>>,
    },
    /// The replicated log gave up the leadership of `token` (a write failed
    /// after its entries may have left early): the elector resigns it if it
    /// still holds it (`Protocol::give_up_leadership`).
    GiveUp {
        /// The token given up.
        token: tenure_core::FencingToken,
    },
    /// The replicated log's configuration of members changed, or the node
    /// starts (the driver takes no other input before the first one): the
    /// elector counts by `electorate`, the handshakes show `roster`, and
    /// `peers` (every other member, with the address to dial) become the
    /// transport's. `reply` answers once the elector counts by it: the log
    /// task acknowledges the entry to no one before.
    Electorate {
        /// What the elector counts by.
        electorate: Electorate,
        /// What the handshakes show and check.
        roster: Roster,
        /// The other members and where to dial them; `None`: unchanged
        /// (only the log's last entry or a commit changed).
        peers: Option<Vec<(NodeId, SocketAddr)>>,
        /// Answered once done.
        reply: oneshot::Sender<()>,
    },
}

/// What the driver and every handle share.
pub(crate) struct Shared {
    pub(crate) config: NodeConfig,
    pub(crate) clock: Clock,
    /// Inputs are fed only by the driver; handles lock it briefly to read
    /// (status, `is_leader` against the clock now).
    pub(crate) core: Mutex<Elector>,
    pub(crate) net: Arc<Net>,
    pub(crate) tracker: Mutex<LeaderTracker>,
    /// How late the driver wakes for the core's deadlines.
    pub(crate) lag: Mutex<DriverLag>,
    /// The leadership changes and their causes (`NodeHandle::timeline`).
    pub(crate) timeline: Mutex<Timeline>,
    pub(crate) leadership: watch::Sender<Leadership>,
    pub(crate) events: broadcast::Sender<LeadershipEvent>,
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) stop: watch::Sender<bool>,
    /// This node's incarnation (taken when the data directory was opened).
    pub(crate) incarnation: u64,
}

impl Shared {
    /// The core's leadership as of now.
    pub(crate) fn leadership_now(&self) -> Leadership {
        leadership_of(&lock(&self.core))
    }
}

/// The leadership an elector reports.
pub(crate) fn leadership_of(core: &Elector) -> Leadership {
    let s = core.status();
    Leadership { leader: s.leader, term: s.term, fencing_token: s.fencing_token, role: s.role }
}
