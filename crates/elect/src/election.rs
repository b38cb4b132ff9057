//! An election held in any [`Store`] (tenure, etcd, ZooKeeper): campaign,
//! wait to lead, resign, check a token, observe. This is the
//! store-independent layer 2 of docs/STORES.md: every wait is raced
//! against the session's loss, and a leadership is handed out only before
//! the session's deadline and only for the candidacy's own token.

use crate::error::Error;
use crate::session::Session;
use crate::store::{Candidacy, Store, StoreError, Waited};
pub use crate::store::{Check, Leader, Observed};
use futures_util::stream::BoxStream;
use std::sync::Arc;
use std::time::Duration;

/// Longest election name the servers accept.
pub const MAX_NAME_LEN: usize = 128;
/// Largest candidate value the servers accept, in bytes.
pub const MAX_VALUE_BYTES: usize = 4096;
/// The long poll of [`Election::wait_until_leader`]: each `wait` asks the
/// server to hold the answer this long (the server's default; at most 60 s).
pub const WAIT_POLL: Duration = Duration::from_secs(30);
/// Pause before an observer reconnects after its stream ended or failed;
/// it doubles up to [`OBSERVE_BACKOFF_MAX`].
pub const OBSERVE_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Longest pause between an observer's reconnections.
pub const OBSERVE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Checks an election name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`.
pub fn check_name(name: &str) -> Result<(), Error> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !name.chars().all(ok_char) {
        return Err(Error::Invalid(format!(
            "bad election name {name:?}: 1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

/// Checks a candidate value: at most 4,096 bytes.
pub fn check_value(value: &str) -> Result<(), Error> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::Invalid(format!(
            "a candidate value is at most {MAX_VALUE_BYTES} bytes, this one has {}",
            value.len()
        )));
    }
    Ok(())
}

/// One named election in a store: the one election API, whichever the
/// store.
#[derive(Clone, Debug)]
pub struct Election {
    store: Arc<dyn Store>,
    name: String,
}

impl Election {
    /// The election `name` (1 to 128 characters of `A-Z a-z 0-9 . _ -`) in `store`.
    pub fn new(store: Arc<dyn Store>, name: &str) -> Result<Election, Error> {
        check_name(name)?;
        Ok(Election { store, name: name.to_string() })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_checked_before_asking() {
        assert!(check_name("db-primary.eu_1").is_ok());
        assert!(check_name(&"a".repeat(128)).is_ok());
        for bad in ["", "a/b", "a b", "é", &"a".repeat(129)] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("bad election name"), "{bad}: {err}");
        }
        assert!(check_value(&"v".repeat(4096)).is_ok());
        assert!(check_value(&"v".repeat(4097)).unwrap_err().to_string().contains("4096"));
    }
}
