//! Renewals on their way to the leader, gathered: one node's renewals (its
//! HTTP keepalives and keepalive streams, its etcd `LeaseKeepAlive`
//! streams) go to the leader's sessions service as leader asks of many
//! leases each ([`SessionAsk::RenewMany`]), at most
//! [`RENEWAL_ASKS_IN_FLIGHT`] at a time, over the node's one peer
//! connection to the leader. A renewal arriving while those are on their
//! way waits for the next ask, which takes every renewal waiting (up to
//! [`MAX_RENEWALS_PER_ASK`]): under light load each renewal leaves at once
//! on its own; under heavy load the asks grow instead of multiplying, and
//! the leader checks its leadership (R2) once per ask instead of once per
//! renewal.
//!
//! Bounded: at most [`MAX_QUEUED_RENEWALS`] wait; beyond, a renewal is
//! answered [`SessionAnswer::Busy`] at once, as the leader answers when
//! too many wait for its check. An ask out for longer than
//! [`SLOT_HELD_AT_MOST`] (a frame lost on the way fails only at the
//! request timeout) lets the next one leave: a few stuck asks do not hold
//! up every renewal of the node.
//!
//! A leader of an earlier build, which cannot read a renewal of many
//! leases, answers [`SessionAnswer::BadRequest`]: each of them is then
//! asked again on its own, so a rolling upgrade renews every session.

use super::protocol::{
    ask, RenewAnswers, SessionAnswer, SessionAsk, SessionAskError, MAX_RENEWALS_PER_ASK,
};
use std::future::Future;
use std::sync::Arc;
use tenure_kv::{LeaseId, Store};
use tenure_node::replicated::AskError;
use tenure_node::Replicated;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Renewals waiting for an ask to the leader, at most.
pub const MAX_QUEUED_RENEWALS: usize = 16 * MAX_RENEWALS_PER_ASK;

/// Asks of renewals on their way to the leader from one node, at most
/// (not counting those out for longer than [`SLOT_HELD_AT_MOST`]).
pub const RENEWAL_ASKS_IN_FLIGHT: usize = 4;

/// How long an ask of renewals holds its slot at most: far beyond a round
/// trip to the leader, and well under the shortest TTL (500 ms). A slower
/// ask goes on answering its renewals when it ends, but the next may
/// leave.
pub const SLOT_HELD_AT_MOST: std::time::Duration = std::time::Duration::from_millis(250);

/// Single renewals in flight at once when a leader of an earlier build
/// refused a renewal of many (its ask queue holds 1,024).
const FALLBACK_IN_FLIGHT: usize = 32;

type Reply = oneshot::Sender<Answer>;

/// A node's renewals, gathered into asks to the leader. Cheap to clone
/// (every clone feeds the same task); the task ends when the last clone is
/// dropped, after the asks on their way are answered.
#[derive(Clone, Debug)]
pub struct Renewer {
    queue: mpsc::Sender<(LeaseId, Reply)>,
}

impl Renewer {
    /// Starts the task that sends the renewals of `kv`'s node.
    pub fn start(kv: Replicated<Store>) -> Renewer {
        Renewer::with(move |leases| {
            let kv = kv.clone();
            async move { send(&kv, leases).await }
        })
    }

    /// Starts the task with `send`, which asks the leader to renew a batch
    /// of leases and returns their answers, in order.
    fn with<F, Fut>(send: F) -> Renewer
    where
        F: Fn(Vec<LeaseId>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Answer>> + Send + 'static,
    {
        let (queue, waiting) = mpsc::channel(MAX_QUEUED_RENEWALS);
        tokio::spawn(gather(waiting, send));
        Renewer { queue }
    }

    /// Renews `lease` on the leader: its answer, or why none came.
    pub async fn renew(&self, lease: LeaseId) -> Answer {
        let (reply, answer) = oneshot::channel();
        match self.queue.try_send((lease, reply)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Ok(SessionAnswer::Busy),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(SessionAskError::Ask(AskError::Stopped))
            }
        }
        answer.await.unwrap_or(Err(SessionAskError::Ask(AskError::Stopped)))
    }
}

/// A renewal's answer, or why none came.
type Answer = Result<SessionAnswer, SessionAskError>;

/// Takes the renewals waiting, as many as an ask holds, once an ask may
/// leave; sends each batch in a task of its own and answers each renewal.
async fn gather<F, Fut>(mut waiting: mpsc::Receiver<(LeaseId, Reply)>, send: F)
where
    F: Fn(Vec<LeaseId>) -> Fut,
    Fut: Future<Output = Vec<Answer>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(RENEWAL_ASKS_IN_FLIGHT));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let mut batch = Vec::new();
        while batch.is_empty() {
            let Some(first) = waiting.recv().await else { return };
            batch.push(first);
            while batch.len() < MAX_RENEWALS_PER_ASK {
                match waiting.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            // Nobody waits for these any more (the caller went away).
            batch.retain(|(_, reply)| !reply.is_closed());
        }
        let (leases, replies): (Vec<LeaseId>, Vec<Reply>) = batch.into_iter().unzip();
        let mut asked = Box::pin(send(leases));
        tokio::spawn(async move {
            // An ask slower than this (a frame lost on the way: it fails
            // only at the request timeout) frees its slot for the next, so
            // a few stuck asks never hold up every renewal of the node.
            let answers = tokio::select! {
                answers = &mut asked => answers,
                () = tokio::time::sleep(SLOT_HELD_AT_MOST) => {
                    drop(slot);
                    asked.await
                }
            };
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        });
    }
}

/// Asks the leader to renew `leases`: one [`SessionAsk::Renew`] for one,
/// one [`SessionAsk::RenewMany`] for more; their answers, in order.
async fn send(kv: &Replicated<Store>, leases: Vec<LeaseId>) -> Vec<Answer> {
    if let [lease] = leases[..] {
        return vec![ask(kv, SessionAsk::Renew(lease)).await];
    }
    let n = leases.len();
    let asked = kv.ask_leader(SessionAsk::RenewMany(leases.clone()).encode()).await;
    match answers_of(n, asked.map_err(SessionAskError::from).and_then(|b| RenewAnswers::decode(&b)))
    {
        Some(answers) => answers,
        // A leader of an earlier build: each on its own, a few at a time.
        None => {
            use futures_util::StreamExt;
            let asks: Vec<_> =
                leases.into_iter().map(|l| Box::pin(ask(kv, SessionAsk::Renew(l)))).collect();
            futures_util::stream::iter(asks).buffered(FALLBACK_IN_FLIGHT).collect().await
        }
    }
}

/// Each of `n` renewals' answer from the leader's answer to their
/// [`SessionAsk::RenewMany`]; `None` when the leader could not read the
/// question (a build before it: ask each on its own).
fn answers_of(n: usize, answered: Result<RenewAnswers, SessionAskError>) -> Option<Vec<Answer>> {
    Some(match answered {
        Ok(RenewAnswers::Each(answers)) if answers.len() == n => {
            answers.into_iter().map(Ok).collect()
        }
        Ok(RenewAnswers::Each(answers)) => {
            let e = SessionAskError::Malformed(format!(
                "{} answers to a renewal of {n} sessions",
                answers.len()
            ));
            vec![Err(e); n]
        }
        Ok(RenewAnswers::All(SessionAnswer::BadRequest)) => return None,
        Ok(RenewAnswers::All(answer)) => vec![Ok(answer); n],
        Err(e) => vec![Err(e); n],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio::sync::Notify;

    /// Renewals queued while every ask slot is taken leave together, in
    /// one ask, once a slot is free; each gets its own answer.
    #[tokio::test]
    async fn renewals_waiting_for_a_slot_leave_in_one_ask() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let go = Arc::new(Notify::new());
        let renewer = {
            let (sizes, go) = (sizes.clone(), go.clone());
            Renewer::with(move |leases: Vec<LeaseId>| {
                sizes.lock().unwrap().push(leases.len());
                let go = go.clone();
                async move {
                    go.notified().await;
                    leases.iter().map(|l| Ok(SessionAnswer::Renewed { ttl_ms: l.0 })).collect()
                }
            })
        };
        let renew = |l: u64| {
            let r = renewer.clone();
            tokio::spawn(async move { r.renew(LeaseId(l)).await })
        };
        // One at a time: each leaves alone and takes a slot.
        let mut pending = Vec::new();
        for l in 0..RENEWAL_ASKS_IN_FLIGHT {
            pending.push(renew(l as u64));
            wait_until(|| sizes.lock().unwrap().len() == l + 1).await;
        }
        pending.extend((100..110).map(renew));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(*sizes.lock().unwrap(), vec![1; RENEWAL_ASKS_IN_FLIGHT], "no slot free");
        for _ in 0..=RENEWAL_ASKS_IN_FLIGHT {
            go.notify_one();
        }
        wait_until(|| sizes.lock().unwrap().len() == RENEWAL_ASKS_IN_FLIGHT + 1).await;
        go.notify_one();
        assert_eq!(sizes.lock().unwrap()[RENEWAL_ASKS_IN_FLIGHT], 10, "the ten waiting, together");
        for (p, l) in pending.into_iter().zip((0..4).chain(100..110)) {
            assert_eq!(p.await.unwrap().unwrap(), SessionAnswer::Renewed { ttl_ms: l });
        }
    }

    /// Asks that never end hold their slots only for a while: a renewal
    /// after them is still answered.
    #[tokio::test]
    async fn stuck_asks_do_not_hold_up_the_next_renewals() {
        let asked = Arc::new(Mutex::new(0));
        let renewer = {
            let asked = asked.clone();
            Renewer::with(move |leases: Vec<LeaseId>| {
                let n = {
                    let mut a = asked.lock().unwrap();
                    *a += 1;
                    *a
                };
                async move {
                    if n <= RENEWAL_ASKS_IN_FLIGHT {
                        std::future::pending::<()>().await;
                    }
                    leases.iter().map(|_| Ok(SessionAnswer::Renewed { ttl_ms: 1 })).collect()
                }
            })
        };
        let mut stuck = Vec::new();
        for l in 0..RENEWAL_ASKS_IN_FLIGHT {
            let r = renewer.clone();
            stuck.push(tokio::spawn(async move { r.renew(LeaseId(l as u64)).await }));
            wait_until(|| *asked.lock().unwrap() == l + 1).await;
        }
        let next = tokio::time::timeout(4 * SLOT_HELD_AT_MOST, renewer.renew(LeaseId(99))).await;
        assert_eq!(next.expect("answered").unwrap(), SessionAnswer::Renewed { ttl_ms: 1 });
        stuck.iter().for_each(|h| h.abort());
    }

    #[tokio::test]
    async fn beyond_the_queue_a_renewal_is_busy_at_once() {
        let renewer = Renewer::with(|_| std::future::pending::<Vec<Answer>>());
        // Renewals that never get an answer, until the queue is full.
        let mut held = Vec::new();
        let mut l = 0;
        while renewer.queue.capacity() > 0 {
            for _ in 0..256 {
                let r = renewer.clone();
                held.push(tokio::spawn(async move { r.renew(LeaseId(l)).await }));
                l += 1;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            assert!(
                held.len() <= 2 * MAX_QUEUED_RENEWALS + 8 * MAX_RENEWALS_PER_ASK,
                "never full: {} spawned, room for {}, {} done",
                held.len(),
                renewer.queue.capacity(),
                held.iter().filter(|h| h.is_finished()).count()
            );
        }
        for _ in 0..100 {
            assert_eq!(renewer.renew(LeaseId(u64::MAX)).await.ok(), Some(SessionAnswer::Busy));
        }
        held.iter().for_each(|h| h.abort());
    }

    #[test]
    fn the_answers_of_many_are_each_renewals_or_ask_again_for_an_earlier_build() {
        let renewed = SessionAnswer::Renewed { ttl_ms: 9 };
        let each = RenewAnswers::Each(vec![renewed, SessionAnswer::NotFound]);
        let got: Vec<_> =
            answers_of(2, Ok(each)).unwrap().into_iter().map(|a| a.unwrap()).collect();
        assert_eq!(got, [renewed, SessionAnswer::NotFound]);
        let all = answers_of(3, Ok(RenewAnswers::All(SessionAnswer::NotLeader))).unwrap();
        assert!(all.iter().all(|a| a.as_ref().ok() == Some(&SessionAnswer::NotLeader)));
        assert!(answers_of(2, Ok(RenewAnswers::All(SessionAnswer::BadRequest))).is_none());
        let short = answers_of(3, Ok(RenewAnswers::Each(vec![renewed]))).unwrap();
        assert!(short.iter().all(|a| matches!(a, Err(SessionAskError::Malformed(_)))));
        let failed = answers_of(2, Err(SessionAskError::Ask(AskError::Busy))).unwrap();
        assert!(failed.iter().all(|a| matches!(a, Err(SessionAskError::Ask(AskError::Busy)))));
    }

    async fn wait_until(done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("not reached within 2.5 s");
    }
}
