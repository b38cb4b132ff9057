//! Peer transport over TCP, with mutual TLS ([`crate::tls`]) unless the node
//! runs in the insecure mode: one outbound connection per peer (the dialer,
//! `dial`), and an accept loop for the peers' connections to us
//! (`accept`).
//!
//! Election messages to peer P travel on our outbound connection to P; P's
//! messages to us arrive on P's outbound connection to our listener. Each
//! dialer also pings its peer every heartbeat interval on the same connection
//! and keeps a smoothed round-trip time (RFC 6298 style, gain 1/8).
//!
//! Sending never blocks the driver: each peer has a bounded queue that drops
//! its oldest message when full (a newer heartbeat or vote supersedes it, and
//! the protocol tolerates loss).
//!
//! Inbound connections are bounded (`accept`): at most
//! [`MAX_PENDING_HANDSHAKES`] unauthenticated handshakes, each within
//! [`HANDSHAKE_TIMEOUT`], the oldest giving way to a newer one; one live
//! connection per configured peer, a newer replacing the older; an idle
//! timeout of [`PEER_IDLE_PINGS`] ping intervals. Refusals are logged at most
//! [`REJECT_LOG_BURST`] lines per [`REJECT_LOG_INTERVAL`], then summarised.

mod accept;
mod dial;
mod inbound;
mod net;
mod reject_log;
mod stream;

pub use accept::{
    check_hello, Hello, DUPLICATE_ID_MIN_WINDOW, DUPLICATE_ID_PINGS, MAX_PENDING_HANDSHAKES,
    NOT_A_MEMBER, PEER_IDLE_PINGS,
};
pub use dial::{
    check_hello_ack, probe, reconnect_cap, HelloAck, CONNECT_TIMEOUT, RECONNECT_MAX, RECONNECT_MIN,
    SILENT_PINGS,
};
pub use inbound::{Inbound, PeerData};
pub use net::{
    show_voters, Advertised, Net, PeerLink, Removal, Roster, WireStats, HANDSHAKE_TIMEOUT,
    PEER_DATA_QUEUE_CAPACITY, PEER_QUEUE_CAPACITY,
};
pub use reject_log::{REJECT_LOG_BURST, REJECT_LOG_INTERVAL};

use crate::spy::DeathNotice;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tenure_core::{Message, NodeId};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::timeout;
use tracing::{debug, info, warn};

/// The running transport: queues messages and owns the network tasks.
pub struct Transport {
    net: Arc<Net>,
    closing: watch::Sender<bool>,
    /// One dialer per other member, by id.
    dialers: BTreeMap<NodeId, JoinHandle<()>>,
    acceptor: JoinHandle<()>,
    /// What a new dialer needs: the death notices' channel.
    deaths: mpsc::Sender<DeathNotice>,
}

impl Transport {
    /// Spawns the accept loop on `listener` and one dialer per peer; what
    /// peers send is passed to `inbound`.
    pub fn spawn(net: Arc<Net>, listener: TcpListener, inbound: Inbound) -> Self {
        let (closing, _) = watch::channel(false);
        let deaths = inbound.deaths.clone();
        let acceptor =
            tokio::spawn(accept::accept_loop(net.clone(), listener, inbound, closing.subscribe()));
        let mut transport = Transport { net, closing, dialers: BTreeMap::new(), acceptor, deaths };
        for link in transport.net.links() {
            transport.spawn_dialer(link);
        }
        transport
    }

    fn spawn_dialer(&mut self, link: Arc<PeerLink>) {
        let (net, deaths, closing) =
            (self.net.clone(), self.deaths.clone(), self.closing.subscribe());
        let id = link.id;
        if let Some(old) =
            self.dialers.insert(id, tokio::spawn(dial::dial_loop(net, link, deaths, closing)))
        {
            old.abort();
        }
    }

    /// Makes `peers` (every other member of the configuration in force, with
    /// the address to dial) this node's peers: a new member gets a link and
    /// a dialer, one that left loses them (its connections close), one
    /// whose address changed is dialled there. Messages for a node that is
    /// no peer are dropped.
    pub fn set_peers(&mut self, peers: &[(NodeId, SocketAddr)]) {
        let me = self.net.me;
        let wanted: BTreeMap<NodeId, SocketAddr> =
            peers.iter().copied().filter(|&(id, _)| id != me).collect();
        for link in self.net.links() {
            match wanted.get(&link.id) {
                Some(addr) if *addr == link.addr => {
                    link.make_member();
                    continue;
                }
                // A guest stays while its connection lasts: a node that
                // replays old configurations that do not name the leader
                // it follows must keep hearing it, and answering it.
                None if link.is_guest() => continue,
                _ => {}
            }
            if let Some(dialer) = self.dialers.remove(&link.id) {
                dialer.abort();
            }
            // Its inbound connection closes too (at its next frame): a peer
            // whose pings this node answered on a connection it no longer
            // answers messages on never dialled again.
            self.net.remove_exact(&link);
            if !wanted.contains_key(&link.id) {
                info!(node = %me, peer = %link.id, "no longer a member: its link is closed");
            }
        }
        for (id, addr) in wanted {
            if self.net.link(id).is_none() {
                info!(node = %me, peer = %id, %addr, "a member to dial");
                let link = Arc::new(PeerLink::new(id, addr));
                self.net.add_link(link.clone());
                self.spawn_dialer(link);
            }
        }
    }

    /// Queues `msg` for peer `to`, dropping that peer's oldest queued message if
    /// the queue is full. Never blocks.
    pub fn send(&self, to: NodeId, msg: Message) {
        let Some(link) = self.net.link(to) else {
            debug!(%to, "message for an unknown peer dropped");
            return;
        };
        if link.enqueue(msg) {
            self.net.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Flushes queued messages to connected peers and closes every connection,
    /// waiting at most `bound`; then stops every task.
    pub async fn close(mut self, bound: Duration) {
        let _ = self.closing.send(true);
        let mut dialers: Vec<JoinHandle<()>> =
            std::mem::take(&mut self.dialers).into_values().collect();
        let acceptor = &mut self.acceptor;
        let flush = async {
            for d in &mut dialers {
                let _ = d.await;
            }
            // The accept loop closes the listener and every inbound
            // connection before it ends, so the port is free after this.
            let _ = acceptor.await;
        };
        if timeout(bound, flush).await.is_err() {
            warn!(?bound, "peers did not take the last messages in time; closing anyway");
        }
        for d in &dialers {
            d.abort();
        }
        self.acceptor.abort();
        for link in self.net.links() {
            link.connected.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for Transport {
    /// Stops every task (the listener closes with the accept loop); used when
    /// the node is dropped without a graceful shutdown.
    fn drop(&mut self) {
        for d in self.dialers.values() {
            d.abort();
        }
        self.acceptor.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::wire::Timings;
    use tenure_core::ProtocolKind;

    #[test]
    fn reconnect_cap_is_bounded() {
        assert_eq!(reconnect_cap(Duration::from_millis(200)), Duration::from_millis(50));
        assert_eq!(reconnect_cap(Duration::from_secs(10)), RECONNECT_MAX);
        assert_eq!(reconnect_cap(Duration::from_millis(8)), RECONNECT_MIN);
    }

    /// A hello passes only with an incarnation a node can have: 1 to 2^53.
    #[test]
    fn a_hello_shows_a_valid_incarnation() {
        let net = Net::new(
            "c".into(),
            NodeId(1),
            7,
            tenure_core::DirectoryId(0xd1),
            ProtocolKind::Raft,
            &[
                (NodeId(1), "127.0.0.1:1".parse().unwrap()),
                (NodeId(2), "127.0.0.1:2".parse().unwrap()),
            ],
            Clock::new(),
            Duration::from_millis(10),
            RECONNECT_MIN,
            None,
        )
        .with_timings(TIMINGS);
        let peer = tenure_core::DirectoryId(0xd2);
        let hello_of = |incarnation, directory| {
            Ok(crate::wire::Frame::Hello {
                version: crate::wire::WIRE_VERSION,
                cluster_id: "c".into(),
                from: NodeId(2),
                to: NodeId(1),
                protocol: ProtocolKind::Raft,
                incarnation,
                voters: vec![NodeId(1), NodeId(2)],
                api_address: None,
                directory,
                config: tenure_core::ConfigId::BOOTSTRAP,
                peer_address: None,
                etcd_address: Some("h:2379".into()),
                timings: TIMINGS,
            })
        };
        let hello = |incarnation| hello_of(incarnation, peer);
        let max = crate::storage::MAX_INCARNATION;
        for ok in [1, 12, max] {
            assert_eq!(
                check_hello(&net, hello(ok)),
                Ok(Hello {
                    from: NodeId(2),
                    incarnation: ok,
                    advertised: Advertised { api: None, etcd: Some("h:2379".into()) },
                    directory: peer,
                    guest_at: None
                })
            );
        }
        let mut long = hello(1);
        if let Ok(crate::wire::Frame::Hello { etcd_address, .. }) = &mut long {
            *etcd_address = Some("x".repeat(crate::wire::MAX_API_ADDRESS_LEN + 1));
        }
        let e = check_hello(&net, long).unwrap_err();
        assert!(e.contains("an etcd API address of 261 bytes"), "{e}");
        let e = check_hello(&net, hello_of(1, tenure_core::DirectoryId(0))).unwrap_err();
        assert!(e.contains("data-directory identity 0"), "{e}");
        for bad in [0, max + 1, u64::MAX] {
            let e = check_hello(&net, hello(bad)).unwrap_err();
            assert!(e.contains(&format!("incarnation {bad}")), "{e}");
        }
        // A peer whose election timeout is shorter than this node's could
        // elect a leader while this node's lease still holds: refused, by
        // both values and the flags to fix.
        let short = Timings { election_timeout_us: 400_000, ..TIMINGS };
        let mut other = hello(1);
        if let Ok(crate::wire::Frame::Hello { timings, .. }) = &mut other {
            *timings = short;
        }
        let e = check_hello(&net, other).unwrap_err();
        assert!(
            e.contains(
                "node 2 runs with election timeout 400 ms, heartbeat 100 ms, round trip 50 ms, \
                 node 1 with election timeout 1000 ms,"
            ) && e.contains("--election-timeout-ms"),
            "{e}"
        );
        let link = &net.links()[0];
        let voters = [NodeId(1), NodeId(2)];
        let ack_of = |incarnation, directory| {
            let ack = HelloAck {
                version: crate::wire::WIRE_VERSION,
                cluster_id: "c",
                node: NodeId(2),
                protocol: ProtocolKind::Raft,
                incarnation,
                voters: &voters,
                api_address: None,
                directory,
                config: tenure_core::ConfigId::BOOTSTRAP,
                etcd_address: None,
                timings: TIMINGS,
            };
            check_hello_ack(&net, link, &ack)
        };
        let ack = |incarnation| ack_of(incarnation, peer);
        assert_eq!(ack(max), None);
        assert!(ack(0).is_some() && ack(max + 1).is_some());
        let zero = ack_of(1, tenure_core::DirectoryId(0)).expect("identity 0 is refused");
        assert!(zero.contains("data-directory identity 0"), "{zero}");
        // The acceptor's timings are checked by the dialer too.
        let ack = HelloAck {
            version: crate::wire::WIRE_VERSION,
            cluster_id: "c",
            node: NodeId(2),
            protocol: ProtocolKind::Raft,
            incarnation: 1,
            voters: &voters,
            api_address: None,
            directory: peer,
            config: tenure_core::ConfigId::BOOTSTRAP,
            etcd_address: None,
            timings: Timings { heartbeat_us: 250_500, ..TIMINGS },
        };
        let e = check_hello_ack(&net, link, &ack).expect("other timings are refused");
        assert!(
            e.contains("node 2 runs with election timeout 1000 ms, heartbeat 250.500 ms"),
            "{e}"
        );
    }

    /// The timings of the tests' nets: tenure's defaults.
    const TIMINGS: Timings =
        Timings { heartbeat_us: 100_000, election_timeout_us: 1_000_000, round_trip_us: 50_000 };

    /// A member (voter or learner) removed while it was away (its hello
    /// shows an older configuration of the log) is told so by each member;
    /// it counts the voters that said so, if its own configuration names
    /// it, and learns it was removed once a majority of its voters did. A joining node, a leader
    /// committing its own removal, a node the newer configuration names, a
    /// node re-added under its id with a new data directory, or a
    /// configuration not newer than its own count for nothing.
    #[tokio::test]
    async fn a_member_removed_while_away_learns_it_from_a_majority() {
        use tenure_core::{ConfigId, DirectoryId};
        let addr = |p: u16| -> std::net::SocketAddr { ([127, 0, 0, 1], p).into() };
        let id = |t: u64, index: u64| ConfigId { token: tenure_core::FencingToken(t), index };
        let (old, new) = (id(3, 8), id(4, 20));
        let two = || vec![NodeId(1), NodeId(2)];
        let net_of = |me: u64, joining: bool, peers: &[u64]| {
            let peers: Vec<_> = peers.iter().map(|&p| (NodeId(p), addr(p as u16))).collect();
            Net::new(
                "c".into(),
                NodeId(me),
                7,
                DirectoryId(0xd0 + u128::from(me)),
                ProtocolKind::Raft,
                &peers,
                Clock::new(),
                Duration::from_millis(10),
                RECONNECT_MIN,
                None,
            )
            .with_joining(joining)
        };
        // Node 1, a member of configuration `new` of voters {1,2}: node 3's
        // hello at `old` over {1,2,3} is a removed voter's.
        let member = net_of(1, false, &[1, 2]);
        member.set_roster(Roster { config: new, voters: two(), ..Roster::default() });
        let hello = |from: u64, voters: Vec<u64>, config| {
            Ok(crate::wire::Frame::Hello {
                version: crate::wire::WIRE_VERSION,
                cluster_id: "c".into(),
                from: NodeId(from),
                to: NodeId(1),
                protocol: ProtocolKind::Raft,
                incarnation: 5,
                voters: voters.into_iter().map(NodeId).collect(),
                api_address: None,
                directory: DirectoryId(0xd3),
                config,
                peer_address: None,
                etcd_address: None,
                timings: Timings::default(),
            })
        };
        let removed_member = |net: &Net, from, voters, config| {
            accept::removed_member(net, &hello(from, voters, config))
        };
        assert_eq!(removed_member(&member, 3, vec![1, 2, 3], old), Some(NodeId(3)));
        let e = check_hello(&member, hello(3, vec![1, 2, 3], old)).unwrap_err();
        assert!(e.contains(NOT_A_MEMBER), "{e}");
        // So is a hello at `old` that does not count node 3 a voter: a
        // learner of `old` (whether it counts is node 3's to tell, by its
        // own configuration).
        assert_eq!(removed_member(&member, 3, vec![1, 2], old), Some(NodeId(3)));
        // Not one: a joiner (the bootstrap list, with itself in a build
        // before this frame, without in this one), a hello as new as this
        // node's or newer (a guest; a leader committing its own removal),
        // or from a member.
        assert_eq!(removed_member(&member, 3, vec![1, 2, 3], ConfigId::BOOTSTRAP), None);
        assert_eq!(removed_member(&member, 3, vec![1, 2], ConfigId::BOOTSTRAP), None);
        assert_eq!(removed_member(&member, 3, vec![1, 2], new), None);
        assert_eq!(removed_member(&member, 3, vec![1, 2, 3], new), None);
        assert_eq!(removed_member(&member, 3, vec![1, 2, 3], id(5, 30)), None);
        assert_eq!(removed_member(&member, 2, vec![1, 2, 3], old), None);
        // The departing member of the last change (a link still) is one,
        // unless the configuration names it (a learner).
        let departing = net_of(1, false, &[1, 2, 3]);
        departing.set_roster(Roster { config: new, voters: two(), ..Roster::default() });
        assert_eq!(removed_member(&departing, 3, vec![1, 2, 3], old), Some(NodeId(3)));
        departing.set_roster(Roster {
            config: new,
            voters: two(),
            learners: vec![NodeId(3)],
            ..Roster::default()
        });
        assert_eq!(removed_member(&departing, 3, vec![1, 2, 3], old), None);

        // Node 3, counting by `old` over {1,2,3}.
        let removed = net_of(3, false, &[1, 2, 3]);
        let own = Roster {
            config: old,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            ..Roster::default()
        };
        removed.set_roster(own.clone());
        // What does not count: an older configuration, one naming node 3,
        // a peer that is not its voter.
        assert!(!removed.note_removed(NodeId(1), id(2, 30), two()));
        assert!(!removed.note_removed(NodeId(1), new, vec![NodeId(1), NodeId(3)]));
        assert!(!removed.note_removed(NodeId(5), new, two()));
        // One voter of three is no majority; an acceptance withdraws it.
        assert!(removed.note_removed(NodeId(1), new, two()));
        assert_eq!(removed.removal(), None);
        removed.note_accepted(NodeId(1));
        assert!(removed.note_removed(NodeId(2), new, two()));
        assert_eq!(removed.removal(), None);
        assert!(removed.note_removed(NodeId(1), new, two()));
        let removal = tokio::time::timeout(Duration::from_secs(1), removed.removed())
            .await
            .expect("a majority said so");
        assert_eq!((removal.by, removal.config, removal.own), (two(), new, old));
        assert!(!removal.learner);
        let said = removed.removal().expect("kept").to_string();
        assert!(
            said.contains(
                "node 3 was removed from the cluster and its log never received the change"
            ) && said.contains("nodes 1, 2 count by configuration")
                && said.contains("tenure member add 3"),
            "{said}"
        );

        // A learner of `old` (voters 1 and 2) is told so the same way, by
        // both of them.
        let learner_of_old = || {
            let net = net_of(3, false, &[1, 2, 3]);
            net.set_roster(Roster {
                config: old,
                voters: two(),
                learners: vec![NodeId(3)],
                ..Roster::default()
            });
            net
        };
        let learner = learner_of_old();
        assert!(learner.note_removed(NodeId(1), new, two()));
        assert_eq!(learner.removal(), None);
        assert!(learner.note_removed(NodeId(2), new, two()));
        let removal = learner.removal().expect("a majority of its voters said so");
        assert!(removal.learner);
        assert!(removal.to_string().contains("still counts it a learner of configuration"));
        // Not when their configuration names it a voter (promoted).
        let named = learner_of_old();
        assert!(!named.note_removed(NodeId(1), new, vec![NodeId(1), NodeId(2), NodeId(3)]));

        // Counting nothing: a node whose log's configuration already left
        // it out, one at the bootstrap list (a joiner; or a first member
        // that missed the first change), and a node re-added under its id
        // with a new data directory, replaying configurations that name
        // its old one.
        let left_out = net_of(3, false, &[1, 2, 3]);
        left_out.set_roster(Roster { config: new, voters: two(), ..Roster::default() });
        assert!(!left_out.note_removed(NodeId(1), id(4, 21), two()));
        let joiner = net_of(3, true, &[1, 2]);
        assert_eq!(joiner.roster().voters, two());
        assert!(!joiner.note_removed(NodeId(1), new, two()));
        let bootstrap = net_of(3, false, &[1, 2, 3]);
        assert!(!bootstrap.note_removed(NodeId(1), new, two()));
        let readded = net_of(3, true, &[1, 2]);
        readded.set_roster(Roster {
            directories: [(NodeId(3), DirectoryId(0xe3))].into_iter().collect(),
            ..own.clone()
        });
        assert!(!readded.note_removed(NodeId(1), new, two()));
        readded.set_roster(Roster {
            directories: [(NodeId(3), DirectoryId(0xd3))].into_iter().collect(),
            ..own
        });
        assert!(readded.note_removed(NodeId(1), new, two()));
    }

    /// Nodes that count their majorities over different voter sets refuse
    /// each other, both ways, with a reason naming both sets; a malformed
    /// set is refused too. Addresses play no part.
    #[test]
    fn a_peer_with_another_voter_set_is_refused_naming_both() {
        let addr = |p: u16| -> std::net::SocketAddr { ([127, 0, 0, 1], p).into() };
        let net = Net::new(
            "c".into(),
            NodeId(1),
            7,
            tenure_core::DirectoryId(0xd1),
            ProtocolKind::Raft,
            &[(NodeId(1), addr(1)), (NodeId(2), addr(2)), (NodeId(3), addr(3))],
            Clock::new(),
            Duration::from_millis(10),
            RECONNECT_MIN,
            None,
        );
        assert_eq!(net.roster().voters, [NodeId(1), NodeId(2), NodeId(3)]);
        let hello_at = |voters: Vec<u64>, config: tenure_core::ConfigId| {
            Ok(crate::wire::Frame::Hello {
                version: crate::wire::WIRE_VERSION,
                cluster_id: "c".into(),
                from: NodeId(2),
                to: NodeId(1),
                protocol: ProtocolKind::Raft,
                incarnation: 5,
                voters: voters.into_iter().map(NodeId).collect(),
                api_address: Some("0.0.0.0:8002".into()),
                directory: tenure_core::DirectoryId(0xd2),
                config,
                peer_address: None,
                etcd_address: None,
                timings: Timings::default(),
            })
        };
        let hello = |voters: Vec<u64>| hello_at(voters, tenure_core::ConfigId::BOOTSTRAP);
        assert!(check_hello(&net, hello(vec![1, 2, 3])).is_ok());
        for (theirs, shown) in [
            (vec![2], "{2}"),
            (vec![1, 2], "{1,2}"),
            (vec![1, 2, 3, 4], "{1,2,3,4}"),
            (vec![1, 3], "{1,3}"),
        ] {
            let e = check_hello(&net, hello(theirs)).unwrap_err();
            assert!(
                e.contains(&format!("node 2 counts its majorities over voters {shown}")),
                "{e}"
            );
            assert!(e.contains("node 1 over {1,2,3}") && e.contains("--peers"), "{e}");
        }
        for malformed in [vec![], vec![2, 1, 3], vec![1, 1, 2], vec![0, 2]] {
            let e = check_hello(&net, hello(malformed.clone())).unwrap_err();
            assert!(e.contains("malformed voter set"), "{malformed:?}: {e}");
        }
        // Once either side counts by a configuration of the log, the log
        // decides: a peer behind or ahead by a change is a peer.
        let written = tenure_core::ConfigId { token: tenure_core::FencingToken(3), index: 8 };
        assert!(check_hello(&net, hello_at(vec![1, 2], written)).is_ok());
        // A member whose data directory is not the one it was added with is
        // refused, naming both.
        net.set_roster(Roster {
            config: written,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            directories: [(NodeId(2), tenure_core::DirectoryId(0xd9))].into_iter().collect(),
            ..Roster::default()
        });
        let e = check_hello(&net, hello(vec![1, 2, 3])).unwrap_err();
        assert!(
            e.contains("data directory")
                && e.contains("another's --id")
                && e.contains("tenure member replace"),
            "{e}"
        );
        let e = check_hello(&net, hello_at(vec![1, 2, 3], written)).unwrap_err();
        assert!(e.contains("data directory"), "{e}");
        // Unless its configuration is newer: this node's log may lag behind
        // the change that added node 2 again with the directory it has now.
        let later = tenure_core::ConfigId { token: tenure_core::FencingToken(3), index: 12 };
        assert!(check_hello(&net, hello_at(vec![1, 2, 3], later)).is_ok());
        // A node this configuration does not name (node 5), with a newer
        // configuration and a peer address, is heard as a guest, dialled
        // back there; with an older or the same configuration, or no
        // address, it is no member.
        let newer = tenure_core::ConfigId { token: tenure_core::FencingToken(4), index: 9 };
        let stranger = |config, peer_address: Option<&str>| {
            Ok(crate::wire::Frame::Hello {
                version: crate::wire::WIRE_VERSION,
                cluster_id: "c".into(),
                from: NodeId(5),
                to: NodeId(1),
                protocol: ProtocolKind::Raft,
                incarnation: 5,
                voters: vec![NodeId(1), NodeId(2), NodeId(5)],
                api_address: None,
                directory: tenure_core::DirectoryId(0xd5),
                config,
                peer_address: peer_address.map(String::from),
                etcd_address: None,
                timings: Timings::default(),
            })
        };
        let guest = check_hello(&net, stranger(newer, Some("0.0.0.0:7005"))).expect("a guest");
        assert_eq!(guest.guest_at, Some("0.0.0.0:7005".parse().unwrap()));
        for (config, address) in
            [(written, Some("10.0.0.5:7005")), (newer, None), (newer, Some("h:1"))]
        {
            let e = check_hello(&net, stranger(config, address)).unwrap_err();
            assert!(e.contains("node 5 is not a member"), "{config:?} {address:?}: {e}");
        }
        net.set_roster(Roster {
            config: tenure_core::ConfigId::BOOTSTRAP,
            voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            ..Roster::default()
        });
        let link = &net.links()[0];
        let voters = [NodeId(1), NodeId(2)];
        let ack = HelloAck {
            version: crate::wire::WIRE_VERSION,
            cluster_id: "c",
            node: NodeId(2),
            protocol: ProtocolKind::Raft,
            incarnation: 3,
            voters: &voters,
            api_address: None,
            directory: tenure_core::DirectoryId(0xd2),
            config: tenure_core::ConfigId::BOOTSTRAP,
            etcd_address: None,
            timings: Timings::default(),
        };
        let e = check_hello_ack(&net, link, &ack).expect("refused");
        assert!(e.contains("over voters {1,2}") && e.contains("over {1,2,3}"), "{e}");
        // The advertised API address of an unspecified IP takes the peer's.
        assert_eq!(link.directory(), None, "no identity before a handshake");
        let advertised = |api: &str, etcd: Option<&str>| Advertised {
            api: Some(api.into()),
            etcd: etcd.map(String::from),
        };
        link.handshake_accepted(
            advertised("0.0.0.0:8002", Some("0.0.0.0:2379")),
            tenure_core::DirectoryId(0xd2),
        );
        assert_eq!(link.api_address().as_deref(), Some("127.0.0.1:8002"));
        assert_eq!(link.etcd_address().as_deref(), Some("127.0.0.1:2379"));
        assert_eq!(link.directory(), Some(tenure_core::DirectoryId(0xd2)));
        link.handshake_accepted(
            advertised("db2.example:8002", None),
            tenure_core::DirectoryId(0xd3),
        );
        assert_eq!(link.api_address().as_deref(), Some("db2.example:8002"));
        assert_eq!(link.etcd_address(), None, "a node without an etcd API");
        // A loopback address is the peer's own only when it is reached at
        // a loopback address too (the links here are at 127.0.0.1).
        link.handshake_accepted(
            advertised("127.0.0.1:8002", Some("[::1]:2379")),
            tenure_core::DirectoryId(0xd3),
        );
        assert_eq!(link.api_address().as_deref(), Some("127.0.0.1:8002"));
        assert_eq!(link.etcd_address().as_deref(), Some("[::1]:2379"));
        let far = PeerLink::new(NodeId(9), "10.0.0.9:7009".parse().unwrap());
        far.handshake_accepted(
            advertised("127.0.0.1:8002", Some("127.0.0.1:2379")),
            tenure_core::DirectoryId(0xd9),
        );
        assert_eq!((far.api_address(), far.etcd_address()), (None, None));
        far.handshake_accepted(
            advertised("0.0.0.0:8002", Some("db9.example:2379")),
            tenure_core::DirectoryId(0xd9),
        );
        assert_eq!(far.api_address().as_deref(), Some("10.0.0.9:8002"));
        assert_eq!(far.etcd_address().as_deref(), Some("db9.example:2379"));
        assert_eq!(link.directory(), Some(tenure_core::DirectoryId(0xd3)));
    }

    #[test]
    fn full_queue_drops_the_oldest() {
        let net = Arc::new(Net::new(
            "c".into(),
            NodeId(1),
            1,
            tenure_core::DirectoryId(0xd1),
            ProtocolKind::Raft,
            &[
                (NodeId(1), "127.0.0.1:1".parse().unwrap()),
                (NodeId(2), "127.0.0.1:2".parse().unwrap()),
            ],
            Clock::new(),
            Duration::from_millis(10),
            RECONNECT_MIN,
            None,
        ));
        let link = net.links()[0].clone();
        for counter in 0..(PEER_QUEUE_CAPACITY as u64 + 5) {
            let msg = Message::Heartbeat { term: tenure_core::Term(1), counter, sent_at_nanos: 0 };
            assert_eq!(link.enqueue(msg), counter >= PEER_QUEUE_CAPACITY as u64);
        }
        let q = link.take_queued();
        assert_eq!(q.len(), PEER_QUEUE_CAPACITY);
        assert!(matches!(q.front(), Some(Message::Heartbeat { counter: 5, .. })));
    }

    /// A node whose configuration does not name a peer ahead of it (the
    /// leader it follows, while it replays older configurations) keeps the
    /// guest's link through every configuration that does not name it,
    /// and answers it; a member that leaves the configuration is hung up
    /// on both ways, so that it dials again and is admitted by what this
    /// node holds now. (A joining node replaying configurations older than
    /// its leader closed its link to it, while the leader's own connection,
    /// whose pings it still answered, kept it from ever dialling again: the
    /// node never caught up; the network-namespace replacement test found
    /// it.)
    #[tokio::test]
    async fn a_guest_outlives_configurations_that_do_not_name_it() {
        let listen = || std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (la, lb) = (listen(), listen());
        let (aa, ab) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
        let net = |me: u64, peers: &[(NodeId, SocketAddr)], addr: SocketAddr| {
            Arc::new(
                Net::new(
                    "c".into(),
                    NodeId(me),
                    1,
                    tenure_core::DirectoryId(0xd0 + me as u128),
                    ProtocolKind::Raft,
                    peers,
                    Clock::new(),
                    Duration::from_millis(20),
                    RECONNECT_MIN,
                    None,
                )
                .with_peer_address(Some(addr.to_string())),
            )
        };
        // Node 1 counts by a newer configuration that names node 2; node 2
        // by the bootstrap list, which names node 3 (never started) only.
        let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (na, nb) = (net(1, &[(NodeId(2), ab)], aa), net(2, &[(NodeId(3), unused)], ab));
        let newer = tenure_core::ConfigId { token: tenure_core::FencingToken(5), index: 40 };
        na.set_roster(Roster {
            config: newer,
            voters: vec![NodeId(1), NodeId(2)],
            ..Roster::default()
        });
        let inbound = || {
            let (election, rx) = mpsc::channel(64);
            let (deaths, drx) = mpsc::channel(64);
            (Inbound { election, data: None, deaths }, rx, drx)
        };
        let (ia, mut ra, _da) = inbound();
        let (ib, mut rb, _db) = inbound();
        let tokio_listener = |l: std::net::TcpListener| {
            l.set_nonblocking(true).unwrap();
            TcpListener::from_std(l).unwrap()
        };
        let ta = Transport::spawn(na.clone(), tokio_listener(la), ia);
        let mut tb = Transport::spawn(nb.clone(), tokio_listener(lb), ib);
        let heartbeat = |n: u64| Message::Heartbeat {
            term: tenure_core::Term(1),
            counter: n,
            sent_at_nanos: 0,
        };
        // What arrives from `from` within 5 s, sent again every 50 ms (a
        // message sent before a connection is up is queued or dropped).
        async fn deliver(
            send: impl Fn(),
            rx: &mut mpsc::Receiver<(NodeId, Message)>,
            from: NodeId,
        ) -> bool {
            let until = tokio::time::Instant::now() + Duration::from_secs(5);
            while tokio::time::Instant::now() < until {
                send();
                if let Ok(Some((f, _))) = timeout(Duration::from_millis(50), rx.recv()).await {
                    if f == from {
                        return true;
                    }
                }
            }
            false
        }
        // Node 1 is heard as a guest and answered on the link dialled back.
        assert!(deliver(|| ta.send(NodeId(2), heartbeat(1)), &mut rb, NodeId(1)).await);
        let guest = nb.link(NodeId(1)).expect("a guest's link");
        assert!(guest.is_guest());
        assert!(deliver(|| tb.send(NodeId(1), heartbeat(2)), &mut ra, NodeId(2)).await);
        // Node 2 goes through a configuration that does not name node 1
        // either: still heard, still answered.
        tb.set_peers(&[(NodeId(3), "127.0.0.1:10".parse().unwrap())]);
        assert!(nb.link(NodeId(1)).is_some_and(|l| Arc::ptr_eq(&l, &guest)));
        assert!(deliver(|| ta.send(NodeId(2), heartbeat(3)), &mut rb, NodeId(1)).await);
        assert!(deliver(|| tb.send(NodeId(1), heartbeat(4)), &mut ra, NodeId(2)).await);
        // A configuration names node 1 at the address it was dialled at:
        // the same link, a member's now.
        tb.set_peers(&[(NodeId(1), aa)]);
        assert!(nb.link(NodeId(1)).is_some_and(|l| Arc::ptr_eq(&l, &guest) && !l.is_guest()));
        // Then one removes it: node 2 hangs up on node 1's connection too,
        // node 1 dials again and, still ahead, is admitted as a guest anew.
        tb.set_peers(&[(NodeId(3), unused)]);
        assert!(guest.is_closed());
        // Within a few ping intervals (20 ms): not by a timeout of some
        // other kind.
        let until = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            ta.send(NodeId(2), heartbeat(5));
            if nb.link(NodeId(1)).is_some_and(|l| !Arc::ptr_eq(&l, &guest) && l.is_guest()) {
                break;
            }
            assert!(tokio::time::Instant::now() < until, "node 1 never dialled node 2 again");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ta.close(Duration::from_secs(1)).await;
        tb.close(Duration::from_secs(1)).await;
    }
}
