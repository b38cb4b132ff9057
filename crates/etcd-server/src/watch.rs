//! etcd's Watch service: the bidirectional stream of watch creations,
//! cancels and progress requests, answered with the store's changes as
//! etcd's events.
//!
//! Fed as tenure's own `GET /v1/kv-watch` is: each stream wakes on every
//! advance of the node's applied log index ([`tenure_node::Replicated::applied`])
//! and reads the store's bounded history of changes
//! ([`tenure_kv::Store::history_between`]) under the replica's lock. No
//! second mechanism: a watch served by a follower sees that follower's
//! applied store, so its events come in revision order, without gaps, and
//! at most the replication lag behind the leader's.
//!
//! What etcd clients rely on, kept: created answers in the order of the
//! creates and before any event of their watch, with the store's revision
//! at creation; all the events of one revision of one watch in one answer
//! (one answer per revision); a start revision that is compacted answered
//! with the created answer, then `{watch_id, compact_revision, canceled}`;
//! a cancel answered `{watch_id, canceled}` (an unknown id ignored); a
//! progress request answered `{watch_id: -1, header.revision}` (etcd 3.4);
//! the filters, `prev_kv`, `fragment` and `progress_notify`. What differs
//! from etcd and why: docs/ETCD.md.
//!
//! Bounds: [`MAX_WATCHES_PER_STREAM`], [`MAX_WATCH_STREAMS`] (and the
//! listener's streams per connection), [`STREAM_BUFFER`] answers queued per
//! stream. A client that does not read makes its stream wait (HTTP/2 flow
//! control, then the bounded queue); its watches stop reading the history,
//! and one that falls behind the history the store keeps
//! ([`tenure_kv::MAX_HISTORY`] changes) is cancelled as etcd cancels a
//! watch whose revision was compacted.

use crate::errors::{NO_LEADER, SERVER_STOPPED};
use crate::range::{key_range, to_etcd};
use crate::Shared;
use prost::Message;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tenure_etcd_api::etcdserverpb::watch_create_request::FilterType;
use tenure_etcd_api::etcdserverpb::watch_request::RequestUnion;
use tenure_etcd_api::etcdserverpb::watch_server::Watch;
use tenure_etcd_api::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use tenure_etcd_api::mvccpb::{self, event::EventType};
use tenure_kv::{Change, Compacted, Store};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, warn};

/// Watches one stream may hold at once; a create beyond is refused (a
/// created and canceled answer with a reason, as etcd refuses a create).
pub const MAX_WATCHES_PER_STREAM: usize = 1024;

/// Watch streams one listener serves at once; one more is answered
/// ResourceExhausted. (Streams per connection are bounded by
/// [`crate::MAX_STREAMS_PER_CONNECTION`], every call counted.)
pub const MAX_WATCH_STREAMS: usize = 4096;

/// Answers queued for one stream's client; when the queue is full the
/// stream's watches stop reading until the client reads.
pub const STREAM_BUFFER: usize = 64;

/// Changes one watch reads from the history per round (a revision is never
/// cut), so that a watch replaying a long history leaves its stream's
/// other watches and requests their turn.
pub const SCAN_PER_ROUND: usize = 1024;

/// Bytes of events (keys and values, previous ones included) one watch
/// reads per round, besides its last revision (which is never cut): what
/// a stream holds in memory beyond its queue while it sends them.
pub const ROUND_BYTES: usize = 4 * 1024 * 1024;

/// The size from which an answer of a watch created with `fragment` is
/// split: etcd's default `--max-request-bytes` (1.5 MiB), which etcd uses
/// for this.
pub const FRAGMENT_BYTES: usize = 1536 * 1024;

/// How long a watch created with `progress_notify` stays quiet before it is
/// sent a progress answer (etcd's 10 minutes).
pub const PROGRESS_NOTIFY_INTERVAL: Duration = Duration::from_secs(600);

/// How long a stream opened with `hasleader: true` lives on without a
/// leader before it ends with "etcdserver: no leader" (etcd: three election
/// timeouts of 1 s by default).
pub const NO_LEADER_GRACE: Duration = Duration::from_secs(3);

/// etcd's reason for a create whose key is not before its range end.
pub const EMPTY_RANGE: &str = "mvcc: watcher range is empty";
/// etcd's reason for a create with a watch id the stream already uses.
pub const DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";

/// The Watch service.
pub(crate) struct WatchService {
    shared: Arc<Shared>,
    streams: Arc<Semaphore>,
    stopping: watch::Receiver<bool>,
}

impl WatchService {
    /// The service; its streams end (Unavailable, so that clients resume
    /// elsewhere) when `stopping` turns true.
    pub(crate) fn new(shared: Arc<Shared>, stopping: watch::Receiver<bool>) -> Self {
        WatchService { shared, streams: Arc::new(Semaphore::new(MAX_WATCH_STREAMS)), stopping }
    }
}

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = ReceiverStream<Result<WatchResponse, Status>>;

    async fn watch(
        &self,
        request: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        self.shared.check_leader(&request)?;
        let has_leader = request.metadata().get("hasleader").is_some_and(|v| v == "true");
        let permit = self.streams.clone().try_acquire_owned().map_err(|_| {
            Status::resource_exhausted(format!(
                "tenure: this member serves {MAX_WATCH_STREAMS} watch streams at most; put \
                 several watches on one stream"
            ))
        })?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let stream = WatchStream {
            shared: self.shared.clone(),
            tx,
            stopping: self.stopping.clone(),
            watchers: BTreeMap::new(),
            next_id: 0,
        };
        tokio::spawn(stream.run(request.into_inner(), has_leader, permit));
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// One watch of a stream (and the Election service's watch on a leader's
/// key).
#[derive(Clone, Debug)]
pub(crate) struct Watcher {
    /// The first key (etcd's: an empty key is `"\0"`).
    key: Vec<u8>,
    /// The range end: empty for one key, `"\0"` for every key from `key`.
    end: Vec<u8>,
    /// The next revision to read.
    pub(crate) next: u64,
    prev_kv: bool,
    no_put: bool,
    no_delete: bool,
    fragment: bool,
    progress_notify: bool,
    /// Nothing sent since the last progress tick.
    quiet: bool,
}

impl Watcher {
    /// A watch of the puts and deletes of one key from revision `next`.
    pub(crate) fn on_key(key: Vec<u8>, next: u64) -> Watcher {
        Watcher {
            key,
            end: Vec::new(),
            next,
            prev_kv: false,
            no_put: false,
            no_delete: false,
            fragment: false,
            progress_notify: false,
            quiet: true,
        }
    }

    /// Whether `change` is one of this watch's events.
    fn wants(&self, change: &Change) -> bool {
        let removal = change.kind.is_removal();
        !(removal && self.no_delete || !removal && self.no_put)
            && key_range(&self.key, &self.end).contains(change.kv.key.as_bytes())
    }
}

/// The events of one watch from its next revision on: whole revisions in
/// order, each with its events, and the revision read through; or
/// [`Compacted`] when the history no longer reaches back to it.
pub(crate) type Batch = (Vec<(u64, Vec<mvccpb::Event>)>, u64);

/// Reads `w`'s events from `store`: up to about `max_scan` changes of the
/// history or `max_bytes` of events, whichever comes first (never part of
/// a revision).
pub(crate) fn read(
    store: &Store,
    w: &Watcher,
    max_scan: usize,
    max_bytes: usize,
) -> Result<Batch, Compacted> {
    let current = store.revision();
    if w.next > current {
        return Ok((Vec::new(), w.next - 1));
    }
    let mut out: Vec<(u64, Vec<mvccpb::Event>)> = Vec::new();
    let mut through = current;
    let mut last = 0;
    let mut bytes = 0;
    for (scanned, change) in store.history_between(w.next, current)?.enumerate() {
        if (scanned >= max_scan || bytes >= max_bytes) && change.revision != last {
            through = last;
            break;
        }
        last = change.revision;
        if !w.wants(change) {
            continue;
        }
        let event = event(change, w.prev_kv);
        bytes += [event.kv.as_ref(), event.prev_kv.as_ref()]
            .into_iter()
            .flatten()
            .map(|kv| kv.key.len() + kv.value.len())
            .sum::<usize>();
        match out.last_mut() {
            Some((revision, events)) if *revision == change.revision => events.push(event),
            _ => out.push((change.revision, vec![event])),
        }
    }
    Ok((out, through))
}

/// A change as etcd's event: a put carries the key as it now is; a
/// removal (a delete, or the end of the key's lease) only the key and the
/// removal's revision, as etcd's tombstones do.
fn event(change: &Change, prev_kv: bool) -> mvccpb::Event {
    let (kind, kv) = if change.kind.is_removal() {
        let kv = mvccpb::KeyValue {
            key: change.kv.key.as_bytes().to_vec(),
            mod_revision: change.revision as i64,
            ..mvccpb::KeyValue::default()
        };
        (EventType::Delete, kv)
    } else {
        (EventType::Put, to_etcd(&change.kv))
    };
    mvccpb::Event {
        r#type: kind as i32,
        kv: Some(kv),
        prev_kv: change.prev.as_ref().filter(|_| prev_kv).map(to_etcd),
    }
}

/// `response` as etcd's `sendFragments` cuts it when its watch allows it:
/// unchanged when smaller than `limit` or with one event; otherwise pieces
/// of whole events under `limit` (at least one event each), every piece
/// but the last marked `fragment`.
fn fragments(response: WatchResponse, allowed: bool, limit: usize) -> Vec<WatchResponse> {
    if !allowed || response.events.len() < 2 || response.encoded_len() < limit {
        return vec![response];
    }
    let mut pieces = Vec::new();
    let mut events = response.events.iter().peekable();
    while events.peek().is_some() {
        let mut piece = WatchResponse { events: Vec::new(), fragment: true, ..response.clone() };
        while let Some(e) = events.peek() {
            piece.events.push((*e).clone());
            if piece.events.len() > 1 && piece.encoded_len() >= limit {
                piece.events.pop();
                break;
            }
            events.next();
        }
        piece.fragment = events.peek().is_some();
        pieces.push(piece);
    }
    pieces
}

/// The stream's client went away, or the member stops: the stream ends.
struct Ended;

/// One Watch stream: its watches, and the queue of answers to its client.
struct WatchStream {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Result<WatchResponse, Status>>,
    stopping: watch::Receiver<bool>,
    watchers: BTreeMap<i64, Watcher>,
    /// The next id to try for a create that does not choose one (etcd's
    /// ids start at 0).
    next_id: i64,
}

impl WatchStream {
    /// Serves the stream until its client leaves or the member stops.
    async fn run(
        mut self,
        mut inbound: Streaming<WatchRequest>,
        has_leader: bool,
        _permit: OwnedSemaphorePermit,
    ) {
        let mut applied = self.shared.ctx.kv.applied();
        let mut leadership = self.shared.ctx.node.leadership();
        let mut stopping = self.stopping.clone();
        let mut no_leader_since =
            leadership.borrow_and_update().leader.is_none().then(Instant::now);
        let mut progress = tokio::time::interval_at(
            Instant::now() + PROGRESS_NOTIFY_INTERVAL,
            PROGRESS_NOTIFY_INTERVAL,
        );
        let mut inbound_open = true;
        loop {
            // Marks the index seen before reading, so that an advance after
            // the read wakes the wait below.
            applied.borrow_and_update();
            let Ok(behind) = self.catch_up().await else { return };
            let deadline = no_leader_since.map(|t| t + NO_LEADER_GRACE);
            let step: Result<(), Status> = tokio::select! {
                biased;
                _ = stopped(&mut stopping) => Err(Status::unavailable(SERVER_STOPPED)),
                _ = self.tx.closed() => return,
                request = inbound.message(), if inbound_open => match request {
                    Ok(Some(request)) => match self.handle(request).await {
                        Ok(()) => Ok(()),
                        Err(Ended) => return,
                    },
                    // A client that closes its side still reads (etcd
                    // serves the stream until the client leaves).
                    Ok(None) => {
                        inbound_open = false;
                        Ok(())
                    }
                    Err(status) => {
                        debug!(%status, "an etcd watch stream ended");
                        return;
                    }
                },
                // A watch that is still catching up: its next round.
                _ = std::future::ready(()), if behind => Ok(()),
                changed = applied.changed() => match changed {
                    Ok(()) => Ok(()),
                    Err(_) => Err(Status::unavailable(SERVER_STOPPED)),
                },
                changed = leadership.changed(), if has_leader => match changed {
                    Ok(()) => {
                        let leader = leadership.borrow_and_update().leader;
                        no_leader_since = match (leader, no_leader_since) {
                            (Some(_), _) => None,
                            (None, None) => Some(Instant::now()),
                            (None, since) => since,
                        };
                        Ok(())
                    }
                    Err(_) => Err(Status::unavailable(SERVER_STOPPED)),
                },
                _ = sleep_until(deadline), if deadline.is_some() => {
                    warn!("an etcd watch stream that requires a leader ends: none for {NO_LEADER_GRACE:?}");
                    Err(Status::unavailable(NO_LEADER))
                }
                _ = progress.tick() => match self.progress_notify().await {
                    Ok(()) => Ok(()),
                    Err(Ended) => return,
                },
            };
            if let Err(status) = step {
                // Unavailable: the client reopens the stream (here or on
                // another member) and resumes every watch where it was.
                // Not waited for: a client that does not read loses the
                // connection anyway.
                let _ = self.tx.try_send(Err(status));
                return;
            }
        }
    }

    /// The store's revision now (this member's applied state).
    fn revision(&self) -> u64 {
        self.shared.ctx.kv.read_stale(|s| s.revision()).0
    }

    /// Queues `response` for the client, waiting while the queue is full.
    async fn send(&mut self, response: WatchResponse) -> Result<(), Ended> {
        tokio::select! {
            sent = self.tx.send(Ok(response)) => sent.map_err(|_| Ended),
            _ = stopped(&mut self.stopping) => Err(Ended),
        }
    }

    /// Answers one request of the client.
    async fn handle(&mut self, request: WatchRequest) -> Result<(), Ended> {
        match request.request_union {
            Some(RequestUnion::CreateRequest(create)) => self.create(create).await,
            Some(RequestUnion::CancelRequest(cancel)) => {
                // etcd ignores the cancel of an id it does not know.
                if self.watchers.remove(&cancel.watch_id).is_none() {
                    return Ok(());
                }
                let header = Some(self.shared.header(self.revision()));
                let watch_id = cancel.watch_id;
                self.send(WatchResponse { header, watch_id, canceled: true, ..Default::default() })
                    .await
            }
            Some(RequestUnion::ProgressRequest(_)) => {
                // The revision every watch of the stream has been told all
                // of (etcd 3.4 answers with its store's: the same once its
                // watches have caught up, as they have here but for one
                // still replaying its history).
                let current = self.revision();
                let told = self.watchers.values().map(|w| w.next - 1).min().unwrap_or(current);
                let header = Some(self.shared.header(told.min(current)));
                self.send(WatchResponse { header, watch_id: -1, ..Default::default() }).await
            }
            None => Ok(()),
        }
    }

    /// Creates a watch, or answers why not, as etcd does.
    async fn create(&mut self, c: WatchCreateRequest) -> Result<(), Ended> {
        let current = self.revision();
        let header = Some(self.shared.header(current));
        let refuse = |reason: &str| WatchResponse {
            header,
            watch_id: -1,
            created: true,
            canceled: true,
            cancel_reason: reason.to_string(),
            ..Default::default()
        };
        // etcd: an empty key is the smallest key, "\0".
        let key = if c.key.is_empty() { vec![0] } else { c.key };
        let end = c.range_end;
        if !end.is_empty() && end != [0] && key >= end {
            return self.send(refuse(EMPTY_RANGE)).await;
        }
        if self.watchers.len() >= MAX_WATCHES_PER_STREAM {
            let reason = format!(
                "tenure: a watch stream holds {MAX_WATCHES_PER_STREAM} watches at most; open \
                 another stream (another gRPC context) for more"
            );
            return self.send(refuse(&reason)).await;
        }
        let id = if c.watch_id != 0 {
            if self.watchers.contains_key(&c.watch_id) {
                return self.send(refuse(DUPLICATE_ID)).await;
            }
            c.watch_id
        } else {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id += 1;
            }
            self.next_id += 1;
            self.next_id - 1
        };
        let start = match c.start_revision {
            0 => current + 1,
            // Before the first revision: from the first.
            r => u64::try_from(r).unwrap_or(1).max(1),
        };
        let filters = |f: FilterType| c.filters.contains(&(f as i32));
        let watcher = Watcher {
            key,
            end,
            next: start,
            prev_kv: c.prev_kv,
            no_put: filters(FilterType::Noput),
            no_delete: filters(FilterType::Nodelete),
            fragment: c.fragment,
            progress_notify: c.progress_notify,
            quiet: true,
        };
        self.send(WatchResponse { header, watch_id: id, created: true, ..Default::default() })
            .await?;
        self.watchers.insert(id, watcher);
        Ok(())
    }

    /// One round of reading for every watch: its events since its last
    /// round, sent one answer per revision. Whether one is still behind.
    async fn catch_up(&mut self) -> Result<bool, Ended> {
        let mut behind = false;
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        for id in ids {
            let Some(w) = self.watchers.get(&id) else { continue };
            let (batch, current) = self
                .shared
                .ctx
                .kv
                .read_stale(|s| (read(s, w, SCAN_PER_ROUND, ROUND_BYTES), s.revision()))
                .0;
            match batch {
                Err(c) => {
                    self.watchers.remove(&id);
                    debug!(watch_id = id, compacted = c.compacted, "an etcd watch is compacted");
                    // etcd's compact_revision is the oldest revision a watch
                    // may start from; tenure's history starts after its
                    // compacted revision. The header's revision is 0, as
                    // etcd's is in this answer.
                    let response = WatchResponse {
                        header: Some(self.shared.header(0)),
                        watch_id: id,
                        canceled: true,
                        compact_revision: c.compacted as i64 + 1,
                        ..Default::default()
                    };
                    self.send(response).await?;
                }
                Ok((revisions, through)) => {
                    behind |= through < current;
                    let fragment = match self.watchers.get_mut(&id) {
                        Some(w) => {
                            w.next = through + 1;
                            w.quiet &= revisions.is_empty();
                            w.fragment
                        }
                        None => continue,
                    };
                    for (revision, events) in revisions {
                        let response = WatchResponse {
                            header: Some(self.shared.header(revision)),
                            watch_id: id,
                            events,
                            ..Default::default()
                        };
                        for piece in fragments(response, fragment, FRAGMENT_BYTES) {
                            self.send(piece).await?;
                        }
                    }
                }
            }
        }
        Ok(behind)
    }

    /// etcd's progress notification: a watch with `progress_notify` that
    /// has caught up and was sent nothing since the last tick is told the
    /// store's revision.
    async fn progress_notify(&mut self) -> Result<(), Ended> {
        let current = self.revision();
        let due: Vec<i64> = self
            .watchers
            .iter_mut()
            .filter_map(|(id, w)| {
                let due = w.progress_notify && w.quiet && w.next > current;
                w.quiet = true;
                due.then_some(*id)
            })
            .collect();
        for watch_id in due {
            let header = Some(self.shared.header(current));
            self.send(WatchResponse { header, watch_id, ..Default::default() }).await?;
        }
        Ok(())
    }
}

/// Waits until the listener stops (or is gone).
async fn stopped(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

/// Sleeps until `deadline`; never wakes without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_kv::Command;

    fn put(s: &mut Store, key: &str, value: &str) {
        let command = Command::Put {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            if_mod_revision: None,
            lease: None,
        };
        s.execute(&command);
    }

    fn watcher(key: &str, end: &str, next: u64) -> Watcher {
        Watcher { end: end.as_bytes().to_vec(), ..Watcher::on_key(key.as_bytes().to_vec(), next) }
    }

    fn keys(batch: &Batch) -> Vec<(u64, Vec<(i32, String)>)> {
        batch
            .0
            .iter()
            .map(|(r, evs)| {
                let evs = evs
                    .iter()
                    .map(|e| {
                        (e.r#type, String::from_utf8(e.kv.as_ref().unwrap().key.clone()).unwrap())
                    })
                    .collect();
                (*r, evs)
            })
            .collect()
    }

    #[test]
    fn a_watch_reads_its_range_from_its_revision_in_whole_revisions() {
        let mut s = Store::new();
        for (k, v) in [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4")] {
            put(&mut s, k, v);
        }
        s.execute(&Command::Delete { key: "a".into(), if_mod_revision: None });
        // The writes are revisions 2 to 5 (an empty store is at 1), the delete 6.
        let all = read(&s, &watcher("a", "\0", 1), 100, usize::MAX).unwrap();
        assert_eq!(all.1, 6);
        assert_eq!(keys(&all).len(), 5);
        let a = read(&s, &watcher("a", "", 3), 100, usize::MAX).unwrap();
        assert_eq!(keys(&a), [(4, vec![(0, "a".into())]), (6, vec![(1, "a".into())])]);
        let between = read(&s, &watcher("b", "c", 1), 100, usize::MAX).unwrap();
        assert_eq!(keys(&between), [(3, vec![(0, "b".into())])]);
        // A removal carries only the key and its revision.
        let del = &a.0[1].1[0];
        let kv = del.kv.as_ref().unwrap();
        assert_eq!((kv.mod_revision, kv.create_revision, kv.version), (6, 0, 0));
        assert!(kv.value.is_empty() && del.prev_kv.is_none());
        // prev_kv and the filters.
        let mut w = watcher("a", "", 1);
        w.prev_kv = true;
        w.no_delete = true;
        let puts = read(&s, &w, 100, usize::MAX).unwrap();
        assert_eq!(keys(&puts).len(), 2);
        assert_eq!(puts.0[1].1[0].prev_kv.as_ref().unwrap().value, b"1");
        w.no_delete = false;
        w.no_put = true;
        let dels = read(&s, &w, 100, usize::MAX).unwrap();
        assert_eq!(dels.0[0].1[0].prev_kv.as_ref().unwrap().value, b"3");
        // A bounded round stops between revisions, then goes on.
        let first = read(&s, &watcher("a", "\0", 1), 2, usize::MAX).unwrap();
        assert_eq!(first.1, 3);
        let small = read(&s, &watcher("a", "\0", 1), 100, 1).unwrap();
        assert_eq!(small.1, 2, "one revision at least");
        // Nothing new, or a future revision: nothing, through where it was.
        assert_eq!(read(&s, &watcher("a", "", 7), 100, usize::MAX).unwrap(), (vec![], 6));
        assert_eq!(read(&s, &watcher("a", "", 10), 100, usize::MAX).unwrap(), (vec![], 9));
        // Compacted.
        s.execute(&Command::Compact { revision: 4 });
        assert_eq!(read(&s, &watcher("a", "", 4), 100, usize::MAX).unwrap_err().compacted, 4);
        assert!(read(&s, &watcher("a", "", 5), 100, usize::MAX).is_ok());
    }

    #[test]
    fn large_answers_are_cut_into_fragments_only_when_asked() {
        let event = |n: u8| mvccpb::Event {
            kv: Some(mvccpb::KeyValue { key: vec![n], value: vec![n; 100], ..Default::default() }),
            ..Default::default()
        };
        let response = WatchResponse {
            watch_id: 3,
            events: (0..5).map(event).collect(),
            ..Default::default()
        };
        assert_eq!(fragments(response.clone(), false, 10).len(), 1);
        assert_eq!(fragments(response.clone(), true, 100_000).len(), 1);
        let pieces = fragments(response.clone(), true, 250);
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert!(pieces[0].fragment && pieces[1].fragment && !pieces[2].fragment);
        assert!(pieces.iter().all(|p| p.watch_id == 3));
        let events: Vec<_> = pieces.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(events, response.events);
        // Each piece holds at least one event, however small the limit.
        assert_eq!(fragments(response, true, 1).len(), 5);
    }
}
