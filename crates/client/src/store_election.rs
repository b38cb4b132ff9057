//! An election held in any [`Store`] (tenure, etcd, ZooKeeper): campaign,
//! wait to lead, resign, check a token, observe. This is the
//! store-independent layer 2 of docs/STORES.md: every wait is raced
//! against the session's loss, and a leadership is handed out only before
//! the session's deadline and only for the candidacy's own token.

use crate::election::{check_name, check_value, Check, Observed, OBSERVE_BACKOFF_MAX};
use crate::election::{OBSERVE_BACKOFF_MIN, WAIT_POLL};
use crate::error::Error;
use crate::session::Session;
use crate::store::{Candidacy, Store, StoreError, Waited};
use futures_util::stream::BoxStream;
use std::sync::Arc;

/// One named election in a store.
#[derive(Clone, Debug)]
pub struct StoreElection {
    store: Arc<dyn Store>,
    name: String,
}

impl StoreElection {
    /// The election `name` (1 to 128 characters of `A-Z a-z 0-9 . _ -`) in `store`.
    pub fn new(store: Arc<dyn Store>, name: &str) -> Result<StoreElection, Error> {
        check_name(name)?;
        Ok(StoreElection { store, name: name.to_string() })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store it is held in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Refuses a candidacy of another session or election.
    fn owned(&self, session: &Session, candidacy: &Candidacy) -> Result<(), Error> {
        if candidacy.session != session.session_id() || candidacy.election != self.name {
            return Err(Error::Invalid(format!(
                "election {}: the candidacy {} is session {}'s in election {}, not session {}'s",
                self.name,
                candidacy.key,
                candidacy.session,
                candidacy.election,
                session.id()
            )));
        }
        Ok(())
    }

    /// Refuses a session of another store, or one that ended.
    fn usable(&self, session: &Session) -> Result<(), Error> {
        if !std::ptr::addr_eq(Arc::as_ptr(session.store()), Arc::as_ptr(&self.store)) {
            return Err(Error::Invalid(format!(
                "election {}: the session {} belongs to another store",
                self.name,
                session.id()
            )));
        }
        match session.ended() {
            Some(reason) => Err(Error::SessionEnded { id: session.id(), reason }),
            None => Ok(()),
        }
    }

    /// Joins the queue with `session` and `value` and returns at once with
    /// the candidacy (its fencing token, and whether it leads already).
    pub async fn campaign(&self, session: &Session, value: &str) -> Result<Candidacy, Error> {
        check_value(value)?;
        self.usable(session)?;
        let candidacy = self.store.campaign(session.session_id(), &self.name, value).await?;
        if candidacy.leader {
            // A leadership is only worth anything before the deadline.
            self.usable(session)?;
        }
        Ok(candidacy)
    }

    /// Waits until `candidacy` leads and returns its fencing token. Fails
    /// when the session ends (at its deadline at the latest, or when the
    /// store suspends it) or the candidacy is gone; never answers a
    /// leadership after the deadline or with another token.
    pub async fn wait_until_leader(
        &self,
        session: &Session,
        candidacy: &Candidacy,
    ) -> Result<u64, Error> {
        self.owned(session, candidacy)?;
        self.usable(session)?;
        let mut pause = OBSERVE_BACKOFF_MIN;
        loop {
            let waited = tokio::select! {
                reason = session.lost() => {
                    return Err(Error::SessionEnded { id: session.id(), reason });
                }
                w = self.store.wait(candidacy, WAIT_POLL) => w,
            };
            match waited {
                Ok(Waited::Leads { token }) if token == candidacy.token => {
                    self.usable(session)?;
                    return Ok(token);
                }
                Ok(Waited::Leads { token }) => {
                    return Err(Error::Store(StoreError::Refused(format!(
                        "election {}: the store answered a leadership with token {token}, not \
                         the candidacy's {}",
                        self.name, candidacy.token
                    ))));
                }
                Ok(Waited::Ahead { .. }) => pause = OBSERVE_BACKOFF_MIN,
                Err(StoreError::Gone(why)) => {
                    self.usable(session)?;
                    return Err(Error::Store(StoreError::Gone(why)));
                }
                Err(e) if e.is_retryable() => {
                    tracing::debug!(election = %self.name, error = %e, "wait failed; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(OBSERVE_BACKOFF_MAX);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Returns, with the reason, once a linearizable read says that
    /// `candidacy`'s token no longer leads although its session lives on:
    /// its key was deleted by someone else (an operator, a client with
    /// write access to the store). Checked every renewal interval while
    /// the caller leads, so such a leadership ends within one interval
    /// plus a read (the fencing token covers that window); a read that
    /// fails is tried at the next interval (the session's deadline covers
    /// a store that does not answer).
    pub async fn deposed(&self, session: &Session, candidacy: &Candidacy) -> String {
        loop {
            tokio::time::sleep(session.renew_interval()).await;
            match self.store.check(&self.name, candidacy.token).await {
                Ok(check) if !check.current => {
                    return match check.token {
                        Some(t) => {
                            format!("token {t} leads {} now, not {}", self.name, candidacy.token)
                        }
                        None => format!("no candidacy leads {} now", self.name),
                    };
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(election = %self.name, error = %e, "check failed"),
            }
        }
    }

    /// Leaves the queue (and leadership); its successor is woken at once.
    /// A candidacy that is already gone is not an error.
    pub async fn resign(&self, candidacy: &Candidacy) -> Result<(), Error> {
        Ok(self.store.resign(candidacy).await?)
    }

    /// Whether `token` is the current leader's (a linearizable read).
    pub async fn check(&self, token: u64) -> Result<Check, Error> {
        Ok(self.store.check(&self.name, token).await?)
    }

    /// The election's state now, then every change (see [`Observed`]).
    pub fn observe(&self) -> Result<BoxStream<'static, Result<Observed, StoreError>>, Error> {
        Ok(self.store.observe(&self.name)?)
    }
}
