//! Data-driven scripts: a story told as commands, each stanza followed by the
//! trace it must produce (after etcd-raft's `testdata` scripts).
//!
//! A script is a sequence of stanzas separated by blank lines. A stanza is
//! one or more command lines, a line `----`, and the expected output: every
//! line up to the next blank line (or the end). Lines starting with `#`
//! between stanzas are comments.
//!
//! ```text
//! # Cold start, then the leader crashes.
//! cluster protocol=raft nodes=3
//! run 2s
//! ----
//! 1011.151ms n1 leader t1 (election-won)
//!
//! crash n1
//! run-until-leader
//! ----
//! 2927.113ms n2 leader t2 (election-won)
//! leader n2 after 928ms
//! ```
//!
//! Times are global, from the cluster's start.
//!
//! A script whose `cluster` commands leave out `protocol=` is a story shared
//! by every protocol: it runs once per [`ProtocolKind`], and where their
//! outputs differ, the expected output holds each, under a tag naming the
//! protocols that produce it (`[raft ranked]`, `[paxos]`).
//!
//! # Commands
//! Nodes are written `n1`; `leader` is the single node that leads now,
//! `followerK` the K-th running node that does not (in preference order),
//! and `let NAME NODE` names a node for later commands (printing `NAME: n3`),
//! so that a shared story need not know which node a protocol elects.
//! Durations are written `2s`, `150ms`, `40us` or `7ns`.
//! * `cluster [protocol=raft|ranked|paxos] [nodes=3] [seed=N] [latency=1ms]
//!   [jitter=0ms] [heartbeat=100ms] [timeout=1s] [drift=n2:+40000,n3:-100]
//!   [offset=n2:5s]` starts a cluster of [`super::Cluster`]`<Elector>`;
//! * `show ...` sets what later commands print, with the keys any command
//!   accepts for itself: `roles=none|leadership|all` (default leadership:
//!   taking and leaving office), `leaders=on|off` (`LeaderChanged` events),
//!   `persist=on|off`, `msgs=KIND,KIND|*|none` (messages sent, by
//!   [`crate::Message::kind`]) and `inputs=on|off` (timeouts, crashes, ...);
//! * `run DURATION`, `run-until-leader [not=NODE] [max=DURATION]` (prints the
//!   leader and how long it took);
//! * `crash NODE`, `restart NODE`, `pause NODE`, `resume NODE`,
//!   `timeout NODE` (fire its timer now), `shutdown NODE`,
//!   `transfer FROM TO` (prints `ok` or the refusal);
//! * `notify-dead NODE [to=NODE]`: a death notice about `NODE`, as a spy that
//!   knows would send it ([`crate::Protocol::handle_peer_dead`]), to one
//!   node or to every running node but `NODE`;
//! * `cut A B` (both ways), `cut A->B` (one way), `isolate NODE`,
//!   `deafen NODE`, `heal` (every link), `heal A B`;
//! * `fail-storage NODE [tell]` (writes fail; with `tell` the node is told at
//!   once), `recover-storage NODE`;
//! * `status [NODE...]`, `leaders`, `history` (every node that took office),
//!   `elections` (candidacies started).
//!
//! Every command prints the trace of what it caused (as [`super::render`]
//! shows it), then its own result.

use super::trace::{fmt_hard_state, render, RoleChanges, Show};
use super::{fmt_time, Clock, Cluster, Liveness, Setup};
use crate::elector::Elector;
use crate::kind::ProtocolKind;
use crate::protocol::Protocol;
use crate::types::NodeId;
use rand_pcg::Pcg64Mcg;
use std::collections::BTreeMap;
use std::time::Duration;

/// The clusters scripts run.
type Elected = Cluster<Elector<Pcg64Mcg>>;

/// The line between a stanza's commands and its expected output.
pub const SEPARATOR: &str = "----";

/// The largest cluster a script may start.
pub const MAX_SCRIPT_NODES: u64 = 15;

/// Longest span a single `run` may cover: keeps a typo from running for ages.
pub const MAX_RUN: Duration = Duration::from_secs(3600);

/// A script that cannot run, with the line at fault (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ScriptError {
    /// The line.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, ScriptError> {
    Err(ScriptError { line, message: message.into() })
}

/// One stanza of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stanza {
    /// The commands, with their line numbers.
    pub commands: Vec<(usize, String)>,
    /// The expected output, as written.
    pub expected: Vec<String>,
    /// Index (0-based) of the first line of the expected output in the script.
    expected_at: usize,
}

/// Splits a script into stanzas.
pub fn parse(text: &str) -> Result<Vec<Stanza>, ScriptError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut stanzas = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end();
        if line.is_empty() || line.starts_with('#') {
            i += 1;
            continue;
        }
        let mut commands = Vec::new();
        while i < lines.len() && lines[i].trim_end() != SEPARATOR {
            let command = lines[i].trim();
            if command.is_empty() {
                return err(
                    i + 1,
                    format!("a stanza needs a `{SEPARATOR}` line after its commands"),
                );
            }
            if !command.starts_with('#') {
                commands.push((i + 1, command.to_string()));
            }
            i += 1;
        }
        if i == lines.len() {
            return err(i, format!("the last stanza has no `{SEPARATOR}` line"));
        }
        i += 1;
        let expected_at = i;
        let mut expected = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            expected.push(lines[i].trim_end().to_string());
            i += 1;
        }
        stanzas.push(Stanza { commands, expected, expected_at });
    }
    Ok(stanzas)
}

/// The protocols a script runs under: the one its `cluster` commands name
/// (`None`: as written), or every protocol when one of them names none.
pub fn protocols(stanzas: &[Stanza]) -> Vec<Option<ProtocolKind>> {
    let shared = stanzas
        .iter()
        .flat_map(|s| &s.commands)
        .any(|(_, c)| c.split_whitespace().next() == Some("cluster") && !c.contains("protocol="));
    if shared {
        ProtocolKind::ALL.into_iter().map(Some).collect()
    } else {
        vec![None]
    }
}

/// Runs `stanzas` with `protocol` for `cluster` commands that name none;
/// returns each stanza's output.
pub fn run(
    stanzas: &[Stanza],
    protocol: Option<ProtocolKind>,
) -> Result<Vec<Vec<String>>, ScriptError> {
    let mut interpreter = Interpreter::new(protocol);
    stanzas
        .iter()
        .map(|s| {
            let mut out = Vec::new();
            for (line, command) in &s.commands {
                out.extend(interpreter.command(*line, command)?);
            }
            Ok(out)
        })
        .collect()
}

/// The expected output of a stanza from its output under each protocol run:
/// as is when they agree, otherwise grouped under `[protocols]` tags.
pub fn merge(outputs: &[(Option<ProtocolKind>, Vec<String>)]) -> Vec<String> {
    let mut groups: Vec<(Vec<&str>, &Vec<String>)> = Vec::new();
    for (kind, lines) in outputs {
        let name = kind.map_or("all", ProtocolKind::as_str);
        match groups.iter_mut().find(|(_, l)| *l == lines) {
            Some((names, _)) => names.push(name),
            None => groups.push((vec![name], lines)),
        }
    }
    if groups.len() <= 1 {
        return groups.first().map(|(_, l)| (*l).clone()).unwrap_or_default();
    }
    let mut merged = Vec::new();
    for (names, lines) in groups {
        merged.push(format!("[{}]", names.join(" ")));
        merged.extend(lines.iter().cloned());
    }
    merged
}

/// Runs a script under every protocol it asks for and returns its text with
/// each stanza's expected output replaced by the actual one. A script passes
/// when the result equals its text.
pub fn rewrite(text: &str) -> Result<String, ScriptError> {
    let stanzas = parse(text)?;
    let runs: Vec<(Option<ProtocolKind>, Vec<Vec<String>>)> = protocols(&stanzas)
        .into_iter()
        .map(|p| run(&stanzas, p).map(|out| (p, out)))
        .collect::<Result<_, _>>()?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut next = 0;
    for (i, stanza) in stanzas.iter().enumerate() {
        out.extend(lines[next..stanza.expected_at].iter().map(|l| l.to_string()));
        let outputs: Vec<_> = runs.iter().map(|(p, o)| (*p, o[i].clone())).collect();
        out.extend(merge(&outputs));
        next = stanza.expected_at + stanza.expected.len();
    }
    out.extend(lines[next..].iter().map(|l| l.to_string()));
    let mut result = out.join("\n");
    result.push('\n');
    Ok(result)
}

/// Runs script commands against one cluster.
pub struct Interpreter {
    protocol: Option<ProtocolKind>,
    cluster: Option<Elected>,
    show: Show,
    /// Names given by `let`.
    names: BTreeMap<String, NodeId>,
}

/// `key=value` arguments and plain words of one command.
struct Args<'a> {
    line: usize,
    words: Vec<&'a str>,
    keys: BTreeMap<&'a str, &'a str>,
}

impl<'a> Args<'a> {
    fn new(line: usize, parts: &[&'a str]) -> Self {
        let mut words = Vec::new();
        let mut keys = BTreeMap::new();
        for part in parts {
            match part.split_once('=') {
                Some((k, v)) => {
                    keys.insert(k, v);
                }
                None => words.push(*part),
            }
        }
        Args { line, words, keys }
    }

    fn take(&mut self, key: &str) -> Option<&'a str> {
        self.keys.remove(key)
    }

    fn node(&self, word: &str) -> Result<NodeId, ScriptError> {
        match word.strip_prefix('n').and_then(|d| d.parse::<u64>().ok()) {
            Some(i) if i > 0 => Ok(NodeId(i)),
            _ => err(self.line, format!("{word:?} is not a node: write n1, n2, ...")),
        }
    }

    fn duration(&self, text: &str) -> Result<Duration, ScriptError> {
        let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (value, unit) = text.split_at(digits);
        let value: u64 = match value.parse() {
            Ok(v) => v,
            Err(_) => {
                return err(self.line, format!("{text:?} is not a duration such as 2s or 150ms"))
            }
        };
        Ok(match unit {
            "s" => Duration::from_secs(value),
            "ms" => Duration::from_millis(value),
            "us" => Duration::from_micros(value),
            "ns" => Duration::from_nanos(value),
            _ => return err(self.line, format!("{text:?}: the unit must be s, ms, us or ns")),
        })
    }

    /// Fails on keys nobody took.
    fn finish(&self) -> Result<(), ScriptError> {
        match self.keys.keys().next() {
            Some(k) => err(self.line, format!("unknown argument {k:?}")),
            None => Ok(()),
        }
    }
}

fn on_off(line: usize, key: &str, value: &str) -> Result<bool, ScriptError> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => err(line, format!("{key}= takes on or off, not {value:?}")),
    }
}

/// Applies the `show` keys of `args` to `show`.
fn read_show(args: &mut Args, show: &mut Show) -> Result<(), ScriptError> {
    if let Some(v) = args.take("roles") {
        show.roles = match v {
            "none" => RoleChanges::None,
            "leadership" => RoleChanges::Leadership,
            "all" => RoleChanges::All,
            _ => return err(args.line, format!("roles= takes none, leadership or all, not {v:?}")),
        };
    }
    if let Some(v) = args.take("leaders") {
        show.leader_changes = on_off(args.line, "leaders", v)?;
    }
    if let Some(v) = args.take("persist") {
        show.persist = on_off(args.line, "persist", v)?;
    }
    if let Some(v) = args.take("inputs") {
        show.inputs = on_off(args.line, "inputs", v)?;
    }
    if let Some(v) = args.take("msgs") {
        show.messages =
            if v == "none" { Vec::new() } else { v.split(',').map(str::to_string).collect() };
    }
    Ok(())
}

impl Interpreter {
    /// An interpreter whose `cluster` commands default to `protocol`.
    pub fn new(protocol: Option<ProtocolKind>) -> Self {
        Interpreter { protocol, cluster: None, show: Show::default(), names: BTreeMap::new() }
    }

    /// The cluster started by the last `cluster` command.
    pub fn cluster(&self) -> Option<&Elected> {
        self.cluster.as_ref()
    }

    /// Runs one command (from script line `line`); returns what it prints.
    pub fn command(&mut self, line: usize, command: &str) -> Result<Vec<String>, ScriptError> {
        let command = substitute(command, &self.names);
        let parts: Vec<&str> = command.split_whitespace().collect();
        let Some((&name, rest)) = parts.split_first() else { return Ok(Vec::new()) };
        let mut args = Args::new(line, rest);
        if name == "cluster" {
            self.cluster = Some(self.start(&mut args)?);
            self.names.clear();
            args.finish()?;
            return Ok(Vec::new());
        }
        if name == "show" {
            read_show(&mut args, &mut self.show)?;
            args.finish()?;
            return Ok(Vec::new());
        }
        let mut show = self.show.clone();
        read_show(&mut args, &mut show)?;
        let Some(c) = self.cluster.as_mut() else {
            return err(line, "start a cluster first: cluster protocol=raft nodes=3");
        };
        if name == "let" {
            let [var, word] = args.words[..] else { return err(line, "let NAME NODE") };
            let taken = resolve(c, line, var, false).is_ok() || self.names.contains_key(var);
            let valid = var.chars().all(|ch| ch.is_ascii_lowercase() || ch == '-');
            if taken || !valid {
                return err(line, format!("{var:?} cannot be a name: use fresh lower-case words"));
            }
            let id = resolve(c, line, word, true)?;
            self.names.insert(var.to_string(), id);
            args.finish()?;
            return Ok(vec![format!("{var}: {id:?}")]);
        }
        let from = c.steps().len();
        let mut result = Vec::new();
        act(c, name, &mut args, &mut result)?;
        args.finish()?;
        let mut out = render(c.steps(), from, &show);
        out.extend(result);
        Ok(out)
    }

    fn start(&self, args: &mut Args) -> Result<Elected, ScriptError> {
        let line = args.line;
        let protocol = match args.take("protocol") {
            Some(p) => p.parse::<ProtocolKind>().or_else(|e| err(line, e.to_string()))?,
            None => match self.protocol {
                Some(p) => p,
                None => return err(line, "name the protocol: cluster protocol=raft"),
            },
        };
        let nodes: u64 = match args.take("nodes").map(str::parse) {
            None => 3,
            Some(Ok(n)) if (1..=MAX_SCRIPT_NODES).contains(&n) => n,
            Some(_) => return err(line, format!("nodes= takes 1 to {MAX_SCRIPT_NODES}")),
        };
        let mut setup = Setup::new(nodes);
        if let Some(v) = args.take("seed") {
            setup.seed = v.parse().or_else(|_| err(line, format!("seed={v:?} is not a number")))?;
        }
        for (key, field) in [
            ("latency", &mut setup.latency),
            ("jitter", &mut setup.jitter),
            ("heartbeat", &mut setup.heartbeat),
            ("timeout", &mut setup.election_timeout),
        ] {
            if let Some(v) = args.take(key) {
                *field = args.duration(v)?;
            }
        }
        read_clocks(args, &mut setup)?;
        for id in setup.ids() {
            if let Err(e) = setup.config(id).validate_for(protocol) {
                return err(line, e.to_string());
            }
        }
        Ok(setup.elector(protocol))
    }
}

/// `drift=n2:+40000,n3:-100` and `offset=n2:5s`.
fn read_clocks(args: &mut Args, setup: &mut Setup) -> Result<(), ScriptError> {
    let line = args.line;
    for key in ["drift", "offset"] {
        let Some(list) = args.take(key) else { continue };
        for item in list.split(',') {
            let Some((node, value)) = item.split_once(':') else {
                return err(line, format!("{key}= takes NODE:VALUE, not {item:?}"));
            };
            let id = args.node(node)?;
            if id.0 > setup.size {
                return err(line, format!("{node} is not in a cluster of {}", setup.size));
            }
            let clock = setup.clocks.entry(id).or_insert(Clock::PERFECT);
            if key == "drift" {
                match value.parse::<i64>() {
                    Ok(ppm) if ppm.abs() < 1_000_000 => clock.rate_ppm = ppm,
                    _ => {
                        return err(line, format!("drift {value:?}: parts per million, |x| < 10^6"))
                    }
                }
            } else {
                clock.offset = args.duration(value)?;
            }
        }
    }
    Ok(())
}

/// Node `word`: `n2`; `leader`, the single node that leads now; or
/// `followerK`, the K-th running node that does not lead, in preference
/// order. It must be in the cluster when `member`.
fn resolve(c: &Elected, line: usize, word: &str, member: bool) -> Result<NodeId, ScriptError> {
    let id = if word == "leader" {
        match c.leaders()[..] {
            [id] => id,
            ref ids => return err(line, format!("`leader` needs one leader, not {}", names(ids))),
        }
    } else if let Some(k) = word.strip_prefix("follower").and_then(|k| k.parse::<usize>().ok()) {
        let leaders = c.leaders();
        let running = c.ids().iter().copied().filter(|&id| c.liveness(id) == Liveness::Up);
        match running.filter(|id| !leaders.contains(id)).nth(k.wrapping_sub(1)) {
            Some(id) => id,
            None => return err(line, format!("there is no {word}")),
        }
    } else {
        match word.strip_prefix('n').and_then(|d| d.parse::<u64>().ok()) {
            Some(i) if i > 0 => NodeId(i),
            _ => {
                let hint = "write n1, n2, ..., leader, follower1, ... or a name given by `let`";
                return err(line, format!("{word:?} is not a node: {hint}"));
            }
        }
    };
    if member && !c.ids().contains(&id) {
        return err(line, format!("{id:?} is not in this cluster of {}", c.ids().len()));
    }
    Ok(id)
}

/// `command` with every name bound by `let` replaced by its node, in plain
/// words, `key=NAME` and `A->B`.
fn substitute(command: &str, names: &BTreeMap<String, NodeId>) -> String {
    let node = |w: &str| names.get(w).map_or_else(|| w.to_string(), |id| format!("{id:?}"));
    let word = |w: &str| match w.split_once('=') {
        Some((k, v)) => format!("{k}={}", node(v)),
        None => match w.split_once("->") {
            Some((a, b)) => format!("{}->{}", node(a), node(b)),
            None => node(w),
        },
    };
    command.split_whitespace().map(word).collect::<Vec<_>>().join(" ")
}

/// The command's `count` words, as nodes of the cluster.
fn nodes(c: &Elected, args: &Args, count: usize) -> Result<Vec<NodeId>, ScriptError> {
    if args.words.len() != count {
        return err(args.line, format!("expected {count} node(s), got {:?}", args.words));
    }
    args.words.iter().map(|w| resolve(c, args.line, w, true)).collect()
}

/// Runs command `name` (other than `cluster` and `show`) on `c`.
fn act(
    c: &mut Elected,
    name: &str,
    args: &mut Args,
    result: &mut Vec<String>,
) -> Result<(), ScriptError> {
    let line = args.line;
    let one = |args: &Args| -> Result<NodeId, ScriptError> { Ok(nodes(c, args, 1)?[0]) };
    match name {
        "run" => {
            let [d] = args.words[..] else { return err(line, "run DURATION") };
            let d = args.duration(d)?;
            if d > MAX_RUN {
                return err(line, format!("runs are limited to {MAX_RUN:?}"));
            }
            c.run_for(d);
        }
        "run-until-leader" => run_until_leader(c, args, result)?,
        "crash" => c.crash(one(args)?),
        "restart" => c.restart(one(args)?),
        "pause" => c.pause(one(args)?),
        "resume" => {
            let id = one(args)?;
            if c.liveness(id) != Liveness::Paused {
                return err(line, format!("{id:?} is not paused"));
            }
            c.resume(id);
        }
        "timeout" => c.timeout(one(args)?),
        "notify-dead" => notify_dead(c, args)?,
        "shutdown" => c.shutdown(one(args)?),
        "isolate" => c.isolate(one(args)?),
        "deafen" => c.deafen(one(args)?),
        "transfer" => {
            let [from, to] = args.words[..] else { return err(line, "transfer FROM TO") };
            let (from, to) = (resolve(c, line, from, true)?, resolve(c, line, to, false)?);
            match c.transfer(from, to) {
                Ok(()) => result.push("ok".to_string()),
                Err(e) => result.push(format!("refused: {e}")),
            }
        }
        "cut" | "heal" => links(c, name, args)?,
        "fail-storage" => {
            let tell = args.words.last() == Some(&"tell");
            if tell {
                args.words.pop();
            }
            let id = one(args)?;
            c.fail_storage(id);
            if tell {
                c.tell_persist_failed(id);
            }
        }
        "recover-storage" => c.recover_storage(one(args)?),
        "status" => status(c, args, result)?,
        "leaders" => result.push(format!("leaders: {}", names(&c.leaders()))),
        "history" => {
            for r in c.leader_history() {
                result.push(format!("{} {:?} t{}", fmt_time(r.at), r.node, r.term.0));
            }
        }
        "elections" => result.push(format!("elections: {}", c.elections())),
        _ => return err(line, format!("unknown command {name:?}")),
    }
    Ok(())
}

/// `notify-dead DEAD [to=NODE]`: a death notice to one node, or to every
/// running node but DEAD.
fn notify_dead(c: &mut Elected, args: &mut Args) -> Result<(), ScriptError> {
    let line = args.line;
    let to = match args.take("to") {
        Some(w) => Some(resolve(c, line, w, true)?),
        None => None,
    };
    // The node reported dead need not be a voter: the core refuses such a
    // notice, and a script may show it.
    let [dead] = args.words[..] else { return err(line, "notify-dead NODE [to=NODE]") };
    let dead = resolve(c, line, dead, false)?;
    match to {
        Some(to) => c.notify_dead(to, dead),
        None => c.notify_dead_all(dead),
    }
    Ok(())
}

fn run_until_leader(
    c: &mut Elected,
    args: &mut Args,
    result: &mut Vec<String>,
) -> Result<(), ScriptError> {
    let line = args.line;
    let not = match args.take("not") {
        Some(w) => Some(resolve(c, line, w, true)?),
        None => None,
    };
    let max = match args.take("max") {
        Some(v) => args.duration(v)?,
        None => c.setup().election_timeout * 5,
    };
    if !args.words.is_empty() || max > MAX_RUN {
        return err(line, "run-until-leader [not=NODE] [max=DURATION]");
    }
    let start = c.now();
    while c.now().saturating_since(start) < max {
        c.run_for(Duration::from_millis(1));
        if let Some(&x) = c.leaders().iter().find(|&&x| Some(x) != not) {
            let took = c.now().saturating_since(start);
            result.push(format!("leader {x:?} after {}ms", took.as_millis()));
            return Ok(());
        }
    }
    result.push(format!("no leader within {}ms", max.as_millis()));
    Ok(())
}

fn links(c: &mut Elected, name: &str, args: &Args) -> Result<(), ScriptError> {
    let line = args.line;
    let pair = |a: &str, b: &str| -> Result<(NodeId, NodeId), ScriptError> {
        let (a, b) = (resolve(c, line, a, true)?, resolve(c, line, b, true)?);
        if a == b {
            return err(line, format!("a link joins two nodes, not {a:?} and itself"));
        }
        Ok((a, b))
    };
    match (name, &args.words[..]) {
        ("heal", []) => c.heal(),
        ("heal", [a, b]) => {
            let (a, b) = pair(a, b)?;
            c.heal_link(a, b);
        }
        ("cut", [a, b]) => {
            let (a, b) = pair(a, b)?;
            c.cut(a, b);
        }
        ("cut", [ab]) if ab.contains("->") => {
            let (a, b) = ab.split_once("->").expect("checked");
            let (a, b) = pair(a, b)?;
            c.cut_one_way(a, b);
        }
        _ => return err(line, "cut A B | cut A->B | heal | heal A B"),
    }
    Ok(())
}

fn names(ids: &[NodeId]) -> String {
    if ids.is_empty() {
        return "none".to_string();
    }
    ids.iter().map(|id| format!("{id:?}")).collect::<Vec<_>>().join(" ")
}

/// `n1 leader t1 vote=n1 leader=n1 token=1 leading`, and what else is unusual.
fn status(c: &Elected, args: &Args, result: &mut Vec<String>) -> Result<(), ScriptError> {
    let ids =
        if args.words.is_empty() { c.ids().to_vec() } else { nodes(c, args, args.words.len())? };
    for id in ids {
        let s = c.status(id);
        let hs = c.node(id).hard_state();
        let mut text = format!(
            "{id:?} {} {} leader={}",
            s.role,
            fmt_hard_state(hs),
            names(&s.leader.into_iter().collect::<Vec<_>>())
        );
        if let Some(t) = s.fencing_token {
            text.push_str(&format!(" token={t}"));
        }
        if c.is_leader(id) {
            text.push_str(" leading");
        }
        if s.storage_failed {
            text.push_str(" storage-failed");
        }
        if c.durable(id) != hs {
            text.push_str(&format!(" durable=({})", fmt_hard_state(c.durable(id))));
        }
        match c.liveness(id) {
            Liveness::Up => {}
            Liveness::Paused => text.push_str(" paused"),
            Liveness::Down => text.push_str(" down"),
        }
        result.push(text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stanzas_and_rewrites_expectations() {
        let text =
            "# a comment\ncluster protocol=raft nodes=1\nrun 3s\n----\nstale\n\nleaders\n----\n";
        let stanzas = parse(text).unwrap();
        assert_eq!(stanzas.len(), 2);
        assert_eq!(stanzas[0].commands.len(), 2);
        assert_eq!(stanzas[0].expected, vec!["stale"]);
        assert_eq!(protocols(&stanzas), vec![None]);
        let new = rewrite(text).unwrap();
        assert!(
            new.starts_with("# a comment\ncluster protocol=raft nodes=1\nrun 3s\n----\n"),
            "{new}"
        );
        assert!(new.ends_with("\nleaders\n----\nleaders: n1\n"), "{new}");
        assert_eq!(rewrite(&new).unwrap(), new, "a rewritten script passes");
    }

    #[test]
    fn bad_scripts_say_what_is_wrong() {
        let e = rewrite("cluster protocol=zab\n----\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("unknown protocol"), "{e}");
        let e = rewrite("cluster protocol=raft\nrun 2 s\n----\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: run DURATION");
        let e = rewrite("cluster protocol=raft\ncrash n9\n----\n").unwrap_err();
        assert!(e.message.contains("not in this cluster"), "{e}");
        let e = rewrite("cluster protocol=raft\nrun 1s\n").unwrap_err();
        assert!(e.message.contains("no `----` line"), "{e}");
        let e = rewrite("cluster protocol=raft colour=red\n----\n").unwrap_err();
        assert!(e.message.contains("unknown argument \"colour\""), "{e}");
        let e = rewrite("leaders\n----\n").unwrap_err();
        assert!(e.message.contains("start a cluster first"), "{e}");
    }

    #[test]
    fn shared_scripts_run_for_every_protocol_and_tag_differences() {
        let stanzas = parse("cluster nodes=1\n----\n").unwrap();
        assert_eq!(protocols(&stanzas).len(), ProtocolKind::ALL.len());
        let same = vec!["x".to_string()];
        let other = vec!["y".to_string()];
        let outputs = [
            (Some(ProtocolKind::Raft), same.clone()),
            (Some(ProtocolKind::Ranked), other.clone()),
            (Some(ProtocolKind::Paxos), same.clone()),
        ];
        assert_eq!(merge(&outputs), vec!["[raft paxos]", "x", "[ranked]", "y"]);
        assert_eq!(merge(&outputs[..1]), vec!["x"]);
    }
}
