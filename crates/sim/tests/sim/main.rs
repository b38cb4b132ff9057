//! The simulator's tests, one test binary (`cargo test -p tenure-sim --test
//! sim`; one file: `--test sim kv::`): each file a module. One binary
//! compiles the optimised simulator's generic code once, not once per file.

mod elect;
mod hostile;
mod kv;
mod membership;
mod partitions;
mod paxos;
mod ranked;
mod regressions;
mod scenarios;
mod util;
