//! The HTTP API's JSON bodies. The first byte picks the body; the rest is the
//! body's bytes:
//!
//! * 0: the request body of `POST /v1/transfer`, through axum's own JSON
//!   parsing (`Json::from_bytes`, as the extractor does) and the handler's
//!   check (`http::transfer_target`);
//! * 1 to 5: the answers the CLI and the demo read: `StatusBody`,
//!   `LeaderBody`, `LeadershipBody` (a watch event), `ErrorBody`,
//!   `TransferBody`;
//! * 6: the request body of `POST /v1/txn`, through `Json::from_bytes` and
//!   the handler's conversion to the store's command (`http::txn_command`);
//! * 7 and 8: the key-value answers `tenure kv` reads: `KvGetBody` (with a
//!   flattened key), `TxnBody`.
//!
//! Properties: nothing panics; a transfer request is refused or names a
//! positive node id, and an accepted body names the node its `to` field
//! holds; a transaction is refused with a 4xx, or becomes a command that
//! encodes and decodes back to itself; a body that parses serializes to JSON
//! that parses back to it (floats aside, whose last digit JSON need not keep).

use axum::response::IntoResponse;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use tenure::api::{
    ErrorBody, KvGetBody, LeaderBody, LeadershipBody, StatusBody, TransferBody, TransferRequest,
    TxnBody, TxnRequest,
};
use tenure::http::{transfer_target, txn_command};
use tenure_kv::Command;

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 9 {
        0 => transfer_request(body),
        1 => {
            // Floats (rtt_ms) may lose their last digit on the way back.
            let _ = serde_json::from_slice::<StatusBody>(body);
        }
        2 => round_trip::<LeaderBody>(body),
        3 => round_trip::<LeadershipBody>(body),
        4 => round_trip::<ErrorBody>(body),
        5 => round_trip::<TransferBody>(body),
        6 => txn_request(body),
        7 => round_trip::<KvGetBody>(body),
        _ => round_trip::<TxnBody>(body),
    }
}

fn txn_request(body: &[u8]) {
    let Ok(Json(request)) = Json::<TxnRequest>::from_bytes(body) else { return };
    match txn_command(request) {
        Ok(command) => {
            assert!(matches!(command, Command::Txn { .. }), "{command:?}");
            assert_eq!(Command::decode(&command.encode()).as_ref(), Ok(&command));
        }
        Err(e) => {
            let status = e.into_response().status();
            assert!(status.is_client_error(), "{status}");
        }
    }
}

fn transfer_request(body: &[u8]) {
    let parsed = serde_json::from_slice::<TransferRequest>(body);
    match transfer_target(Json::<TransferRequest>::from_bytes(body)) {
        Ok(to) => {
            assert_ne!(to.0, 0, "node 0 accepted");
            assert_eq!(parsed.map(|r| r.to).ok(), Some(to.0), "axum and serde disagree");
        }
        Err(e) => {
            let status = e.into_response().status();
            assert!(status.is_client_error(), "{status}");
        }
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(body: &[u8]) {
    let Ok(value) = serde_json::from_slice::<T>(body) else { return };
    let json = serde_json::to_vec(&value).expect("a parsed body serializes");
    let again: T = serde_json::from_slice(&json).expect("serialized JSON parses");
    assert_eq!(again, value);
}
