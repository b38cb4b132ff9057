//! Sessions: grant, renew, revoke and the loss signal.
//!
//! # The deadline (docs/STORES.md §3.3)
//!
//! Expiry is decided by the ensemble's leader. Every packet a server gets
//! on a session touches it there, but a *follower*'s touches reach the
//! leader only with the follower's replies to the leader's pings (every
//! `tickTime/2`). A reply from a follower therefore proves that the
//! follower touched the session after our send, not that the leader did.
//!
//! A renewal here is a `sync`, which a follower forwards to the leader on
//! the same TCP connection as its ping replies; the leader handles that
//! connection's packets in order. So the reply to renewal `n` proves that
//! the leader handled every ping reply the follower sent before it
//! forwarded the `sync`. Renewals are `T/4` apart ([`RENEWALS_PER_TTL`])
//! and ZooKeeper negotiates `T ≥ 2 tickTime`, so `T/4 ≥ tickTime/2`
//! (strictly above it unless the session is exactly two ticks long: set
//! [`crate::ZkOptions::min_ttl`] above that): a ping round lies between the
//! previous renewal's arrival at the follower and this one's, and its reply
//! carried the previous renewal's touch. Hence the deadline may rest on the
//! **previous** renewal's send time, and [`Renewal::sent`] of renewal `n`
//! is renewal `n − 1`'s: trust is one interval (`T/4`) shorter than with
//! etcd or tenure, which [`tenure_elect::Store::renewal_lag`] tells the
//! layer above. Renewing every `T/4` rather than `T/3` leaves, after a
//! renewal, `0.818 T − 2 × T/4 ≈ 0.32 T` before the deadline once the next
//! renewal is due (tenure and etcd: `0.818 T − T/3 ≈ 0.48 T`).
//!
//! * The first renewal returns the grant's send time: the session was
//!   created at the leader after the connect was sent, with a full timeout.
//! * A reconnection to another server in between is no weaker: the new
//!   server revalidates the session with the leader, which touches it there
//!   (read in ZooKeeper's source, not tested here).
//! * A `sync` answered at all proves the session was not expired at the
//!   leader when it handled the `sync`: the follower applies the leader's
//!   earlier commits (a `closeSession` included, which drops our
//!   connection) before it answers a `sync`.
//! * If a ping reply is lost or delayed past the next renewal, the argument
//!   fails; the fallback is [`crate::ZkOptions::min_ttl`], to be set to
//!   `2 × syncLimit × tickTime` (the client cannot read those by default).
//!
//! Not yet confirmed by a partition test (the client's follower cut off
//! from the leader while the application keeps running).
//!
//! The library's own local expiry (7/5 × the timeout after the last
//! receipt) is never relied on: it comes after the server may have deleted
//! our nodes.

use crate::errors::bounded;
use crate::{Entry, ZkStore};
use std::sync::Arc;
use std::time::Duration;
use tenure_elect::session::check_ttl;
use tenure_elect::store::{Renewal, SessionId, StoreError};
use tokio::time::Instant;
use zookeeper_client::{Client, SessionState};

/// A session is renewed this many times per TTL (see the module's notes).
pub const RENEWALS_PER_TTL: u32 = 4;

/// Whether `state` ends a session for good (a new session needs a new client).
pub(crate) fn is_terminal(state: SessionState) -> bool {
    matches!(state, SessionState::Expired | SessionState::Closed | SessionState::AuthFailed)
}

/// Whether `state` ends trust in the session (Curator: suspended = not leader).
pub(crate) fn ends_trust(state: SessionState) -> bool {
    is_terminal(state) || state == SessionState::Disconnected
}

/// The send time a renewal sent at `now` and answered may rest on: the
/// previous renewal's (see the module's notes); `now` becomes the previous
/// one for the next renewal. Renewals of a session are serialized (the
/// caller holds `last`'s lock across the request), so `now` is the latest.
pub(crate) fn rest_on_previous(last: &mut Instant, now: Instant) -> Instant {
    std::mem::replace(last, now)
}

impl ZkStore {
    pub(crate) async fn grant_session(&self, ttl: Duration) -> Result<Renewal, StoreError> {
        check_ttl(ttl)?;
        if ttl.as_millis() > i32::MAX as u128 {
            return Err(StoreError::Invalid(format!(
                "a ZooKeeper session timeout is at most {} ms",
                i32::MAX
            )));
        }
        let sent = Instant::now();
        let connect = Client::connector().with_session_timeout(ttl).connect(&self.servers);
        // The library tries every server within about the session timeout.
        let limit = ttl + self.options.request_timeout;
        let client = bounded(&self.servers, "connect", limit, connect).await?;
        let granted = client.session_timeout();
        if granted < self.options.min_ttl {
            // Dropping the only client closes the session.
            return Err(StoreError::Refused(format!(
                "ZooKeeper granted a session timeout of {} ms, below the {} ms this store needs \
                 (min_ttl: 2 × syncLimit × tickTime)",
                granted.as_millis(),
                self.options.min_ttl.as_millis()
            )));
        }
        check_ttl(granted).map_err(|e| StoreError::Refused(format!("ZooKeeper granted {e}")))?;
        let session = SessionId(client.session_id().0 as u64);
        let (revoked, _) = tokio::sync::watch::channel(false);
        let entry = Entry { client, last_sent: tokio::sync::Mutex::new(sent), revoked };
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.insert(session, Arc::new(entry));
        Ok(Renewal { session, sent, ttl: granted })
    }

    pub(crate) async fn renew_session(&self, session: SessionId) -> Result<Renewal, StoreError> {
        let entry = self.entry(session)?;
        // Held across the request: one renewal of a session at a time.
        let mut last = entry.last_sent.lock().await;
        let now = Instant::now();
        let sync = entry.client.sync("/");
        let limit = self.options.request_timeout;
        bounded(&self.servers, "renew (sync)", limit, sync)
            .await
            .map_err(|e| on_session_error(self, session, e))?;
        let sent = rest_on_previous(&mut last, now);
        Ok(Renewal { session, sent, ttl: entry.client.session_timeout() })
    }

    /// Removes `session` from the map and tells its waits to end.
    pub(crate) fn forget(&self, session: SessionId) -> Option<Arc<Entry>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sessions.remove(&session)?;
        entry.revoked.send_replace(true);
        Some(entry)
    }

    /// Closes the session: dropping the last clone of its client sends
    /// `closeSession` (the server deletes its ephemeral nodes); waits until
    /// the client says `Closed`, at most the request timeout.
    pub(crate) async fn revoke_session(&self, session: SessionId) -> Result<(), StoreError> {
        let Some(entry) = self.forget(session) else { return Ok(()) };
        let mut states = entry.client.state_watcher();
        drop(entry);
        let closed = async {
            let mut state = states.state();
            while !is_terminal(state) {
                state = states.changed().await;
            }
        };
        if tokio::time::timeout(self.options.request_timeout, closed).await.is_err() {
            tracing::warn!(
                session = %format_args!("{:#x}", session.0),
                "ZooKeeper session not closed within the request timeout: it will expire"
            );
        }
        Ok(())
    }

    pub(crate) async fn suspension(&self, session: SessionId) -> String {
        let entry = match self.entry(session) {
            Ok(entry) => entry,
            Err(e) => return e.to_string(),
        };
        let mut states = entry.client.state_watcher();
        let mut revoked = entry.revoked.subscribe();
        drop(entry);
        let mut state = states.state();
        loop {
            if ends_trust(state) {
                return format!("ZooKeeper session {:#x} is {state}", session.0);
            }
            tokio::select! {
                next = states.changed() => state = next,
                _ = revoked.wait_for(|r| *r) => {
                    return format!("ZooKeeper session {:#x} was revoked", session.0);
                }
            }
        }
    }
}

/// Passes on an error of a call on `session`'s client, forgetting the
/// session if its client reached a terminal state (a candidacy that is
/// gone is not a session that is gone).
pub(crate) fn on_session_error(store: &ZkStore, session: SessionId, e: StoreError) -> StoreError {
    if matches!(e, StoreError::Gone(_)) {
        // Removes the session when its client's state is terminal.
        let _ = store.entry(session);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_rests_on_the_previous_send_time() {
        let t0 = Instant::now();
        let mut last = t0;
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(rest_on_previous(&mut last, t1), t0);
        let t2 = t1 + Duration::from_millis(100);
        assert_eq!(rest_on_previous(&mut last, t2), t1);
        assert_eq!(last, t2);
    }

    #[test]
    fn disconnected_ends_trust_but_only_terminal_states_end_the_session() {
        assert!(ends_trust(SessionState::Disconnected));
        assert!(!is_terminal(SessionState::Disconnected));
        for s in [SessionState::Expired, SessionState::Closed, SessionState::AuthFailed] {
            assert!(ends_trust(s) && is_terminal(s), "{s}");
        }
        assert!(!ends_trust(SessionState::SyncConnected));
    }
}
