//! What every call passes before its service runs: admission by the
//! caller's token or client certificate ([`crate::auth`]), then [`CALL_TIMEOUT`] on every call but
//! the [`WAITING_CALLS`] (tonic's own timeout would cut those too; a
//! client's `grpc-timeout` still bounds every call, tonic applies it).

use crate::auth::Auth;
use crate::subject::Subjects;
use crate::{CALL_TIMEOUT, WAITING_CALLS};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codegen::{http, Service, StdError};

/// The tower service in front of the listener's services.
#[derive(Clone)]
pub(crate) struct Gate<S> {
    pub(crate) auth: Arc<Auth>,
    /// What each connection's client certificate names.
    pub(crate) subjects: Arc<Subjects>,
    pub(crate) inner: S,
}

impl<S, B> Service<http::Request<B>> for Gate<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<StdError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = StdError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, StdError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StdError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let path = request.uri().path();
        if path == crate::auth::HEALTH_WATCH {
            let status = tonic::Status::unimplemented(
                "tenure: the health service answers Check; Watch is not served (call Check)",
            );
            return Box::pin(async move { Err(Box::new(status) as StdError) });
        }
        let token = request.headers().get("token").map(|v| v.as_bytes());
        // The certificate's name is read only for a call without a token.
        let presented = || self.subjects.presented(request.extensions());
        let caller = match self.auth.admit(path, token, presented) {
            Ok(caller) => caller,
            // tonic answers the error as the status it is.
            Err(status) => return Box::pin(async move { Err(Box::new(status) as StdError) }),
        };
        let waits = WAITING_CALLS.contains(&path);
        request.extensions_mut().insert(caller);
        let call = self.inner.call(request);
        Box::pin(async move {
            if waits {
                return call.await.map_err(Into::into);
            }
            match tokio::time::timeout(CALL_TIMEOUT, call).await {
                Ok(answer) => answer.map_err(Into::into),
                Err(_) => Err(tonic::TimeoutExpired(()).into()),
            }
        })
    }
}
