//! The replica's tests, one test binary (`cargo test -p tenure-replica
//! --test replica`; one file: `--test replica replication::`): each file a
//! module. One binary compiles the optimised replica's generic code once,
//! not once per file.

mod membership;
mod replication;
mod util;
