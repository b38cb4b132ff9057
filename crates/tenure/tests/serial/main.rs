//! Tests of real `tenure server` processes (and real etcd, ZooKeeper,
//! Chromium and stock clients beside them) that run one at a time: every
//! test here takes the harness's lock ([`harness::serial`]) before it starts
//! anything, so their timing assertions see two otherwise quiet cores. One
//! test binary for all of them: each file below was a binary of its own,
//! compiled and linked on its own. `cargo test -p tenure --test serial
//! etcd_go::` runs one file's tests.

#[path = "../browser/mod.rs"]
mod browser;
#[path = "../harness/mod.rs"]
mod harness;

mod api_auth;
mod campaign_flood;
mod client_elector;
mod connection_flood;
mod dashboard;
mod dashboard_groups;
mod death_notices;
mod elect_cli;
mod elections_scale;
mod etcd_api;
mod etcd_election;
mod etcd_go;
mod etcd_lease;
mod etcd_linearizable;
mod etcd_parity;
mod etcd_watch;
mod etcdctl;
mod failover_ride;
mod foreign_sessions;
mod large_reads;
mod membership;
mod peer_config;
mod sessions;
