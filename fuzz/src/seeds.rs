//! The seed corpora, made from the real encoders and a real data directory,
//! so that they follow the formats as those change. `tests/corpora.rs`
//! checks that `corpus/<target>/seed-*` are these (and writes them when
//! `TENURE_FUZZ_WRITE_SEEDS=1`).

use tenure_core::{
    FencingToken, HardState, Lsn, Message, NodeId, PaxosMessage, ProtocolKind, RankedMessage, Term,
};
use tenure_node::storage::{DataDir, Identity, LOCK_FILE, STATE_FILE};
use tenure_node::wire::{self, Forward, Frame, WIRE_VERSION};
use tenure_replica::{
    Entry, Member, Members, Membership, Payload, Position, ReplicaMessage, SnapshotChunk,
};

/// One seed: its target, its file name (without the `seed-` prefix) and its bytes.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    seeds.extend(wire_seeds().into_iter().map(|(n, b)| ("wire", n, b)));
    seeds.extend(state_seeds().into_iter().map(|(n, b)| ("state_file", n, b)));
    seeds.extend(config_seeds().into_iter().map(|(n, b)| ("config_file", n, b)));
    seeds.extend(http_seeds().into_iter().map(|(n, b)| ("http_json", n, b)));
    seeds
}

/// The byte stream a peer sends: each frame behind its length.
fn stream(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        let bytes = wire::encode(frame);
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn hello(protocol: ProtocolKind) -> Frame {
    hello_from("c", protocol)
}

fn hello_from(cluster_id: &str, protocol: ProtocolKind) -> Frame {
    Frame::Hello {
        version: WIRE_VERSION,
        cluster_id: cluster_id.into(),
        from: NodeId(2),
        to: NodeId(1),
        protocol,
        incarnation: 2,
        voters: vec![NodeId(1), NodeId(2), NodeId(3)],
        api_address: Some("127.0.0.1:8002".into()),
        etcd_address: None,
        directory: tenure_core::DirectoryId(0xd2),
        config: tenure_core::ConfigId::BOOTSTRAP,
        peer_address: None,
        timings: crate::wire::timings(),
    }
}

/// A ping that moves the target's clock past a startup lease.
const LATER: Frame = Frame::Ping { nonce: 1500 };

fn msg(m: impl Into<Message>) -> Frame {
    Frame::Message(m.into())
}

fn wire_seeds() -> Vec<(String, Vec<u8>)> {
    let t = Term;
    let raft = vec![
        hello(ProtocolKind::Raft),
        LATER,
        msg(Message::PreVote { term: t(1), freshness: tenure_core::Freshness::BOOTSTRAP }),
        msg(Message::Vote {
            term: t(1),
            transfer: false,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
        msg(Message::Heartbeat { term: t(1), counter: 1, sent_at_nanos: 5 }),
        msg(Message::HeartbeatResponse { term: t(1), ok: true, echo_sent_at_nanos: 5 }),
        msg(Message::PreVoteResponse {
            term: t(1),
            proposed: t(2),
            granted: true,
            lease_remaining_ms: None,
        }),
        msg(Message::VoteResponse { term: t(2), granted: true }),
        msg(Message::Resign { term: t(1), successor: Some(NodeId(1)) }),
        msg(Message::Vote {
            term: t(2),
            transfer: true,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
    ];
    let ranked = vec![
        hello(ProtocolKind::Ranked),
        LATER,
        msg(RankedMessage::Elect {
            term: t(1),
            claim: Some(Lsn { term: t(0), counter: 3 }),
            sent_at_nanos: 9,
            transfer: None,
            vote_in_nanos: 1000,
            freshness: tenure_core::Freshness::BOOTSTRAP,
            leaving: false,
            stands: true,
        }),
        msg(RankedMessage::Vote { term: t(1), echo_sent_at_nanos: 9 }),
        msg(RankedMessage::Lead { term: t(1), counter: 1, sent_at_nanos: 11 }),
        msg(RankedMessage::LeadAck { term: t(1), ok: true, counter: 1, echo_sent_at_nanos: 11 }),
        msg(RankedMessage::Resign { term: t(1), successor: Some(NodeId(1)) }),
    ];
    let paxos = vec![
        hello(ProtocolKind::Paxos),
        LATER,
        msg(PaxosMessage::Prepare {
            ballot: t(0),
            attempt: 1,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
        msg(PaxosMessage::Prepare {
            ballot: t(17),
            attempt: 2,
            handover: None,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
        msg(PaxosMessage::Accept {
            ballot: t(17),
            slot: 1,
            freshness: tenure_core::Freshness::BOOTSTRAP,
        }),
        msg(PaxosMessage::Commit { ballot: t(17), slot: 1, heartbeat: 1, sent_at_nanos: 3 }),
        msg(PaxosMessage::PrepareAck { ballot: t(33), attempt: 1, committed: 1, accepted_slot: 1 }),
        msg(PaxosMessage::PrepareNack {
            ballot: t(33),
            attempt: 1,
            promised: t(17),
            committed: 1,
            heartbeat: Some(Lsn { term: t(17), counter: 1 }),
            busy_ms: Some(5),
        }),
        msg(PaxosMessage::AcceptAck { ballot: t(33), slot: 2 }),
        msg(PaxosMessage::AcceptNack { ballot: t(33), promised: t(49) }),
        msg(PaxosMessage::CommitAck {
            ballot: t(17),
            ok: true,
            promised: t(17),
            echo_sent_at_nanos: 3,
        }),
        msg(PaxosMessage::Resign { ballot: t(17), successor: Some(NodeId(1)) }),
    ];
    let answers = vec![
        Frame::HelloAck {
            version: WIRE_VERSION,
            cluster_id: "c".into(),
            node: NodeId(2),
            protocol: ProtocolKind::Raft,
            incarnation: 1_750_000_000_000_000,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            api_address: Some("0.0.0.0:8002".into()),
            etcd_address: None,
            directory: tenure_core::DirectoryId(0xd2),
            config: tenure_core::ConfigId::BOOTSTRAP,
            timings: crate::wire::timings(),
        },
        Frame::Reject { reason: "no".into() },
        Frame::Removed {
            config: tenure_core::ConfigId { token: FencingToken(4), index: 9 },
            voters: vec![NodeId(1), NodeId(2)],
            reason: "node 3 is not a member".into(),
        },
        Frame::Pong { nonce: 7 },
    ];
    let token = FencingToken::for_term(t(1));
    let put = tenure_kv::Command::Put {
        key: "k".into(),
        value: b"v".to_vec(),
        if_mod_revision: None,
        lease: None,
    };
    let first = Position { token, index: 1 };
    let log = vec![
        hello(ProtocolKind::Raft),
        LATER,
        msg(Message::Heartbeat { term: t(1), counter: 1, sent_at_nanos: 5 }),
        Frame::Replica(ReplicaMessage::Sync { token }),
        Frame::Replica(ReplicaMessage::Append {
            token,
            prev: Position::ZERO,
            entries: vec![Entry { pos: first, payload: Payload::Command(put.encode()) }],
            commit: 1,
            round: 1,
        }),
        Frame::Replica(ReplicaMessage::InstallSnapshot {
            token,
            chunk: SnapshotChunk {
                last: first,
                total: 4,
                offset: 0,
                data: vec![0, 1, 2, 3],
                membership: Membership {
                    at: Position::ZERO,
                    members: Members::bootstrap(&[NodeId(1), NodeId(2), NodeId(3)]),
                },
            },
        }),
        Frame::Replica(ReplicaMessage::Append {
            token,
            prev: first,
            entries: vec![Entry {
                pos: Position { token, index: 2 },
                payload: Payload::Members(Members {
                    voters: vec![Member::bare(NodeId(1)), Member::bare(NodeId(2))],
                    learners: vec![Member {
                        id: NodeId(4),
                        address: "10.0.0.4:7000".into(),
                        directory: Some(tenure_core::DirectoryId(0xd4)),
                        auto_promote: false,
                    }],
                }),
            }],
            commit: 1,
            round: 2,
        }),
        Frame::Replica(ReplicaMessage::Fetch { token, after: 0, offset: 0 }),
        Frame::Forward(Forward::Propose { id: 1, command: put.encode() }),
        Frame::Forward(Forward::ReadIndexReply { id: 1, result: Ok(1) }),
        Frame::Forward(Forward::Ask { id: 2, request: b"{\"renew\":1}".to_vec() }),
        Frame::Forward(Forward::Answered { id: 2, result: Ok(b"\"not_found\"".to_vec().into()) }),
    ];
    vec![
        ("raft".into(), stream(&raft)),
        ("log".into(), stream(&log)),
        ("ranked".into(), stream(&ranked)),
        ("paxos".into(), stream(&paxos)),
        ("answers".into(), stream(&answers)),
        ("other-cluster".into(), stream(&[hello_from("d", ProtocolKind::Raft)])),
    ]
}

/// The state target's input: flags, state length, minimum term, state, lock.
fn state_input(flags: u8, state: Option<&[u8]>, min_term: u64, lock: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    let len = state.map_or(0xffff, |s| u16::try_from(s.len()).expect("a small state file"));
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&min_term.to_le_bytes());
    out.extend_from_slice(state.unwrap_or_default());
    out.extend_from_slice(lock);
    out
}

/// The state and lock files of a real data directory after `writes`.
fn data_dir_files(protocol: ProtocolKind, writes: &[HardState]) -> (Vec<u8>, Vec<u8>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let id = Identity { cluster_id: "c".into(), node_id: NodeId(1), protocol };
    let (data, _) = DataDir::open(dir.path(), id).expect("a fresh data directory opens");
    for &w in writes {
        data.write(w).expect("a write");
    }
    drop(data);
    let read = |name| std::fs::read(dir.path().join(name)).expect("the file was written");
    (read(STATE_FILE), read(LOCK_FILE))
}

fn state_seeds() -> Vec<(String, Vec<u8>)> {
    let hs = |term, vote: Option<u64>| HardState { term: Term(term), voted_for: vote.map(NodeId) };
    let (fresh_state, fresh_lock) = data_dir_files(ProtocolKind::Raft, &[]);
    let (old_state, _) = data_dir_files(ProtocolKind::Raft, &[hs(2, Some(1))]);
    let (state, lock) =
        data_dir_files(ProtocolKind::Raft, &[hs(2, Some(1)), hs(3, None), hs(5, Some(2))]);
    let (paxos_state, paxos_lock) = data_dir_files(ProtocolKind::Paxos, &[hs(17, Some(2))]);
    let mut torn = state.clone();
    torn[30] ^= 0x40;
    const FIX: u8 = 1;
    const RESET: u8 = 1 << 1;
    const RESET_TERM: u8 = 2 << 1;
    const PAXOS: u8 = 2 << 3;
    vec![
        ("fresh".into(), state_input(0, Some(&fresh_state), 0, &fresh_lock)),
        ("first-start".into(), state_input(0, None, 0, &fresh_lock)),
        ("consistent".into(), state_input(FIX, Some(&state), 0, &lock)),
        ("rolled-back".into(), state_input(FIX, Some(&old_state), 0, &lock)),
        ("rolled-back-reset".into(), state_input(FIX | RESET, Some(&old_state), 0, &lock)),
        ("missing-reset-term".into(), state_input(RESET_TERM, None, 9, b"")),
        ("torn-slot".into(), state_input(0, Some(&torn), 0, &lock)),
        ("earlier-lock".into(), state_input(FIX, Some(&state), 0, b"")),
        ("paxos".into(), state_input(FIX | PAXOS, Some(&paxos_state), 0, &paxos_lock)),
        ("protocol-switch".into(), state_input(FIX | RESET, Some(&paxos_state), 0, &paxos_lock)),
    ]
}

fn config_seeds() -> Vec<(String, Vec<u8>)> {
    let full =
        "id = 1\ncluster_id = \"prod-db\"\nlisten = \"0.0.0.0:7001\"\nhttp = \"127.0.0.1:8001\"\n\
                peers = [\"1=10.0.0.1:7001\", \"2=10.0.0.2:7001\", \"3=10.0.0.3:7001\"]\n\
                data_dir = \"/var/lib/tenure\"\nheartbeat_ms = 100\nelection_timeout_ms = 1000\n\
                protocol = \"raft\"\nround_trip_ms = 50\nlog_format = \"json\"\n\
                tls_cert = \"/etc/tenure/node-1.pem\"\ntls_key = \"/etc/tenure/node-1-key.pem\"\n\
                tls_ca = \"/etc/tenure/ca.pem\"\ninsecure_open_api = true\n";
    let paxos = "id = 2\npeers = [\"1=127.0.0.1:7001\", \"2=127.0.0.1:7002\", \"3=[::1]:7003\"]\n\
                 protocol = \"paxos\"\nheartbeat_ms = 20\nelection_timeout_ms = 400\n\
                 insecure_no_tls = true\ninsecure_open_api = true\n";
    let minimal = "id = 3\n";
    let bad = "id = 0\npeers = [\"1=127.0.0.1:7001\", \"1=127.0.0.1:7002\"]\nheartbeat = 5\n";
    [("full", full), ("paxos", paxos), ("minimal", minimal), ("bad", bad)]
        .into_iter()
        .map(|(n, t)| (n.into(), t.as_bytes().to_vec()))
        .collect()
}

fn http_seeds() -> Vec<(String, Vec<u8>)> {
    let bodies: [(&str, u8, &str); 39] = [
        ("transfer", 0, r#"{"to": 2}"#),
        ("transfer-zero", 0, r#"{"to": 0}"#),
        ("transfer-extra", 0, r#"{"to": 2, "from": 1}"#),
        (
            "status",
            1,
            r#"{"id":2,"incarnation":1750000000000001,"protocol":"raft","role":"follower","term":1,"voted_for":1,"leader":1,"leader_address":"127.0.0.1:7001","fencing_token":1,"lsn":{"term":1,"counter":15},"storage_failed":false,"peers":[{"id":1,"address":"127.0.0.1:7001","connected":true,"last_heard_ms":5,"rtt_ms":0.333,"incarnation":1750000000000007}]}"#,
        ),
        ("leader", 2, r#"{"id":1,"address":"127.0.0.1:7001","term":3,"fencing_token":3}"#),
        ("leadership", 3, r#"{"leader":null,"term":4,"fencing_token":null,"role":"candidate"}"#),
        (
            "error",
            4,
            r#"{"error":"this node is not the leader: the leader is node 1; ask it","leader":1}"#,
        ),
        (
            "error-stale",
            4,
            r#"{"error":"stale: incarnation 3 of node 2 is not its current one (4)","current_incarnation":4}"#,
        ),
        ("transfer-answer", 5, r#"{"to":2,"from_term":7}"#),
        ("transfer-string", 0, r#"{"to": "2"}"#),
        (
            "txn",
            6,
            r#"{"compare":[{"key":"lock","target":"mod_revision","op":"=","value":0},{"key":"cfg","target":"value","op":"!=","value_base64":"/wA="}],"success":[{"put":{"key":"lock","value":"me"}},{"delete":{"key":"old"}}],"failure":[{"get":{"key":"lock"}}]}"#,
        ),
        ("txn-bad", 6, r#"{"compare":[{"key":"a","target":"version","op":"<","value":"1"}]}"#),
        (
            "kv-get",
            7,
            r#"{"key":"app/db","value":"x","create_revision":1,"mod_revision":2,"version":2,"revision":3}"#,
        ),
        (
            "txn-answer",
            8,
            r#"{"succeeded":false,"revision":5,"fencing_token":1,"responses":[{"get":{"kv":{"key":"k","value_base64":"/wA=","create_revision":5,"mod_revision":5,"version":1}}},{"put":{"prev":null}}]}"#,
        ),
        ("grant", 9, r#"{"ttl_ms": 10000}"#),
        ("grant-short", 9, r#"{"ttl_ms": 100}"#),
        ("grant-string", 9, r#"{"ttl_ms": "5000"}"#),
        ("campaign", 10, "db-primary\n{\"session\": 3, \"value\": \"10.0.0.1:5432\"}"),
        ("campaign-no-value", 10, "db.eu_1\n{\"session\": 3}"),
        ("campaign-bad-name", 10, "a/b\n{\"session\": 3, \"value\": \"x\"}"),
        ("campaign-session-zero", 10, "db\n{\"session\": 0, \"value\": \"x\"}"),
        ("campaign-extra", 10, "db\n{\"session\": 3, \"value\": \"x\", \"ttl_ms\": 1}"),
        ("resign", 11, "db\n{\"session\": 3}"),
        ("resign-negative", 11, "db\n{\"session\": -3}"),
        ("proclaim", 12, "db\n{\"session\": 3, \"value\": \"10.0.0.2:5432\"}"),
        ("proclaim-no-value", 12, "db\n{\"session\": 3}"),
        (
            "candidacy-answer",
            13,
            r#"{"name":"db","session":4,"create_revision":19,"leader":false,"token":null,"ahead":1}"#,
        ),
        (
            "election-answer",
            14,
            r#"{"name":"db","leader":{"session":3,"value":"a","token":17},"candidates":[{"session":3,"value":"a","create_revision":17},{"session":4,"value":"b","create_revision":19}],"revision":20}"#,
        ),
        ("check-answer", 15, r#"{"current":true,"token":17,"revision":20}"#),
        ("session-answer", 16, r#"{"id":3,"ttl_ms":10000}"#),
        ("revoke-answer", 16, r#"{"id":3,"keys_deleted":1,"revision":21}"#),
        ("proclaim-answer", 17, r#"{"revision":21,"token":17}"#),
        ("observe-leader", 18, "leader\n{\"session\":3,\"value\":\"a\",\"token\":17,\"revision\":17}"),
        ("observe-no-leader", 18, "no-leader\n{\"revision\":22}"),
        ("dead", 19, "2\n{\"incarnation\": 1750000000000007}"),
        ("dead-zero", 19, "2\n{\"incarnation\": 0}"),
        ("dead-extra", 19, "3\n{\"incarnation\": 4, \"node\": 3}"),
        ("dead-answer", 19, "1\n{\"accepted\":true,\"node\":1,\"incarnation\":4,\"was_leader\":true}"),
        (
            "observe-compacted",
            18,
            "compacted\n{\"error\":\"changes up to revision 10 are no longer kept\",\"compacted\":10,\"current\":30}",
        ),
    ];
    bodies
        .into_iter()
        .map(|(n, which, body)| {
            let mut b = vec![which];
            b.extend_from_slice(body.as_bytes());
            (n.into(), b)
        })
        .collect()
}
