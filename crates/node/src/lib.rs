//! The tokio runtime for tenure (work in progress).
