//! Candidacies: campaign, wait, resign, check (docs/STORES.md §2.3, §4).

use crate::errors::{bounded, bounded_opt, classify};
use crate::queue::{base_name, election_dir, node_prefix, queue, Child};
use crate::session::on_session_error;
use crate::{Entry, ZkStore};
use std::time::Duration;
use tenure_elect::election::{check_name, check_value, Check};
use tenure_elect::store::{Candidacy, SessionId, StoreError, Waited, MAX_WAIT};
use tokio::time::Instant;
use zookeeper_client::Error as ZkError;
use zookeeper_client::{Acls, Client, CreateMode, MultiReadResult, OneshotWatcher, Stat};

/// How many times a read is tried again when the node it listed is deleted
/// before its `Stat` is read (each time, someone left the queue).
pub(crate) const MAX_RELISTS: usize = 16;

/// What one look at the queue found for a waiting candidacy.
enum Step {
    /// It leads (proved).
    Leads(u64),
    /// `ahead` candidacies are ahead; the watch fires when the predecessor goes.
    Behind { ahead: u64, watch: OneshotWatcher },
    /// The predecessor went between the list and the watch: look again.
    Again,
}

impl ZkStore {
    /// Lists `dir`'s queue; `None` if `dir` does not exist.
    pub(crate) async fn list(
        &self,
        client: &Client,
        dir: &str,
    ) -> Result<Option<(Vec<Child>, Stat)>, StoreError> {
        let limit = self.options.request_timeout;
        let listed = bounded_opt(&self.servers, "get_children", limit, client.get_children(dir));
        Ok(listed.await?.map(|(children, stat)| (queue(&children), stat)))
    }

    /// `dir`'s queue and the `Stat` of `own`, read at one point in one
    /// request (a multi-read); `None` for what does not exist.
    async fn list_with(
        &self,
        client: &Client,
        dir: &str,
        own: &str,
    ) -> Result<(Option<Vec<Child>>, Option<Stat>), StoreError> {
        let bad = |e| classify(&self.servers, "multi-read", e);
        let mut reader = client.new_multi_reader();
        reader.add_get_children(dir).map_err(bad)?;
        reader.add_get_data(own).map_err(bad)?;
        let limit = self.options.request_timeout;
        let results = bounded(&self.servers, "multi-read", limit, reader.commit()).await?;
        let odd = || StoreError::Refused(format!("multi-read of {dir}: {results:?}"));
        let queue_of = match results.first() {
            Some(MultiReadResult::Children { children }) => Some(queue(children)),
            Some(MultiReadResult::Error { err: ZkError::NoNode }) => None,
            Some(MultiReadResult::Error { err }) => return Err(bad(err.clone())),
            _ => return Err(odd()),
        };
        let stat = match results.get(1) {
            Some(MultiReadResult::Data { stat, .. }) => Some(*stat),
            Some(MultiReadResult::Error { err: ZkError::NoNode }) => None,
            Some(MultiReadResult::Error { err }) => return Err(bad(err.clone())),
            _ => return Err(odd()),
        };
        Ok((queue_of, stat))
    }

    /// The `Stat` of `path`, `None` if it does not exist.
    async fn stat(&self, client: &Client, path: &str) -> Result<Option<Stat>, StoreError> {
        let limit = self.options.request_timeout;
        bounded(&self.servers, "exists", limit, client.check_stat(path)).await
    }

    /// The session's own node in `dir`, if one exists: a campaign retried
    /// after a create whose answer was lost adopts it (the name carries the
    /// session id; `ephemeralOwner` proves it).
    async fn adopt(
        &self,
        entry: &Entry,
        session: SessionId,
        dir: &str,
    ) -> Result<Option<(String, Stat)>, StoreError> {
        let Some((q, _)) = self.list(&entry.client, dir).await? else { return Ok(None) };
        for child in q.iter().filter(|c| c.session == session.0) {
            let path = format!("{dir}/{}", child.name);
            match self.stat(&entry.client, &path).await? {
                Some(stat) if stat.ephemeral_owner as u64 == session.0 => {
                    return Ok(Some((path, stat)))
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// Creates the session's ephemeral sequential node in `dir`, creating
    /// `dir` (and its parents) as persistent nodes when missing.
    async fn create_node(
        &self,
        entry: &Entry,
        session: SessionId,
        dir: &str,
        value: &str,
    ) -> Result<(String, Stat), StoreError> {
        let prefix = format!("{dir}/{}", node_prefix(session));
        let ephemeral = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let limit = self.options.request_timeout;
        let client = &entry.client;
        for _ in 0..2 {
            let create = client.create(&prefix, value.as_bytes(), &ephemeral);
            match bounded_opt(&self.servers, "create", limit, create).await? {
                Some((stat, sequence)) => return Ok((format!("{prefix}{sequence}"), stat)),
                None => {
                    // Racing creators are fine: mkdir treats NodeExists as done.
                    let dirs = CreateMode::Persistent.with_acls(Acls::anyone_all());
                    bounded(&self.servers, "mkdir", limit, client.mkdir(dir, &dirs)).await?;
                }
            }
        }
        Err(StoreError::Refused(format!("{dir}: deleted again right after it was created")))
    }

    pub(crate) async fn campaign_in(
        &self,
        session: SessionId,
        election: &str,
        value: &str,
    ) -> Result<Candidacy, StoreError> {
        check_name(election)?;
        check_value(value)?;
        let entry = self.entry(session)?;
        let dir = election_dir(&self.options.root, election);
        let made = async {
            if let Some(adopted) = self.adopt(&entry, session, &dir).await? {
                return Ok(adopted);
            }
            match self.create_node(&entry, session, &dir, value).await {
                Err(lost @ StoreError::NoAnswer { .. }) => {
                    // The create may have been applied: find it by name.
                    tracing::info!(%dir, "create answer lost: looking for the session's node");
                    self.adopt(&entry, session, &dir).await?.ok_or(lost)
                }
                other => other,
            }
        };
        let (key, stat) = made.await.map_err(|e| on_session_error(self, session, e))?;
        if stat.ephemeral_owner as u64 != session.0 {
            return Err(StoreError::Refused(format!(
                "{key}: created by session {:#x}, owned by {:#x}",
                session.0, stat.ephemeral_owner
            )));
        }
        let first = self.list(&entry.client, &dir).await?.and_then(|(q, _)| q.into_iter().next());
        let leader = first.is_some_and(|c| c.name == base_name(&key));
        let token = stat.czxid as u64;
        Ok(Candidacy { session, election: election.to_string(), key, token, leader })
    }

    /// The candidacy's directory and node name, checked against this store.
    fn locate<'c>(&self, c: &'c Candidacy) -> Result<(String, &'c str), StoreError> {
        let dir = election_dir(&self.options.root, &c.election);
        let name = c.key.strip_prefix(&dir).and_then(|n| n.strip_prefix('/')).unwrap_or("");
        if !name.starts_with(&node_prefix(c.session)) || name.contains('/') {
            return Err(StoreError::Invalid(format!(
                "{}: not a candidacy of session {:#x} in {dir}",
                c.key, c.session.0
            )));
        }
        Ok((dir, name))
    }

    /// One look at the queue: leads (proved), behind (watching the
    /// predecessor only), or look again.
    async fn step(
        &self,
        entry: &Entry,
        c: &Candidacy,
        dir: &str,
        own: &str,
    ) -> Result<Step, StoreError> {
        let gone = || StoreError::Gone(format!("{}: the candidacy's node no longer exists", c.key));
        let (q, own_stat) = self.list_with(&entry.client, dir, &c.key).await?;
        let Some(q) = q else { return Err(gone()) };
        let pos = q.iter().position(|ch| ch.name == own).ok_or_else(gone)?;
        if pos == 0 {
            // The proof: first in the list, and the node is this session's
            // with this token (CURATOR-696: ephemeralOwner), both read at
            // one point.
            return match own_stat {
                // A connection lost meanwhile suspends the session (Curator's
                // rule): no leadership is answered on it, whatever was read.
                Some(_) if crate::session::ends_trust(entry.client.state()) => {
                    Err(StoreError::NoAnswer {
                        endpoint: self.servers.clone(),
                        sent: true,
                        source: "the session's connection was lost during the proof".into(),
                    })
                }
                Some(s) if s.ephemeral_owner as u64 == c.session.0 && s.czxid as u64 == c.token => {
                    Ok(Step::Leads(c.token))
                }
                _ => Err(gone()),
            };
        }
        let predecessor = format!("{dir}/{}", q[pos - 1].name);
        let limit = self.options.request_timeout;
        let watch = entry.client.check_and_watch_stat(&predecessor);
        match bounded(&self.servers, "exists (watch)", limit, watch).await? {
            (Some(_), watch) => Ok(Step::Behind { ahead: pos as u64, watch }),
            (None, _) => Ok(Step::Again),
        }
    }

    pub(crate) async fn wait_for(
        &self,
        c: &Candidacy,
        timeout: Duration,
    ) -> Result<Waited, StoreError> {
        let (dir, own) = self.locate(c)?;
        let entry = self.entry(c.session)?;
        let deadline = Instant::now() + timeout.min(MAX_WAIT);
        let mut revoked = entry.revoked.subscribe();
        let mut states = entry.client.state_watcher();
        loop {
            // Marks the state now as seen: `changed` below waits for the next.
            states.state();
            let step = self.step(&entry, c, &dir, own).await;
            match step.map_err(|e| on_session_error(self, c.session, e))? {
                Step::Leads(token) => return Ok(Waited::Leads { token }),
                Step::Again => continue,
                Step::Behind { ahead, watch } => {
                    tokio::select! {
                        _ = watch.changed() => {}
                        // A reconnect or a loss: look again (a lost
                        // connection fails the next read: NoAnswer).
                        _ = states.changed() => {}
                        _ = tokio::time::sleep_until(deadline) => return Ok(Waited::Ahead { ahead }),
                        _ = revoked.wait_for(|r| *r) => {
                            return Err(StoreError::Gone(format!("{}: session revoked", c.key)));
                        }
                    }
                }
            }
        }
    }

    pub(crate) async fn resign_from(&self, c: &Candidacy) -> Result<(), StoreError> {
        self.locate(c)?;
        // A session already gone took its ephemeral nodes with it.
        let Ok(entry) = self.entry(c.session) else { return Ok(()) };
        let resign = async {
            // One request, no read first: the path names this session and a
            // sequence number its parent never gives twice, and the node's
            // data is never set (version 0), so what it deletes is this
            // candidacy. (Only if an operator deleted and recreated the
            // election's parent could the path name a later candidacy of
            // the same session: that one would lose its place, nobody else.)
            let limit = self.options.request_timeout;
            let delete = entry.client.delete(&c.key, Some(0));
            bounded_opt(&self.servers, "delete", limit, delete).await.map(|_| ())
        };
        match resign.await.map_err(|e| on_session_error(self, c.session, e)) {
            Err(StoreError::Gone(_)) => Ok(()),
            other => other,
        }
    }

    pub(crate) async fn check_token(
        &self,
        election: &str,
        token: u64,
    ) -> Result<Check, StoreError> {
        check_name(election)?;
        let dir = election_dir(&self.options.root, election);
        let client = self.reader.client().await?;
        let limit = self.options.request_timeout;
        let answer = async {
            // sync: the reads that follow see every write the leader
            // committed before it handled the sync.
            bounded_opt(&self.servers, "sync", limit, client.sync(&dir)).await?;
            for _ in 0..MAX_RELISTS {
                let Some((q, parent)) = self.list(&client, &dir).await? else {
                    return Ok(Check { current: false, token: None, revision: 0 });
                };
                let revision = parent.pzxid as u64;
                let Some(first) = q.first() else {
                    return Ok(Check { current: false, token: None, revision });
                };
                if let Some(s) = self.stat(&client, &format!("{dir}/{}", first.name)).await? {
                    let leader = s.czxid as u64;
                    let revision = revision.max(leader);
                    return Ok(Check { current: leader == token, token: Some(leader), revision });
                }
            }
            Err(StoreError::Unavailable {
                endpoint: self.servers.clone(),
                message: format!("{dir}: the queue changed during {MAX_RELISTS} reads"),
            })
        };
        answer.await.map_err(|e| self.reader.on_error(e))
    }
}
