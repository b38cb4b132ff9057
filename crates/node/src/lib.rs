//! # tenure-node: the tokio runtime for tenure
//!
//! This crate turns the sans-IO election core ([`tenure_core::Elector`]: the
//! protocol chosen by [`NodeConfig::protocol`])
//! into a running node: it reads the clock, owns the sockets, persists the
//! durable state, and offers an embedding API ([`start`], [`Node`],
//! [`NodeHandle`]) to applications and to the `tenure` server.
//!
//! ```no_run
//! # async fn demo(config: tenure_node::NodeConfig) -> Result<(), tenure_node::StartError> {
//! let node = tenure_node::start(config).await?;
//! let handle = node.handle();
//! let mut events = handle.events();
//! while let Ok(event) = events.recv().await {
//!     if let tenure_node::LeadershipEvent::BecameLeader { fencing_token, .. } = event {
//!         // Lead; check `handle.is_leader()` before each action and tag
//!         // writes with `fencing_token`.
//! #       let _ = fencing_token; break;
//!     }
//! }
//! node.shutdown().await; // cedes leadership first if leading
//! # Ok(()) }
//! ```
//!
//! ## Tasks
//!
//! * **driver** (module `driver`, one task): the only code that feeds
//!   inputs to the core. A `tokio::select!` loop over: a stop request, handle
//!   commands (a bounded channel), death notices of the next-incarnation spy
//!   (a bounded channel, taken before messages; see [`spy`]), received
//!   messages (a bounded channel), the single timer armed at
//!   `poll_timeout()`, and the persist-retry timer.
//! * **transport** ([`transport`]): an accept loop with one task per inbound
//!   connection, and one dialer task per peer.
//! * **log** ([`replicated`], only with [`start_replicated`]): the replicated
//!   log beside the elector: the only code that feeds the replica; it
//!   follows the published leadership, writes and syncs `<data_dir>/log`
//!   before sending, batches proposals (group commit) and forwards
//!   followers' requests to the leader over the peer connections.
//! * Handles read the core under a short mutex (status, `is_leader` checked
//!   against the clock at the call) and never feed it inputs. What the
//!   driver and the handles share (the core, the transport state, the
//!   published leadership, the command and stop channels) lives in module
//!   `shared`, so neither the driver nor the handle module imports the other.
//!
//! ## A message from socket to core and back
//!
//! 1. Peer P's dialer holds one TCP connection to our listener (TCP_NODELAY),
//!    with mutual TLS ([`tls`]: P's certificate names it as `node-P.<cluster>`).
//!    It opened with a handshake ([`wire::Frame::Hello`]: wire version,
//!    cluster id, P's id, our id, P's protocol, incarnation, voter set and
//!    API address; we answer with ours in [`wire::Frame::HelloAck`]), which
//!    we checked: another cluster, another protocol, another voter set
//!    ([`transport::Net::voter_mismatch`]), an unknown id, our own id,
//!    another version, an id that P's certificate does not name, or a second
//!    live process claiming P's id is refused with a logged reason, a
//!    [`wire::Frame::Reject`], and a close (counted in `frames_rejected`, and
//!    shown as the peer's `handshake_error` in [`PeerInfo`]). Inbound connections are bounded (handshake slots,
//!    one connection per peer, an idle timeout; see [`transport`]). An
//!    incarnation of P higher than the one we knew (on either side's
//!    handshake) proves the one we knew dead: the driver is told before
//!    anything the new one sends is read ([`spy`]).
//! 2. Frames are length-delimited (4-byte length, at most
//!    [`wire::MAX_FRAME_LEN`] bytes), start with the wire version byte, and
//!    carry a postcard-encoded [`wire::Frame`]. A malformed or oversized frame
//!    closes that connection with a log line; nothing else is affected.
//! 3. The inbound task stamps P's `last_heard` and passes
//!    `(P, Message)` to the driver over a bounded channel (when it is full the
//!    reader waits: back-pressure onto P's TCP connection).
//! 4. The driver calls `handle_message(now, P, msg)` (now = nanoseconds since a
//!    process-local origin, see [`clock`]) and takes the output.
//! 5. **Persist, then send.** If the output carries a `HardState`, the driver
//!    writes it to the state file and syncs it (on a blocking thread, awaited)
//!    *before* any message of that output leaves.
//! 6. Each message goes into the destination's send queue (bounded at
//!    [`transport::PEER_QUEUE_CAPACITY`]; when full the oldest message is
//!    dropped: a later heartbeat or vote supersedes it, and the protocol
//!    tolerates loss). The driver never blocks on the network.
//! 7. The destination's dialer writes the queue to its connection. If it is
//!    down, it reconnects with a backoff from 10 ms doubling up to
//!    `min(election_timeout / 4, 1 s)` ([`transport::reconnect_cap`]), so a
//!    restarted peer is reached again well within an election timeout.
//! 8. The output's events are logged (every role change at info level with
//!    its reason and term), turned into [`LeadershipEvent`]s on a broadcast
//!    channel, and the [`Leadership`] watch channel is updated.
//! 9. The driver re-arms its single timer at `poll_timeout()`.
//!
//! Round-trip times come from transport pings: each dialer sends a
//! [`wire::Frame::Ping`] every heartbeat interval and the acceptor answers on
//! the same connection; the RTT is smoothed with gain 1/8 (as TCP's SRTT).
//!
//! ## Durability contract
//!
//! * The data directory holds `state` (two checksummed copies of term, vote,
//!   cluster id, node id, protocol and format version; see [`storage`]) and
//!   `lock`, which also holds the record of the newest state the node acted
//!   on, and `incarnation` (two checksummed copies of the number the last
//!   start took; see [`storage::incarnation`]). A missing directory is
//!   created.
//! * Every start takes the next incarnation, written to both copies and
//!   synced before the node dials or accepts any peer; a damaged file
//!   ([`StartError::CorruptIncarnation`]) is refused until [`reset_state`]
//!   replaces it with a number from the wall clock.
//! * Every state change overwrites the first copy in place and, at the same
//!   time, the record in `lock`, each made durable with one `fdatasync`,
//!   before any message produced with that change is sent; the second copy
//!   is written after the messages left (and before the first is
//!   overwritten again). A crash at any point leaves a complete copy of the
//!   newest acknowledged state; no peer ever saw a vote that a restart could
//!   forget.
//! * If a write fails, the messages of that output are dropped, the core is
//!   told (`handle_persist_failed`: it stops voting and leading), an error is
//!   logged, `storage_failed` shows in the status, and the write is retried
//!   with a backoff from [`PERSIST_RETRY_MIN`] doubling to [`PERSIST_RETRY_MAX`]
//!   for as long as the node runs; on success the core is told
//!   (`handle_persist_recovered`).
//! * An exclusive `flock` on `lock` (held for the node's life) keeps a second
//!   process, or a second node in this process, out: it gets
//!   [`StartError::DataDirLocked`].
//! * One damaged copy is survived with a warning (the good copy is written over
//!   it). A start that could make the node vote twice in a term is refused
//!   with an error naming the file and the way out: a state file missing next
//!   to a record ([`StartError::StateMissing`]), older than the record
//!   ([`StartError::StateRolledBack`]), with both copies damaged
//!   ([`StartError::CorruptState`]) or of another protocol
//!   ([`StartError::ProtocolMismatch`]); [`reset_state`] (`tenure server
//!   --reset-state`) then writes a state no older than the record. A state
//!   file of another node or cluster ([`StartError::ForeignState`]) or of a
//!   newer format ([`StartError::UnsupportedStateFormat`]) is never reset. A
//!   FIFO, socket, device or directory in place of either file is refused
//!   ([`StartError::NotAFile`]) without blocking. Nothing is overwritten
//!   without a reset. `docs/ARCHITECTURE.md` gives the reasoning: what the
//!   node can detect, what it cannot, and why the reset is safe.
//!
//! ## Graceful shutdown
//!
//! [`Node::shutdown`] (or [`NodeHandle::shutdown_signal`]) makes the driver call
//! the core's `shutdown`: a leader resigns in favour of its most responsive
//! follower, which campaigns at once instead of waiting for a timeout. The
//! Resign messages are flushed, each connection is closed in order (FIN, then
//! waiting for the peer's), all within [`SHUTDOWN_FLUSH_TIMEOUT`]; then every
//! task stops and the lock is released.

#![warn(missing_docs)]

pub mod clock;
pub mod config;
mod driver;
pub mod error;
pub mod log_store;
pub mod metrics;
mod node;
pub mod ratelog;
pub mod replicated;
mod shared;
pub mod spy;
pub mod status;
pub mod storage;
mod sync;
pub mod timeline;
pub mod tls;
pub mod transport;
pub mod wire;

pub use config::{NodeConfig, NodeConfigError};
pub use driver::{PERSIST_RETRY_MAX, PERSIST_RETRY_MIN, SHUTDOWN_FLUSH_TIMEOUT};
pub use error::{Recovery, StartError, TransferError};
pub use node::{reset_state, start, start_with_listener, Node, NodeHandle};
pub use ratelog::RateLimitedLog;
pub use replicated::{start_replicated, Committed, ReadFailure, Replicated, WriteError};
pub use spy::{NoticeError, NoticeOutcome};
pub use status::{DriverLagStats, Leadership, LeadershipEvent, NodeMetrics, NodeStatus, PeerInfo};
pub use storage::ResetOutcome;
pub use tenure_core::{FencingToken, Lsn, NodeId, ProtocolKind, Role, Term};
pub use tls::{Security, TlsFiles};
