//! ZooKeeper's errors as the [`StoreError`]s the layer above tells apart.

use std::future::Future;
use std::time::Duration;
use tenure_elect::StoreError;
use zookeeper_client::Error as ZkError;

/// Whether `e` was caused by an I/O error: the client reports a connection
/// reset or broken pipe as its own `Custom` error with the `io::Error` as
/// its source, not as `ConnectionLoss`.
fn caused_by_io(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Classifies `e`, an answer (or its absence) about `what` sent to `servers`.
/// A session that expired or was closed is [`StoreError::Gone`]; a lost
/// connection (a reset socket included) is [`StoreError::NoAnswer`] (sent:
/// the request may have arrived); a throttled or read-only server is
/// [`StoreError::Unavailable`].
pub(crate) fn classify(servers: &str, what: &str, e: ZkError) -> StoreError {
    if matches!(e, ZkError::Custom(_)) && caused_by_io(&e) {
        return StoreError::NoAnswer {
            endpoint: servers.to_string(),
            sent: true,
            source: Box::new(e),
        };
    }
    match e {
        ZkError::SessionExpired | ZkError::ClientClosed => {
            StoreError::Gone(format!("{what}: the ZooKeeper session is gone ({e})"))
        }
        ZkError::ConnectionLoss | ZkError::Timeout | ZkError::NoHosts => StoreError::NoAnswer {
            endpoint: servers.to_string(),
            sent: !matches!(e, ZkError::NoHosts),
            source: Box::new(e),
        },
        ZkError::Throttled | ZkError::NotReadOnly | ZkError::SessionMoved => {
            StoreError::Unavailable {
                endpoint: servers.to_string(),
                message: format!("{what}: {e}"),
            }
        }
        ZkError::BadArguments(_) => StoreError::Invalid(format!("{what}: {e}")),
        e => StoreError::Refused(format!("{what}: {e}")),
    }
}

/// The error of a request that got no answer within `limit`.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {} ms", limit.as_millis())]
pub(crate) struct TimedOut {
    limit: Duration,
}

/// Runs one request bounded by `limit`: a request still unanswered then is
/// [`StoreError::NoAnswer`] (it may have arrived).
pub(crate) async fn bounded<T>(
    servers: &str,
    what: &str,
    limit: Duration,
    request: impl Future<Output = Result<T, ZkError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, request).await {
        Ok(answer) => answer.map_err(|e| classify(servers, what, e)),
        Err(_) => Err(StoreError::NoAnswer {
            endpoint: servers.to_string(),
            sent: true,
            source: Box::new(TimedOut { limit }),
        }),
    }
}

/// [`bounded`], with ZooKeeper's `NoNode` as `None`.
pub(crate) async fn bounded_opt<T>(
    servers: &str,
    what: &str,
    limit: Duration,
    request: impl Future<Output = Result<T, ZkError>>,
) -> Result<Option<T>, StoreError> {
    let request = async {
        match request.await {
            Ok(v) => Ok(Some(v)),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    };
    bounded(servers, what, limit, request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_loss_is_gone_connection_loss_is_retryable() {
        let gone = classify("h:1", "renew", ZkError::SessionExpired);
        assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
        let lost = classify("h:1", "renew", ZkError::ConnectionLoss);
        assert!(matches!(lost, StoreError::NoAnswer { sent: true, .. }), "{lost:?}");
        assert!(lost.is_retryable());
        let none = classify("h:1", "grant", ZkError::NoHosts);
        assert!(matches!(none, StoreError::NoAnswer { sent: false, .. }), "{none:?}");
        let busy = classify("h:1", "x", ZkError::Throttled);
        assert!(busy.is_retryable());
        let refused = classify("h:1", "x", ZkError::NoAuth);
        assert!(matches!(refused, StoreError::Refused(_)) && !refused.is_retryable());
    }

    /// An error that wraps another, as the client's `Custom` wraps I/O.
    #[derive(Debug, thiserror::Error)]
    #[error("session: {0}")]
    struct Wrapped(#[source] std::io::Error);

    #[test]
    fn a_reset_connection_anywhere_in_the_chain_is_io() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(caused_by_io(&Wrapped(reset)));
        assert!(!caused_by_io(&ZkError::NoAuth));
        assert!(!caused_by_io(&ZkError::ConnectionLoss));
    }

    #[tokio::test]
    async fn a_request_past_its_limit_is_no_answer() {
        let slow = std::future::pending::<Result<(), ZkError>>();
        let e = bounded("h:1", "sync", Duration::from_millis(10), slow).await.unwrap_err();
        assert!(matches!(e, StoreError::NoAnswer { sent: true, .. }), "{e:?}");
        assert!(e.is_retryable());
    }
}
