//! Where an election lives in the store: the key of each candidate,
//! `_tenure/elections/<name>/<session as 16 hex digits>`, and the rule for
//! names. The store counts candidates by these keys as it applies changes;
//! the election recipe ([`crate::election`]) builds its commands on them.

use crate::lease::LeaseId;

/// Where every election's keys live. The key-value API refuses writes
/// under `_tenure/`: only the election calls change these keys.
pub const ELECTIONS_PREFIX: &str = "_tenure/elections/";

/// Longest election name, in bytes (names are ASCII).
pub const MAX_NAME_BYTES: usize = 128;

/// What is wrong with an election name ([`crate::validate_name`] says it
/// as an [`crate::ElectionError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameFault {
    /// Empty, or over [`MAX_NAME_BYTES`]: the length in characters.
    Length(usize),
    /// A character outside `A-Z a-z 0-9 . _ -`.
    Character(char),
}

/// Checks an election name: 1 to [`MAX_NAME_BYTES`] of `A-Z a-z 0-9 . _ -`.
pub(crate) fn check_name(name: &str) -> Result<(), NameFault> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(NameFault::Length(name.chars().count()));
    }
    match name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        Some(c) => Err(NameFault::Character(c)),
        None => Ok(()),
    }
}

/// The prefix of every candidate key of `name` (ends with `/`, so no name
/// is a prefix of another's keys).
pub fn prefix(name: &str) -> String {
    format!("{ELECTIONS_PREFIX}{name}/")
}

/// A key after every candidate key of `name` and before any key of a name
/// that sorts after it: where a scan skips to the next election. (Session
/// digits are `0-9a-f`, all below `~`.)
pub(crate) fn after_name(name: &str) -> String {
    format!("{ELECTIONS_PREFIX}{name}/~")
}

/// The candidate key of `session` in election `name`.
pub fn candidate_key(name: &str, session: LeaseId) -> String {
    format!("{ELECTIONS_PREFIX}{name}/{:016x}", session.0)
}

/// The election name and session of a candidate key, if it is one.
pub fn parse_candidate_key(key: &str) -> Option<(&str, LeaseId)> {
    let rest = key.strip_prefix(ELECTIONS_PREFIX)?;
    let (name, hex) = rest.rsplit_once('/')?;
    if hex.len() != 16 || check_name(name).is_err() {
        return None;
    }
    let id = u64::from_str_radix(hex, 16).ok()?;
    (hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then_some((name, LeaseId(id)))
}
