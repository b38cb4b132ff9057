//! # tenure-model: exhaustive model checking of the election core
//!
//! (Module documentation is completed below once the results are measured.)

#![warn(missing_docs)]

pub mod check;
pub mod elector;
pub mod model;
pub mod network;
pub mod rng;

pub use model::{Action, Bounds, Durability, ElectionModel, ElectionState};
