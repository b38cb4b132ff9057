//! `GET /v1/watch`: Server-Sent Events, the current leadership and then every
//! change, until the node or the server stops.

use super::auth::Caller;
use super::error::ApiError;
use super::state::AppState;
use super::watchers::{WatchRefusal, WatchSlot, Watchers};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use std::convert::Infallible;
use std::time::Duration;
use tenure_api::LeadershipBody;
use tenure_node::{Leadership, RateLimitedLog};
use tokio::sync::watch;

/// Interval of SSE keep-alive comments, so proxies and clients see a live stream.
pub(super) const SSE_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Opens a stream; answers 429 when the caller's address or token has its
/// share of streams open, 503 when every stream is taken (see
/// [`super::watchers`]).
pub async fn get(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let slot = acquire_slot(&st, &caller)?;
    Ok(leadership_sse(st.node.leadership(), st.stopping.clone(), slot))
}

/// The `/v1/watch` answer over any leadership channel (a node's, or a
/// store-led server's): the SSE stream of [`leadership_events`] with
/// keep-alive comments.
pub(crate) fn leadership_sse(
    rx: watch::Receiver<Leadership>,
    stopping: watch::Receiver<bool>,
    slot: WatchSlot,
) -> Response {
    let stream = leadership_events(rx, stopping, slot);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response()
}

/// A stream's slot for `caller` (the watch streams of `/v1/watch` and
/// `/v1/kv-watch` count together), or the refusal: 429 when the caller's
/// address or token has its share open, 503 (with `Retry-After`) when
/// every stream is taken.
pub(super) fn acquire_slot(st: &AppState, caller: &Caller) -> Result<WatchSlot, ApiError> {
    stream_slot(&st.watchers, &st.rejections, caller)
}

/// [`acquire_slot`] from `watchers` (watch streams, election waits,
/// keepalive streams), refusals counted in `rejections`.
pub(crate) fn stream_slot(
    watchers: &Watchers,
    rejections: &RateLimitedLog,
    caller: &Caller,
) -> Result<WatchSlot, ApiError> {
    watchers.acquire(caller.addr, caller.token.as_ref()).map_err(|refusal| {
        let limits = watchers.limits();
        rejections.record(refusal.reason(&limits), caller.addr);
        match refusal {
            WatchRefusal::Total => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, refusal.message(&limits))
                    .retry_after(1)
            }
            WatchRefusal::Address(_) | WatchRefusal::Token(_) => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, refusal.message(&limits))
            }
        }
    })
}

fn leadership_body(l: &Leadership) -> LeadershipBody {
    LeadershipBody {
        leader: l.leader.map(|n| n.0),
        term: l.term.0,
        fencing_token: l.fencing_token.map(|t| t.0),
        role: l.role.as_str().to_string(),
    }
}

/// The SSE stream: the current leadership first, then every change, until the
/// node's channel closes or the server stops. The slot is given back with the stream.
fn leadership_events(
    rx: watch::Receiver<Leadership>,
    stopping: watch::Receiver<bool>,
    slot: WatchSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watching {
        rx: watch::Receiver<Leadership>,
        stopping: watch::Receiver<bool>,
        first: bool,
        _slot: WatchSlot,
    }
    let start = Watching { rx, stopping, first: true, _slot: slot };
    stream::unfold(start, |mut w| async move {
        if !w.first {
            tokio::select! {
                changed = w.rx.changed() => changed.ok()?,
                _ = w.stopping.wait_for(|s| *s) => return None,
            }
        }
        w.first = false;
        let body = leadership_body(&w.rx.borrow_and_update());
        let event = Event::default()
            .event("leadership")
            .json_data(&body)
            .unwrap_or_else(|_| Event::default().comment("unencodable leadership"));
        Some((Ok(event), w))
    })
}
