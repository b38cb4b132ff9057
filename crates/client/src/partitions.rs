//! A member of a group of partitions (docs/PARTITIONS.md): it joins with its
//! session, is told which partitions it owns, each with its epoch (the
//! fencing token to tag the partition's writes with) and a
//! [`CancellationToken`], and gives partitions back when the leader asks.
//!
//! ```no_run
//! # async fn example(store: std::sync::Arc<tenure_client::TenureStore>) -> Result<(), tenure_client::Error> {
//! use std::time::Duration;
//! use tenure_client::partitions::{Event, JoinOptions, PartitionMember};
//! use tenure_client::{Session, TenureStore};
//! let session = Session::start(store.clone(), Duration::from_secs(10)).await?;
//! let options = JoinOptions { partitions: Some(64), ..JoinOptions::default() };
//! let mut member = PartitionMember::join(store.cluster().clone(), &session, "shards", options).await?;
//! loop {
//!     match member.next().await? {
//!         Event::Assigned { partition, epoch, stop } => {
//!             // Work on `partition` until `stop` is cancelled, tagging
//!             // writes with `epoch`.
//!             # let _ = (partition, epoch, stop);
//!         }
//!         Event::Revoked { partition, .. } => {
//!             // Its `stop` was cancelled: make sure its work is over, then:
//!             member.release(partition).await?;
//!         }
//!         Event::Lost { .. } => break,
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! **The rule that keeps owners apart.** Work on a partition only while its
//! `stop` token is not cancelled. The member cancels it when the leader
//! asks for the partition back ([`Event::Revoked`]; then stop, and only
//! then [`PartitionMember::release`]), when the partition is gone (its
//! session ended there), and at the session's deadline less
//! [`JoinOptions::stop_margin`] ([`Event::Lost`]: the cluster may give the
//! partitions to others from the deadline on). [`PartitionMember::leave`]
//! cancels every token; call it once the work has stopped.

use crate::cluster::Cluster;
use crate::error::Error;
use crate::http::REQUEST_TIMEOUT;
use hyper::{Method, StatusCode};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tenure_api::{
    AssignmentBody, GroupBody, GroupJoinRequest, GroupLeaveRequest, GroupListBody,
    GroupReleaseRequest, GroupWriteBody, MAX_RELEASE_PARTITIONS,
};
use tenure_elect::store::MAX_WAIT;
use tenure_elect::{CancellationToken, Loss, Retry, Session, SessionWatch};

/// How long one long poll of the assignment waits on the server.
pub const POLL_WAIT: Duration = Duration::from_secs(10);

/// Pause before polling again after a failed poll; it doubles with each
/// failure in a row, up to [`POLL_RETRY_MAX`] (a cluster refusing long polls
/// with 429, or unreachable, is not polled in a tight loop).
pub const POLL_RETRY: Duration = Duration::from_millis(200);

/// The longest pause between failed polls.
pub const POLL_RETRY_MAX: Duration = Duration::from_secs(5);

/// What a member says when it joins (see `POST /v1/groups/{name}/join` in
/// docs/API.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinOptions {
    /// The group's partition count: required to create the group; when it
    /// exists, another count is refused.
    pub partitions: Option<u32>,
    /// The group's stabilisation time in milliseconds, when the join
    /// creates it.
    pub stabilise_ms: Option<u64>,
    /// The member's weight (at least 1).
    pub weight: u32,
    /// Its zone.
    pub zone: Option<String>,
    /// Partitions it would rather own.
    pub preferred: Vec<u32>,
    /// Partitions it must never own.
    pub excluded: Vec<u32>,
    /// How long before the session's deadline the member cancels every
    /// partition's token when no renewal moved the deadline on: the time
    /// the work needs to stop. Default: a tenth of the session's TTL.
    pub stop_margin: Option<Duration>,
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            partitions: None,
            stabilise_ms: None,
            weight: 1,
            zone: None,
            preferred: Vec::new(),
            excluded: Vec::new(),
            stop_margin: None,
        }
    }
}

/// What happened to the member's partitions.
#[derive(Debug)]
pub enum Event {
    /// `partition` is the member's, granted at `epoch` (larger than every
    /// earlier grant's): work on it until `stop` is cancelled.
    Assigned {
        /// The partition.
        partition: u32,
        /// The grant's epoch, the fencing token.
        epoch: u64,
        /// Cancelled when the work must stop.
        stop: CancellationToken,
    },
    /// `partition`'s `stop` was cancelled. If `release` is true the leader
    /// asked for it back: once its work is over, call
    /// [`PartitionMember::release`]. If false it is gone already (the
    /// cluster ended its grant).
    Revoked {
        /// The partition.
        partition: u32,
        /// The epoch of the grant that ended.
        epoch: u64,
        /// Whether the member must release it.
        release: bool,
    },
    /// The session ended or its deadline came without a renewal: every
    /// token was cancelled, and the member owns nothing from now on.
    Lost {
        /// Why.
        loss: Loss,
    },
}

/// A partition the member owns, as it knows it.
#[derive(Debug)]
struct Owned {
    epoch: u64,
    stop: CancellationToken,
    /// Asked back: its `Revoked` went out, the release is the caller's.
    revoked: bool,
}

/// A member of one group. See the module documentation.
pub struct PartitionMember {
    cluster: Arc<Cluster>,
    group: String,
    session: u64,
    /// Cancelled at the session's end or its deadline less the margin, by
    /// a task of its own (whatever the caller is awaiting then); every
    /// partition's token is a child of it.
    expired: CancellationToken,
    /// That task: why the session ended, once it did.
    watcher: tokio::task::JoinHandle<Loss>,
    owned: BTreeMap<u32, Owned>,
    /// Events found and not yet returned.
    pending: std::collections::VecDeque<Event>,
    /// The revision of the last assignment read.
    after: Option<u64>,
    /// The pause after the next failed poll.
    retry: Duration,
    /// Grants given back ([`PartitionMember::release_later`]) whose keys
    /// may still show: partition -> epoch. Not told again as `Revoked`;
    /// forgotten once the key is gone or shows another grant.
    given_back: BTreeMap<u32, u64>,
    lost: bool,
}

impl PartitionMember {
    /// Joins group `group` with `session` (creating the group when
    /// `options.partitions` says how many partitions it has and it does not
    /// exist yet).
    pub async fn join(
        cluster: Arc<Cluster>,
        session: &Session,
        group: &str,
        options: JoinOptions,
    ) -> Result<PartitionMember, Error> {
        let mut request = GroupJoinRequest::new(session.id());
        request.partitions = options.partitions.map(u64::from);
        request.stabilise_ms = options.stabilise_ms;
        request.weight = options.weight;
        request.zone = options.zone.clone();
        request.preferred = options.preferred.clone();
        request.excluded = options.excluded.clone();
        let body = serde_json::json!(request);
        let path = format!("/v1/groups/{group}/join");
        let _: GroupWriteBody = cluster
            .json(Method::POST, &path, Some(&body), REQUEST_TIMEOUT, Retry::Idempotent)
            .await?;
        let margin = options.stop_margin.unwrap_or(session.ttl() / 10);
        let expired = CancellationToken::new();
        let watcher = tokio::spawn(watch_deadline(session.watch(), margin, expired.clone()));
        Ok(PartitionMember {
            cluster,
            group: group.to_string(),
            session: session.id(),
            expired,
            watcher,
            owned: BTreeMap::new(),
            pending: Default::default(),
            after: None,
            retry: POLL_RETRY,
            given_back: BTreeMap::new(),
            lost: false,
        })
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The partitions the member owns now, with their epochs, ascending
    /// (those asked back and not yet released included).
    pub fn owned(&self) -> Vec<(u32, u64)> {
        self.owned.iter().map(|(p, o)| (*p, o.epoch)).collect()
    }

    /// The token of `partition` if the member owns it and was not asked to
    /// give it up: for work started again on it (it is cancelled when the
    /// work must stop, as the one [`Event::Assigned`] gave).
    pub fn stop_token(&self, partition: u32) -> Option<CancellationToken> {
        self.owned.get(&partition).filter(|o| !o.revoked).map(|o| o.stop.clone())
    }

    /// The next event: waits for the assignment to change, or for the
    /// session's deadline less the stop margin. After [`Event::Lost`] it
    /// returns `Lost` again.
    ///
    /// Polls that fail for a reason that may pass (no answer, a 5xx, 429)
    /// are retried here, after a pause that doubles up to
    /// [`POLL_RETRY_MAX`]. A refusal that asking again cannot change (a
    /// token refused, a 4xx) is returned after that pause: calling `next`
    /// again polls again. Either way the deadline keeps running: without a
    /// renewal, every token is cancelled at the deadline less the margin.
    pub async fn next(&mut self) -> Result<Event, Error> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(e);
            }
            if self.lost {
                return Ok(Event::Lost { loss: Loss::Gone });
            }
            if self.expired.is_cancelled() {
                let loss = (&mut self.watcher).await.unwrap_or(Loss::DeadlinePassed);
                self.lose(loss);
                continue;
            }
            let expired = self.expired.clone();
            let pause = self.retry;
            let poll = async {
                let read = self.poll().await;
                if read.is_err() {
                    tokio::time::sleep(pause).await;
                }
                read
            };
            tokio::select! {
                biased;
                () = expired.cancelled() => {}
                read = poll => match read {
                    Ok(read) => {
                        self.retry = POLL_RETRY;
                        match read {
                            Some(a) => self.apply(a),
                            None => self.lose(Loss::Gone),
                        }
                    }
                    Err(Error::Refused(r)) if r.status == StatusCode::BAD_REQUEST && self.after.is_some() => {
                        // `after` beyond the store's revision (a restored
                        // cluster): read the assignment afresh.
                        tracing::warn!(group = %self.group, error = %r, "the assignment poll was refused; reading it afresh");
                        self.after = None;
                    }
                    Err(e) => {
                        self.retry = (self.retry * 2).min(POLL_RETRY_MAX);
                        if final_refusal(&e) {
                            return Err(e);
                        }
                        tracing::warn!(group = %self.group, error = %e, "an assignment poll failed; polling again");
                    }
                },
            }
        }
    }

    /// Gives `partition` back: call it once its work is over, after its
    /// [`Event::Revoked`] (or to give up a partition of one's own accord,
    /// once its work is over). A partition the member no longer owns is not
    /// an error. The same as [`PartitionMember::release_later`] sent at once.
    pub async fn release(&mut self, partition: u32) -> Result<(), Error> {
        match self.release_later(partition) {
            Some(r) => r.send().await,
            None => Ok(()),
        }
    }

    /// Forgets `partition` (cancelling its token) and returns the release to
    /// send, which borrows nothing of the member: a caller that keeps
    /// calling [`PartitionMember::next`] while it is sent (and sends it
    /// again after an error: the member does not tell the partition again
    /// as [`Event::Revoked`] while its key still shows that grant). `None`
    /// if the member does not own it.
    pub fn release_later(&mut self, partition: u32) -> Option<Release> {
        self.release_all_later(&[partition]).pop()
    }

    /// [`PartitionMember::release_later`] for several partitions: the
    /// releases to send, one per [`MAX_RELEASE_PARTITIONS`] of those the
    /// member owns (each gives its partitions up at one revision: one
    /// request and one commit for many, where a join or a rebalance asks
    /// for many back at once). Partitions it does not own are left out.
    pub fn release_all_later(&mut self, partitions: &[u32]) -> Vec<Release> {
        let mut grants = Vec::new();
        for p in partitions {
            let Some(o) = self.owned.remove(p) else { continue };
            o.stop.cancel();
            self.given_back.insert(*p, o.epoch);
            grants.push((*p, o.epoch));
        }
        grants
            .chunks(MAX_RELEASE_PARTITIONS)
            .map(|chunk| Release {
                cluster: self.cluster.clone(),
                path: format!("/v1/groups/{}/release", self.group),
                request: GroupReleaseRequest::new(self.session, chunk),
            })
            .collect()
    }

    /// The next event if one is known already, without asking the cluster:
    /// one assignment often brings several (a join asks many partitions
    /// back at once), and a caller that gathers them sends one release for
    /// all.
    pub fn try_next(&mut self) -> Option<Event> {
        self.pending.pop_front()
    }

    /// Leaves the group: cancels every partition's token and deletes the
    /// member and its partitions on the cluster, which grants them to
    /// others at once. Call it once the work on every partition is over.
    pub async fn leave(mut self) -> Result<(), Error> {
        for o in std::mem::take(&mut self.owned).into_values() {
            o.stop.cancel();
        }
        let body = serde_json::json!(GroupLeaveRequest { session: self.session });
        let path = format!("/v1/groups/{}/leave", self.group);
        match self
            .cluster
            .json::<GroupWriteBody>(
                Method::POST,
                &path,
                Some(&body),
                REQUEST_TIMEOUT,
                Retry::Idempotent,
            )
            .await
        {
            Ok(_) => Ok(()),
            // Not a member any more (a retry that landed, or its session ended).
            Err(Error::Refused(r)) if r.status == StatusCode::NOT_FOUND => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One long poll; `None` when the session is not a member any more.
    async fn poll(&self) -> Result<Option<AssignmentBody>, Error> {
        let wait = POLL_WAIT.min(MAX_WAIT);
        let after = self.after.map(|a| format!("&after={a}")).unwrap_or_default();
        let path = format!(
            "/v1/groups/{}/assignment?session={}&timeout_ms={}{after}",
            self.group,
            self.session,
            wait.as_millis()
        );
        let read = self
            .cluster
            .json::<AssignmentBody>(
                Method::GET,
                &path,
                None,
                wait + REQUEST_TIMEOUT,
                Retry::Idempotent,
            )
            .await;
        match read {
            Ok(a) => Ok(Some(a)),
            Err(Error::Refused(r)) if r.status == StatusCode::NOT_FOUND => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Turns an assignment into events.
    fn apply(&mut self, a: AssignmentBody) {
        self.after = Some(a.revision);
        let now: BTreeMap<u32, (u64, bool)> =
            a.owned.iter().map(|o| (o.partition, (o.epoch, o.release))).collect();
        // A release on its way (or lost: sent again by whoever holds it)
        // is not news; once its key is gone or shows another grant, it is
        // over.
        self.given_back.retain(|p, epoch| now.get(p).is_some_and(|(e, _)| e == epoch));
        let now: BTreeMap<u32, (u64, bool)> = now
            .into_iter()
            .filter(|(p, (epoch, _))| self.given_back.get(p) != Some(epoch))
            .collect();
        // Gone, or granted again under another epoch.
        let ended: Vec<u32> = self
            .owned
            .iter()
            .filter(|(p, o)| now.get(p).is_none_or(|(epoch, _)| *epoch != o.epoch))
            .map(|(p, _)| *p)
            .collect();
        for p in ended {
            let o = self.owned.remove(&p).expect("listed");
            o.stop.cancel();
            if !o.revoked {
                self.pending.push_back(Event::Revoked {
                    partition: p,
                    epoch: o.epoch,
                    release: false,
                });
            }
        }
        for (&p, &(epoch, release)) in &now {
            match self.owned.get_mut(&p) {
                Some(o) if release && !o.revoked => {
                    o.stop.cancel();
                    o.revoked = true;
                    self.pending.push_back(Event::Revoked { partition: p, epoch, release: true });
                }
                Some(_) => {}
                None if release => {
                    // Asked back before this member knew it had it: nothing
                    // of it ran; give it back at once.
                    let stop = self.expired.child_token();
                    stop.cancel();
                    self.owned.insert(p, Owned { epoch, stop, revoked: true });
                    self.pending.push_back(Event::Revoked { partition: p, epoch, release: true });
                }
                None => {
                    let stop = self.expired.child_token();
                    self.owned.insert(p, Owned { epoch, stop: stop.clone(), revoked: false });
                    self.pending.push_back(Event::Assigned { partition: p, epoch, stop });
                }
            }
        }
    }

    /// The session can no longer be trusted: every token is cancelled.
    fn lose(&mut self, loss: Loss) {
        self.expired.cancel();
        for o in std::mem::take(&mut self.owned).into_values() {
            o.stop.cancel();
        }
        self.lost = true;
        self.pending.push_back(Event::Lost { loss });
    }
}

impl Drop for PartitionMember {
    /// Stops the deadline's task (the tokens stay as they are).
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Cancels `expired` when the session ends or `margin` before its deadline
/// with no renewal; returns why.
async fn watch_deadline(
    mut watch: SessionWatch,
    margin: Duration,
    expired: CancellationToken,
) -> Loss {
    let loss = watch.stale(margin).await;
    expired.cancel();
    loss
}

/// Whether a failed poll is a refusal that asking again cannot change: a
/// token refused, or a 4xx other than 429 (a limit on long polls held at
/// once, which frees up).
fn final_refusal(e: &Error) -> bool {
    match e {
        Error::AuthRefused(_) | Error::Config(_) | Error::Invalid(_) => true,
        Error::Refused(r) => {
            r.status.is_client_error() && r.status != StatusCode::TOO_MANY_REQUESTS
        }
        _ => false,
    }
}

/// A release to send (see [`PartitionMember::release_later`]).
#[derive(Debug, Clone)]
pub struct Release {
    cluster: Arc<Cluster>,
    path: String,
    request: GroupReleaseRequest,
}

impl Release {
    /// The grants released, `(partition, epoch)` each.
    pub fn grants(&self) -> Vec<(u32, u64)> {
        self.request.grants().unwrap_or_default()
    }

    /// Sends it. Released already (a retry that landed) or gone with the
    /// session is not an error; an error may be sent again.
    pub async fn send(self) -> Result<(), Error> {
        let body = serde_json::json!(self.request);
        let answer = self
            .cluster
            .json::<GroupWriteBody>(
                Method::POST,
                &self.path,
                Some(&body),
                REQUEST_TIMEOUT,
                Retry::Idempotent,
            )
            .await;
        match answer {
            Ok(_) => Ok(()),
            Err(Error::Refused(r))
                if r.status == StatusCode::CONFLICT || r.status == StatusCode::NOT_FOUND =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// A page of the groups the cluster holds now (`GET /v1/groups`,
/// linearizable): at most `limit` (1 to 100) after the name `after`, by
/// name; [`GroupListBody::more`] says whether others follow.
pub async fn groups(
    cluster: &Cluster,
    after: Option<&str>,
    limit: usize,
) -> Result<GroupListBody, Error> {
    let mut path = format!("/v1/groups?limit={limit}");
    if let Some(after) = after {
        path.push_str(&format!("&after={after}"));
    }
    cluster.json(Method::GET, &path, None, REQUEST_TIMEOUT, Retry::Idempotent).await
}

/// Group `name` as the cluster holds it now (`GET /v1/groups/{name}`,
/// linearizable): its spec, members (the first page: [`GroupBody::more`]
/// says whether more follow) and owners.
pub async fn group(cluster: &Cluster, name: &str) -> Result<GroupBody, Error> {
    let path = format!("/v1/groups/{name}");
    cluster.json(Method::GET, &path, None, REQUEST_TIMEOUT, Retry::Idempotent).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Refused;

    fn refusal(status: StatusCode) -> Error {
        Error::Refused(Refused {
            url: "https://n1/v1/groups/g/assignment".into(),
            status,
            message: "no".into(),
            body: Default::default(),
        })
    }

    #[test]
    fn only_refusals_that_asking_again_cannot_change_end_a_poll() {
        assert!(final_refusal(&refusal(StatusCode::FORBIDDEN)));
        assert!(final_refusal(&refusal(StatusCode::UNPROCESSABLE_ENTITY)));
        assert!(final_refusal(&Error::Invalid("bad group name".into())));
        // A limit on long polls frees up; a server error or no answer passes.
        assert!(!final_refusal(&refusal(StatusCode::TOO_MANY_REQUESTS)));
        assert!(!final_refusal(&refusal(StatusCode::SERVICE_UNAVAILABLE)));
        assert!(!final_refusal(&refusal(StatusCode::INTERNAL_SERVER_ERROR)));
    }
}
