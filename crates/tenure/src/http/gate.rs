//! The gate in front of every endpoint: admits a request by the endpoint's
//! [`Access`] and the caller's token, or answers 401/403 (and counts the
//! refusal in the server's rate-limited log).

use super::auth::{Access, ApiAuth, Caller, Refusal};
use super::state::{ApiError, AppState};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use tenure_node::RateLimitedLog;

/// What the gate needs: who may call, and where refusals are counted. Its
/// own state, so that every router (a node's, a store-led server's) puts
/// the same gate in front of its endpoints.
#[derive(Clone)]
pub(crate) struct Gate {
    pub(crate) auth: Arc<ApiAuth>,
    pub(crate) rejections: Arc<RateLimitedLog>,
}

impl AppState {
    /// The gate in front of its endpoints.
    pub(crate) fn gate(&self) -> Gate {
        Gate { auth: self.auth.clone(), rejections: self.rejections.clone() }
    }
}

/// Runs the handler for an admitted request, with a [`Caller`] extension
/// (its token's name and role, and its address); refuses the others.
pub(super) async fn admit(
    State(st): State<Gate>,
    access: Access,
    mut req: Request,
    next: Next,
) -> Response {
    let addr = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let authorization = req.headers().get_all(header::AUTHORIZATION).iter().map(|v| v.as_bytes());
    match st.auth.authorize(access, authorization) {
        Ok(caller) => {
            req.extensions_mut().insert(Caller { addr, ..caller });
            next.run(req).await
        }
        Err(refusal) => {
            st.rejections.record(refusal.reason(), addr);
            let status = match refusal {
                Refusal::Forbidden { .. } => StatusCode::FORBIDDEN,
                Refusal::NoToken | Refusal::BadToken(_) => StatusCode::UNAUTHORIZED,
            };
            let error =
                ApiError::new(status, refusal.message(req.method().as_str(), req.uri().path()));
            ([(header::WWW_AUTHENTICATE, refusal.challenge())], error).into_response()
        }
    }
}
