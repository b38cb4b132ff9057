//! Tests against tenure servers started in this test process
//! (`tenure_server::server::run`, real sockets; [`servers`]), one test
//! binary for all of them: each file below was a binary of its own, and
//! each compiled and linked the whole server again (about 14 s of a CI
//! core apiece). `cargo test -p tenure --test inproc kv_api::` runs one
//! file's tests.

mod servers;

mod api_access;
mod elections_api;
mod groups_api;
mod groups_observe;
mod in_process;
mod kv_api;
mod kv_cli;
mod partition_member;
mod session_owners;
