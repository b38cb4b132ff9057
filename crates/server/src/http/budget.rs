//! The budget of list answers (`GET /v1/kv?prefix=`, `GET /v1/sessions`,
//! `GET /v1/elections`): each is a page of at most [`MAX_LIST_BYTES`] of
//! JSON (and `more: true` with the key, id or name to continue `after`), only
//! that page is copied out of the store under the replica's lock, it is
//! serialised on a blocking thread, not on the API's async workers, and at
//! most [`MAX_LIST_ANSWERS`] are built or sent at once.

use super::error::ApiError;
use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::{Bytes, Frame, SizeHint};
use serde::Serialize;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most JSON one list answer's entries take (a page has at least one
/// entry, so a single value of the store's largest, 64 KiB of control
/// bytes, 384 KiB of JSON, always fits). 4 MiB answers a store of small
/// keys in one page (tens of thousands of keys), and bounds what one answer
/// holds in memory: the page copied from the store, its JSON, about three
/// times this at most.
pub const MAX_LIST_BYTES: usize = 4 * 1024 * 1024;

/// List answers built or being sent at once on one node: each holds up to
/// three times [`MAX_LIST_BYTES`] until its client has read it, so four
/// hold at most ~50 MiB. A reader that pages through a large store holds
/// one at a time.
pub const MAX_LIST_ANSWERS: usize = 4;

/// How long a list request waits for one of the [`MAX_LIST_ANSWERS`] before
/// it is answered 503 with `Retry-After: 1`: a page takes milliseconds to
/// build and to send to a client that reads it, so a second of waiting
/// means the answers are held by clients that read slowly. Below the CLI's
/// and the client's 2 s per request, so they get the 503 (and ask again)
/// rather than a timeout.
pub const LIST_ANSWER_WAIT: Duration = Duration::from_secs(1);

/// The list answers of one node ([`MAX_LIST_ANSWERS`]).
#[derive(Clone)]
pub(crate) struct ListAnswers {
    permits: Arc<Semaphore>,
}

impl Default for ListAnswers {
    fn default() -> Self {
        ListAnswers { permits: Arc::new(Semaphore::new(MAX_LIST_ANSWERS)) }
    }
}

impl ListAnswers {
    /// One of the answers, waiting at most [`LIST_ANSWER_WAIT`]; else 503.
    pub(crate) async fn permit(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        let permit = tokio::time::timeout(LIST_ANSWER_WAIT, self.permits.clone().acquire_owned());
        match permit.await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "too many list answers being built or read (at most {MAX_LIST_ANSWERS}, \
                     waited {LIST_ANSWER_WAIT:?}); try again later"
                ),
            )
            .retry_after(1)),
        }
    }
}

/// The length of `text` as a JSON string's contents, as serde_json escapes
/// it: `"` and `\` and the short escapes take 2 bytes, other control
/// characters 6 (`\u00XX`), the rest 1 each.
pub(crate) fn json_str_len(text: &[u8]) -> usize {
    text.iter()
        .map(|&b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// The length of a value in a list answer's JSON: as a string if it is
/// UTF-8, else in base64 (as the API sends it).
pub(crate) fn json_value_len(value: &[u8]) -> usize {
    match std::str::from_utf8(value) {
        Ok(_) => json_str_len(value),
        Err(_) => value.len().div_ceil(3) * 4,
    }
}

/// Builds `make()` and serialises it on a blocking thread; the answer holds
/// `permit` until it has been sent (or dropped with its connection).
pub(crate) async fn json_answer<T, F>(permit: OwnedSemaphorePermit, make: F) -> Response
where
    T: Serialize,
    F: FnOnce() -> T + Send + 'static,
{
    let built = tokio::task::spawn_blocking(move || serde_json::to_vec(&make()));
    match built.await {
        Ok(Ok(json)) => {
            let body = Body::new(Held { data: Some(Bytes::from(json)), _permit: permit });
            let mut response = body.into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Ok(Err(e)) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be serialised: {e}"),
        )
        .into_response(),
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("building the answer failed: {e}"),
        )
        .into_response(),
    }
}

/// `data`, a JSON answer with `status` built elsewhere (another node's),
/// sent holding a list answer's `permit`.
pub(crate) fn held_json(permit: OwnedSemaphorePermit, status: StatusCode, data: Bytes) -> Response {
    let body = Body::new(Held { data: Some(data), _permit: permit });
    let mut response = body.into_response();
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A body sent in one frame, holding a list answer's permit until it is
/// dropped.
struct Held {
    data: Option<Bytes>,
    _permit: OwnedSemaphorePermit,
}

impl hyper::body::Body for Held {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lengths_match_serde_json() {
        let samples: [&[u8]; 6] = [
            b"",
            b"plain text",
            b"\"quoted\\\"",
            b"\n\t\r\x08\x0c",
            b"\x00\x01\x1f\x7f",
            "é€😀".as_bytes(),
        ];
        for s in samples {
            let text = std::str::from_utf8(s).unwrap();
            let json = serde_json::to_string(text).unwrap();
            assert_eq!(json_str_len(s), json.len() - 2, "{text:?}");
            assert_eq!(json_value_len(s), json.len() - 2, "{text:?}");
        }
        // Not UTF-8: base64, padded.
        assert_eq!(json_value_len(&[0xff]), 4);
        assert_eq!(json_value_len(&[0xff; 4]), 8);
    }

    #[tokio::test]
    async fn an_answer_holds_its_permit_until_it_is_dropped() {
        let answers = ListAnswers::default();
        let mut held = Vec::new();
        for _ in 0..MAX_LIST_ANSWERS {
            let permit = answers.permit().await.unwrap();
            held.push(json_answer(permit, || vec![1, 2, 3]).await);
        }
        // Refused after LIST_ANSWER_WAIT (1 s of real time).
        let refused = answers.permit().await.unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        drop(held.pop());
        let _permit = answers.permit().await.unwrap();
    }
}
