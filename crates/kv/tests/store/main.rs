//! The store's tests, one test binary (`cargo test -p tenure-kv --test
//! store`; one file: `--test store leases::`): each file a module. One
//! binary compiles the optimised store's generic code once, not once per
//! file.

mod election_counts;
mod lease_clock_model;
mod lease_keeper_model;
mod lease_properties;
mod leases;
mod range_txn;
