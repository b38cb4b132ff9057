//! What tenure's tests start besides tenure: real etcd members and
//! ZooKeeper servers on loopback (from Debian's `etcd-server` and
//! `zookeeper`), each stopped and its files removed when dropped, even when
//! the test fails. Used by the tests of the etcd and ZooKeeper stores and by
//! the `tenure server --store` tests.
#![warn(missing_docs)]

pub mod etcd;
mod stopped;
pub mod zookeeper;
