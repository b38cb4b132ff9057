//! Election names and the keys of their candidates:
//! `_tenure/elections/<name>/<session as 16 hex digits>`.

use tenure_kv::LeaseId;

/// Keys under this prefix belong to tenure itself: the key-value API
/// refuses to write them (only the election calls change them).
pub const RESERVED_PREFIX: &str = "_tenure/";

/// The prefix of every candidate key.
pub const ELECTIONS_PREFIX: &str = "_tenure/elections/";

/// The longest election name, in characters (all ASCII, so bytes).
pub const MAX_NAME_CHARS: usize = 128;

/// A name that is not an election name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// An empty name.
    #[error(
        "the election name is empty; give 1 to {MAX_NAME_CHARS} characters of A-Z a-z 0-9 . _ -"
    )]
    Empty,
    /// A name over [`MAX_NAME_CHARS`].
    #[error("the election name has {0} characters; at most {MAX_NAME_CHARS} are accepted")]
    TooLong(usize),
    /// A character outside `A-Z a-z 0-9 . _ -`.
    #[error("the election name holds {0:?}; names are made of A-Z a-z 0-9 . _ -")]
    BadCharacter(char),
}

/// Checks an election name: 1 to [`MAX_NAME_CHARS`] characters of
/// `A-Z a-z 0-9 . _ -`.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c))) {
        return Err(NameError::BadCharacter(c));
    }
    if name.len() > MAX_NAME_CHARS {
        return Err(NameError::TooLong(name.len()));
    }
    Ok(())
}

/// The prefix of the candidates of `name`: `_tenure/elections/<name>/`.
pub fn name_prefix(name: &str) -> String {
    format!("{ELECTIONS_PREFIX}{name}/")
}

/// The key of `session`'s candidacy in `name`.
pub fn candidate_key(name: &str, session: LeaseId) -> String {
    format!("{ELECTIONS_PREFIX}{name}/{:016x}", session.0)
}

/// The name and session of a candidate key, if `key` is one.
pub fn parse_key(key: &str) -> Option<(&str, LeaseId)> {
    let rest = key.strip_prefix(ELECTIONS_PREFIX)?;
    let (name, session) = rest.split_once('/')?;
    if session.len() != 16 || check_name(name).is_err() {
        return None;
    }
    let id = u64::from_str_radix(session, 16).ok()?;
    Some((name, LeaseId(id)))
}

/// A key after every candidate key of `name` and before any key of a name
/// that sorts after it: where a scan skips to the next election. (Session
/// digits are `0-9a-f`, all below `~`.)
pub fn after_name(name: &str) -> String {
    format!("{ELECTIONS_PREFIX}{name}/~")
}

/// True if the key-value API must not write `key`.
pub fn is_reserved(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_and_plain() {
        for good in ["a", "orders-db", "svc.primary_1", &"x".repeat(MAX_NAME_CHARS)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(
            check_name(&"x".repeat(MAX_NAME_CHARS + 1)),
            Err(NameError::TooLong(MAX_NAME_CHARS + 1))
        );
        for (bad, c) in [("a/b", '/'), ("a b", ' '), ("é", 'é'), ("a\n", '\n'), ("*", '*')] {
            assert_eq!(check_name(bad), Err(NameError::BadCharacter(c)), "{bad:?}");
        }
        assert!(NameError::Empty.to_string().contains("A-Z a-z 0-9 . _ -"));
    }

    #[test]
    fn keys_carry_the_name_and_the_session_in_sixteen_hex_digits() {
        let key = candidate_key("db", LeaseId(0x2a));
        assert_eq!(key, "_tenure/elections/db/000000000000002a");
        assert_eq!(parse_key(&key), Some(("db", LeaseId(42))));
        assert!(key.starts_with(&name_prefix("db")));
        assert!(!key.starts_with(&name_prefix("d")), "a name's prefix ends with '/'");
        assert!(after_name("db").as_str() > key.as_str());
        assert!(after_name("db").as_str() < candidate_key("db0", LeaseId(1)).as_str());
        for bad in ["_tenure/elections/db/2a", "_tenure/elections/db", "other/db/000000000000002a"]
        {
            assert_eq!(parse_key(bad), None, "{bad}");
        }
        assert_eq!(parse_key("_tenure/elections/a b/000000000000002a"), None);
        assert!(is_reserved("_tenure/x") && !is_reserved("_tenur") && !is_reserved("app/_tenure/"));
    }
}
