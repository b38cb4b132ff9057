//! The driver task: the only place that feeds inputs to the election core and
//! carries out its outputs (persist, then send, then publish events).

use crate::error::TransferError;
use crate::metrics::LAG_WINDOW;
use crate::shared::{Command, Elector, Shared};
use crate::spy::{DeathNotice, NoticeError, NoticeOutcome, Spy};
use crate::status::LeadershipEvent;
use crate::storage::DataDir;
use crate::sync::lock;
use crate::timeline::{link_view, unix_ms};
use crate::transport::Transport;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{
    Event, FencingToken, HardState, Instant, Message, NodeId, Output, Protocol, Role, Term,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

/// First delay before retrying a failed state write.
pub const PERSIST_RETRY_MIN: Duration = Duration::from_millis(10);
/// Largest delay between retries of a failed state write. The node retries
/// for as long as it runs: it cannot vote or lead until a write succeeds.
pub const PERSIST_RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a graceful shutdown waits for its last messages (the Resign) to be
/// written to connected peers.
pub const SHUTDOWN_FLUSH_TIMEOUT: Duration = Duration::from_millis(500);

/// A timer wake later than this is logged (at most once per
/// [`crate::metrics::LAG_WINDOW`]): a quarter of the shortest election
/// timeouts, far above what a driver on threads of its own sees.
pub const LAG_WARNING: Duration = Duration::from_millis(250);

/// What woke the driver up.
enum Wake {
    Stop,
    Command(Command),
    Dead(DeathNotice),
    Message(NodeId, Message),
    Timer,
    RetryPersist,
}

/// Retry state while the state file cannot be written.
struct PersistRetry {
    at: tokio::time::Instant,
    backoff: Duration,
}

/// What feeds the driver besides the stop request and its timers.
pub(crate) struct Channels {
    /// Election messages from peers.
    pub(crate) inbound: mpsc::Receiver<(NodeId, Message)>,
    /// Commands from handles.
    pub(crate) commands: mpsc::Receiver<Command>,
    /// Death notices of the next-incarnation spy, from the transport.
    pub(crate) deaths: mpsc::Receiver<DeathNotice>,
}

/// The driver: owns the inputs of the core, the data directory and the transport.
pub struct Driver {
    pub(crate) shared: Arc<Shared>,
    pub(crate) data: Arc<DataDir>,
    pub(crate) transport: Transport,
    pub(crate) inbound: mpsc::Receiver<(NodeId, Message)>,
    pub(crate) commands: mpsc::Receiver<Command>,
    pub(crate) deaths: mpsc::Receiver<DeathNotice>,
    pub(crate) stop: watch::Receiver<bool>,
    /// The term this node leads, while it leads.
    pub(crate) led_term: Option<Term>,
    retry: Option<PersistRetry>,
    /// Writes of the state file's second copy still running; each holds the
    /// data directory (and so its lock) until it ends.
    mirrors: JoinSet<()>,
    /// When a late wake was last logged.
    lag_warned: Option<tenure_core::Instant>,
    /// Waiting for the replicated log's configuration
    /// ([`Command::Electorate`]): until it comes, no message, timer or
    /// death notice reaches the core, which would otherwise count by its
    /// bootstrap list and might support a candidate the log's
    /// configuration refuses.
    gated: bool,
}

impl Driver {
    /// A driver for a freshly built core.
    pub(crate) fn new(
        shared: Arc<Shared>,
        data: Arc<DataDir>,
        transport: Transport,
        channels: Channels,
        gated: bool,
    ) -> Self {
        let stop = shared.stop.subscribe();
        let Channels { inbound, commands, deaths } = channels;
        Driver {
            shared,
            data,
            transport,
            inbound,
            commands,
            deaths,
            stop,
            led_term: None,
            retry: None,
            mirrors: JoinSet::new(),
            lag_warned: None,
            gated,
        }
    }

    /// Runs until a stop is requested, then stops gracefully.
    pub async fn run(mut self) {
        // The core's construction output (the startup event).
        let out = lock(&self.shared.core).take_output();
        self.process(out).await;
        loop {
            let deadline = lock(&self.shared.core).poll_timeout();
            let timer = sleep_until_core(&self.shared, deadline);
            let retry_at = self.retry.as_ref().map(|r| r.at);
            let open = !self.gated;
            let wake = tokio::select! {
                biased;
                _ = self.stop.wait_for(|&stop| stop) => Wake::Stop,
                Some(cmd) = self.commands.recv() => Wake::Command(cmd),
                // Before messages: a notice queued before the new
                // incarnation's first message is taken before it.
                Some(notice) = self.deaths.recv(), if open => Wake::Dead(notice),
                Some((from, msg)) = self.inbound.recv(), if open => Wake::Message(from, msg),
                _ = timer, if open => Wake::Timer,
                _ = sleep_opt(retry_at), if retry_at.is_some() => Wake::RetryPersist,
            };
            match wake {
                Wake::Stop => break,
                Wake::Command(cmd) => self.command(cmd).await,
                Wake::Dead(notice) => {
                    self.peer_dead(notice).await;
                }
                Wake::Message(from, msg) => {
                    self.input(|core, now| core.handle_message(now, from, msg)).await
                }
                Wake::Timer => {
                    self.record_lag(deadline);
                    self.input(|core, now| core.handle_timeout(now)).await
                }
                Wake::RetryPersist => self.retry_persist().await,
            }
        }
        info!(node = %self.shared.config.id, "stopping: ceding leadership if leading");
        self.input(|core, now| core.shutdown(now)).await;
        let Driver { transport, mut mirrors, .. } = self;
        transport.close(SHUTDOWN_FLUSH_TIMEOUT).await;
        // The data directory's lock is released only when the last copy is
        // written: a node started right after this one returns must get it.
        while mirrors.join_next().await.is_some() {}
    }

    async fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Transfer { to, reply } => {
                let mut result = Ok(());
                self.input(|core, now| result = core.transfer_leadership(now, to)).await;
                match &result {
                    Ok(()) => {
                        info!(node = %self.shared.config.id, successor = %to, "handing leadership over")
                    }
                    Err(e) => {
                        warn!(node = %self.shared.config.id, successor = %to, error = %e, "leadership transfer refused")
                    }
                }
                let _ = reply.send(result.map_err(TransferError::from));
            }
            Command::GiveUp { token } => {
                warn!(node = %self.shared.config.id, %token, "the replicated log gave up this node's leadership: resigning it");
                self.input(|core, now| core.give_up_leadership(now, token)).await;
            }
            Command::NotifyDead { peer, incarnation, reply } => {
                let result = self.external_notice(peer, incarnation).await;
                let _ = reply.send(result);
            }
            Command::Electorate { electorate, roster, peers, reply } => {
                let id = self.shared.config.id;
                info!(node = %id, configuration = %electorate, "counting by the log's configuration");
                // Links first: the elector's next heartbeat reaches a new
                // member.
                if let Some(peers) = peers {
                    self.transport.set_peers(&peers);
                }
                self.shared.net.set_roster(roster);
                self.input(|core, now| core.handle_electorate(now, electorate)).await;
                self.gated = false;
                let _ = reply.send(());
            }
        }
    }

    /// An external death notice: checked against the incarnations the
    /// handshakes showed (see [`crate::spy`]), then given to the core if it
    /// names the peer's current one.
    async fn external_notice(
        &mut self,
        peer: NodeId,
        incarnation: u64,
    ) -> Result<NoticeOutcome, NoticeError> {
        let id = self.shared.config.id;
        let checked = match self.shared.net.link(peer) {
            _ if peer == id => Err(NoticeError::Myself(peer)),
            None => Err(NoticeError::NotAVoter(peer)),
            Some(link) => link.check_notice(incarnation),
        };
        match checked {
            Ok(NoticeOutcome::Accepted { .. }) => {
                let by = Spy::External;
                let was_leader = self.peer_dead(DeathNotice { peer, incarnation, by }).await;
                Ok(NoticeOutcome::Accepted { peer, incarnation, was_leader })
            }
            Ok(stale @ NoticeOutcome::Stale { current, .. }) => {
                info!(node = %id, %peer, incarnation, current, "a stale death notice: nothing to do");
                Ok(stale)
            }
            Err(e) => {
                warn!(node = %id, %peer, incarnation, error = %e, "a death notice was refused");
                Err(e)
            }
        }
    }

    /// Gives the election core a death notice: `notice.incarnation` of
    /// `notice.peer` is dead, as `notice.by` knows for certain. Returns
    /// whether this node followed that peer as its leader.
    ///
    /// The one place where death notices reach the core, whichever spy gave
    /// them: `Protocol::handle_peer_dead` releases this node's support for
    /// the peer and, if it was the leader, stands at once in rank order. The
    /// core counts what it accepts (`Counters::death_notices`, exported as
    /// `tenure_death_notices_total`).
    async fn peer_dead(&mut self, notice: DeathNotice) -> bool {
        let DeathNotice { peer, incarnation, by } = notice;
        let was_leader = lock(&self.shared.core).status().leader == Some(peer);
        info!(
            node = %self.shared.config.id,
            %peer,
            incarnation,
            was_leader,
            "a peer's incarnation is dead: {by}"
        );
        self.input(|core, now| core.handle_peer_dead(now, peer)).await;
        was_leader
    }

    /// Feeds one input to the core and carries out what it produced.
    async fn input(&mut self, f: impl FnOnce(&mut Elector, Instant)) {
        let out = {
            let mut core = lock(&self.shared.core);
            let now = self.shared.clock.now();
            f(&mut core, now);
            core.take_output()
        };
        self.process(out).await;
    }

    /// Persist (fsync) first; only then send; then publish events.
    async fn process(&mut self, mut out: Output) {
        let mut written = false;
        if let Some(state) = out.persist.take() {
            match self.write(state).await {
                Ok(()) => {
                    written = true;
                    self.persist_recovered(&mut out);
                }
                Err(e) => self.persist_failed(&mut out, &e),
            }
        }
        for (to, msg) in out.messages {
            self.transport.send(to, msg);
        }
        if written {
            self.mirror();
        }
        for event in out.events {
            self.event(event);
        }
        self.publish_leadership();
    }

    async fn write(&self, state: HardState) -> std::io::Result<()> {
        let data = self.data.clone();
        // fsync blocks: keep it off the async workers.
        tokio::task::spawn_blocking(move || data.write(state))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }

    /// Copies the state just written into the file's second slot, off the
    /// critical path: the messages that waited for the write have left. The
    /// data directory's lock orders it before the next write.
    fn mirror(&mut self) {
        while self.mirrors.try_join_next().is_some() {}
        let data = self.data.clone();
        let id = self.shared.config.id;
        self.mirrors.spawn_blocking(move || {
            if let Err(e) = data.mirror() {
                warn!(
                    node = %id,
                    path = %data.state_path().display(),
                    error = %e,
                    "cannot write the second copy of the state (the first copy is durable)"
                );
            }
        });
    }

    fn persist_failed(&mut self, out: &mut Output, e: &std::io::Error) {
        // Messages produced with unpersisted state must not leave: a vote sent
        // but forgotten on restart could elect two leaders in one term.
        out.messages.clear();
        let more = {
            let mut core = lock(&self.shared.core);
            core.handle_persist_failed(self.shared.clock.now());
            core.take_output()
        };
        out.events.extend(more.events);
        let backoff = match &self.retry {
            Some(r) => (r.backoff * 2).min(PERSIST_RETRY_MAX),
            None => PERSIST_RETRY_MIN,
        };
        let id = self.shared.config.id;
        let path = self.data.state_path();
        if self.retry.is_none() {
            error!(
                node = %id,
                path = %path.display(),
                error = %e,
                retry_in = ?backoff,
                "cannot write the state file: this node neither votes nor leads until it can"
            );
        } else {
            warn!(node = %id, path = %path.display(), error = %e, retry_in = ?backoff, "the state file is still not writable");
        }
        self.retry = Some(PersistRetry { at: tokio::time::Instant::now() + backoff, backoff });
    }

    fn persist_recovered(&mut self, out: &mut Output) {
        if self.retry.take().is_none() {
            return;
        }
        let more = {
            let mut core = lock(&self.shared.core);
            core.handle_persist_recovered(self.shared.clock.now());
            core.take_output()
        };
        out.messages.extend(more.messages);
        out.events.extend(more.events);
        info!(
            node = %self.shared.config.id,
            path = %self.data.state_path().display(),
            "the state file is writable again: voting resumes"
        );
    }

    async fn retry_persist(&mut self) {
        let state = lock(&self.shared.core).hard_state();
        // Same path as any output: on failure the backoff grows, on success
        // the core is told the storage recovered.
        self.process(Output { persist: Some(state), ..Output::default() }).await;
    }

    /// Logs a core event and publishes the matching leadership event.
    fn event(&mut self, event: Event) {
        let id = self.shared.config.id;
        {
            let now = self.shared.clock.now();
            let net = &self.shared.net;
            lock(&self.shared.timeline).observe(&event, now, unix_ms(), |p| link_view(net, now, p));
        }
        let published = match event {
            Event::RoleChanged { role, term, reason } => {
                info!(node = %id, %role, %term, ?reason, "role changed");
                if role == Role::Leader {
                    self.led_term = Some(term);
                    Some(LeadershipEvent::BecameLeader {
                        term,
                        fencing_token: FencingToken::for_term(term),
                    })
                } else {
                    self.led_term.take().map(|term| LeadershipEvent::LostLeadership { term })
                }
            }
            Event::LeaderChanged { leader, term, fencing_token } => {
                info!(node = %id, leader = ?leader, %term, "leader changed");
                lock(&self.shared.tracker).observe(leader, self.shared.clock.now());
                match leader {
                    Some(l) if l == id => None, // announced as BecameLeader
                    Some(leader) => Some(LeadershipEvent::LeaderObserved {
                        leader,
                        term,
                        fencing_token: fencing_token.unwrap_or(FencingToken::for_term(term)),
                    }),
                    None => Some(LeadershipEvent::NoLeader { term }),
                }
            }
            Event::LeaderResigned { leader, term, successor } => {
                info!(node = %id, %leader, %term, successor = ?successor, "the leader resigned");
                None
            }
            Event::LeaderDied { leader, term } => {
                info!(node = %id, %leader, %term, "the leader was reported dead");
                None
            }
            Event::Halted { reason } => {
                // The core stopped itself rather than risk a second leader or
                // vote: it is inert now. Stop the node so that its owner (the
                // server exits, an embedder sees `stop_requested`) notices.
                error!(node = %id, %reason, "the election core halted on a broken invariant; stopping");
                self.shared.stop.send_replace(true);
                None
            }
        };
        if let Some(e) = published {
            // No subscriber is fine.
            let _ = self.shared.events.send(e);
        }
    }

    fn publish_leadership(&self) {
        let now = self.shared.leadership_now();
        self.shared.leadership.send_if_modified(|cur| {
            let changed = *cur != now;
            *cur = now;
            changed
        });
    }
}

impl Driver {
    /// Records how late the driver woke for the core's `deadline`, and
    /// warns when it was later than [`LAG_WARNING`].
    fn record_lag(&mut self, deadline: tenure_core::Instant) {
        let now = self.shared.clock.now();
        let late = now.saturating_since(deadline);
        lock(&self.shared.lag).record(now, late);
        let quiet = self.lag_warned.is_some_and(|at| now.saturating_since(at) < LAG_WINDOW);
        if late > LAG_WARNING && !quiet {
            self.lag_warned = Some(now);
            warn!(
                node = %self.shared.config.id,
                late_ms = late.as_millis(),
                "the election driver woke late for its timer: something starves its threads"
            );
        }
    }
}

async fn sleep_until_core(shared: &Shared, deadline: Instant) {
    match shared.clock.to_std(deadline) {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

async fn sleep_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
