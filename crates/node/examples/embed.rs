//! The embedding example of docs/EMBEDDING.md (section "The node"), as a
//! program that `cargo test` and `cargo build --examples` compile.
//! `tests/readme.rs` checks that the page shows exactly the lines between the
//! two markers below, so the docs cannot drift from code that compiles.
//!
//! Running it needs what it names: peers at 10.0.0.1-3, a writable
//! `/var/lib/myapp/tenure`, and the node's certificate, key and the
//! cluster's CA in `/etc/myapp/tenure` (`tenure cert --out /etc/myapp/tenure
//! --nodes 1,2,3 --cluster-id prod` makes them). For a program to run on one machine, see
//! `leader_task.rs`.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // README begin
    use tenure_node::{LeadershipEvent, NodeConfig, NodeId, ProtocolKind, Security, TlsFiles};

    let node = tenure_node::start(NodeConfig {
        id: NodeId(1),
        cluster_id: "prod".into(),
        listen: "0.0.0.0:7001".parse()?,
        peers: vec![
            (NodeId(1), "10.0.0.1:7001".parse()?),
            (NodeId(2), "10.0.0.2:7001".parse()?),
            (NodeId(3), "10.0.0.3:7001".parse()?),
        ],
        data_dir: "/var/lib/myapp/tenure".into(),
        heartbeat_interval: std::time::Duration::from_millis(100),
        election_timeout: std::time::Duration::from_millis(1000),
        protocol: ProtocolKind::Raft, // the same on every node
        round_trip: None, // ranked and paxos: a round-trip bound; default half a heartbeat
        // Mutual TLS with files made by `tenure cert`; Security::InsecureNoTls for none.
        security: Security::MutualTls(TlsFiles {
            cert: "/etc/myapp/tenure/node-1.pem".into(),
            key: "/etc/myapp/tenure/node-1-key.pem".into(),
            ca: "/etc/myapp/tenure/ca.pem".into(),
        }),
        single_node: false, // true only for a one-node cluster on purpose
        api_address: Some("10.0.0.1:8080".into()), // told to the peers (optional)
        etcd_address: None, // where an etcd API of yours answers (optional)
        joining: false,     // true for a node that joins a running cluster (tenure server --join)
    })
    .await?;
    let handle = node.handle();
    let mut events = handle.events();
    while let Ok(event) = events.recv().await {
        match event {
            LeadershipEvent::BecameLeader { fencing_token, .. } => {
                // Start the leader's work; tag every write with the token.
                println!("leading with fencing token {fencing_token}");
            }
            LeadershipEvent::LostLeadership { .. } => println!("stop the leader's work"),
            LeadershipEvent::LeaderObserved { leader, .. } => {
                println!("forward requests to {leader}")
            }
            LeadershipEvent::NoLeader { .. } => {}
        }
    }
    // Hands leadership over first if this node leads.
    node.shutdown().await;
    // README end
    Ok(())
}
