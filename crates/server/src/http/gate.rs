//! The gate in front of every endpoint: admits a request by the endpoint's
//! [`Access`] and the caller's token, or answers 401/403 (and counts the
//! refusal in the server's rate-limited log). A request with a valid token
//! proves its connection ([`Standing::prove`]), or is answered 503 when
//! every proven place is taken.

use super::admission::{ProvenFull, Standing};
use super::auth::{Access, ApiAuth, Caller, Refusal};
use super::error::ApiError;
use super::state::AppState;
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

/// The reason a request with a token is counted under when every proven
/// place is taken (instead of a line each).
const OVER_CAP: &str = "503 too many connections";

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
            // A role: a valid token, or an API without tokens (an anonymous
            // probe has none and leaves its connection unproven).
            if caller.role.is_some() {
                let standing = req.extensions().get::<Arc<Standing>>();
                if let Some(Err(ProvenFull(max))) = standing.map(|s| s.prove()) {
                    st.rejections.record(OVER_CAP, addr);
                    let error = ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("too many connections (at most {max}); try again later"),
                    );
                    return ([(header::CONNECTION, "close")], error).into_response();
                }
            }
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
