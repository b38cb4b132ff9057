//! The `GET /v1/watch` streams open at once (and the other streams that
//! share their slots): at most [`MAX_WATCHERS`] in
//! all, [`MAX_WATCHERS_PER_ADDRESS`] from one client address and
//! [`MAX_WATCHERS_PER_TOKEN`] per token, so that no single client can take
//! every stream. The elections' long polls are counted the same way,
//! within limits of their own ([`StreamLimits`]).

use super::limits::MAX_CONNECTIONS;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Most `GET /v1/watch` streams open at once; each holds a connection.
/// Beyond: `503 Service Unavailable` (the server is busy, not the client at
/// fault).
pub const MAX_WATCHERS: usize = 64;

/// Most watch streams from one client address: an IPv4 address, or an IPv6
/// /64 (one host's usual share of a network). A `tenure watch` holds one; an
/// application with a few processes on one host a handful. Eight leaves the
/// [`MAX_WATCHERS`] to at least eight hosts. Beyond: `429 Too Many Requests`.
pub const MAX_WATCHERS_PER_ADDRESS: usize = 8;

/// Most watch streams per token: half of [`MAX_WATCHERS`], so that one token
/// (a leaked one, or one shared by a misbehaving fleet) leaves half the
/// streams to the others. Beyond: `429 Too Many Requests`.
pub const MAX_WATCHERS_PER_TOKEN: usize = 32;

/// The client address watch streams are counted under: IPv4 addresses
/// (and IPv4-mapped IPv6) as they are, IPv6 by their /64 prefix.
fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

/// Why a stream was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchRefusal {
    /// [`StreamLimits::total`] streams are open.
    Total,
    /// [`StreamLimits::per_address`] streams are open from this address.
    Address(IpAddr),
    /// [`StreamLimits::per_token`] streams are open with this token.
    Token(Arc<str>),
}

impl WatchRefusal {
    /// The reason under which the refusal is counted in the log.
    pub fn reason(&self, limits: &StreamLimits) -> &'static str {
        let [total, address, token] = limits.reasons;
        match self {
            WatchRefusal::Total => total,
            WatchRefusal::Address(_) => address,
            WatchRefusal::Token(_) => token,
        }
    }

    /// The error message.
    pub fn message(&self, limits: &StreamLimits) -> String {
        let what = limits.what;
        match self {
            WatchRefusal::Total => {
                format!("too many {what} (at most {}); try again later", limits.total)
            }
            WatchRefusal::Address(addr) => format!(
                "too many {what} from {addr} (at most {} per client address); close one first",
                limits.per_address
            ),
            WatchRefusal::Token(name) => format!(
                "too many {what} with the token {name:?} (at most {} per token); close one \
                 first",
                limits.per_token
            ),
        }
    }
}

/// The caps of one kind of long-lived request: in all, per client address
/// and per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Most open at once.
    pub total: usize,
    /// Most from one client address.
    pub per_address: usize,
    /// Most per token.
    pub per_token: usize,
    /// What they are, in the plural, for messages ("watch streams").
    pub what: &'static str,
    /// The reasons refusals are counted under in the log: total, per
    /// address, per token.
    pub reasons: [&'static str; 3],
}

/// The caps of the watch streams.
pub const WATCH_LIMITS: StreamLimits = StreamLimits {
    total: MAX_WATCHERS,
    per_address: MAX_WATCHERS_PER_ADDRESS,
    per_token: MAX_WATCHERS_PER_TOKEN,
    what: "watch streams",
    reasons: [
        "503 watch streams full",
        "429 watch streams per address",
        "429 watch streams per token",
    ],
};

/// The caps of the long polls, the elections' `wait` and the groups'
/// `assignment` together: each holds a connection, so at most
/// half of [`MAX_CONNECTIONS`] in all (the rest stay for other
/// calls), a quarter of those per client address and half per token.
pub const WAITER_LIMITS: StreamLimits = StreamLimits {
    total: MAX_CONNECTIONS / 2,
    per_address: MAX_CONNECTIONS / 8,
    per_token: MAX_CONNECTIONS / 4,
    what: "long polls (election waits and group assignments)",
    reasons: ["503 long polls full", "429 long polls per address", "429 long polls per token"],
};

/// The caps of the keepalive streams (`GET /v1/sessions/{id}/keepalive`),
/// apart from the watch streams so that observers cannot take the streams
/// that keep sessions alive, nor the reverse. They serve browsers and
/// shells (the Rust client and `tenure run` renew with `POST`), so a few
/// dozen: 32 in all, 8 per address and 16 per token. With the watch streams
/// and the waits they leave 32 of [`MAX_CONNECTIONS`] to other calls.
pub const KEEPALIVE_STREAM_LIMITS: StreamLimits = StreamLimits {
    total: 32,
    per_address: 8,
    per_token: 16,
    what: "keepalive streams",
    reasons: [
        "503 keepalive streams full",
        "429 keepalive streams per address",
        "429 keepalive streams per token",
    ],
};

#[derive(Default)]
struct Counts {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
    by_token: HashMap<Arc<str>, usize>,
}

/// The open streams, counted in all, per address and per token. The maps
/// hold only the clients with a stream open, so at most the total's
/// entries each.
#[derive(Clone)]
pub struct Watchers {
    counts: Arc<Mutex<Counts>>,
    limits: StreamLimits,
}

impl Default for Watchers {
    /// The watch streams' counts, within [`WATCH_LIMITS`].
    fn default() -> Self {
        Watchers::new(WATCH_LIMITS)
    }
}

/// One open stream's place; given back when dropped (with the stream).
pub struct WatchSlot {
    counts: Arc<Mutex<Counts>>,
    address: Option<IpAddr>,
    token: Option<Arc<str>>,
}

fn lock(counts: &Mutex<Counts>) -> MutexGuard<'_, Counts> {
    // Counters, each update complete under the lock: consistent when poisoned.
    counts.lock().unwrap_or_else(|e| e.into_inner())
}

impl Watchers {
    /// Counts of requests held within `limits`.
    pub fn new(limits: StreamLimits) -> Self {
        Watchers { counts: Arc::default(), limits }
    }

    /// The caps.
    pub fn limits(&self) -> StreamLimits {
        self.limits
    }

    /// Takes a slot for a stream from `addr` with `token`, or says which limit is reached.
    pub fn acquire(
        &self,
        addr: Option<IpAddr>,
        token: Option<&Arc<str>>,
    ) -> Result<WatchSlot, WatchRefusal> {
        let address = addr.map(client_key);
        let mut c = lock(&self.counts);
        if let Some(a) = address {
            if c.by_address.get(&a).copied().unwrap_or(0) >= self.limits.per_address {
                return Err(WatchRefusal::Address(a));
            }
        }
        if let Some(t) = token {
            if c.by_token.get(t).copied().unwrap_or(0) >= self.limits.per_token {
                return Err(WatchRefusal::Token(t.clone()));
            }
        }
        if c.total >= self.limits.total {
            return Err(WatchRefusal::Total);
        }
        c.total += 1;
        if let Some(a) = address {
            *c.by_address.entry(a).or_default() += 1;
        }
        if let Some(t) = token {
            *c.by_token.entry(t.clone()).or_default() += 1;
        }
        Ok(WatchSlot { counts: self.counts.clone(), address, token: token.cloned() })
    }

    /// Streams open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        lock(&self.counts).total
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut c = lock(&self.counts);
        c.total -= 1;
        if let Some(a) = self.address {
            release(&mut c.by_address, &a);
        }
        if let Some(t) = &self.token {
            release(&mut c.by_token, t);
        }
    }
}

/// One fewer under `key`; the entry goes when it reaches zero.
fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n -= 1;
        if *n == 0 {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    #[test]
    fn one_address_or_token_cannot_take_every_stream() {
        let w = Watchers::default();
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let mut held = Vec::new();
        for _ in 0..MAX_WATCHERS_PER_ADDRESS {
            held.push(w.acquire(v4(1), Some(&a)).unwrap());
        }
        assert_eq!(w.acquire(v4(1), Some(&b)).err(), Some(WatchRefusal::Address(v4(1).unwrap())));
        // Token a from other addresses, up to its own limit.
        for i in 0..(MAX_WATCHERS_PER_TOKEN - MAX_WATCHERS_PER_ADDRESS) {
            held.push(w.acquire(v4(10 + (i / MAX_WATCHERS_PER_ADDRESS) as u8), Some(&a)).unwrap());
        }
        assert_eq!(w.acquire(v4(99), Some(&a)).err(), Some(WatchRefusal::Token(a.clone())));
        // Others fill the rest, then the total is reached.
        for i in 0..(MAX_WATCHERS - MAX_WATCHERS_PER_TOKEN) {
            held.push(w.acquire(v4(100 + (i / MAX_WATCHERS_PER_ADDRESS) as u8), Some(&b)).unwrap());
        }
        assert_eq!(w.open(), MAX_WATCHERS);
        assert_eq!(w.acquire(v4(200), None).err(), Some(WatchRefusal::Total));
        // Closing streams gives their places back, and forgets idle clients.
        drop(held.drain(..MAX_WATCHERS_PER_ADDRESS));
        assert!(w.acquire(v4(1), Some(&a)).is_ok());
        drop(held);
        assert_eq!(w.open(), 0);
        let c = lock(&w.counts);
        assert!(c.by_address.is_empty() && c.by_token.is_empty());
    }

    #[test]
    fn the_election_waits_have_limits_of_their_own() {
        let w = Watchers::new(WAITER_LIMITS);
        assert_eq!(w.limits(), WAITER_LIMITS);
        let held: Vec<_> =
            (0..WAITER_LIMITS.per_address).map(|_| w.acquire(v4(1), None).unwrap()).collect();
        assert!(matches!(w.acquire(v4(1), None), Err(WatchRefusal::Address(_))));
        let mut more = Vec::new();
        for i in 0..(WAITER_LIMITS.total - held.len()) {
            more.push(w.acquire(v4(2 + (i / WAITER_LIMITS.per_address) as u8), None).unwrap());
        }
        assert_eq!(w.acquire(v4(99), None).err(), Some(WatchRefusal::Total));
        drop(held);
        assert!(w.acquire(v4(1), None).is_ok());
        // The watch streams' counts are apart.
        assert!(Watchers::default().acquire(v4(1), None).is_ok());
    }

    #[test]
    fn refusals_name_the_kind_of_stream_and_its_limit() {
        let w = Watchers::new(KEEPALIVE_STREAM_LIMITS);
        let token: Arc<str> = "app".into();
        let held: Vec<_> = (0..KEEPALIVE_STREAM_LIMITS.per_token)
            .map(|i| w.acquire(v4(i as u8), Some(&token)).unwrap())
            .collect();
        let refused = w.acquire(v4(200), Some(&token)).err().expect("over the token's share");
        assert_eq!(refused.reason(&w.limits()), "429 keepalive streams per token");
        assert_eq!(
            refused.message(&w.limits()),
            "too many keepalive streams with the token \"app\" (at most 16 per token); close \
             one first"
        );
        // The watch streams are counted apart.
        assert!(Watchers::default().acquire(v4(0), Some(&token)).is_ok());
        drop(held);
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64_prefix() {
        let w = Watchers::default();
        let host = |last: u16| Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last)));
        let _held: Vec<_> = (0..MAX_WATCHERS_PER_ADDRESS as u16)
            .map(|i| w.acquire(host(i), None).unwrap())
            .collect();
        assert!(matches!(w.acquire(host(999), None), Err(WatchRefusal::Address(_))));
        let other = Some(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1)));
        assert!(w.acquire(other, None).is_ok());
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(Some(client_key(mapped)), v4(1));
    }
}
