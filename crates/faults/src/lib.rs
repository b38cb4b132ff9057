//! Fault tests of real `tenure server` processes, each in its own network
//! namespace (work in progress).
#![warn(missing_docs)]
