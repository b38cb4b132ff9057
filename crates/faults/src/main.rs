//! `tenure-faults`: randomized fault runs (work in progress).
fn main() {}
