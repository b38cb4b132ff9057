//! `GET /v1/watch`: Server-Sent Events, the current leadership and then every
//! change, until the node or the server stops.

use super::state::{ApiError, AppState, MAX_WATCHERS};
use crate::api::LeadershipBody;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use std::convert::Infallible;
use std::time::Duration;
use tenure_node::Leadership;
use tokio::sync::{watch, OwnedSemaphorePermit};

/// Interval of SSE keep-alive comments, so proxies and clients see a live stream.
const SSE_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Opens a stream, or answers 503 when [`MAX_WATCHERS`] are open.
pub async fn get(State(st): State<AppState>) -> Result<Response, ApiError> {
    let permit = st.watchers.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("too many watchers (at most {MAX_WATCHERS}); try again later"),
        )
    })?;
    let stream = leadership_events(st.node.leadership(), st.stopping.clone(), permit);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(SSE_KEEP_ALIVE)).into_response())
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
/// node's channel closes or the server stops. The permit is released with the stream.
fn leadership_events(
    rx: watch::Receiver<Leadership>,
    stopping: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    struct Watching {
        rx: watch::Receiver<Leadership>,
        stopping: watch::Receiver<bool>,
        first: bool,
        _permit: OwnedSemaphorePermit,
    }
    let start = Watching { rx, stopping, first: true, _permit: permit };
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
