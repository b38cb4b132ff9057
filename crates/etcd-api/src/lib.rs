//! etcd's v3 gRPC API, the part tenure uses as a client
//! (crates/store-etcd) and will serve: `KV` (Range, Put, DeleteRange, Txn,
//! Compact), `Watch`, `Lease` (Grant, Revoke, KeepAlive, TimeToLive,
//! Leases), `Cluster.MemberList`, `Maintenance.Status`,
//! `Auth.Authenticate`, and the `Election` and `Lock` services
//! ([`v3electionpb`], [`v3lockpb`]).
//!
//! The messages and services are written in our own `.proto` files
//! (`proto/`), with etcd's package, message and field names and numbers,
//! so the gRPC paths and the bytes on the wire are etcd's. The Rust code
//! generated from them (prost messages, tonic clients and servers) is
//! checked in under `src/generated/`: building this crate needs no
//! `protoc` and no build script. `tests/generated.rs` regenerates it (with
//! protox, a protobuf compiler in Rust) and fails if it differs; after
//! editing a `.proto` file, update it with
//! `TENURE_REGENERATE=1 cargo test -p tenure-etcd-api --test generated`.

/// etcd's multi-version store records: [`mvccpb::KeyValue`], [`mvccpb::Event`].
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod mvccpb {
    include!("generated/mvccpb.rs");
}

/// The messages of etcd's `authpb` that the Auth service carries.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod authpb {
    include!("generated/authpb.rs");
}

/// etcd's v3 requests and answers, with a client (`kv_client::KvClient`,
/// ...) and a server (`kv_server::KvServer`, ...) per service.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod etcdserverpb {
    include!("generated/etcdserverpb.rs");
}

/// etcd's Election service (Campaign, Proclaim, Leader, Observe, Resign):
/// its messages, a client (`election_client::ElectionClient`) and a server
/// (`election_server::ElectionServer`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v3electionpb {
    include!("generated/v3electionpb.rs");
}

/// etcd's Lock service (Lock, Unlock): its messages, a client
/// (`lock_client::LockClient`) and a server (`lock_server::LockServer`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v3lockpb {
    include!("generated/v3lockpb.rs");
}

/// The end of the range of the keys that start with `prefix`, as etcd
/// computes it (clientv3's `GetPrefixRangeEnd`): the prefix with its last
/// byte below 0xff incremented and the bytes after it dropped; `"\0"` (every
/// key from the prefix on) if every byte is 0xff.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    match prefix.iter().rposition(|b| *b < 0xff) {
        Some(i) => {
            let mut end = prefix[..=i].to_vec();
            end[i] += 1;
            end
        }
        None => vec![0],
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn a_prefix_ends_where_etcd_says() {
        assert_eq!(prefix_end(b"/a/b/"), b"/a/b0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"a\xfe\xff\xff"), b"a\xff");
        assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    }
}
