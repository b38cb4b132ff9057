//! The bounds of the HTTP server: how many connections it serves at once,
//! proven by a token or not yet, and how long it waits for a client.
//! `axum::serve` offers none of these; the pools in `admission.rs`, the
//! accept loop in `serve.rs` and the per-connection watchdog in `conn.rs`
//! enforce them.
//!
//! The API's clients are operators, the CLI, load balancers polling
//! `/v1/is-leader`, Prometheus, `/v1/watch` streams and the applications
//! that use the key-value store: mostly small requests that arrive whole in
//! one packet, values of up to 64 KiB. The limits are generous for them and
//! keep a slow or hostile client from holding the server's memory and file
//! descriptors.

use std::time::Duration;

/// Proven connections served at once: those a request with a valid API
/// token came on (on a server without tokens, any request). Above
/// [`super::MAX_WATCHERS`] (64), so that open `/v1/watch` streams never
/// crowd out status requests; with [`MAX_UNPROVEN_CONNECTIONS`] and the
/// peer transport far below the 65,536 open files the packaged unit allows
/// (the server raises its soft limit to the hard one at start and warns
/// when it is still below what these pools need). Each connection costs a
/// task and its buffers, tens of kilobytes.
///
/// Strangers cannot take these places: a connection enters them only with a
/// token ([`super::admission`]). A request with a valid token when they are
/// all taken is answered `503 Service Unavailable` with a JSON error
/// (`{"error": "too many connections ..."}`) and `connection: close`, and
/// the connection is closed. The connections already served are not
/// disturbed, and a place is free again as soon as one of them closes.
pub const MAX_CONNECTIONS: usize = 256;

/// Unproven connections held at once: every connection from its `accept`
/// (its TLS handshake, a load balancer's anonymous `/healthz`, a stranger's
/// silent socket) until a request on it carries a valid token. When they
/// are all taken, a new connection is still admitted: the oldest unproven
/// connection of the address holding the most places is closed for it
/// ([`super::admission`]). 512 holds a flood of 300 connections
/// per node without closing any, and makes a flood that cycles through the
/// pool need hundreds of new connections a second, each of which a
/// client with a token outpaces by sending its first request at once.
/// Each costs at most a TLS session's buffers (~40 KB): 20 MB in all.
pub const MAX_UNPROVEN_CONNECTIONS: usize = 512;

/// How long an unproven connection may take to finish its TLS handshake,
/// to send a request's headers, and to wait idle for its next request.
/// A client on the API sends its first request right after the handshake,
/// in one packet; 2 s leaves room for a retransmission or two, and returns
/// a silent stranger's place in 2 s instead of the 5 s of
/// [`HEADER_READ_TIMEOUT`] (or the 30 s of [`IDLE_TIMEOUT`] after an
/// anonymous probe). Load balancers that poll anonymously every few
/// seconds open a connection per probe.
pub const UNPROVEN_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a client may take to send a request's headers, from its first
/// byte (or from connecting, for the first request). The API's requests are a
/// few hundred bytes, sent in one packet; 5 s leaves room for several TCP
/// retransmissions on a lossy network, and cuts off a "slowloris" client that
/// trickles headers to hold a connection. Such a client is disconnected
/// without an answer.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a client may take to send a request's body, from the end of its
/// headers. The bodies are `POST /v1/transfer`'s `{"to": N}` and the
/// key-value store's values and transactions, at most 256 KiB
/// ([`super::MAX_TXN_BODY_BYTES`]); 5 s, as for the headers (256 KiB in 5 s
/// is 52 KB/s). A client whose body is late
/// is disconnected without an answer (the request is not carried out).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a keep-alive connection may wait for its next request. Pollers
/// (the CLI, `tenure bench`, load balancers every few seconds) keep theirs
/// busy; 30 s lets a client that polls every few seconds reuse its
/// connection, and returns the slot of one that went away without closing
/// within half a minute. An idle connection is closed quietly (FIN), as HTTP
/// allows; clients open a new one for their next request.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest request body accepted (413 beyond) but where a route sets its
/// own: `PUT /v1/kv/{key}` takes a value of up to
/// [`tenure_kv::MAX_VALUE_BYTES`] (the largest the store holds, so a
/// maximal value is not cut short by the HTTP layer), and `POST /v1/txn` up
/// to [`super::MAX_TXN_BODY_BYTES`]. The other bodies are `{"to": N}`.
pub const MAX_BODY_BYTES: usize = 4 * 1024;

/// How often refused requests and connections (bad or missing tokens, a
/// role too low, watch limits, the connection cap) are summarised in the log:
/// one `WARN` line with the counts per reason and the busiest address, at
/// most this often, instead of a line per refusal that a flood could use to
/// fill the disk. Ten seconds tells an operator soon enough; a flood of any
/// size costs six lines a minute.
pub const REJECTION_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// On shutdown, how long requests in progress may take to finish before their
/// connections are closed. `/v1/watch` streams end at once.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The limits a server runs with; [`HttpLimits::default`] gives the constants
/// of this module. Tests shorten them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Proven connections served at once ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Unproven connections held at once ([`MAX_UNPROVEN_CONNECTIONS`]).
    pub max_unproven: usize,
    /// An unproven connection's handshake, header and idle time
    /// ([`UNPROVEN_TIMEOUT`]).
    pub unproven_timeout: Duration,
    /// Time to send a request's headers ([`HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// Time to send a request's body ([`BODY_READ_TIMEOUT`]).
    pub body_read_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: MAX_CONNECTIONS,
            max_unproven: MAX_UNPROVEN_CONNECTIONS,
            unproven_timeout: UNPROVEN_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
            body_read_timeout: BODY_READ_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
        }
    }
}
