//! The error answer every endpoint gives: a status, a JSON body that says
//! what went wrong, and `Retry-After` when a retry should succeed.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use tenure_api::ErrorBody;

/// An error answer: `{"error": "..."}` (with `"leader"`, revisions or an
/// outcome where they help), a 4xx or 5xx status, and `Retry-After` when
/// retrying later should succeed.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    /// Boxed: the body has a field per kind of answer, and errors travel
    /// in `Result`s.
    pub(crate) body: Box<ErrorBody>,
    /// Seconds for `Retry-After`.
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    /// An error answer with `status` and the message `error`.
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        ApiError {
            status,
            body: Box::new(ErrorBody { error: error.into(), ..ErrorBody::default() }),
            retry_after: None,
        }
    }

    /// The same answer with `Retry-After: seconds` (at least 1).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The body.
    pub fn body(&self) -> &ErrorBody {
        &self.body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(*self.body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// The JSON body, or 400 naming the expected shape.
pub(crate) fn json_body<T: DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    Json::<T>::from_bytes(body).map(|Json(t)| t).map_err(|r| {
        ApiError::new(StatusCode::BAD_REQUEST, format!("{}; expected {shape}", r.body_text()))
    })
}
