//! One etcd client per endpoint, connected lazily, and the rule of
//! tenure-client's `Cluster`: ask the endpoint that answered last, move on
//! to the next after an error or a timeout.
//!
//! tonic's balanced channel over several endpoints does not fail over (a
//! killed member keeps failing every other call, and a stream open to it
//! stalls), hence one channel per endpoint, chosen here.
//!
//! A [`Client`] is one endpoint's channel with the metadata etcd reads:
//! `hasleader` (a member without a raft leader refuses instead of
//! stalling), and with credentials the `token` of a login, made again when
//! etcd calls it invalid (etcd's simple tokens expire after 5 idle minutes).

use crate::config::{connect_options, ConnectOptions, EtcdOptions};
use crate::error::{classify, timed_out, EtcdError};
use futures_util::Stream;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tenure_elect::{Retry, StoreError};
use tenure_etcd_api::etcdserverpb::auth_client::AuthClient;
use tenure_etcd_api::etcdserverpb::kv_client::KvClient;
use tenure_etcd_api::etcdserverpb::lease_client::LeaseClient;
use tenure_etcd_api::etcdserverpb::watch_client::WatchClient;
use tenure_etcd_api::etcdserverpb::AuthenticateRequest;
use tokio::sync::{mpsc, OnceCell};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;

/// The most requests queued on one stream (a renewal sends one and reads
/// its answer; a wait's watch stream sends three creations and a probe).
pub(crate) const STREAM_REQUESTS: usize = 8;
/// The metadata key that makes a member without a raft leader refuse.
const REQUIRE_LEADER: &str = "hasleader";
/// The metadata key of the login token.
const TOKEN: &str = "token";
/// What etcd says of a token it does not accept (expired, or its member
/// restarted), when it does not say it with `Unauthenticated`.
const INVALID_TOKEN: &str = "etcdserver: invalid auth token";

/// A channel whose requests carry etcd's metadata.
pub(crate) type Channel = InterceptedService<tonic::transport::Channel, Metadata>;

/// Adds `hasleader: true`, and the login token if there is one.
#[derive(Clone)]
pub(crate) struct Metadata {
    token: Option<Arc<RwLock<Option<AsciiMetadataValue>>>>,
}

impl tonic::service::Interceptor for Metadata {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        r.metadata_mut().insert(REQUIRE_LEADER, AsciiMetadataValue::from_static("true"));
        let token = self.token.as_ref().and_then(|t| t.read().ok().and_then(|t| t.clone()));
        if let Some(token) = token {
            r.metadata_mut().insert(TOKEN, token);
        }
        Ok(r)
    }
}

/// The login of a client with credentials.
struct Login {
    user: String,
    password: String,
    /// The token requests carry (shared with the channel's [`Metadata`]).
    token: Arc<RwLock<Option<AsciiMetadataValue>>>,
    /// One login at a time: calls that all found the token invalid log in once.
    refresh: tokio::sync::Mutex<()>,
    /// Logs in: the same channel, without a token.
    auth: AuthClient<Channel>,
}

/// One endpoint's channel (connected on first use, and again after it
/// broke), with its login if any. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Client {
    channel: Channel,
    login: Option<Arc<Login>>,
}

impl Client {
    /// The client of `url`, logged in if `options` has credentials.
    async fn connect(url: &str, options: &ConnectOptions) -> Result<Client, EtcdError> {
        let raw = options.endpoint(url)?.connect_lazy();
        let Some((user, password)) = options.user.clone() else {
            let channel = InterceptedService::new(raw, Metadata { token: None });
            return Ok(Client { channel, login: None });
        };
        let token = Arc::new(RwLock::new(None));
        let channel = InterceptedService::new(raw.clone(), Metadata { token: Some(token.clone()) });
        let auth = AuthClient::new(InterceptedService::new(raw, Metadata { token: None }));
        let login = Login { user, password, token, refresh: Default::default(), auth };
        let client = Client { channel, login: Some(Arc::new(login)) };
        client.log_in(None).await?;
        Ok(client)
    }

    /// Logs in (again), unless the token is no longer `stale` (another
    /// call logged in meanwhile).
    async fn log_in(&self, stale: Option<AsciiMetadataValue>) -> Result<(), EtcdError> {
        let Some(login) = &self.login else { return Ok(()) };
        let _one = login.refresh.lock().await;
        if *login.token.read().expect("token lock poisoned") != stale {
            return Ok(());
        }
        let request =
            AuthenticateRequest { name: login.user.clone(), password: login.password.clone() };
        let answer = login.auth.clone().authenticate(request).await?.into_inner();
        let token = answer
            .token
            .parse::<AsciiMetadataValue>()
            .map_err(|e| EtcdError::InvalidArgs(format!("the login token: {e}")))?;
        *login.token.write().expect("token lock poisoned") = Some(token);
        Ok(())
    }

    /// Runs `f` on this client; with credentials, once more after logging
    /// in again if etcd found the token invalid.
    pub(crate) async fn run<T, F, Fut>(&self, mut f: F) -> Result<T, EtcdError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let Some(login) = &self.login else { return f(self.clone()).await };
        let stale = login.token.read().expect("token lock poisoned").clone();
        match f(self.clone()).await {
            Err(EtcdError::GRpcStatus(s)) if invalid_token(&s) => {
                self.log_in(stale).await?;
                f(self.clone()).await
            }
            answer => answer,
        }
    }

    /// The KV service.
    pub(crate) fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone())
    }

    /// The Lease service.
    pub(crate) fn lease(&self) -> LeaseClient<Channel> {
        LeaseClient::new(self.channel.clone())
    }

    /// The Watch service.
    pub(crate) fn watch(&self) -> WatchClient<Channel> {
        WatchClient::new(self.channel.clone())
    }
}

/// Whether `s` says the login token is invalid (etcd answers
/// `Unauthenticated`, or `Unknown` with its message from services built
/// on its in-process client).
fn invalid_token(s: &tonic::Status) -> bool {
    match s.code() {
        tonic::Code::Unauthenticated => true,
        tonic::Code::Unknown => s.message() == INVALID_TOKEN,
        _ => false,
    }
}

/// The requests of a stream, as they are queued on `rx`: the stream's
/// request side ends when every sender is dropped.
pub(crate) fn requests<T: Send + 'static>(rx: mpsc::Receiver<T>) -> impl Stream<Item = T> + Send {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) })
}

/// The endpoints of one etcd cluster and a client for each.
pub(crate) struct Endpoints {
    endpoints: Vec<String>,
    clients: Vec<OnceCell<Client>>,
    connect: ConnectOptions,
    /// The endpoint asked first: the last one that answered.
    current: AtomicUsize,
    /// The bound of each request.
    pub(crate) timeout: Duration,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("endpoints", &self.endpoints)
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish()
    }
}

impl Endpoints {
    /// Checked endpoints (`https` if they are) and the store's options.
    pub(crate) fn new(
        endpoints: Vec<String>,
        https: bool,
        options: &EtcdOptions,
    ) -> Result<Endpoints, StoreError> {
        Ok(Endpoints {
            clients: endpoints.iter().map(|_| OnceCell::new()).collect(),
            endpoints,
            connect: connect_options(options, https)?,
            current: AtomicUsize::new(0),
            timeout: options.request_timeout,
        })
    }

    /// The endpoints, in the order given.
    pub(crate) fn list(&self) -> &[String] {
        &self.endpoints
    }

    /// The index of the endpoint asked first now.
    pub(crate) fn current(&self) -> usize {
        self.current.load(Ordering::Relaxed) % self.endpoints.len()
    }

    /// Endpoint `i` answered: ask it first from now on.
    pub(crate) fn answered(&self, i: usize) {
        self.current.store(i, Ordering::Relaxed);
    }

    /// Moves on to the endpoint after `i` (if `i` is still the current one).
    pub(crate) fn skip(&self, i: usize) {
        let n = self.endpoints.len();
        let _ = self.current.compare_exchange(i, (i + 1) % n, Ordering::Relaxed, Ordering::Relaxed);
        tracing::debug!(endpoint = %self.endpoints[i], "etcd: moving on to the next endpoint");
    }

    /// The client of endpoint `i`, connected on first use (with
    /// credentials, connecting authenticates: bounded by the timeout).
    pub(crate) async fn client(&self, i: usize) -> Result<Client, StoreError> {
        let endpoint = &self.endpoints[i];
        let connect = async {
            let c = Client::connect(endpoint, &self.connect);
            match tokio::time::timeout(self.timeout, c).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(e)) => Err(classify(endpoint, e)),
                Err(_) => Err(timed_out(endpoint, self.timeout)),
            }
        };
        self.clients[i].get_or_try_init(|| connect).await.cloned()
    }

    /// Runs `f` on the endpoints in turn, starting with the current one,
    /// each at most the request timeout, until one answers: every endpoint
    /// is asked at most once. A request that may have arrived without an
    /// answer is sent again only if `retry` is [`Retry::Idempotent`]; one
    /// a member refused to serve ([`StoreError::Unavailable`]) always is.
    /// Returns the answer with the endpoint's index, or the last error.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        retry: Retry,
        mut f: F,
    ) -> Result<(usize, T), StoreError>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, EtcdError>>,
    {
        let n = self.endpoints.len();
        let first = self.current();
        let mut last = None;
        for k in 0..n {
            let i = (first + k) % n;
            let endpoint = &self.endpoints[i];
            let answer = match self.client(i).await {
                Ok(client) => match tokio::time::timeout(self.timeout, client.run(&mut f)).await {
                    Ok(Ok(v)) => {
                        self.answered(i);
                        return Ok((i, v));
                    }
                    Ok(Err(e)) => classify(endpoint, e),
                    Err(_) => timed_out(endpoint, self.timeout),
                },
                Err(e) => e,
            };
            let again = match &answer {
                StoreError::Unavailable { .. } => true,
                StoreError::NoAnswer { sent, .. } => !sent || retry == Retry::Idempotent,
                _ => false,
            };
            if answer.is_retryable() {
                self.skip(i);
            }
            if !again {
                return Err(answer);
            }
            tracing::debug!(%endpoint, error = %answer, "etcd: no answer; trying the next endpoint");
            last = Some(answer);
        }
        Err(last.unwrap_or_else(|| StoreError::Config("no etcd endpoint".into())))
    }
}
