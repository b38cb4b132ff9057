//! Who may talk to a node: with mutual TLS only holders of a certificate from
//! the cluster's CA, each only under the id its certificate names; without
//! TLS (the insecure mode, asked for explicitly) anyone; and a node with TLS
//! and one without refuse each other with a reason instead of hanging.

mod common;

use common::{
    dial_tls, handshake, hello, hello_in, identity, make_certs, wait_for, Cluster, CLUSTER,
};
use std::time::{Duration, Instant};
use tenure_node::tls::TlsIdentity;
use tenure_node::wire::{self, Frame};
use tenure_node::Security;
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// The attack: a peer holding node 3's certificate claims to be
/// node 2 while node 2 is alive. It is refused, and the leader stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_of_another_node_cannot_claim_its_id() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let term = c.handle(li).status().term;
    // A node other than the leader and another to impersonate.
    let thief = c.configs[(li + 1) % 3].clone();
    let victim = c.configs[(li + 2) % 3].id;
    let before = c.handle(li).metrics().frames_rejected;

    let mut conn = dial_tls(&identity(&thief), &c.configs[li]).await.expect("a valid certificate");
    let answer = handshake(&mut conn, hello(victim, &c.configs[li])).await;
    match answer {
        Ok(Frame::Reject { reason }) => {
            let name = format!("does not name node-{}.{CLUSTER}", victim.0);
            assert!(reason.contains(&name), "{reason}");
        }
        other => panic!("a stolen id was not refused: {other:?}"),
    }
    // Then the connection is closed: nothing more is read from it.
    use futures_util::StreamExt;
    let next = tokio::time::timeout(Duration::from_secs(5), conn.next()).await.unwrap();
    assert!(!matches!(next, Some(Ok(_))), "the node kept talking: {next:?}");
    let h = c.handle(li);
    wait_for("the refusal counted", || (h.metrics().frames_rejected > before).then_some(())).await;
    // Nor can it write what the leader shows for the victim's link (`tenure
    // status`, the dashboard): only a certificate naming a node marks its link.
    let shown = h.status().peers.into_iter().find(|p| p.id == victim).expect("the victim's link");
    assert_eq!(shown.handshake_error, None, "a refused impostor marked the victim's link");

    // Its own id is accepted: the certificate is good, only the claim was not.
    let mut conn = dial_tls(&identity(&thief), &c.configs[li]).await.unwrap();
    let own = c.handle((li + 1) % 3).incarnation();
    let ack = handshake(&mut conn, hello_in(thief.id, &c.configs[li], own)).await.unwrap();
    assert!(matches!(ack, Frame::HelloAck { node, .. } if node == leader), "{ack:?}");
    drop(conn);

    assert_eq!(c.stable_leader().await, leader);
    assert_eq!(c.handle(li).status().term, term);
    c.stop_all().await;
}

/// A certificate naming the right node, but from another CA, gets no hello
/// answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let other = c.configs[(li + 1) % 3].clone();
    let foreign_dir = tempfile::tempdir().unwrap();
    let foreign = make_certs(foreign_dir.path(), 3);
    let foreign = TlsIdentity::load(&foreign[other.id.0 as usize - 1], CLUSTER, other.id).unwrap();
    let before = c.handle(li).metrics().frames_rejected;

    // Either side may notice first: the node refuses our certificate, and we
    // refuse its (signed by a CA we do not know).
    let outcome = match dial_tls(&foreign, &c.configs[li]).await {
        Err(e) => Err(format!("TLS: {e}")),
        Ok(mut conn) => handshake(&mut conn, hello(other.id, &c.configs[li])).await,
    };
    assert!(!matches!(outcome, Ok(Frame::HelloAck { .. })), "a foreign CA was accepted");

    // The node's side: with a client that trusts the cluster's CA but presents
    // the foreign certificate, the node refuses the certificate itself.
    let files = match &other.security {
        Security::MutualTls(f) => f.clone(),
        Security::InsecureNoTls => unreachable!(),
    };
    let mixed_dir = tempfile::tempdir().unwrap();
    let foreign_files = make_certs(mixed_dir.path(), 3).swap_remove(other.id.0 as usize - 1);
    let mixed = tenure_node::TlsFiles { ca: files.ca.clone(), ..foreign_files };
    // Loading checks the chain, so build the client by hand from rustls.
    let client = foreign_client(&mixed);
    let tcp = TcpStream::connect(c.configs[li].listen).await.unwrap();
    let name = identity(&other).peer_server_name(c.configs[li].id);
    let tls = client.connect(name, tcp).await.expect("the client trusts the node");
    let mut conn = Framed::new(tls, wire::codec());
    let answer = handshake(&mut conn, hello(other.id, &c.configs[li])).await;
    assert!(answer.is_err(), "the node answered a foreign certificate's hello: {answer:?}");
    let h = c.handle(li);
    wait_for("the refusal counted", || (h.metrics().frames_rejected > before).then_some(())).await;
    assert_eq!(c.stable_leader().await, leader);
    c.stop_all().await;
}

/// A TLS client that trusts `files.ca` and presents `files.cert` (which
/// another CA signed).
fn foreign_client(files: &tenure_node::TlsFiles) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let roots = tenure_node::tls::read_roots(&files.ca).unwrap();
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&files.cert).unwrap().map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_file(&files.key).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(tenure_node::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}

/// A plain TCP client speaking the peer protocol gets a reason and a close,
/// never a hello answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_tcp_client_gets_nowhere() {
    let mut c = Cluster::start(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let other = c.configs[(li + 1) % 3].id;
    let tcp = TcpStream::connect(c.configs[li].listen).await.unwrap();
    let mut conn = Framed::new(tcp, wire::codec());
    match handshake(&mut conn, hello(other, &c.configs[li])).await {
        Ok(Frame::Reject { reason }) => assert!(reason.contains("requires TLS"), "{reason}"),
        other => panic!("a plain client was not refused: {other:?}"),
    }
    assert_eq!(c.stable_leader().await, leader);
    c.stop_all().await;
}

/// The insecure mode, asked for explicitly: the cluster works, and (what it
/// costs) a plain client's claim to be node 2 is believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tls_a_cluster_elects_and_any_client_may_claim_an_id() {
    let mut c = Cluster::start_insecure(3).await;
    let leader = c.stable_leader().await;
    let li = c.index_of(leader);
    let other = c.configs[(li + 1) % 3].id;
    let tcp = TcpStream::connect(c.configs[li].listen).await.unwrap();
    let mut conn = Framed::new(tcp, wire::codec());
    let own = c.handle((li + 1) % 3).incarnation();
    let ack = handshake(&mut conn, hello_in(other, &c.configs[li], own)).await.unwrap();
    assert!(matches!(ack, Frame::HelloAck { .. }), "{ack:?}");
    drop(conn);
    c.stop_all().await;
}

/// One node with TLS and one without: each refuses the other (counted), no
/// connection comes up, nobody leads, and nothing hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_tls_and_one_without_refuse_each_other() {
    common::init_logs();
    let (mut configs, listeners, _dir) =
        Cluster::configure(2, common::HEARTBEAT, common::ELECTION_TIMEOUT);
    configs[1].security = Security::InsecureNoTls;
    let mut nodes = Vec::new();
    for (cfg, l) in configs.into_iter().zip(listeners) {
        nodes.push(tenure_node::start_with_listener(cfg, l).await.unwrap());
    }
    let handles: Vec<_> = nodes.iter().map(|n| n.handle()).collect();
    wait_for("both sides to refuse the other", || {
        handles.iter().all(|h| h.metrics().frames_rejected >= 2).then_some(())
    })
    .await;
    let deadline = Instant::now() + common::ELECTION_TIMEOUT * 3;
    while Instant::now() < deadline {
        for h in &handles {
            assert!(!h.status().peers[0].connected, "node {} connected across TLS modes", h.id());
            assert!(!h.is_leader());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for n in nodes {
        tokio::time::timeout(Duration::from_secs(5), n.shutdown()).await.expect("no hang");
    }
}
