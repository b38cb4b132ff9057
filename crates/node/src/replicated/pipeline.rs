//! The log task's writes in flight: the replica's outputs whose log write is
//! not durable yet, in the order they were taken, so that the task goes on
//! feeding inputs (a follower's acknowledgement, the next proposals) while
//! the disk syncs, as etcd's raft does.
//!
//! One write is under way at a time; the writes of outputs taken meanwhile
//! wait and then go together, one `fdatasync` for all of them. What an
//! output sends, answers or hands the elector waits for its own write and
//! every earlier one (it may acknowledge what they hold): it is released in
//! order once they are durable. Only the replica's early messages
//! ([`tenure_replica::Output::early`]) leave before.

use crate::log_store::LogStore;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tenure_core::{Electorate, NodeId};
use tenure_replica::{LogOp, Membership, ReplicaMessage};
use tokio::task::JoinHandle;

/// Most outputs held behind writes in flight: past it, the task waits for
/// the write under way before it takes another input (the disk sets the
/// pace). A sync of 4 ms at 10,000 inputs a second holds about 40.
pub(crate) const MAX_HELD_OUTPUTS: usize = 1024;

/// What an output does once its write (and every earlier one) is durable:
/// what this node tells others and its elector may acknowledge what those
/// writes hold. (Its completions need not wait: a proposal completes once
/// a majority holds it durably, whether or not this node's own copy is
/// among them yet, and a read's index does not rest on this node's disk.)
#[derive(Debug, Default)]
pub(crate) struct Release {
    /// The configuration in force, when the output changed it.
    pub membership: Option<Membership>,
    /// What the elector counts over, when the output changed it.
    pub electorate: Option<Electorate>,
    /// Messages to send.
    pub messages: Vec<(NodeId, ReplicaMessage)>,
}

/// An output held until the writes before it (its own included) are
/// durable.
#[derive(Debug)]
struct Held {
    /// Whether this output carried a write of its own.
    wrote: bool,
    release: Release,
}

/// The outcome of a write that ended.
pub(crate) struct Written {
    /// How many outputs' writes it made durable (or failed to).
    pub outputs: usize,
    /// Whether it did.
    pub result: std::io::Result<()>,
    /// The outputs released by it, in order (none on a failure: what was
    /// held is dropped, its messages must not leave).
    pub released: Vec<Release>,
}

/// The writes in flight and the outputs held behind them.
#[derive(Default)]
pub(crate) struct Pipeline {
    /// The write under way: how many outputs' writes it carries.
    in_flight: Option<(usize, JoinHandle<std::io::Result<()>>)>,
    /// Writes of outputs taken since it began, to go together next.
    queued: Vec<LogOp>,
    queued_outputs: usize,
    held: VecDeque<Held>,
}

impl Pipeline {
    /// Queues `write` and holds `release` behind it and every earlier
    /// write. The release comes back at once when nothing is in flight and
    /// `write` is empty.
    pub(crate) fn push(
        &mut self,
        write: Vec<LogOp>,
        release: Release,
        store: &Arc<LogStore>,
        syncs: &AtomicU64,
    ) -> Option<Release> {
        let wrote = !write.is_empty();
        if !wrote && self.held.is_empty() {
            return Some(release);
        }
        if wrote {
            self.queued.extend(write);
            self.queued_outputs += 1;
        }
        self.held.push_back(Held { wrote, release });
        self.start(store, syncs);
        None
    }

    /// Starts the queued writes as one, unless a write is under way;
    /// counts it in `syncs`.
    pub(crate) fn start(&mut self, store: &Arc<LogStore>, syncs: &AtomicU64) {
        if self.in_flight.is_some() || self.queued_outputs == 0 {
            return;
        }
        syncs.fetch_add(1, Ordering::Relaxed);
        let ops = std::mem::take(&mut self.queued);
        let outputs = std::mem::take(&mut self.queued_outputs);
        let store = store.clone();
        // fsync blocks: keep it off the async workers. (A compaction among
        // the ops is written in the background, by the store's own thread.)
        let write = tokio::task::spawn_blocking(move || store.write(ops));
        self.in_flight = Some((outputs, write));
    }

    /// True while a write is under way.
    pub(crate) fn is_writing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// True when the task should wait for the write under way before it
    /// takes another input.
    pub(crate) fn is_full(&self) -> bool {
        self.held.len() >= MAX_HELD_OUTPUTS
    }

    /// Waits for the write under way to end (never, if none is): what it
    /// made durable, and the outputs that may now go. On a failure, every
    /// held output is dropped and nothing more is written.
    pub(crate) async fn wait(&mut self) -> Written {
        let Some((_, write)) = self.in_flight.as_mut() else {
            return std::future::pending().await;
        };
        let result = write.await.unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let (outputs, _) = self.in_flight.take().expect("under way");
        let released = if result.is_ok() {
            self.release(outputs)
        } else {
            self.queued.clear();
            self.queued_outputs = 0;
            self.held.clear();
            Vec::new()
        };
        Written { outputs, result, released }
    }

    /// The held outputs up to the `outputs`-th that wrote, and those after
    /// it that wrote nothing (they waited only for earlier writes).
    fn release(&mut self, mut outputs: usize) -> Vec<Release> {
        let mut released = Vec::new();
        while let Some(h) = self.held.front() {
            if h.wrote {
                if outputs == 0 {
                    break;
                }
                outputs -= 1;
            }
            released.push(self.held.pop_front().expect("peeked").release);
        }
        released
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::FencingToken;
    use tenure_replica::{Entry, Payload, Position};

    fn entry(index: u64) -> LogOp {
        let pos = Position { token: FencingToken(1), index };
        LogOp::Append(vec![Entry { pos, payload: Payload::Noop }])
    }

    /// A release that sends one message to node `tag`, to tell them apart.
    fn release(tag: u64) -> Release {
        let msg = ReplicaMessage::Sync { token: FencingToken(tag) };
        Release { messages: vec![(NodeId(tag), msg)], ..Release::default() }
    }

    fn tags(released: &[Release]) -> Vec<u64> {
        released.iter().map(|r| r.messages[0].0 .0).collect()
    }

    #[tokio::test]
    async fn outputs_go_in_order_each_after_its_own_write_and_every_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _, _) = LogStore::open_counted(dir.path(), Arc::default()).unwrap();
        let store = Arc::new(store);
        let syncs = AtomicU64::new(0);
        let mut p = Pipeline::default();
        // Nothing under way: an output without a write goes at once.
        assert_eq!(
            tags(&p.push(vec![], release(1), &store, &syncs).into_iter().collect::<Vec<_>>()),
            [1]
        );
        // A write starts; what comes after it waits, a write or not.
        assert!(p.push(vec![entry(1)], release(2), &store, &syncs).is_none());
        assert!(p.is_writing());
        assert!(p.push(vec![], release(3), &store, &syncs).is_none());
        assert!(p.push(vec![entry(2)], release(4), &store, &syncs).is_none());
        assert!(p.push(vec![entry(3)], release(5), &store, &syncs).is_none());
        assert!(p.push(vec![], release(6), &store, &syncs).is_none());
        assert_eq!(syncs.load(Ordering::Relaxed), 1, "one write under way at a time");
        let w = p.wait().await;
        assert!(w.result.is_ok());
        assert_eq!(w.outputs, 1);
        assert_eq!(
            tags(&w.released),
            [2, 3],
            "the first write's output, and the one after it that wrote nothing"
        );
        // The two writes queued meanwhile go together.
        p.start(&store, &syncs);
        assert_eq!(syncs.load(Ordering::Relaxed), 2);
        let w = p.wait().await;
        assert_eq!(w.outputs, 2);
        assert_eq!(tags(&w.released), [4, 5, 6]);
        assert!(!p.is_writing());
        p.start(&store, &syncs);
        assert_eq!(syncs.load(Ordering::Relaxed), 2, "nothing left to write");
        drop(p);
        store.close();
        let (_, restored, _) = LogStore::open_counted(dir.path(), Arc::default()).unwrap();
        assert_eq!(restored.entries.len(), 3, "every write reached the disk");
    }
}
