//! Deterministic simulator for tenure's election core (work in progress).
#![warn(missing_docs)]
pub mod cli;
