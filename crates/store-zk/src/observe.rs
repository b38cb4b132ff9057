//! The reader session (check, observe) and the observer stream.
//!
//! ZooKeeper's watches are one-shot: between a child watch firing and the
//! list that re-arms it, candidacies may come and go unseen. An observer
//! reports [`Observed::Missed`] before a new leader whenever a candidacy
//! it cannot account for may have led in between: one that was ahead of
//! the new leader in the previous list and is gone, or a create and delete
//! it never listed (the directory's `cversion` moved more than the
//! differences between the two lists explain), or a new reader session.

use crate::errors::{bounded, bounded_opt};
use crate::options::ZkOptions;
use crate::queue::{queue, Child};
use crate::session::is_terminal;
use futures_util::stream::BoxStream;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::election::{Observed, OBSERVE_BACKOFF_MAX, OBSERVE_BACKOFF_MIN};
use tenure_elect::store::StoreError;
use zookeeper_client::{Client, OneshotWatcher};

use crate::election::MAX_RELISTS;

/// The store's own session for reads that belong to no election session.
#[derive(Debug)]
pub(crate) struct Reader {
    servers: String,
    timeout: Duration,
    request_timeout: Duration,
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Reader {
    pub(crate) fn new(servers: &str, options: &ZkOptions) -> Reader {
        Reader {
            servers: servers.to_string(),
            timeout: options.reader_timeout,
            request_timeout: options.request_timeout,
            client: tokio::sync::Mutex::new(None),
        }
    }

    /// The reader's client, connected (again) if it has none alive.
    pub(crate) async fn client(&self) -> Result<Client, StoreError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !is_terminal(c.state())) {
            return Ok(c.clone());
        }
        let connect = Client::connector().with_session_timeout(self.timeout).connect(&self.servers);
        let limit = self.timeout + self.request_timeout;
        let client = bounded(&self.servers, "connect (reader)", limit, connect).await?;
        *slot = Some(client.clone());
        Ok(client)
    }

    /// A reader's session that is gone is not the caller's: retryable
    /// (the next call connects a new one).
    pub(crate) fn on_error(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Gone(message) => {
                if let Ok(mut slot) = self.client.try_lock() {
                    slot.take();
                }
                StoreError::Unavailable { endpoint: self.servers.clone(), message }
            }
            e => e,
        }
    }
}

/// The election's state as one list showed it.
#[derive(Clone, Debug)]
struct Seen {
    /// The reader session it was read with.
    reader: i64,
    /// The leader: (session, token, value).
    leader: Option<(u64, u64, String)>,
    queue: Vec<Child>,
    /// The directory's `cversion` (-1 when it does not exist).
    cversion: i64,
    revision: u64,
}

impl Seen {
    fn event(&self) -> Observed {
        match &self.leader {
            Some((session, token, value)) => Observed::Leader {
                session: *session,
                value: value.clone(),
                token: *token,
                revision: self.revision,
            },
            None => Observed::NoLeader { revision: self.revision },
        }
    }

    fn token(&self) -> Option<u64> {
        self.leader.as_ref().map(|l| l.1)
    }
}

/// Whether a leader may have come and gone unseen between `old` and `new`
/// (only asked when the leader changed).
fn missed(old: &Seen, new: &Seen) -> bool {
    if old.reader != new.reader {
        return true;
    }
    // A directory that does not exist yet starts with cversion 0.
    let new_first = new.queue.first().map_or(i64::MAX, |c| c.sequence);
    let gone: Vec<&Child> = old.queue.iter().filter(|c| !new.queue.contains(c)).collect();
    let arrived = new.queue.iter().filter(|c| !old.queue.contains(c)).count();
    // Every gone candidacy but the old leader that was ahead of the new one
    // may have led; a cversion moved further than the lists explain means
    // candidacies created and deleted unseen.
    let ahead = gone.iter().any(|c| Some(*c) != old.queue.first() && c.sequence < new_first);
    let unexplained = new.cversion.max(0) - old.cversion.max(0) > (gone.len() + arrived) as i64;
    ahead || unexplained
}

/// The events that tell the change from `old` to `new`.
fn events(old: Option<&Seen>, new: &Seen) -> Vec<Observed> {
    let Some(old) = old else { return vec![new.event()] };
    if old.token() == new.token() && old.reader == new.reader {
        return vec![];
    }
    if missed(old, new) {
        let r = new.revision;
        return vec![Observed::Missed { compacted: r, current: r }, new.event()];
    }
    vec![new.event()]
}

struct Observer {
    reader: Arc<Reader>,
    dir: String,
    last: Option<Seen>,
    watch: Option<OneshotWatcher>,
    pending: VecDeque<Observed>,
    pause: Option<Duration>,
}

impl Observer {
    /// Lists the queue with a child watch and reads the leader's node.
    async fn read(&self) -> Result<(Seen, OneshotWatcher), StoreError> {
        let client = self.reader.client().await?;
        let (servers, limit) = (&self.reader.servers, self.reader.request_timeout);
        let reader = client.session_id().0;
        for _ in 0..MAX_RELISTS {
            let list = client.get_and_watch_children(&self.dir);
            let Some((children, parent, watch)) =
                bounded_opt(servers, "get_children", limit, list).await?
            else {
                let exists = client.check_and_watch_stat(&self.dir);
                match bounded(servers, "exists (watch)", limit, exists).await? {
                    (Some(_), _) => continue, // Created meanwhile.
                    (None, watch) => {
                        let seen =
                            Seen { reader, leader: None, queue: vec![], cversion: -1, revision: 0 };
                        return Ok((seen, watch));
                    }
                }
            };
            let q = queue(&children);
            let mut seen = Seen {
                reader,
                leader: None,
                queue: q.clone(),
                cversion: i64::from(parent.cversion),
                revision: parent.pzxid as u64,
            };
            let Some(first) = q.first() else { return Ok((seen, watch)) };
            let data = client.get_data(&format!("{}/{}", self.dir, first.name));
            let Some((value, stat)) = bounded_opt(servers, "get_data", limit, data).await? else {
                continue; // The leader left meanwhile.
            };
            let value = String::from_utf8_lossy(&value).into_owned();
            seen.leader = Some((stat.ephemeral_owner as u64, stat.czxid as u64, value));
            seen.revision = seen.revision.max(stat.czxid as u64);
            return Ok((seen, watch));
        }
        Err(StoreError::Unavailable {
            endpoint: servers.clone(),
            message: format!("{}: the queue changed during {MAX_RELISTS} reads", self.dir),
        })
    }

    async fn next(&mut self) -> Result<Observed, StoreError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            if let Some(pause) = self.pause {
                tokio::time::sleep(pause).await;
            }
            if let Some(watch) = self.watch.take() {
                watch.changed().await;
            }
            match self.read().await {
                Ok((seen, watch)) => {
                    self.pause = None;
                    self.watch = Some(watch);
                    self.pending.extend(events(self.last.as_ref(), &seen));
                    self.last = Some(seen);
                }
                Err(e) => {
                    let pause = self.pause.map_or(OBSERVE_BACKOFF_MIN, |p| p * 2);
                    self.pause = Some(pause.min(OBSERVE_BACKOFF_MAX));
                    let e = self.reader.on_error(e);
                    // A lost connection or member is the ensemble's
                    // business: the client moves to another member and
                    // the next read (after the pause) reports whatever
                    // changed meanwhile, `Missed` included.
                    if !e.is_retryable() {
                        return Err(e);
                    }
                    tracing::debug!(error = %e, "ZooKeeper observe: trying again");
                }
            }
        }
    }
}

/// The observer stream of the election directory `dir`: its state, then
/// each change. It tries again on its own after a lost connection or
/// member; only errors that trying again cannot cure are items, and the
/// stream goes on after them too.
pub(crate) fn stream(
    reader: Arc<Reader>,
    dir: String,
) -> BoxStream<'static, Result<Observed, StoreError>> {
    let observer =
        Observer { reader, dir, last: None, watch: None, pending: VecDeque::new(), pause: None };
    Box::pin(futures_util::stream::unfold(observer, |mut o| async move {
        let next = o.next().await;
        Some((next, o))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::parse_child;

    fn seen(names: &[&str], leader: Option<u64>, cversion: i64) -> Seen {
        let queue = names.iter().map(|n| parse_child(n).unwrap()).collect();
        Seen { reader: 1, leader: leader.map(|t| (1, t, "v".into())), queue, cversion, revision: 9 }
    }

    const A: &str = "c-000000000000000a-0000000001";
    const B: &str = "c-000000000000000b-0000000002";
    const C: &str = "c-000000000000000c-0000000003";

    #[test]
    fn a_handover_to_the_next_in_line_is_one_leader_event() {
        let old = seen(&[A, B, C], Some(10), 3);
        let new = seen(&[B, C], Some(11), 4);
        assert_eq!(events(Some(&old), &new), vec![new.event()]);
        // No change of leader: nothing, even if a follower left.
        let same = seen(&[A, B], Some(10), 4);
        assert!(events(Some(&old), &same).is_empty());
    }

    #[test]
    fn a_leader_skipped_between_two_lists_is_reported_as_missed() {
        let old = seen(&[A, B, C], Some(10), 3);
        // A and B gone at once: B may have led in between.
        let new = seen(&[C], Some(12), 5);
        let ev = events(Some(&old), &new);
        assert!(matches!(ev[0], Observed::Missed { .. }), "{ev:?}");
        assert_eq!(ev[1], new.event());
        // A left, and a candidacy came and went unseen (cversion +3 for
        // one delete): it may have led.
        let old = seen(&[A], Some(10), 1);
        let new = seen(&[], None, 4);
        assert!(matches!(events(Some(&old), &new)[0], Observed::Missed { .. }));
        let clean = seen(&[], None, 2);
        assert_eq!(events(Some(&old), &clean), vec![Observed::NoLeader { revision: 9 }]);
    }
}
