//! `tenure kv put|get|del|list|watch|txn`: the replicated key-value store
//! from the command line, a client of `/v1/kv`, `/v1/txn` and
//! `/v1/kv-watch`.
//!
//! Requests go to the endpoints in order: an endpoint that cannot be
//! reached, or answers 503 (no leader, busy, stopping: nothing was done),
//! passes the request to the next, and the list is tried again until
//! `--wait-ms` runs out, unless every endpoint failed in a way no retry
//! mends (a certificate of another CA or host, a peer port). A write whose connection fails after it was sent
//! is not sent again: its outcome is unknown (exit status 3), as when the
//! server answers so (504).

use crate::client::{connect, timestamp, CACERT_ENV, DEFAULT_ENDPOINTS, ENDPOINTS_ENV};
use crate::rest::{error_body, AuthRefused, Client, NoAnswer, RawAnswer, Refused, SseEvent};
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use hyper::{Method, StatusCode};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tenure::tokens::TokenArgs;
use tenure_api::{
    ErrorBody, KvBody, KvDeleteBody, KvEventBody, KvGetBody, KvListBody, KvPutBody, TxnBody,
};
use tenure_kv::{MAX_RANGE, MAX_VALUE_BYTES};
use tenure_server::http::MAX_TXN_BODY_BYTES;
use tokio::time::Instant;

/// The exit statuses, for `--help`.
const EXIT_STATUS: &str = "\
Exit status: 0 done; 1 error (no endpoint answered, a bad request, a refused token, an absent \
key); 2 conflict: a compare-and-set did not match (put, del with --if-mod-revision), or a \
transaction's comparisons failed (its failure branch ran); 3 unknown outcome: the write may or \
may not have been applied (its leader failed mid-way, or the connection broke after it was \
sent): read the key to find out.";

/// `--help` after the flags: `examples`, then the exit statuses.
fn with_exit_status(examples: &str) -> String {
    format!("{examples}\n\n{EXIT_STATUS}")
}

/// `tenure kv --help` after the subcommands.
pub fn kv_help() -> String {
    with_exit_status(KV_EXAMPLES)
}

/// How long one request may take: above the server's own bounds on a
/// request with the default election timeout (3 s waiting for a leader,
/// then 10 s for the commit), so the server's answer comes first.
const KV_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Pause between two rounds over the endpoints when none answered and the
/// servers gave no `Retry-After`; at most 1 s is waited between rounds.
const ROUND_PAUSE: Duration = Duration::from_millis(200);
/// Pause before `kv watch` follows the next endpoint after losing one; doubles up to the max.
const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest pause between reconnections of `kv watch`.
const WATCH_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The characters of a key or prefix sent as they are in a URL: letters,
/// digits, `-._~` and `/` (keys are paths); every other byte is
/// percent-encoded.
const KEEP: &AsciiSet =
    &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');

/// `text` for a URL path or query.
fn encode(text: &str) -> String {
    utf8_percent_encode(text, KEEP).to_string()
}

/// `tenure kv`.
#[derive(Args, Debug)]
pub struct KvArgs {
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(Subcommand, Debug)]
enum KvCommand {
    /// Set a key: `tenure kv put KEY VALUE` (VALUE `-`: read it from stdin).
    #[command(after_help = with_exit_status(PUT_EXAMPLES))]
    Put(PutArgs),
    /// Print a key's value (linearizable unless --stale).
    #[command(after_help = with_exit_status(GET_EXAMPLES))]
    Get(GetArgs),
    /// Delete a key.
    #[command(after_help = with_exit_status(DEL_EXAMPLES))]
    Del(DelArgs),
    /// List the keys starting with a prefix, with their values.
    #[command(after_help = with_exit_status(LIST_EXAMPLES))]
    List(ListArgs),
    /// Print each change of a key or prefix; resumes after a reconnection from the last revision.
    #[command(after_help = with_exit_status(WATCH_EXAMPLES))]
    Watch(WatchArgs),
    /// Run a transaction from a JSON file (or stdin): compare, then success or failure.
    #[command(after_help = TXN_HELP)]
    Txn(TxnArgs),
}

const KV_EXAMPLES: &str = "\
Examples:
  tenure kv put config/db-url postgres://10.0.0.9/app
  tenure kv get config/db-url --endpoints 10.0.0.1:8001,10.0.0.2:8001 --cacert /etc/tenure/ca.pem
  tenure kv list --prefix config/";

const PUT_EXAMPLES: &str = "\
Examples:
  tenure kv put config/db-url postgres://10.0.0.9/app
  tenure kv put locks/nightly host-a --if-mod-revision 0     # only if the key is absent
  tenure kv put config/motd - --token-file ~/.tenure/write.token   # the value from stdin";

const GET_EXAMPLES: &str = "\
Examples:
  tenure kv get config/db-url
  tenure kv get config/db-url --stale --json --endpoints 10.0.0.2:8001 --cacert /etc/tenure/ca.pem";

const DEL_EXAMPLES: &str = "\
Examples:
  tenure kv del config/db-url
  tenure kv del locks/nightly --if-mod-revision 42    # only if nobody wrote it since";

const LIST_EXAMPLES: &str = "\
Examples:
  tenure kv list --prefix config/
  tenure kv list -p jobs/ --limit 100 --json";

const WATCH_EXAMPLES: &str = "\
Examples:
  tenure kv watch --prefix config/
  tenure kv watch --key locks/nightly --from-revision 120 --count 1 --json";

const TXN_HELP: &str = "\
Example, lock.json as below:
  tenure kv txn lock.json --token-file ~/.tenure/write.token

The body, as POST /v1/txn takes it:
  {\"compare\": [{\"key\": \"lock\", \"target\": \"mod_revision\", \"op\": \"=\", \"value\": 0}],
   \"success\": [{\"put\": {\"key\": \"lock\", \"value\": \"me\"}}],
   \"failure\": [{\"get\": {\"key\": \"lock\"}}]}
target: mod_revision, create_revision, version (numbers; 0 for an absent key) or value (a string,
or value_base64); op: = != < >; operations: put {key, value | value_base64}, delete {key}, get
{key}. Prints the answer as JSON.

Exit status: 0 the comparisons held (the success branch ran); 2 they did not (the failure branch \
ran); 1 error; 3 unknown outcome: the transaction may or may not have been applied.";

/// Where the cluster is and how to reach it.
#[derive(Args, Debug)]
struct ClusterArgs {
    /// HTTP API endpoints of the nodes, comma-separated, tried in order.
    #[arg(long, short = 'e', env = ENDPOINTS_ENV, value_name = "URL,...", default_value = DEFAULT_ENDPOINTS)]
    endpoints: String,
    /// The cluster's CA certificate (PEM, from `tenure cert`): endpoints without a scheme
    /// are then https://, and the servers' certificates are checked against it.
    #[arg(long, env = CACERT_ENV, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// How long to keep trying when no endpoint answers (or all answer 503), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    wait_ms: u64,
    /// Reads need a token of role read; put, del and txn role write (or admin).
    #[command(flatten)]
    auth: TokenArgs,
}

#[derive(Args, Debug)]
struct PutArgs {
    /// The key (UTF-8, 1 to 1024 bytes, no control characters; `/` is an ordinary character).
    #[arg(value_parser = crate::usage::key)]
    key: String,
    /// The value; `-` reads it from stdin (at most 64 KiB).
    #[arg(allow_hyphen_values = true)]
    value: String,
    /// Compare-and-set: only if the key's mod_revision is R (0: only if the key is absent).
    #[arg(long, value_name = "R")]
    if_mod_revision: Option<u64>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct GetArgs {
    /// The key.
    #[arg(value_parser = crate::usage::key)]
    key: String,
    /// Read the answering node's state as applied so far, instead of a linearizable read.
    #[arg(long)]
    stale: bool,
    /// Print the key, its value and its revisions as JSON instead of the value.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct DelArgs {
    /// The key.
    #[arg(value_parser = crate::usage::key)]
    key: String,
    /// Only if the key's mod_revision is R.
    #[arg(long, value_name = "R")]
    if_mod_revision: Option<u64>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// The prefix [default: every key].
    #[arg(long, short = 'p', default_value = "")]
    prefix: String,
    /// At most this many keys [default: every key; the node answers a page
    /// of at most 4 MiB at a time, which this follows]. Pages are each read
    /// at their own revision: a key written while they are read may or may
    /// not show.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Read the answering node's state as applied so far.
    #[arg(long)]
    stale: bool,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct WatchArgs {
    /// Watch the keys starting with this [default: every key].
    #[arg(long, short = 'p', conflicts_with = "key")]
    prefix: Option<String>,
    /// Watch this key only.
    #[arg(long)]
    key: Option<String>,
    /// The first revision to print [default: the changes after the current revision].
    #[arg(long, value_name = "R")]
    from_revision: Option<u64>,
    /// Exit after printing this many changes [default: never].
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Print each change as the JSON of its event.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Args, Debug)]
struct TxnArgs {
    /// The JSON file of the transaction; `-` is stdin.
    #[arg(default_value = "-")]
    file: PathBuf,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `tenure kv ...`.
pub async fn run(args: KvArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        KvCommand::Put(a) => put(a).await,
        KvCommand::Get(a) => get(a).await,
        KvCommand::Del(a) => del(a).await,
        KvCommand::List(a) => list(a).await,
        KvCommand::Watch(a) => watch(a).await,
        KvCommand::Txn(a) => txn(a).await,
    }
}

/// The exit status of an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Done,
    Error,
    Conflict,
    Unknown,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(match e {
            Exit::Done => 0,
            Exit::Error => 1,
            Exit::Conflict => 2,
            Exit::Unknown => 3,
        })
    }
}

/// The exit status of an error answer, after saying what it was.
fn failed(status: StatusCode, body: &ErrorBody) -> Exit {
    let exit = exit_of(status, body);
    let what = match exit {
        Exit::Conflict => "conflict",
        Exit::Unknown => "unknown outcome",
        _ => "error",
    };
    eprintln!("{what} (HTTP {}): {}", status.as_u16(), body.error);
    exit
}

/// 409: conflict; 504 with `"outcome": "unknown"`: unknown; otherwise an error.
fn exit_of(status: StatusCode, body: &ErrorBody) -> Exit {
    match status {
        StatusCode::CONFLICT => Exit::Conflict,
        StatusCode::GATEWAY_TIMEOUT if body.outcome.as_deref() == Some("unknown") => Exit::Unknown,
        _ => Exit::Error,
    }
}

/// A write whose request may have reached a server that did not answer.
#[derive(Debug, thiserror::Error)]
#[error(
    "the outcome is unknown: {0:#}; the write may or may not have been applied (read the key to \
     find out)"
)]
struct UnknownOutcome(anyhow::Error);

/// The cluster a command talks to.
struct Cluster {
    client: Client,
    endpoints: Vec<String>,
    wait: Duration,
}

impl Cluster {
    fn new(args: &ClusterArgs) -> anyhow::Result<Cluster> {
        let (client, endpoints) = connect(args.cacert.as_deref(), &args.auth, &args.endpoints)?;
        Ok(Cluster { client, endpoints, wait: Duration::from_millis(args.wait_ms) })
    }

    /// Asks the endpoints in order until one answers other than 503. A
    /// `write` whose request may have been received without an answer is
    /// not sent again: an [`UnknownOutcome`] error.
    async fn ask(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        write: bool,
    ) -> anyhow::Result<RawAnswer> {
        let deadline = Instant::now() + self.wait;
        let mut last: Option<anyhow::Error> = None;
        loop {
            let mut retry_after: Option<u64> = None;
            // Endpoints of this round that no retry can mend (a certificate
            // that does not fit, a peer port): if all are, say so now.
            let mut misconfigured = 0;
            for endpoint in &self.endpoints {
                let url = format!("{endpoint}{path}");
                match self.client.send(method.clone(), &url, body.clone(), KV_REQUEST_TIMEOUT).await
                {
                    Ok(a) if a.status == StatusCode::SERVICE_UNAVAILABLE => {
                        retry_after = match (retry_after, a.retry_after) {
                            (Some(x), Some(y)) => Some(x.min(y)),
                            (x, y) => x.or(y),
                        };
                        last = Some(anyhow!("{url}: HTTP 503: {}", error_body(&a.body).error));
                    }
                    Ok(a) => return Ok(a),
                    Err(e) => match e.downcast_ref::<NoAnswer>() {
                        Some(n) if write && n.sent => return Err(UnknownOutcome(e).into()),
                        Some(n) => {
                            misconfigured += usize::from(n.is_misconfigured());
                            last = Some(e);
                        }
                        None => return Err(e),
                    },
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            if misconfigured == self.endpoints.len() {
                let last = last.unwrap_or_else(|| anyhow!("no endpoint answered"));
                return Err(last.context(format!(
                    "no endpoint of {} can answer: asking again would not help",
                    self.endpoints.join(",")
                )));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let last = last.unwrap_or_else(|| anyhow!("no endpoint answered"));
                return Err(last.context(format!(
                    "no endpoint of {} answered within --wait-ms {}",
                    self.endpoints.join(","),
                    self.wait.as_millis()
                )));
            }
            let pause = retry_after.map_or(ROUND_PAUSE, Duration::from_secs);
            tokio::time::sleep(pause.min(Duration::from_secs(1)).min(left)).await;
        }
    }
}

/// The exit status of a command's error: 3 for an unknown outcome, else 1
/// (said on stderr either way; the refusals of tokens are errors of `main`).
fn outcome_of(e: anyhow::Error) -> anyhow::Result<ExitCode> {
    if e.downcast_ref::<UnknownOutcome>().is_some() {
        eprintln!("{e:#}");
        return Ok(Exit::Unknown.into());
    }
    Err(e)
}

/// The answer's body as `T`, or the exit status of an error answer.
fn body_of<T: serde::de::DeserializeOwned>(a: &RawAnswer) -> anyhow::Result<Result<T, Exit>> {
    if a.status.is_success() {
        Ok(Ok(serde_json::from_slice(&a.body).context("an unexpected answer")?))
    } else {
        Ok(Err(failed(a.status, &error_body(&a.body))))
    }
}

fn print_json(body: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(body)?);
    Ok(())
}

/// The value of `put`: the argument, or stdin for `-`.
fn value_of(arg: &str) -> anyhow::Result<Vec<u8>> {
    if arg != "-" {
        return Ok(arg.as_bytes().to_vec());
    }
    read_limited(std::io::stdin().lock(), MAX_VALUE_BYTES, "the value on stdin")
}

/// All of `from`, at most `limit` bytes.
fn read_limited(from: impl Read, limit: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    from.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {what}"))?;
    if bytes.len() > limit {
        bail!("{what} is larger than {limit} bytes, the most the store accepts");
    }
    Ok(bytes)
}

/// `?if_mod_revision=R`, or nothing.
fn if_mod(r: Option<u64>) -> String {
    r.map(|r| format!("?if_mod_revision={r}")).unwrap_or_default()
}

async fn put(a: PutArgs) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&a.cluster)?;
    let value = value_of(&a.value)?;
    let path = format!("/v1/kv/{}{}", encode(&a.key), if_mod(a.if_mod_revision));
    let body = Some(("application/octet-stream", value));
    let answer = match cluster.ask(Method::PUT, &path, body, true).await {
        Ok(answer) => answer,
        Err(e) => return outcome_of(e),
    };
    match body_of::<KvPutBody>(&answer)? {
        Ok(b) if a.json => print_json(&b)?,
        Ok(b) => println!("revision {} (fencing token {})", b.revision, b.fencing_token),
        Err(exit) => return Ok(exit.into()),
    }
    Ok(ExitCode::SUCCESS)
}

async fn get(a: GetArgs) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&a.cluster)?;
    let stale = if a.stale { "?consistency=stale" } else { "" };
    let path = format!("/v1/kv/{}{stale}", encode(&a.key));
    let answer = cluster.ask(Method::GET, &path, None, false).await?;
    if answer.status == StatusCode::NOT_FOUND {
        let e = error_body(&answer.body);
        match e.revision {
            Some(r) => eprintln!("{} (revision {r})", e.error),
            None => eprintln!("{}", e.error),
        }
        return Ok(Exit::Error.into());
    }
    match body_of::<KvGetBody>(&answer)? {
        Ok(b) if a.json => print_json(&b)?,
        Ok(b) => {
            let mut value = b.kv.value_bytes().map_err(|e| anyhow!("an unexpected answer: {e}"))?;
            value.push(b'\n');
            std::io::stdout().write_all(&value)?;
        }
        Err(exit) => return Ok(exit.into()),
    }
    Ok(ExitCode::SUCCESS)
}

async fn del(a: DelArgs) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&a.cluster)?;
    let path = format!("/v1/kv/{}{}", encode(&a.key), if_mod(a.if_mod_revision));
    let answer = match cluster.ask(Method::DELETE, &path, None, true).await {
        Ok(answer) => answer,
        Err(e) => return outcome_of(e),
    };
    match body_of::<KvDeleteBody>(&answer)? {
        Ok(b) if a.json => print_json(&b)?,
        Ok(b) if b.deleted => println!("deleted (revision {})", b.revision),
        Ok(b) => println!("no such key (revision {})", b.revision),
        Err(exit) => return Ok(exit.into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// A value for a line of text: as it is if UTF-8, else `base64:...`.
fn shown(kv: &KvBody) -> String {
    match (&kv.value, &kv.value_base64) {
        (Some(v), _) => v.clone(),
        (None, Some(b)) => format!("base64:{b}"),
        (None, None) => String::new(),
    }
}

/// How often `tenure kv list` asks again for a page the node is too busy to
/// build (503 with `Retry-After`) before it gives up.
const LIST_PAGE_TRIES: u32 = 10;

async fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    if a.limit == Some(0) {
        return Err(crate::usage::usage("--limit 0: give at least 1 (or no --limit: every key)"));
    }
    let cluster = Cluster::new(&a.cluster)?;
    let total = a.limit.unwrap_or(usize::MAX);
    let (mut listed, mut after, mut revision, mut more) = (0, None::<String>, None, false);
    let mut kvs = Vec::new();
    // The node answers a page at a time (at most 4 MiB of JSON): follow
    // `more` with `after=` the last key.
    loop {
        let want = (total - listed).min(MAX_RANGE);
        let mut path = format!("/v1/kv?prefix={}&limit={want}", encode(&a.prefix));
        if let Some(key) = &after {
            path.push_str(&format!("&after={}", encode(key)));
        }
        if a.stale {
            path.push_str("&consistency=stale");
        }
        let answer = page(&cluster, &path).await?;
        let b = match body_of::<KvListBody>(&answer)? {
            Ok(b) => b,
            Err(exit) => return Ok(exit.into()),
        };
        revision.get_or_insert(b.revision);
        listed += b.kvs.len();
        after = b.kvs.last().map(|kv| kv.key.clone()).or(after);
        if a.json {
            kvs.extend(b.kvs);
        } else {
            for kv in &b.kvs {
                println!("{}\t{}", kv.key, shown(kv));
            }
        }
        if !b.more {
            break;
        }
        if listed >= total {
            more = true;
            break;
        }
    }
    if a.json {
        print_json(&KvListBody { kvs, more, revision: revision.unwrap_or(0) })?;
    } else if more {
        eprintln!("(more keys match: give a larger --limit or a longer --prefix)");
    }
    Ok(ExitCode::SUCCESS)
}

/// One page of a listing, asked again after `Retry-After` while the node
/// is too busy to build it (503), at most [`LIST_PAGE_TRIES`] times.
async fn page(cluster: &Cluster, path: &str) -> anyhow::Result<RawAnswer> {
    let mut tries = 1;
    loop {
        let answer = cluster.ask(Method::GET, path, None, false).await?;
        if answer.status != StatusCode::SERVICE_UNAVAILABLE || tries == LIST_PAGE_TRIES {
            return Ok(answer);
        }
        tries += 1;
        tokio::time::sleep(Duration::from_secs(answer.retry_after.unwrap_or(1).min(5))).await;
    }
}

async fn txn(a: TxnArgs) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&a.cluster)?;
    let what = format!("the transaction in {}", a.file.display());
    let body = if a.file.as_os_str() == "-" {
        read_limited(std::io::stdin().lock(), MAX_TXN_BODY_BYTES, "the transaction on stdin")?
    } else {
        let file = std::fs::File::open(&a.file).with_context(|| format!("opening {what}"))?;
        read_limited(file, MAX_TXN_BODY_BYTES, &what)?
    };
    let answer =
        match cluster.ask(Method::POST, "/v1/txn", Some(("application/json", body)), true).await {
            Ok(answer) => answer,
            Err(e) => return outcome_of(e),
        };
    match body_of::<TxnBody>(&answer)? {
        Ok(b) => {
            print_json(&b)?;
            Ok(if b.succeeded { Exit::Done } else { Exit::Conflict }.into())
        }
        Err(exit) => Ok(exit.into()),
    }
}

/// What `kv watch` follows.
struct Watched {
    /// `prefix=P` or `key=K`, encoded.
    filter: String,
    /// The revision to resume from.
    next: u64,
    /// Changes of the revision being received (printed once its id came).
    pending: Vec<KvEventBody>,
    printed: u64,
    limit: u64,
    json: bool,
}

impl Watched {
    /// Takes one event; false once `--count` changes were printed.
    fn on_event(&mut self, e: SseEvent) -> anyhow::Result<bool> {
        match e.event.as_str() {
            "put" | "delete" => {
                let change: KvEventBody = serde_json::from_str(&e.data)
                    .with_context(|| format!("a bad event {}", e.data))?;
                self.pending.push(change);
            }
            "compacted" => {
                let body = error_body(e.data.as_bytes());
                bail!("the watch fell behind what the store keeps: {}", body.error);
            }
            _ => return Ok(true),
        }
        let Some(id) = e.id else { return Ok(true) };
        let revision: u64 = id.parse().with_context(|| format!("a bad event id {id}"))?;
        for change in std::mem::take(&mut self.pending) {
            if self.printed == self.limit {
                break;
            }
            if self.json {
                println!("{}", serde_json::to_string(&change)?);
            } else {
                println!(
                    "{}\t{}\t{}\t{}",
                    change.revision,
                    change.kind,
                    change.kv.key,
                    shown(&change.kv)
                );
            }
            self.printed += 1;
        }
        self.next = revision + 1;
        Ok(self.printed < self.limit)
    }
}

async fn watch(a: WatchArgs) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::new(&a.cluster)?;
    let filter = match (&a.key, &a.prefix) {
        (Some(k), _) => format!("key={}", encode(k)),
        (None, p) => format!("prefix={}", encode(p.as_deref().unwrap_or(""))),
    };
    let next = match a.from_revision {
        Some(r) => r,
        // From the cluster's revision now (linearizable), so that a
        // reconnection before the first change loses none.
        None => {
            let answer = cluster.ask(Method::GET, "/v1/kv?limit=1", None, false).await?;
            match body_of::<KvListBody>(&answer)? {
                Ok(b) => b.revision + 1,
                Err(exit) => return Ok(exit.into()),
            }
        }
    };
    let mut w = Watched {
        filter,
        next,
        pending: Vec::new(),
        printed: 0,
        limit: a.count.unwrap_or(u64::MAX),
        json: a.json,
    };
    let mut backoff = WATCH_BACKOFF_MIN;
    for endpoint in cluster.endpoints.iter().cycle() {
        let url = format!("{endpoint}/v1/kv-watch?{}&from_revision={}", w.filter, w.next);
        w.pending.clear();
        let followed = tokio::select! {
            r = cluster.client.events(&url, None, |e| w.on_event(e)) => r,
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
        };
        if w.printed >= w.limit {
            return Ok(ExitCode::SUCCESS);
        }
        match followed {
            Ok(()) => eprintln!("{}  {endpoint}: stream ended; switching", timestamp()),
            Err(e) if e.downcast_ref::<AuthRefused>().is_some() => return Err(e),
            Err(e) => match e.downcast_ref::<Refused>() {
                Some(r) if r.status == StatusCode::GONE || r.status.is_client_error() => {
                    return Err(e)
                }
                _ => eprintln!("{}  {e:#}; trying the next endpoint", timestamp()),
            },
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_percent_encoded_but_their_slashes_kept() {
        assert_eq!(encode("app/config"), "app/config");
        assert_eq!(encode("a b?c&d=e%f+g#"), "a%20b%3Fc%26d%3De%25f%2Bg%23");
        assert_eq!(encode("ü/~x-y_z.1"), "%C3%BC/~x-y_z.1");
    }

    #[test]
    fn exit_statuses_follow_the_answers() {
        let unknown = ErrorBody { outcome: Some("unknown".into()), ..ErrorBody::default() };
        assert_eq!(exit_of(StatusCode::GATEWAY_TIMEOUT, &unknown), Exit::Unknown);
        assert_eq!(exit_of(StatusCode::GATEWAY_TIMEOUT, &ErrorBody::default()), Exit::Error);
        assert_eq!(exit_of(StatusCode::CONFLICT, &ErrorBody::default()), Exit::Conflict);
        assert_eq!(exit_of(StatusCode::PAYLOAD_TOO_LARGE, &ErrorBody::default()), Exit::Error);
        let e = outcome_of(UnknownOutcome(anyhow!("reset")).into()).unwrap();
        assert_eq!(e, ExitCode::from(3));
        assert!(outcome_of(anyhow!("other")).is_err());
    }

    #[test]
    fn stdin_values_are_bounded() {
        assert_eq!(read_limited(&b"abc"[..], 3, "v").unwrap(), b"abc");
        let err = read_limited(&b"abcd"[..], 3, "the value").unwrap_err().to_string();
        assert!(err.contains("larger than 3 bytes"), "{err}");
    }

    fn event(name: &str, id: Option<u64>, revision: u64, key: &str) -> SseEvent {
        let data = serde_json::json!({
            "type": name, "revision": revision, "key": key, "value": "v",
            "create_revision": 1, "mod_revision": revision, "version": 1
        });
        SseEvent { event: name.into(), id: id.map(|i| i.to_string()), data: data.to_string() }
    }

    #[test]
    fn a_watch_resumes_after_the_last_whole_revision() {
        let mut w = Watched {
            filter: String::new(),
            next: 1,
            pending: vec![],
            printed: 0,
            limit: 3,
            json: false,
        };
        assert!(w.on_event(event("put", Some(4), 4, "a")).unwrap());
        assert_eq!((w.next, w.printed), (5, 1));
        // The first change of a transaction: held until its revision's id.
        assert!(w.on_event(event("put", None, 6, "b")).unwrap());
        assert_eq!((w.next, w.printed, w.pending.len()), (5, 1, 1));
        assert!(!w.on_event(event("delete", Some(6), 6, "c")).unwrap(), "--count 3 reached");
        assert_eq!((w.next, w.printed), (7, 3));
        let compacted = SseEvent {
            event: "compacted".into(),
            id: None,
            data: r#"{"error":"revisions up to 9 were compacted","compacted":9,"current":12}"#
                .into(),
        };
        let err = w.on_event(compacted).unwrap_err().to_string();
        assert!(err.contains("compacted"), "{err}");
    }
}
