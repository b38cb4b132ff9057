//! Who holds the HTTP server's connections: a connection is *unproven* until
//! one of its requests carries a valid API token, and *proven* after.
//!
//! Unproven connections (anyone's: a TLS handshake in progress, a load
//! balancer's anonymous probe, a stranger's silent socket) share a pool of
//! their own, [`HttpLimits::max_unproven`], with short timeouts
//! ([`HttpLimits::unproven_timeout`]). When the pool is full, a new
//! connection is never refused: it takes the place of the oldest unproven
//! connection of the address that holds the most of the pool, which is
//! closed. So a flood of connections from one address churns that address's
//! own places, and a client with a token that connects during the flood
//! only needs its first request to arrive before the flood has cycled
//! through the pool to be served.
//!
//! A request with a valid token (or any request, on a server without
//! tokens) moves its connection into the proven places,
//! [`HttpLimits::max_connections`], which strangers cannot take, and gives it
//! the normal timeouts. When those are all taken, the request is answered
//! 503 and the connection closed, as before there were two pools.

use super::limits::HttpLimits;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The reason an evicted connection is counted under in the refusal log.
pub(super) const EVICTED: &str = "unproven connection closed for a newer one (pool full)";

/// The two pools of one server.
pub(super) struct Admission {
    proven: Arc<Semaphore>,
    max_proven: usize,
    max_unproven: usize,
    unproven: Mutex<Unproven>,
}

/// The unproven connections, oldest first.
#[derive(Default)]
struct Unproven {
    next: u64,
    /// By admission order: the address and how to close it.
    entries: BTreeMap<u64, (IpAddr, Arc<Notify>)>,
}

/// The connection this one evicted, if the pool was full: its address.
pub(super) type Evicted = Option<IpAddr>;

impl Admission {
    /// Pools of the sizes in `limits`.
    pub(super) fn new(limits: &HttpLimits) -> Arc<Self> {
        Arc::new(Admission {
            proven: Arc::new(Semaphore::new(limits.max_connections)),
            max_proven: limits.max_connections,
            max_unproven: limits.max_unproven.max(1),
            unproven: Mutex::new(Unproven::default()),
        })
    }

    fn unproven(&self) -> MutexGuard<'_, Unproven> {
        // Plain maps, each changed in one step: a poisoned lock is consistent.
        self.unproven.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a new connection from `addr` as unproven; when the pool is
    /// full, closes the oldest unproven connection of the address holding
    /// the most places, and says whose it was.
    pub(super) fn admit(self: &Arc<Self>, addr: IpAddr) -> (Arc<Standing>, Evicted) {
        let mut pool = self.unproven();
        let mut evicted = None;
        if pool.entries.len() >= self.max_unproven {
            if let Some(seq) = pool.victim() {
                if let Some((victim, close)) = pool.entries.remove(&seq) {
                    close.notify_one();
                    evicted = Some(victim);
                }
            }
        }
        let seq = pool.next;
        pool.next += 1;
        let close = Arc::new(Notify::new());
        pool.entries.insert(seq, (addr, close.clone()));
        let standing = Standing {
            seq,
            admission: self.clone(),
            close,
            proven: AtomicBool::new(false),
            permit: Mutex::new(None),
        };
        (Arc::new(standing), evicted)
    }

    /// How many connections hold each pool (proven, unproven).
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        (self.max_proven - self.proven.available_permits(), self.unproven().entries.len())
    }
}

impl Unproven {
    /// The oldest connection of the address that holds the most places
    /// (the oldest of all on a tie).
    fn victim(&self) -> Option<u64> {
        let mut counts: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for (addr, _) in self.entries.values() {
            *counts.entry(*addr).or_default() += 1;
        }
        let most = counts.values().copied().max()?;
        self.entries
            .iter()
            .find(|(_, (addr, _))| counts.get(addr) == Some(&most))
            .map(|(&seq, _)| seq)
    }
}

/// A connection's standing: unproven (and closable for a newer one) or
/// proven (holding a place of the proven pool). Shared by the connection's
/// task and its requests (as an extension, for the gate); its places are
/// returned when the last of them lets it go.
pub(crate) struct Standing {
    seq: u64,
    admission: Arc<Admission>,
    close: Arc<Notify>,
    proven: AtomicBool,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
}

/// Every proven place is taken: at most this many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProvenFull(pub(crate) usize);

impl Standing {
    /// Whether a request of this connection carried a valid token.
    pub(super) fn is_proven(&self) -> bool {
        self.proven.load(Ordering::Acquire)
    }

    /// Moves the connection into the proven pool (a no-op when it is
    /// there), or says the proven pool is full.
    pub(crate) fn prove(&self) -> Result<(), ProvenFull> {
        if self.is_proven() {
            return Ok(());
        }
        let mut permit = self.permit.lock().unwrap_or_else(|e| e.into_inner());
        if permit.is_none() {
            let taken = self.admission.proven.clone().try_acquire_owned();
            *permit = Some(taken.map_err(|_| ProvenFull(self.admission.max_proven))?);
            self.admission.unproven().entries.remove(&self.seq);
            self.proven.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Completes when the connection was closed for a newer one (never,
    /// once proven).
    pub(super) async fn evicted(&self) {
        self.close.notified().await;
    }
}

impl Drop for Standing {
    fn drop(&mut self) {
        if !self.is_proven() {
            self.admission.unproven().entries.remove(&self.seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(proven: usize, unproven: usize) -> HttpLimits {
        HttpLimits { max_connections: proven, max_unproven: unproven, ..HttpLimits::default() }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    /// Whether `standing` was told to close (without waiting).
    async fn was_evicted(standing: &Standing) -> bool {
        tokio::time::timeout(Duration::from_millis(10), standing.evicted()).await.is_ok()
    }

    #[tokio::test]
    async fn a_full_pool_closes_the_oldest_of_the_busiest_address_and_proven_ones_stay() {
        let a = Admission::new(&limits(2, 4));
        let (mine, _) = a.admit(ip(1));
        let flood: Vec<_> = (0..3).map(|_| a.admit(ip(9)).0).collect();
        assert_eq!(a.held(), (0, 4));
        // The pool is full: a newcomer from the flooding address takes the
        // place of that address's oldest connection, not of the older one of
        // another address.
        let (next, evicted) = a.admit(ip(9));
        assert_eq!(evicted, Some(ip(9)));
        assert!(was_evicted(&flood[0]).await);
        assert!(!was_evicted(&mine).await && !was_evicted(&flood[1]).await);
        // A proven connection leaves the pool and is never closed for a
        // newer one.
        mine.prove().unwrap();
        assert_eq!(a.held(), (1, 3));
        for _ in 0..10 {
            a.admit(ip(9));
        }
        assert!(!was_evicted(&mine).await);
        drop(next);
        drop(flood);
        // A proven place is returned when the connection goes.
        drop(mine);
        assert_eq!(a.held().0, 0);
    }

    #[tokio::test]
    async fn the_proven_pool_has_a_cap_and_a_place_comes_back_with_its_connection() {
        let a = Admission::new(&limits(1, 8));
        let (first, _) = a.admit(ip(1));
        let (second, _) = a.admit(ip(2));
        first.prove().unwrap();
        first.prove().unwrap();
        assert_eq!(second.prove(), Err(ProvenFull(1)));
        assert!(!second.is_proven());
        drop(first);
        second.prove().unwrap();
        assert_eq!(a.held(), (1, 0));
    }

    #[tokio::test]
    async fn a_tie_closes_the_oldest() {
        let a = Admission::new(&limits(1, 2));
        let (one, _) = a.admit(ip(1));
        let (_two, _) = a.admit(ip(2));
        let (_three, evicted) = a.admit(ip(3));
        assert_eq!(evicted, Some(ip(1)));
        assert!(was_evicted(&one).await);
    }
}
