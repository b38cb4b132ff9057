//! The peer wire, as an acceptor reads it: the input is the byte stream a
//! peer sends, cut into frames by the transport's length-delimited codec. The
//! first frame must pass the handshake check (`transport::check_hello`); the
//! election messages after it go to an election core of the protocol the
//! hello named, as the driver would feed them. The clock moves a millisecond
//! per frame, and a ping moves it by its nonce (modulo a few seconds) so the
//! input controls time too; timers fire when due. Every frame is also checked as a dialer would check a
//! `HelloAck` (`transport::check_hello_ack`).
//!
//! After the handshake, frames may be as large as the replicated log's
//! ([`wire::MAX_DATA_FRAME_LEN`]), and its messages go to a replica of the
//! key-value store, as the log task would feed them.
//!
//! Properties: nothing panics; a decoded frame encodes back to the same frame
//! in no more bytes; the core never halts (a halt is a broken invariant: a
//! hostile peer must not be able to cause one).

use bytes::BytesMut;
use rand_pcg::Pcg64Mcg;
use std::time::Duration;
use tenure_core::{Config, Elector, Event, Instant, Message, NodeId, Protocol, ProtocolKind};
use tenure_kv::Store;
use tenure_node::clock::Clock;
use tenure_node::transport::{check_hello, check_hello_ack, HelloAck, Net};
use tenure_node::wire::{self, Frame};
use tenure_replica::{Config as ReplicaConfig, Replica, Restored};
use tokio_util::codec::Decoder;

/// The node under test: node 1 of cluster "c" with voters 1, 2 and 3.
const ME: NodeId = NodeId(1);
const CLUSTER: &str = "c";
const HEARTBEAT: Duration = Duration::from_millis(100);
const ELECTION_TIMEOUT: Duration = Duration::from_millis(1000);
/// How far the clock moves between two frames.
const FRAME_GAP: Duration = Duration::from_millis(1);
/// The most a ping moves the clock, in milliseconds.
const MAX_PING_GAP_MS: u64 = 4000;

fn net(protocol: ProtocolKind) -> Net {
    let peers: Vec<_> =
        (1..=3).map(|i| (NodeId(i), ([127, 0, 0, 1], 7000 + i as u16).into())).collect();
    Net::new(
        CLUSTER.into(),
        ME,
        1,
        tenure_core::DirectoryId(0xd1),
        protocol,
        &peers,
        Clock::new(),
        HEARTBEAT,
        ELECTION_TIMEOUT,
        None,
    )
    .with_timings(timings())
}

/// The election timings of the target's node, which the seeds' hellos show.
pub fn timings() -> wire::Timings {
    wire::Timings::of(&config())
}

/// An election core of `protocol` for node 1, fresh.
pub fn core(protocol: ProtocolKind) -> Elector<Pcg64Mcg> {
    Elector::new(protocol, config(), Default::default(), Pcg64Mcg::new(7), Instant::ZERO)
}

/// The election configuration of the target's node 1.
fn config() -> Config {
    Config::new(ME, vec![NodeId(1), NodeId(2), NodeId(3)], HEARTBEAT, ELECTION_TIMEOUT)
}

/// Cuts `data` into frames as the transport would (the first, the hello, at
/// most [`wire::MAX_FRAME_LEN`] bytes, the rest at most
/// [`wire::MAX_DATA_FRAME_LEN`]), stopping at the first error (the transport
/// closes the connection there).
fn frames(data: &[u8]) -> Vec<BytesMut> {
    let mut codec = wire::codec();
    let mut buf = BytesMut::from(data);
    let mut out = Vec::new();
    while let Ok(Some(frame)) = codec.decode_eof(&mut buf) {
        out.push(frame);
        codec.set_max_frame_length(wire::MAX_DATA_FRAME_LEN);
    }
    out
}

/// A replica of the key-value store on node 1, empty.
fn replica() -> Replica<Store> {
    let cfg = ReplicaConfig::new(ME, vec![NodeId(1), NodeId(2), NodeId(3)], HEARTBEAT);
    Replica::new(cfg, Restored::default(), Store::new()).expect("an empty log restores")
}

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let _ = session(data);
}

/// Runs the target on one input; returns the core the handshake opened, if any.
pub fn session(data: &[u8]) -> Option<Elector<Pcg64Mcg>> {
    let mut session: Option<(NodeId, Elector<Pcg64Mcg>)> = None;
    let mut log = replica();
    let mut now = Instant::ZERO;
    for (i, bytes) in frames(data).iter().enumerate() {
        let max = if i == 0 { wire::MAX_FRAME_LEN } else { wire::MAX_DATA_FRAME_LEN };
        assert!(bytes.len() <= max, "the codec let {} bytes through", bytes.len());
        let decoded = wire::decode(bytes);
        if let Ok(frame) = &decoded {
            let again = wire::encode(frame);
            assert!(again.len() <= bytes.len(), "{frame:?} re-encodes longer");
            assert_eq!(wire::decode(&again).ok().as_ref(), Some(frame), "round trip");
            dialer_side(frame);
        }
        now = now + FRAME_GAP;
        if i == 0 {
            let protocol = match &decoded {
                Ok(Frame::Hello { protocol, .. }) => *protocol,
                _ => ProtocolKind::Raft,
            };
            match check_hello(&net(protocol), decoded) {
                Ok(hello) => {
                    let valid = 1..=tenure_node::storage::MAX_INCARNATION;
                    assert!(valid.contains(&hello.incarnation), "{hello:?} passed the handshake");
                    session = Some((hello.from, core(protocol)))
                }
                Err(_) => return None, // refused: the connection closes
            }
            continue;
        }
        let (from, core) = session.as_mut()?;
        match decoded {
            Ok(Frame::Message(msg)) => step(core, now, *from, msg),
            Ok(Frame::Replica(msg)) => {
                // The elector's view first, as the log task tells it.
                let s = core.status();
                log.set_leadership(now, s.leader, s.leader.and(s.fencing_token));
                log.handle_message(now, *from, msg);
                let _ = log.take_output();
            }
            // Forwarded requests go to the log task, which checks their ids.
            Ok(Frame::Forward(_)) => {}
            Ok(Frame::Ping { nonce }) => {
                now = now + Duration::from_millis(nonce % MAX_PING_GAP_MS);
                tick(core, now);
            }
            _ => break, // anything else closes the connection
        }
    }
    session.map(|(_, core)| core)
}

/// Feeds one message (and any timer due by then) to the core, checking that
/// it does not halt.
fn step(core: &mut Elector<Pcg64Mcg>, now: Instant, from: NodeId, msg: Message) {
    tick(core, now);
    core.handle_message(now, from, msg);
    check(core.take_output().events);
}

/// Fires the core's timer if it is due.
fn tick(core: &mut Elector<Pcg64Mcg>, now: Instant) {
    if core.poll_timeout() <= now {
        core.handle_timeout(now);
        check(core.take_output().events);
    }
}

fn check(events: Vec<Event>) {
    for e in events {
        assert!(!matches!(e, Event::Halted { .. }), "a peer's message halted the core: {e:?}");
    }
}

/// The checks a dialer makes of the acceptor's answer.
fn dialer_side(frame: &Frame) {
    let Some(ack) = HelloAck::of(frame) else { return };
    let (node, voters) = (ack.node, ack.voters);
    let net = net(ack.protocol);
    let link = &net.links()[0];
    let verdict = check_hello_ack(&net, link, &ack);
    let well_formed = !voters.is_empty()
        && voters.len() <= tenure_core::MAX_VOTERS
        && voters.windows(2).all(|w| w[0] < w[1])
        && voters[0].0 > 0;
    // While both count by their bootstrap lists (this side always
    // does), the lists must be the same, the peer among them.
    let same_bootstrap = *voters == net.roster().voters && voters.contains(&node);
    let expected_ok = ack.version == wire::WIRE_VERSION
        && ack.cluster_id == CLUSTER
        && node == link.id
        && (1..=tenure_node::storage::MAX_INCARNATION).contains(&ack.incarnation)
        && well_formed
        && (ack.config != tenure_core::ConfigId::BOOTSTRAP || same_bootstrap)
        && ack.directory.0 != 0
        && [ack.api_address, ack.etcd_address]
            .iter()
            .all(|a| a.is_none_or(|a| (1..=wire::MAX_API_ADDRESS_LEN).contains(&a.len())));
    assert_eq!(verdict.is_none(), expected_ok, "{frame:?}: {verdict:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::{Role, Term};

    #[test]
    fn the_core_config_is_valid_for_every_protocol() {
        for p in [ProtocolKind::Raft, ProtocolKind::Ranked, ProtocolKind::Paxos] {
            let cfg =
                Config::new(ME, vec![NodeId(1), NodeId(2), NodeId(3)], HEARTBEAT, ELECTION_TIMEOUT);
            assert_eq!(cfg.validate_for(p), Ok(()), "{p}");
        }
    }

    /// The byte stream a peer sends: each frame behind its length.
    pub(crate) fn stream(frames: &[Frame]) -> Vec<u8> {
        let mut out = Vec::new();
        for frame in frames {
            let bytes = wire::encode(frame);
            out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            out.extend_from_slice(&bytes);
        }
        out
    }

    fn hello(cluster_id: &str) -> Frame {
        Frame::Hello {
            version: wire::WIRE_VERSION,
            cluster_id: cluster_id.into(),
            from: NodeId(2),
            to: ME,
            protocol: ProtocolKind::Raft,
            incarnation: 5,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            api_address: Some("0.0.0.0:8002".into()),
            directory: tenure_core::DirectoryId(0xd2),
            config: tenure_core::ConfigId::BOOTSTRAP,
            peer_address: None,
            etcd_address: None,
            timings: timings(),
        }
    }

    /// A stream that passes the handshake reaches the core: after a ping
    /// moved the clock past the startup lease, the vote is granted.
    #[test]
    fn a_hello_then_a_vote_reaches_the_core() {
        let vote = Frame::Message(Message::Vote {
            term: Term(3),
            transfer: false,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        });
        let ours = stream(&[hello(CLUSTER), Frame::Ping { nonce: 1500 }, vote.clone()]);
        assert_eq!(frames(&ours).len(), 3);
        let core = session(&ours).expect("the handshake passes");
        assert_eq!(core.hard_state().term, Term(3));
        assert_eq!(core.hard_state().voted_for, Some(NodeId(2)));
        // Another cluster is refused at the handshake.
        assert!(session(&stream(&[hello("d"), vote])).is_none());
    }

    /// Every file of the wire corpus speaks the current wire version: each
    /// passes the handshake (or is meant not to: another cluster), so what
    /// follows its hello reaches the core. A file of an older version would
    /// be refused at the hello and test nothing.
    #[test]
    fn the_corpus_passes_the_handshake() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/wire");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let data = std::fs::read(&path).unwrap();
            let first = frames(&data).into_iter().next().expect("a first frame");
            assert_eq!(first[0], wire::WIRE_VERSION, "{name} speaks another wire version");
            let hello = matches!(wire::decode(&first), Ok(Frame::Hello { .. }));
            let expected = hello && name != "seed-other-cluster";
            assert_eq!(session(&data).is_some(), expected, "{name}");
        }
        let crash = std::fs::read(format!("{dir}/crash-core-heartbeat-in-own-term")).unwrap();
        let core = session(&crash).unwrap();
        assert!(core.counters().messages_refused >= 1, "the rival heartbeat was not refused");
    }

    /// This target's finding in the core (`corpus/wire/crash-core-heartbeat-in-own-term`):
    /// node 2 grants node 1's vote, then claims to lead the same term. It
    /// tripped a `debug_assert!` in the raft elector; the core now refuses
    /// and counts the message, and stops leading (`Reason::RivalLeader`: a
    /// second leader of a term means a voter voted twice).
    #[test]
    fn a_heartbeat_claiming_the_term_this_node_leads_is_refused_and_ends_its_leadership() {
        let mut c = core(ProtocolKind::Raft);
        let mut now = c.poll_timeout();
        c.handle_timeout(now);
        let _ = c.take_output();
        let proposed = Term(c.hard_state().term.0 + 1);
        let granted = Message::PreVoteResponse {
            term: c.hard_state().term,
            proposed,
            granted: true,
            lease_remaining_ms: None,
        };
        c.handle_message(now, NodeId(2), granted);
        c.handle_message(now, NodeId(2), Message::VoteResponse { term: proposed, granted: true });
        assert_eq!(c.status().role, Role::Leader);
        let _ = c.take_output();
        now = now + FRAME_GAP;
        let claim = Message::Heartbeat { term: proposed, counter: 1, sent_at_nanos: 0 };
        let refused = c.counters().messages_refused;
        c.handle_message(now, NodeId(2), claim);
        assert_eq!(c.status().role, Role::Follower, "led beside a rival of its own term");
        assert_eq!(c.status().leader, None, "followed a rival of its own term");
        assert_eq!(c.counters().messages_refused, refused + 1, "not counted as refused");
        check(c.take_output().events);
    }
}
