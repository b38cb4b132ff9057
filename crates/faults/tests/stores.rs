//! The external stores' launchers on their own: a 3-member etcd cluster and
//! a 3-server ZooKeeper ensemble in network namespaces, ready, a leader
//! killed and replaced, a member paused, the killed one restarted. Root and
//! `ip netns` needed (skips visibly otherwise); a missing etcd or ZooKeeper
//! fails the test with what to install.

use tenure_faults::scenarios::run_test as run;
use tenure_faults::stores::{launcher_check, StoreKind};

#[test]
fn etcd_cluster_starts_loses_its_leader_and_takes_a_member_back() {
    run("store-etcd-launcher", || launcher_check(StoreKind::Etcd));
}

#[test]
fn zookeeper_ensemble_starts_loses_its_leader_and_takes_a_server_back() {
    run("store-zk-launcher", || launcher_check(StoreKind::ZooKeeper));
}
