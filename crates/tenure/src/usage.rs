//! Usage errors: a malformed argument exits 64 and does nothing, whatever
//! the command (docs/CLI.md). clap's parsers catch most of them; the
//! parsers here judge the values whose shape clap cannot (node ids, peer
//! addresses, data-directory identities) with the checks the server
//! applies, and [`Usage`] marks what a command finds wrong with its
//! arguments once parsed (an election name, a TTL, a grace that does not
//! fit the TTL, an empty key), so that `main` exits 64 for those too.

use std::fmt;
use tenure_core::{DirectoryId, MAX_NODE_ID};

/// A malformed argument found by a command after clap parsed its flags:
/// `main` prints it and exits 64, as for clap's own usage errors.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// `message` as a usage error (for `map_err`).
pub fn usage(message: impl fmt::Display) -> anyhow::Error {
    Usage(message.to_string()).into()
}

/// Whether `e` is (or wraps) a usage error.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Usage>())
}

/// A node id argument: 1 to [`MAX_NODE_ID`] (clap's `value_parser`).
pub fn node_id(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if (1..=MAX_NODE_ID).contains(&n) => Ok(n),
        _ => Err(format!("node ids are 1 to {MAX_NODE_ID}")),
    }
}

/// A member's peer address argument: HOST:PORT that the other members can
/// dial, judged as the server judges it (clap's `value_parser`).
pub fn peer_address(s: &str) -> Result<String, String> {
    match tenure_replica::address_problem(s) {
        None => Ok(s.to_string()),
        Some(why) => Err(format!("it {why}; write HOST:PORT, the node's peer address")),
    }
}

/// A data-directory identity argument: 32 hex digits, `directory` of the
/// node's `/v1/status` (clap's `value_parser`).
pub fn directory(s: &str) -> Result<String, String> {
    s.parse::<DirectoryId>()
        .map(|_| s.to_string())
        .map_err(|e| format!("{e}; `directory` of the node's /v1/status"))
}

/// A key argument of `tenure kv`: 1 to 1024 bytes, no control characters,
/// judged as the store judges it (clap's `value_parser`).
pub fn key(s: &str) -> Result<String, String> {
    tenure_kv::check_key(s).map(|()| s.to_string()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_judged_as_the_server_judges_them() {
        assert_eq!(node_id("7"), Ok(7));
        for bad in ["0", "65536", "-1", "x", ""] {
            assert!(node_id(bad).unwrap_err().contains("1 to 65535"), "{bad}");
        }
        assert!(peer_address("10.0.0.4:7001").is_ok());
        assert!(peer_address("notanaddress").unwrap_err().contains("has no port"));
        assert!(peer_address("0.0.0.0:7001").unwrap_err().contains("unspecified"));
        assert!(directory(&"ab".repeat(16)).is_ok());
        assert!(directory("xyz").unwrap_err().contains("/v1/status"));
        assert_eq!(key("").unwrap_err(), "the key is empty");
        assert!(key("a\nb").is_err() && key(&"k".repeat(1025)).is_err() && key("a/b").is_ok());
        let e = anyhow::Error::from(Usage("bad".into())).context("checking");
        assert!(is_usage(&e) && !is_usage(&anyhow::anyhow!("bad")));
    }
}
