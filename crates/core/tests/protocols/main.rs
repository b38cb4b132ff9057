//! The electors' interaction tests, one test binary (`cargo test -p
//! tenure-core --test protocols`; one file: `--test protocols raft::`):
//! each file a module. One binary compiles the optimised cores' generic code
//! once, not once per file.

mod membership;
mod paxos;
mod raft;
mod ranked;
mod scripts;
mod shared;
