//! The peer wire protocol: length-delimited, versioned frames.
//!
//! Every frame is a 4-byte big-endian length (tokio-util's
//! `LengthDelimitedCodec`, at most [`MAX_FRAME_LEN`] bytes) followed by a
//! one-byte wire version ([`WIRE_VERSION`]) and a postcard-encoded [`Frame`].
//!
//! A connection is one-way for election messages: the dialer sends
//! [`Frame::Hello`], the acceptor answers [`Frame::HelloAck`] or
//! [`Frame::Reject`] or [`Frame::Removed`] (and closes). Then the dialer sends [`Frame::Message`]s and
//! [`Frame::Ping`]s, and the acceptor answers each ping with a [`Frame::Pong`].
//!
//! The same connection carries the replicated log's traffic
//! ([`Frame::Replica`], [`Frame::Forward`]). Those frames are larger than an
//! election message: until the handshake is done a frame may have at most
//! [`MAX_FRAME_LEN`] bytes, after it (the peer proved who it is) at most
//! [`MAX_DATA_FRAME_LEN`].

use bytes::{BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use tenure_core::{ConfigId, DirectoryId, Message, NodeId, ProtocolKind};
use tenure_replica::ReplicaMessage;
use tokio_util::codec::LengthDelimitedCodec;

/// The wire protocol version this build speaks (15: the handshake carries
/// the sender's election timings; 14: the log may carry
/// lease checkpoints, which a build of version 13 cannot decode; 13: the
/// log may carry
/// expiries of many leases in one entry, which a build of version 12 cannot
/// decode; 12: a transaction in the
/// log may delete a key and put it again, which a build of version 11
/// refuses when it applies it; 11: the handshake carries
/// the sender's etcd API address; 10: a ranked claim says
/// whether its sender stands and whether its configuration removes it; 9:
/// the handshake carries the sender's peer address; 8: log entries may carry a
/// configuration, and a snapshot piece the configuration in force at its
/// last entry; 7: the handshake carries the
/// sender's data-directory identity; 6: the replicated log may
/// carry sessions with owners, and answers the per-owner refusals, which a
/// build of version 5 cannot decode; 5 added the sender's voter set and API
/// address in [`Frame::Hello`] and [`Frame::HelloAck`]; 4 the sender's
/// incarnation; 3 the replicated log's frames). A node of another version
/// is refused at the handshake, by name: the answer and the log say
/// "unsupported wire version 7 (this build speaks 8)", so a cluster never
/// runs builds that would apply its log differently.
pub const WIRE_VERSION: u8 = 15;

/// The longest API address a handshake may carry ([`Frame::Hello`]'s
/// `api_address`): a DNS name (at most 253 bytes) and a port.
pub const MAX_API_ADDRESS_LEN: usize = 260;

/// The largest frame accepted or sent before the handshake is done. Election
/// messages take a few dozen bytes and a handshake at most a few hundred;
/// larger frames from a stranger are garbage.
pub const MAX_FRAME_LEN: usize = 1024;

/// The largest frame accepted or sent once a peer passed the handshake: an
/// `Append` of at most 256 KiB of commands, a 2 MiB snapshot piece, or a
/// forwarded command's answer (a transaction reads at most
/// `tenure_kv::MAX_TXN_OPS` keys of at most 64 KiB each, 8 MiB and change).
pub const MAX_DATA_FRAME_LEN: usize = 16 * 1024 * 1024;

/// One frame of the peer protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame {
    /// Dialer -> acceptor, first frame: who is calling, and whom it means to reach.
    Hello {
        /// The dialer's protocol version (equal to the frame's version byte).
        version: u8,
        /// The dialer's cluster.
        cluster_id: String,
        /// The dialer.
        from: NodeId,
        /// The node the dialer believes it is calling.
        to: NodeId,
        /// The election protocol the dialer runs; peers running another are refused.
        protocol: ProtocolKind,
        /// The dialer's incarnation: its process's number, larger at every
        /// start of the node (see [`crate::storage::incarnation`]).
        incarnation: u64,
        /// The voters the dialer counts its majorities over: their ids,
        /// ascending, each once. While both sides count by their bootstrap
        /// lists, the acceptor refuses a dialer whose set is not its own
        /// (see [`crate::transport`]: ids only, since addresses may differ
        /// from host to host).
        voters: Vec<NodeId>,
        /// Where the dialer's configuration was written in its log
        /// ([`ConfigId::BOOTSTRAP`]: its bootstrap list).
        config: ConfigId,
        /// Where the dialer's embedding service (tenure: its HTTP API)
        /// answers, HOST:PORT, at most [`MAX_API_ADDRESS_LEN`] bytes; opaque
        /// to the node. An unspecified IP (`0.0.0.0:8001`) means "my host,
        /// at this port": the receiver puts the dialer's configured peer
        /// address's IP in its place ([`crate::PeerInfo::api_address`]).
        api_address: Option<String>,
        /// The dialer's data-directory identity (never zero): the same at
        /// every start of its directory, new when the directory is new
        /// (see [`crate::storage::incarnation`]).
        directory: DirectoryId,
        /// Where the dialer's peers reach it, HOST:PORT (its peer listener,
        /// at most [`MAX_API_ADDRESS_LEN`] bytes; an unspecified IP means
        /// the IP it connects from). An acceptor whose configuration does
        /// not name the dialer yet dials it back there when it admits it as
        /// a guest (see [`crate::transport`]).
        peer_address: Option<String>,
        /// Where the dialer's etcd API answers, HOST:PORT (tenure: its
        /// `--etcd-listen`), as `api_address`: opaque to the node, at most
        /// [`MAX_API_ADDRESS_LEN`] bytes, an unspecified IP for the
        /// dialer's own ([`crate::PeerInfo::etcd_address`]).
        etcd_address: Option<String>,
        /// The election timings the dialer runs with; peers running others
        /// are refused (see [`Timings`]).
        timings: Timings,
    },
    /// Acceptor -> dialer: handshake accepted.
    HelloAck {
        /// The acceptor's protocol version.
        version: u8,
        /// The acceptor's cluster.
        cluster_id: String,
        /// The acceptor.
        node: NodeId,
        /// The election protocol the acceptor runs.
        protocol: ProtocolKind,
        /// The acceptor's incarnation.
        incarnation: u64,
        /// The voters the acceptor counts its majorities over (as in
        /// [`Frame::Hello`]).
        voters: Vec<NodeId>,
        /// Where the acceptor's configuration was written (as in
        /// [`Frame::Hello`]).
        config: ConfigId,
        /// Where the acceptor's embedding service answers (as in
        /// [`Frame::Hello`]).
        api_address: Option<String>,
        /// The acceptor's data-directory identity (as in [`Frame::Hello`]).
        directory: DirectoryId,
        /// Where the acceptor's etcd API answers (as in [`Frame::Hello`]).
        etcd_address: Option<String>,
        /// The election timings the acceptor runs with (as in [`Frame::Hello`]).
        timings: Timings,
    },
    /// Acceptor -> dialer: handshake refused; the connection is closed after it.
    Reject {
        /// Why, for the dialer's log.
        reason: String,
    },
    /// Dialer -> acceptor: an election message.
    Message(Message),
    /// Dialer -> acceptor: RTT probe; `nonce` is the dialer's send time.
    Ping {
        /// Echoed in the pong.
        nonce: u64,
    },
    /// Acceptor -> dialer: answer to a ping.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// Dialer -> acceptor: a message of the replicated log.
    Replica(ReplicaMessage),
    /// Dialer -> acceptor: a client request forwarded to the leader, or the
    /// leader's answer to one.
    Forward(Forward),
    /// Acceptor -> dialer: handshake refused because the acceptor's
    /// configuration, newer than the one of the log the dialer's hello
    /// showed, no longer names the dialer, a voter or a learner of that
    /// older one: it was removed while it was away (see
    /// [`crate::transport`]).
    /// The connection is closed after it. Last of the frames, so that a
    /// node of the build before reads every other frame as it did; it is
    /// never sent a `Removed` when it joins (its hello shows the bootstrap
    /// list).
    Removed {
        /// The acceptor's configuration.
        config: ConfigId,
        /// Its voters.
        voters: Vec<NodeId>,
        /// Why, for the dialer's log.
        reason: String,
    },
}

pub use tenure_replica::router::{Forward, ForwardRefusal};

/// The election timings a node runs with, shown at every handshake
/// ([`Frame::Hello`], [`Frame::HelloAck`]). A leader's lease counts on every
/// voter waiting a whole election timeout of silence before it helps elect
/// another leader, and the ranked and Paxos protocols on every node bounding
/// a round trip alike: a node started with a shorter timeout than its
/// leader's could elect a second leader while the first still holds its
/// lease. So a peer whose timings are not this node's is refused, by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// How often a leader sends heartbeats, in microseconds.
    pub heartbeat_us: u64,
    /// How long a follower waits for a silent leader, in microseconds.
    pub election_timeout_us: u64,
    /// The bound on one message round trip, in microseconds.
    pub round_trip_us: u64,
}

impl Timings {
    /// The timings of an election core's configuration.
    pub fn of(config: &tenure_core::Config) -> Timings {
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Timings {
            heartbeat_us: us(config.heartbeat_interval),
            election_timeout_us: us(config.election_timeout),
            round_trip_us: us(config.round_trip),
        }
    }
}

impl std::fmt::Display for Timings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |us: u64| {
            if us.is_multiple_of(1000) {
                format!("{} ms", us / 1000)
            } else {
                format!("{:.3} ms", us as f64 / 1000.0)
            }
        };
        write!(
            f,
            "election timeout {}, heartbeat {}, round trip {}",
            ms(self.election_timeout_us),
            ms(self.heartbeat_us),
            ms(self.round_trip_us)
        )
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The frame is empty.
    #[error("empty frame")]
    Empty,
    /// The version byte is not one this build speaks.
    #[error("unsupported wire version {0} (this build speaks {WIRE_VERSION})")]
    Version(u8),
    /// The body is not a valid frame.
    #[error("malformed frame: {0}")]
    Malformed(#[from] postcard::Error),
}

/// The codec every peer connection starts with (frames of at most
/// [`MAX_FRAME_LEN`]); after the handshake the limit is raised to
/// [`MAX_DATA_FRAME_LEN`].
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder().max_frame_length(MAX_FRAME_LEN).new_codec()
}

/// Encodes a frame (version byte + postcard body).
pub fn encode(frame: &Frame) -> Bytes {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_u8(WIRE_VERSION);
    // Encoding our own frame types into a growable buffer cannot fail.
    let body = postcard::to_allocvec(frame).expect("frames serialize");
    buf.extend_from_slice(&body);
    buf.freeze()
}

/// Decodes a frame received from a peer.
pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
    let (&version, body) = bytes.split_first().ok_or(FrameError::Empty)?;
    if version != WIRE_VERSION {
        return Err(FrameError::Version(version));
    }
    let (frame, rest) = postcard::take_from_bytes(body)?;
    if !rest.is_empty() {
        return Err(FrameError::Malformed(postcard::Error::DeserializeBadEncoding));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenure_core::Term;

    #[test]
    fn frames_round_trip() {
        let frames = [
            Frame::Hello {
                version: WIRE_VERSION,
                cluster_id: "c".into(),
                from: NodeId(1),
                to: NodeId(2),
                protocol: ProtocolKind::Paxos,
                incarnation: crate::storage::MAX_INCARNATION,
                voters: (1..=15).map(NodeId).collect(),
                config: ConfigId { token: tenure_core::FencingToken(u64::MAX), index: u64::MAX },
                api_address: Some("x".repeat(MAX_API_ADDRESS_LEN)),
                directory: DirectoryId(u128::MAX),
                peer_address: None,
                etcd_address: Some("x".repeat(MAX_API_ADDRESS_LEN)),
                timings: Timings {
                    heartbeat_us: u64::MAX,
                    election_timeout_us: u64::MAX,
                    round_trip_us: u64::MAX,
                },
            },
            Frame::HelloAck {
                version: WIRE_VERSION,
                cluster_id: "c".into(),
                node: NodeId(2),
                protocol: ProtocolKind::Raft,
                incarnation: 1,
                voters: vec![NodeId(2)],
                config: ConfigId::BOOTSTRAP,
                api_address: None,
                directory: DirectoryId(1),
                etcd_address: None,
                timings: Timings::default(),
            },
            Frame::Message(Message::Heartbeat { term: Term(3), counter: 9, sent_at_nanos: 12345 }),
            Frame::Message(Message::Resign { term: Term(3), successor: Some(NodeId(2)) }),
            Frame::Pong { nonce: u64::MAX },
            Frame::Forward(Forward::Ask { id: 7, request: b"renew 3".to_vec() }),
            Frame::Forward(Forward::Answered { id: 7, result: Ok(b"ok".to_vec().into()) }),
            Frame::Forward(Forward::Answered { id: 8, result: Err(ForwardRefusal::NoService) }),
            Frame::Removed {
                config: ConfigId { token: tenure_core::FencingToken(4), index: 9 },
                voters: vec![NodeId(1), NodeId(2)],
                reason: "node 3 is not a member".into(),
            },
        ];
        for f in frames {
            let bytes = encode(&f);
            assert!(bytes.len() <= MAX_FRAME_LEN);
            assert_eq!(decode(&bytes).unwrap(), f);
        }
    }

    #[test]
    fn the_forward_frames_of_before_asks_encode_as_they_did() {
        // Variant indexes: asks were appended at the end of `Forward` and
        // `NoService` at the end of `ForwardRefusal`.
        let read = encode(&Frame::Forward(Forward::ReadIndex { id: 5 }));
        assert_eq!(&read[..], [WIRE_VERSION, 7, 2, 5]);
        let refused = Forward::ReadIndexReply { id: 5, result: Err(ForwardRefusal::Unknown) };
        assert_eq!(&encode(&Frame::Forward(refused))[..], [WIRE_VERSION, 7, 3, 5, 1, 3]);
    }

    /// The handshake's layout: the voter set, the configuration's position
    /// (version 9) and the API address follow the incarnation, the
    /// data-directory identity follows them, the timings (version 15) come
    /// last; a hello of an older version is
    /// refused by its version, which the error names.
    #[test]
    fn the_hello_carries_the_voters_and_older_versions_are_refused_by_name() {
        let timings = Timings {
            heartbeat_us: 100_000,
            election_timeout_us: 1_000_000,
            round_trip_us: 50_000,
        };
        let hello = Frame::Hello {
            version: WIRE_VERSION,
            cluster_id: "c".into(),
            from: NodeId(2),
            to: NodeId(1),
            protocol: ProtocolKind::Raft,
            incarnation: 300,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            config: ConfigId { token: tenure_core::FencingToken(4), index: 9 },
            api_address: Some("h:1".into()),
            directory: DirectoryId(0x81),
            peer_address: None,
            etcd_address: Some("h:2".into()),
            timings,
        };
        // Frame 0 (Hello), version 15, "c", node 2, node 1, raft (0), 300 as a
        // varint, three voters 1, 2, 3, the configuration 9@4, Some("h:1"),
        // identity 0x81 as a varint, no peer address, Some("h:2"), then the
        // timings in microseconds as varints: heartbeat 100,000, election
        // timeout 1,000,000, round trip 50,000 (9 bytes).
        let bytes = encode(&hello);
        assert_eq!(
            &bytes[..],
            [
                15, 0, 15, 1, b'c', 2, 1, 0, 0xac, 0x02, 3, 1, 2, 3, 4, 9, 1, 3, b'h', b':', b'1',
                0x81, 0x01, 0, 1, 3, b'h', b':', b'2', 0xa0, 0x8d, 0x06, 0xc0, 0x84, 0x3d, 0xd0,
                0x86, 0x03
            ]
        );
        let ack = Frame::HelloAck {
            version: WIRE_VERSION,
            cluster_id: "c".into(),
            node: NodeId(1),
            protocol: ProtocolKind::Raft,
            incarnation: 7,
            voters: vec![NodeId(1)],
            config: ConfigId::BOOTSTRAP,
            api_address: None,
            directory: DirectoryId(5),
            etcd_address: None,
            timings: Timings { heartbeat_us: 1, election_timeout_us: 2, round_trip_us: 3 },
        };
        assert_eq!(&encode(&ack)[..], [15, 1, 15, 1, b'c', 1, 0, 7, 1, 1, 0, 0, 0, 5, 0, 1, 2, 3]);
        // What a node of version 14 sends (no timings): refused by name.
        let v14_len = bytes.len() - 9;
        let mut v14 = bytes[..v14_len].to_vec();
        (v14[0], v14[2]) = (14, 14);
        let e = decode(&v14).unwrap_err();
        assert_eq!(e.to_string(), "unsupported wire version 14 (this build speaks 15)");
        // Without the timings, a hello of this version is cut short.
        (v14[0], v14[2]) = (WIRE_VERSION, WIRE_VERSION);
        assert!(matches!(decode(&v14), Err(FrameError::Malformed(_))));
        // What a node of version 11 sends (the same frame): refused by name.
        let mut v11 = bytes[..v14_len].to_vec();
        (v11[0], v11[2]) = (11, 11);
        let e = decode(&v11).unwrap_err();
        assert_eq!(e.to_string(), "unsupported wire version 11 (this build speaks 15)");
        // What a node of version 10 sends (no etcd address): refused by name.
        let mut v10 = bytes[..v14_len - 5].to_vec();
        (v10[0], v10[2]) = (10, 10);
        let e = decode(&v10).unwrap_err();
        assert_eq!(e.to_string(), "unsupported wire version 10 (this build speaks 15)");
        // What a node of version 6 sends, without an identity: refused by name.
        let mut v6 = bytes[..v14_len - 8].to_vec();
        (v6[0], v6[2]) = (6, 6);
        let e = decode(&v6).unwrap_err();
        assert!(matches!(e, FrameError::Version(6)), "{e:?}");
        assert_eq!(e.to_string(), "unsupported wire version 6 (this build speaks 15)");
        // Without the identity, a hello of this version is cut short.
        (v6[0], v6[2]) = (WIRE_VERSION, WIRE_VERSION);
        assert!(matches!(decode(&v6), Err(FrameError::Malformed(_))));
        // What a node of version 4 sends: its hello without voters and address.
        let v4 = [4, 0, 4, 1, b'c', 2, 1, 0, 0xac, 0x02];
        let e = decode(&v4).unwrap_err();
        assert!(matches!(e, FrameError::Version(4)), "{e:?}");
        // Without them, a hello is cut short.
        let mut short = v4;
        short[0] = WIRE_VERSION;
        short[2] = WIRE_VERSION;
        assert!(matches!(decode(&short), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        assert!(matches!(decode(&[]), Err(FrameError::Empty)));
        assert!(matches!(decode(&[99, 0]), Err(FrameError::Version(99))));
        assert!(matches!(decode(&[WIRE_VERSION, 0xff, 0xff, 0xff]), Err(FrameError::Malformed(_))));
        let mut ok = encode(&Frame::Ping { nonce: 1 }).to_vec();
        ok.push(0);
        assert!(decode(&ok).is_err(), "trailing bytes accepted");
    }
}
