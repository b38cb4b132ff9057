//! ZooKeeper's errors as the [`StoreError`]s the layer above tells apart.

use std::future::Future;
use std::time::Duration;
use tenure_elect::StoreError;
use zookeeper_client::Error as ZkError;

/// Classifies `e`, an answer (or its absence) about `what` sent to `servers`.
/// A session that expired or was closed is [`StoreError::Gone`]; a lost
/// connection is [`StoreError::NoAnswer`] (sent: the request may have
/// arrived); a throttled or read-only server is [`StoreError::Unavailable`].
/// The client reports a failure of its socket (a reset connection, a broken
/// pipe) as its own `Custom` error, not as `ConnectionLoss`, and hides the
/// `io::Error` behind an `Arc` that no source chain shows: every `Custom`
/// error is taken for a lost connection (its others, TLS or SASL set-up,
/// come at connect, which is bounded and retried the same way).
pub(crate) fn classify(servers: &str, what: &str, e: ZkError) -> StoreError {
    match e {
        ZkError::SessionExpired | ZkError::ClientClosed => {
            StoreError::Gone(format!("{what}: the ZooKeeper session is gone ({e})"))
        }
        ZkError::ConnectionLoss | ZkError::Timeout | ZkError::NoHosts | ZkError::Custom(_) => {
            StoreError::NoAnswer {
                endpoint: servers.to_string(),
                sent: !matches!(e, ZkError::NoHosts),
                source: Box::new(e),
            }
        }
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

    #[tokio::test]
    async fn a_request_past_its_limit_is_no_answer() {
        let slow = std::future::pending::<Result<(), ZkError>>();
        let e = bounded("h:1", "sync", Duration::from_millis(10), slow).await.unwrap_err();
        assert!(matches!(e, StoreError::NoAnswer { sent: true, .. }), "{e:?}");
        assert!(e.is_retryable());
    }
}
