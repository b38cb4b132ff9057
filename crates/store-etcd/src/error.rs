//! The errors of calls to etcd, and their classification as [`StoreError`]s.

use std::time::Duration;
use tenure_elect::StoreError;
use tonic::Code;

/// What etcd says when a lease does not exist (a `NotFound` status, or the
/// client's own message when a keepalive stream opens on a dead lease).
const LEASE_NOT_FOUND: &str = "lease not found";
/// etcd's own errors start with this; others come from the transport.
const ETCD_PREFIX: &str = "etcdserver:";

/// An error of a call to one etcd member.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EtcdError {
    /// The member answered a gRPC status, or the channel below the call
    /// failed (a lazily connected channel reports a connection that could
    /// not be made as an `Unavailable` status).
    #[error("grpc request error: {0}")]
    GRpcStatus(#[from] tonic::Status),
    /// A keepalive stream failed or its request channel closed.
    #[error("lease keepalive error: {0}")]
    LeaseKeepAliveError(String),
    /// A watch stream's request channel closed.
    #[error("watch error: {0}")]
    WatchError(String),
    /// A setting no call can succeed with (an endpoint that is no URI, a
    /// password that is no header value).
    #[error("invalid argument: {0}")]
    InvalidArgs(String),
}

/// `e`, an error of a request to `endpoint`, as a [`StoreError`]:
/// a missing lease is [`StoreError::Gone`]; no answer (transport errors,
/// a proposal that timed out or was dropped by a leader change: it may
/// have been applied) is [`StoreError::NoAnswer`]; a member that cannot
/// serve (no leader, stopping, too busy) is [`StoreError::Unavailable`];
/// bad settings are [`StoreError::Config`]; the rest is
/// [`StoreError::Refused`].
pub(crate) fn classify(endpoint: &str, e: EtcdError) -> StoreError {
    let no_answer = |sent: bool, e: EtcdError| StoreError::NoAnswer {
        endpoint: endpoint.to_string(),
        sent,
        source: Box::new(e),
    };
    match e {
        EtcdError::GRpcStatus(ref s) => {
            let message = s.message().to_string();
            if message.contains(LEASE_NOT_FOUND) {
                return StoreError::Gone(format!("{endpoint}: {message}"));
            }
            let from_etcd = message.starts_with(ETCD_PREFIX);
            match s.code() {
                Code::Unavailable | Code::ResourceExhausted if from_etcd => {
                    if message.contains("timed out") || message.contains("leader changed") {
                        no_answer(true, e)
                    } else {
                        StoreError::Unavailable { endpoint: endpoint.to_string(), message }
                    }
                }
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Unknown
                | Code::Internal
                    if !from_etcd =>
                {
                    let sent = !not_sent(s);
                    no_answer(sent, e)
                }
                Code::Unauthenticated | Code::PermissionDenied => {
                    StoreError::Refused(format!("{endpoint}: refused: {message}"))
                }
                _ => StoreError::Refused(format!("{endpoint}: {message} ({:?})", s.code())),
            }
        }
        EtcdError::LeaseKeepAliveError(ref m) if m.contains(LEASE_NOT_FOUND) => {
            StoreError::Gone(format!("{endpoint}: {m}"))
        }
        // A stream's request channel closed: the stream is dead.
        EtcdError::LeaseKeepAliveError(_) | EtcdError::WatchError(_) => no_answer(true, e),
        EtcdError::InvalidArgs(_) => StoreError::Config(format!("{endpoint}: {e}")),
    }
}

/// The error of a request to `endpoint` that got no answer within `timeout`.
pub(crate) fn timed_out(endpoint: &str, timeout: Duration) -> StoreError {
    StoreError::NoAnswer {
        endpoint: endpoint.to_string(),
        sent: true,
        source: format!("no answer within {timeout:?}").into(),
    }
}

/// Whether a status says that the connection could not be made (so the
/// request surely did not leave).
fn not_sent(s: &tonic::Status) -> bool {
    let m = s.message();
    m.contains("error trying to connect")
        || m.contains("tcp connect error")
        || source_chain_refused(s)
}

/// Whether an I/O error "connection refused" is among `e`'s sources.
fn source_chain_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// A store answer that breaks the contract (a missing header, an
/// unexpected operation result).
pub(crate) fn odd(endpoint: &str, what: &str) -> StoreError {
    StoreError::Refused(format!("{endpoint}: unexpected answer: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, message: &str) -> EtcdError {
        EtcdError::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn etcd_errors_are_classified_for_the_layer_above() {
        let gone = classify("e", status(Code::NotFound, "etcdserver: requested lease not found"));
        assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
        let keeper = classify("e", EtcdError::LeaseKeepAliveError("lease not found".into()));
        assert!(matches!(keeper, StoreError::Gone(_)), "{keeper:?}");
        let no_leader = classify("e", status(Code::Unavailable, "etcdserver: no leader"));
        assert!(matches!(no_leader, StoreError::Unavailable { .. }), "{no_leader:?}");
        let maybe = classify("e", status(Code::Unavailable, "etcdserver: request timed out"));
        assert!(matches!(maybe, StoreError::NoAnswer { sent: true, .. }), "{maybe:?}");
        let refused = classify("e", status(Code::Unavailable, "tcp connect error: refused"));
        assert!(matches!(refused, StoreError::NoAnswer { sent: false, .. }), "{refused:?}");
        let reset = classify("e", status(Code::Unknown, "h2 protocol error: connection reset"));
        assert!(matches!(reset, StoreError::NoAnswer { sent: true, .. }), "{reset:?}");
        let auth = classify("e", status(Code::InvalidArgument, "etcdserver: user name not found"));
        assert!(matches!(auth, StoreError::Refused(_)), "{auth:?}");
        let big = classify("e", status(Code::InvalidArgument, "etcdserver: request is too large"));
        assert!(!big.is_retryable());
        let watch = classify("e", EtcdError::WatchError("channel closed".into()));
        assert!(watch.is_retryable());
    }

    #[test]
    fn a_refused_connection_is_found_among_the_sources() {
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = Wrap(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(source_chain_refused(&wrapped));
        assert!(!source_chain_refused(&std::io::Error::from(std::io::ErrorKind::TimedOut)));
    }
}
