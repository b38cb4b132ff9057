//! What a [`super::Cluster`] records, and its stable text form.

use super::START;
use crate::electorate::Electorate;
use crate::message::Message;
use crate::protocol::{Event, HardState, Output, Reason, TransferError};
use crate::time::Instant;
use crate::types::{NodeId, Role};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One input to one node, with the outputs it produced as they were handled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Global time of the input.
    pub at: Instant,
    /// The node.
    pub node: NodeId,
    /// What happened to it.
    pub input: Input,
    /// Its outputs, in order ([`crate::contract::drain`] may handle several).
    pub outputs: Vec<Handled>,
}

/// An input to a node, or a change of its circumstances.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The node was built from its durable state (the cluster's boot count).
    Boot(u64),
    /// A message from the network.
    Message {
        /// The sender.
        from: NodeId,
        /// The message.
        msg: Message,
        /// True when the test handed it over directly, bypassing the network.
        injected: bool,
    },
    /// Its timer fired.
    Timeout,
    /// It was asked to hand leadership to `to`.
    Transfer {
        /// The designated successor.
        to: NodeId,
        /// The protocol's answer.
        result: Result<(), TransferError>,
    },
    /// Graceful stop.
    Shutdown,
    /// Its replicated log gave up the leadership of this token.
    GiveUp(crate::FencingToken),
    /// It was told that durable state could not be written.
    PersistFailed,
    /// It was told that durable state is written again.
    PersistRecovered,
    /// The test drove the protocol directly ([`super::Cluster::node_mut`])
    /// and had its output handled.
    Direct,
    /// It crashed (its memory is lost).
    Crash,
    /// It stopped taking steps, keeping its memory.
    Pause,
    /// It takes steps again.
    Resume,
    /// Its storage started failing every write.
    StorageFailing,
    /// A spy that knows reported `peer` dead (a death notice).
    PeerDead {
        /// The node reported dead.
        peer: NodeId,
    },
    /// It was given the configuration its log holds.
    Electorate(Electorate),
}

/// One output as the driver handled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handled {
    /// The output.
    pub output: Output,
    /// True when `output.persist` could not be written: its messages were
    /// dropped and the protocol was told.
    pub write_failed: bool,
}

/// Which role changes a rendering shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoleChanges {
    /// None.
    None,
    /// Becoming leader and ceasing to be leader.
    #[default]
    Leadership,
    /// Every role change.
    All,
}

/// What [`render`] shows of the steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Show {
    /// Role changes.
    pub roles: RoleChanges,
    /// `LeaderChanged` events.
    pub leader_changes: bool,
    /// Writes of durable state, failed ones included.
    pub persist: bool,
    /// Messages sent (and dropped by a failed write) whose kind
    /// ([`Message::kind`]) is listed; `"*"` shows every kind.
    pub messages: Vec<String>,
    /// Inputs other than message deliveries (timeouts, crashes, transfers, ...).
    pub inputs: bool,
}

impl Show {
    fn message(&self, msg: &Message) -> bool {
        self.messages.iter().any(|k| k == "*" || k == msg.kind())
    }
}

/// Time since [`START`] in milliseconds: `623ms`, or `623.417ms` when not whole.
pub fn fmt_time(at: Instant) -> String {
    let ns = at.as_nanos().saturating_sub(START.as_nanos());
    let (ms, rest) = (ns / 1_000_000, ns % 1_000_000);
    if rest == 0 {
        format!("{ms}ms")
    } else {
        format!("{ms}.{:03}ms", rest / 1000)
    }
}

/// `ElectionTimeout` as `election-timeout`.
fn kebab(reason: Reason) -> String {
    let mut out = String::new();
    for (i, ch) in format!("{reason:?}").chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

fn fmt_node(id: Option<NodeId>) -> String {
    id.map_or_else(|| "none".to_string(), |id| format!("{id:?}"))
}

/// `t1 vote=n2`: a durable state.
pub(crate) fn fmt_hard_state(hs: HardState) -> String {
    format!("t{} vote={}", hs.term.0, fmt_node(hs.voted_for))
}

/// `vote t1`, `vote_response t1 grant`: a message by kind and term, and
/// whether it grants a vote (the only content every protocol shares).
pub(crate) fn fmt_message(msg: &Message) -> String {
    let grant = if msg.vote_grant().is_some() { " grant" } else { "" };
    format!("{} t{}{grant}", msg.kind(), msg.term().0)
}

fn fmt_input(input: &Input) -> Option<String> {
    Some(match input {
        Input::Boot(_) => "boot".to_string(),
        Input::Message { .. } => return None,
        Input::Timeout => "timeout".to_string(),
        Input::Transfer { to, result: Ok(()) } => format!("transfer to {to:?}"),
        Input::Transfer { to, result: Err(e) } => format!("transfer to {to:?} refused: {e}"),
        Input::Shutdown => "shutdown".to_string(),
        Input::GiveUp(t) => format!("told: the log gave up token {t}"),
        Input::PersistFailed => "told: persist failed".to_string(),
        Input::PersistRecovered => "told: persist recovered".to_string(),
        Input::Direct => "driven directly".to_string(),
        Input::Crash => "crash".to_string(),
        Input::Pause => "pause".to_string(),
        Input::Resume => "resume".to_string(),
        Input::StorageFailing => "storage failing".to_string(),
        Input::PeerDead { peer } => format!("told: {peer:?} is dead"),
        Input::Electorate(e) => format!("told: {e}"),
    })
}

/// The text of `steps[from..]` that `show` asks for, one line per item.
/// Earlier steps are read only to know each node's role before the window.
pub fn render(steps: &[Step], from: usize, show: &Show) -> Vec<String> {
    let mut roles: BTreeMap<NodeId, Role> = BTreeMap::new();
    let mut lines = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let visible = i >= from;
        let head = format!("{} {:?}", fmt_time(step.at), step.node);
        if matches!(step.input, Input::Boot(_) | Input::Crash) {
            roles.insert(step.node, Role::Follower);
        }
        if visible && show.inputs {
            if let Some(text) = fmt_input(&step.input) {
                lines.push(format!("{head} {text}"));
            }
        }
        for handled in &step.outputs {
            let out = &handled.output;
            if visible {
                render_output(&head, handled, show, &mut lines);
            }
            for event in &out.events {
                let Event::RoleChanged { role, .. } = event else {
                    // A resignation or a death shows as the leader change it causes.
                    let shown =
                        !matches!(event, Event::LeaderResigned { .. } | Event::LeaderDied { .. });
                    if visible && show.leader_changes && shown {
                        lines.push(format!("{head} {}", fmt_event(event)));
                    }
                    continue;
                };
                let before = roles.insert(step.node, *role).unwrap_or(Role::Follower);
                let shown = match show.roles {
                    RoleChanges::None => false,
                    RoleChanges::Leadership => *role == Role::Leader || before == Role::Leader,
                    RoleChanges::All => true,
                };
                if visible && shown {
                    lines.push(format!("{head} {}", fmt_event(event)));
                }
            }
        }
    }
    lines
}

fn render_output(head: &str, handled: &Handled, show: &Show, lines: &mut Vec<String>) {
    let out = &handled.output;
    if let Some(hs) = out.persist.filter(|_| show.persist) {
        let failed = if handled.write_failed { " FAILED" } else { "" };
        lines.push(format!("{head} persist {}{failed}", fmt_hard_state(hs)));
    }
    let arrow = if handled.write_failed { "-x" } else { "->" };
    for (to, msg) in out.messages.iter().filter(|(_, m)| show.message(m)) {
        lines.push(format!("{head} {arrow} {to:?} {}", fmt_message(msg)));
    }
}

/// `leader n1 t1 token=1`: an event in text.
pub(crate) fn fmt_event(event: &Event) -> String {
    match event {
        Event::RoleChanged { role, term, reason } => {
            format!("{role} t{} ({})", term.0, kebab(*reason))
        }
        Event::LeaderChanged { leader, term, fencing_token } => {
            let token = fencing_token.map_or(String::new(), |t| format!(" token={t}"));
            format!("leader {} t{}{token}", fmt_node(*leader), term.0)
        }
        Event::LeaderResigned { leader, term, successor } => {
            format!(
                "resigned {} t{} successor {}",
                fmt_node(Some(*leader)),
                term.0,
                fmt_node(*successor)
            )
        }
        Event::LeaderDied { leader, term } => {
            format!("died {} t{}", fmt_node(Some(*leader)), term.0)
        }
        Event::Halted { reason } => format!("halted: {reason}"),
    }
}

/// Every step in text: inputs, writes, messages and events (a full dump, for
/// debugging a failing test).
pub fn dump(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        let head = format!("{} {:?}", fmt_time(step.at), step.node);
        match &step.input {
            Input::Message { from, msg, injected } => {
                let how = if *injected { " (injected)" } else { "" };
                let _ = writeln!(text, "{head} <- {from:?} {}{how}", fmt_message(msg));
            }
            other => {
                let _ = writeln!(text, "{head} {}", fmt_input(other).unwrap_or_default());
            }
        }
        for handled in &step.outputs {
            let all = Show { persist: true, messages: vec!["*".into()], ..Show::default() };
            let mut lines = Vec::new();
            render_output(&head, handled, &all, &mut lines);
            lines.extend(handled.output.events.iter().map(|e| format!("{head} {}", fmt_event(e))));
            for line in lines {
                let _ = writeln!(text, "{line}");
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Term;
    use std::time::Duration;

    #[test]
    fn times_and_reasons_read_well() {
        assert_eq!(fmt_time(START + Duration::from_millis(623)), "623ms");
        assert_eq!(fmt_time(START + Duration::from_micros(623_417)), "623.417ms");
        assert_eq!(kebab(Reason::ElectionTimeout), "election-timeout");
        assert_eq!(kebab(Reason::Startup), "startup");
        let e = Event::LeaderChanged {
            leader: Some(NodeId(2)),
            term: Term(3),
            fencing_token: Some(crate::FencingToken(3)),
        };
        assert_eq!(fmt_event(&e), "leader n2 t3 token=3");
        let m = Message::VoteResponse { term: Term(4), granted: true };
        assert_eq!(fmt_message(&m), "vote_response t4 grant");
    }

    #[test]
    fn leadership_view_shows_gaining_and_losing_it() {
        let step = |ms, role, reason| Step {
            at: START + Duration::from_millis(ms),
            node: NodeId(1),
            input: Input::Timeout,
            outputs: vec![Handled {
                output: Output {
                    events: vec![Event::RoleChanged { role, term: Term(1), reason }],
                    ..Output::default()
                },
                write_failed: false,
            }],
        };
        let steps = [
            step(1, Role::PreCandidate, Reason::ElectionTimeout),
            step(2, Role::Candidate, Reason::PreVoteWon),
            step(3, Role::Leader, Reason::ElectionWon),
            step(4, Role::Follower, Reason::QuorumLost),
            step(5, Role::PreCandidate, Reason::ElectionTimeout),
        ];
        let lines = render(&steps, 0, &Show::default());
        assert_eq!(lines, ["3ms n1 leader t1 (election-won)", "4ms n1 follower t1 (quorum-lost)"]);
        assert_eq!(render(&steps, 3, &Show::default()), ["4ms n1 follower t1 (quorum-lost)"]);
    }
}
