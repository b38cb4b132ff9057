//! The server's config file: TOML text into the settings a node starts with
//! (`ServerArgs::resolve_with` of the `tenure` crate, which checks
//! the peer list and ids and has the core validate the election settings).
//!
//! Inputs that would make the parser resolve a host name are skipped: a
//! fuzzer must not send DNS queries (and a lookup takes milliseconds).
//!
//! Properties: nothing panics; settings that resolve name this node among
//! the peers and pass the node's own validation.

use std::net::SocketAddr;
use tenure::config::{parse_file, ServerArgs};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if names_a_host(text) {
        return;
    }
    let Ok(file) = parse_file(text) else { return };
    let Ok(settings) = ServerArgs::default().resolve_with(file) else { return };
    let node = &settings.node;
    assert!(node.peers.iter().any(|&(id, _)| id == node.id), "{node:?}");
    assert_eq!(node.validate(), Ok(()), "{node:?}");
}

/// Whether the parser would resolve a host name: `listen` or `http`, or the
/// address part of a `peers` item, is `HOST:PORT` with a host that is not an
/// IP address (as `resolve_addr` sees it: what does not parse as a socket
/// address but has a colon goes to the resolver).
fn names_a_host(text: &str) -> bool {
    let Ok(doc) = text.parse::<toml::Table>() else { return false };
    let resolved = |s: &str| s.contains(':') && s.parse::<SocketAddr>().is_err();
    let single = ["listen", "http"]
        .iter()
        .filter_map(|k| doc.get(*k).and_then(toml::Value::as_str))
        .any(resolved);
    let peers = doc.get("peers").and_then(toml::Value::as_array).is_some_and(|items| {
        let list: Vec<&str> = items.iter().filter_map(toml::Value::as_str).collect();
        list.join(",")
            .split(',')
            .filter_map(|item| item.split_once('='))
            .any(|(_, addr)| resolved(addr.trim()))
    });
    single || peers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_skipped_and_addresses_are_not() {
        assert!(names_a_host("listen = \"db1.internal:7001\""));
        assert!(names_a_host("peers = [\"1=127.0.0.1:7001\", \"2=db2:7001\"]"));
        assert!(names_a_host("http = \"a:1,b\""));
        assert!(names_a_host("listen = \"1=127.0.0.1:7001\""));
        assert!(!names_a_host("peers = [\"1=127.0.0.1:7001\", \"2=[::1]:7002\"]\nid = 1"));
        assert!(!names_a_host("cluster_id = \"no port here\""));
    }

    #[test]
    fn a_full_file_resolves() {
        let text = "id = 2\ncluster_id = \"prod\"\npeers = [\"1=127.0.0.1:9001\", \"2=127.0.0.1:9002\", \"3=127.0.0.1:9003\"]\nheartbeat_ms = 50\nelection_timeout_ms = 500\nprotocol = \"paxos\"\nround_trip_ms = 10\ninsecure_no_tls = true\ninsecure_open_api = true";
        let settings = ServerArgs::default().resolve_with(parse_file(text).unwrap()).unwrap();
        assert_eq!(settings.node.id.0, 2);
        run(text.as_bytes());
    }
}
