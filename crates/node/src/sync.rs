//! Locking that survives a panic elsewhere.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex, ignoring poisoning: the data behind this crate's mutexes
/// stays consistent (plain values, each updated in one step), and a panic in
/// one task must not take the whole node down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
