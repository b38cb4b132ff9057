//! `GET /v1/sessions/{id}/keepalive`: Server-Sent Events that keep a
//! session alive while the stream is open, for clients that cannot send a
//! renewal every TTL/3 themselves (a browser, a shell's `curl -N`).
//!
//! The node renews the session on the leader (as `POST .../keepalive` does)
//! at once, then every TTL/3 after each renewal was sent, and tells each
//! success as `event: renewed` `{"id","ttl_ms","sent_after_ms"}`, where
//! `sent_after_ms` is how long after this node received the stream's
//! request it sent that renewal, rounded down. That is what lets a client
//! keep a safe deadline without knowing when renewals are sent: the leader
//! counts the TTL from its answer, which comes after the send, so a client
//! that noted its monotonic clock `t0` just before sending the request can
//! take `t0 + sent_after_ms·(1−ρ)/(1+ρ)` as a time no later than the send,
//! and lead until that plus `ttl_ms·(1−ρ)/(1+ρ)`, with ρ = 10 %, the drift
//! bound a server accepts (docs/ELECTIONS.md, "Keepalive as a stream").
//!
//! A refusal that ends the session (unknown, expired or expiring) is told
//! as `event: ended` `{"id","error"}`, and the stream closes. While no
//! leader can answer, each failed attempt is told as `event: unavailable`
//! `{"error"}` and retried after [`RETRY`]; the client's deadline, which
//! only a `renewed` event moves, decides when it must stop.
//!
//! Caution: the renewals go on while the connection is open, even if the
//! client process is stopped (SIGSTOP, a long GC pause); such a client keeps
//! its leadership, and nobody else can be elected, until its connection
//! breaks. A client that must lose its leadership when it is paused renews
//! with `POST` itself (the Rust client and `tenure run` do).

use super::auth::Caller;
use super::error::ApiError;
use super::keepalive::{answer_error, ask_error};
use super::owner::{require_owner, Use};
use super::sessions::session_id;
use super::state::AppState;
use super::watch::{stream_slot, SSE_KEEP_ALIVE};
use super::watchers::WatchSlot;
use crate::sessions::SessionAnswer;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use serde::Serialize;
use std::convert::Infallible;
use std::time::Duration;
use tenure_kv::LeaseId;
use tokio::sync::watch;
use tokio::time::Instant;

/// Pause before a renewal that failed without ending the session is tried
/// again.
pub const RETRY: Duration = Duration::from_millis(250);

/// `event: renewed`.
#[derive(Serialize, Debug, PartialEq, Eq)]
struct RenewedBody {
    id: u64,
    ttl_ms: u64,
    /// Milliseconds from the stream's request arriving here to this
    /// renewal's send, rounded down.
    sent_after_ms: u64,
}

/// `event: ended` (with the session's id) and `event: unavailable`.
#[derive(Serialize, Debug)]
struct RefusedBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    error: String,
}

/// One renewal's outcome.
enum Renewal {
    /// Renewed: a TTL from the leader's answer.
    Renewed { ttl_ms: u64 },
    /// The session is gone or going: the stream ends.
    Ended(String),
    /// Nobody could answer now: tried again after [`RETRY`].
    Unavailable(String),
}

async fn renew(st: &AppState, lease: LeaseId) -> Renewal {
    match st.renewer.renew(lease).await {
        Ok(SessionAnswer::Renewed { ttl_ms }) => Renewal::Renewed { ttl_ms },
        Ok(other) => {
            let e = answer_error(lease, other);
            match e.status() {
                StatusCode::NOT_FOUND => Renewal::Ended(e.body().error.clone()),
                _ => Renewal::Unavailable(e.body().error.clone()),
            }
        }
        Err(e) => Renewal::Unavailable(ask_error(e).body().error.clone()),
    }
}

/// `sent - opened` in whole milliseconds, rounded down.
fn floor_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Opens the stream: 400 for a bad id, 403 for another token's session,
/// 429/503 when the caller or the
/// server has its share of streams open; then the first renewal decides:
/// 404 when the session does not exist or expires, 503 while no leader can
/// answer (nothing streamed).
pub async fn get(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let opened = Instant::now();
    let lease = session_id(id)?;
    require_owner(&st, &caller, &[lease], Use::Renew).await?;
    let slot = stream_slot(&st.keepalives, &st.rejections, &caller)?;
    let sent = opened.elapsed();
    let ttl_ms = match st.renewer.renew(lease).await {
        Ok(SessionAnswer::Renewed { ttl_ms }) => ttl_ms,
        Ok(other) => return Err(answer_error(lease, other)),
        Err(e) => return Err(ask_error(e)),
    };
    let first = RenewedBody { id: lease.0, ttl_ms, sent_after_ms: floor_ms(sent) };
    let keeping = Keeping {
        st: st.clone(),
        stopping: st.stopping.clone(),
        lease,
        opened,
        next_at: opened + sent + interval(ttl_ms),
        first: Some(first),
        ended: false,
        _slot: slot,
    };
    let stream = events(keeping);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
}

/// A third of the TTL: the renewal interval of every client of tenure.
fn interval(ttl_ms: u64) -> Duration {
    Duration::from_millis(ttl_ms) / 3
}

/// One open stream.
struct Keeping {
    st: AppState,
    stopping: watch::Receiver<bool>,
    lease: LeaseId,
    opened: Instant,
    /// When the next renewal is due.
    next_at: Instant,
    /// The first renewal's event, not sent yet.
    first: Option<RenewedBody>,
    /// The session ended; the stream closes after telling it.
    ended: bool,
    _slot: WatchSlot,
}

/// The renewals as events, until the session ends, the client leaves or the
/// server stops.
fn events(start: Keeping) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(start, |mut k| async move {
        if let Some(first) = k.first.take() {
            return Some((Ok(renewed_event(&first)), k));
        }
        if k.ended || *k.stopping.borrow() {
            return None;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(k.next_at) => {}
            _ = k.stopping.wait_for(|s| *s) => return None,
        }
        let sent = k.opened.elapsed();
        let event = match renew(&k.st, k.lease).await {
            Renewal::Renewed { ttl_ms } => {
                k.next_at = k.opened + sent + interval(ttl_ms);
                let body = RenewedBody { id: k.lease.0, ttl_ms, sent_after_ms: floor_ms(sent) };
                renewed_event(&body)
            }
            Renewal::Ended(error) => {
                k.ended = true;
                refused_event("ended", RefusedBody { id: Some(k.lease.0), error })
            }
            Renewal::Unavailable(error) => {
                k.next_at = Instant::now() + RETRY;
                refused_event("unavailable", RefusedBody { id: None, error })
            }
        };
        Some((Ok(event), k))
    })
}

fn renewed_event(body: &RenewedBody) -> Event {
    Event::default()
        .event("renewed")
        .json_data(body)
        .unwrap_or_else(|_| Event::default().comment("unencodable renewal"))
}

fn refused_event(name: &str, body: RefusedBody) -> Event {
    Event::default()
        .event(name)
        .json_data(body)
        .unwrap_or_else(|_| Event::default().comment("unencodable refusal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_time_rounds_down_and_the_interval_is_a_third_of_the_ttl() {
        assert_eq!(floor_ms(Duration::from_micros(1_999)), 1);
        assert_eq!(floor_ms(Duration::ZERO), 0);
        assert_eq!(interval(3_000), Duration::from_millis(1_000));
        let shown =
            format!("{:?}", renewed_event(&RenewedBody { id: 7, ttl_ms: 900, sent_after_ms: 301 }));
        assert!(shown.contains("renewed") && shown.contains("sent_after_ms"), "{shown}");
    }
}
