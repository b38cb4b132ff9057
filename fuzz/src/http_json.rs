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
//!   flattened key), `TxnBody`;
//! * 9: the request body of `POST /v1/sessions`, through `Json::from_bytes`
//!   and the handler's check (`http::grant_command`);
//! * 10 to 12: `NAME\nBODY`, the election name of the path and the request
//!   body of `POST /v1/elections/NAME/campaign`, `resign` and `proclaim`,
//!   through the handlers' own parsing and checks
//!   (`http::campaign_command`, `resign_command`, `proclaim_request`);
//! * 13 to 15: the election answers (`CandidacyBody`, of campaign and
//!   wait; `ElectionBody`; `TokenCheckBody`: the client reads the types
//!   the server writes, both from tenure-api);
//! * 16 and 17: the session answers (`SessionBody`, of grant and
//!   keepalive; `SessionRevokedBody`) and `ProclaimBody`, `ResignBody`;
//! * 18: `EVENT\nDATA`, an observe event, as the server writes it
//!   (`ObservedLeaderBody`, `ObservedNoLeaderBody`, the `compacted`
//!   `ErrorBody`) and as the client reads it (`election::parse_event`);
//! * 19: `ID\nBODY`, the node id of the path and the request body of
//!   `POST /v1/peers/{id}/dead`, through `Json::from_bytes` and the
//!   handler's check (`http::dead_notice`); the body also as the answer
//!   `tenure notify-dead` reads (`DeadNoticeBody`).
//!
//! Properties: nothing panics; a transfer request is refused or names a
//! positive node id, and an accepted body names the node its `to` field
//! holds; a death notice is refused with a 4xx or names the positive node
//! and incarnation that the path and serde read; a transaction is refused with a 4xx, or becomes a command that
//! encodes and decodes back to itself; a body that parses serializes to JSON
//! that parses back to it (floats aside, whose last digit JSON need not keep).
//! Sessions and elections: a request is refused with a 4xx, or is accepted
//! with a TTL within `MIN_TTL_MS..=MAX_TTL_MS` (the one serde reads), a
//! positive session, a name `validate_name` accepts and a value within
//! `MAX_VALUE` (those serde reads), and becomes a command on that name's
//! candidate key of that session that encodes and decodes back (a proclaim:
//! one the recipe accepts for any token). An observe event the server's
//! type parses is read by the client as the same observation, once written
//! as the server writes it.

use axum::extract::Path;
use axum::response::IntoResponse;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use tenure_api::{
    CampaignRequest, CandidacyBody, DeadNoticeBody, DeadNoticeRequest, ElectionBody, ErrorBody,
    KvGetBody, LeaderBody, LeadershipBody, ObservedLeaderBody, ObservedNoLeaderBody, ProclaimBody,
    ProclaimRequest, ResignBody, ResignRequest, SessionBody, SessionGrantRequest,
    SessionRevokedBody, StatusBody, TokenCheckBody, TransferBody, TransferRequest, TxnBody,
    TxnRequest,
};
use tenure_client::observer::parse_event;
use tenure_client::Observed;
use tenure_client::SseEvent;
use tenure_kv::{
    parse_candidate_key, validate_name, Command, Compare, CompareOp, LeaseId, Target, TxnOp,
    MAX_TTL_MS, MAX_VALUE, MIN_TTL_MS,
};
use tenure_server::http::{
    campaign_command, dead_notice, grant_command, proclaim_request, resign_command,
    transfer_target, txn_command, ApiError,
};

/// Runs the target on one input.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 20 {
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
        8 => round_trip::<TxnBody>(body),
        9 => grant_request(body),
        10..=12 => {
            let Some((name, body)) = name_and_body(body) else { return };
            match which % 20 {
                10 => campaign(name, body),
                11 => resign(name, body),
                _ => proclaim(name, body),
            }
        }
        13 => round_trip::<CandidacyBody>(body),
        14 => round_trip::<ElectionBody>(body),
        15 => round_trip::<TokenCheckBody>(body),
        16 => {
            round_trip::<SessionBody>(body);
            round_trip::<SessionRevokedBody>(body);
        }
        17 => {
            round_trip::<ProclaimBody>(body);
            round_trip::<ResignBody>(body);
        }
        18 => observe_event(body),
        _ => {
            let Some((id, body)) = name_and_body(body) else { return };
            dead_notice_request(id, body);
        }
    }
}

fn dead_notice_request(id: &str, body: &[u8]) {
    let parsed = serde_json::from_slice::<DeadNoticeRequest>(body).map(|r| r.incarnation);
    match dead_notice(Ok(Path(id.to_string())), Json::<DeadNoticeRequest>::from_bytes(body)) {
        Ok((node, incarnation)) => {
            assert!(node.0 > 0 && incarnation > 0, "node {node}, incarnation {incarnation}");
            assert_eq!(id.parse::<u64>().ok(), Some(node.0), "the path and the check disagree");
            assert_eq!(parsed.ok(), Some(incarnation), "axum and serde disagree");
        }
        Err(e) => refused(e),
    }
    round_trip::<DeadNoticeBody>(body);
}

/// `NAME\nREST`: the name as the router hands it over (UTF-8), and the rest.
fn name_and_body(data: &[u8]) -> Option<(&str, &[u8])> {
    let newline = data.iter().position(|&b| b == b'\n')?;
    let name = std::str::from_utf8(&data[..newline]).ok()?;
    Some((name, &data[newline + 1..]))
}

/// A refusal is a 4xx.
fn refused(e: ApiError) {
    let status = e.into_response().status();
    assert!(status.is_client_error(), "{status}");
}

/// A command survives the log's encoding.
fn encodes(command: &Command) {
    assert_eq!(Command::decode(&command.encode()).as_ref(), Ok(command));
}

fn txn_request(body: &[u8]) {
    let Ok(Json(request)) = Json::<TxnRequest>::from_bytes(body) else { return };
    match txn_command(request) {
        Ok(command) => {
            assert!(matches!(command, Command::Txn { .. }), "{command:?}");
            encodes(&command);
        }
        Err(e) => refused(e),
    }
}

fn transfer_request(body: &[u8]) {
    let parsed = serde_json::from_slice::<TransferRequest>(body);
    match transfer_target(Json::<TransferRequest>::from_bytes(body)) {
        Ok(to) => {
            assert_ne!(to.0, 0, "node 0 accepted");
            assert_eq!(parsed.map(|r| r.to).ok(), Some(to.0), "axum and serde disagree");
        }
        Err(e) => refused(e),
    }
}

fn grant_request(body: &[u8]) {
    match grant_command(body, None) {
        Ok(command) => {
            let Command::Grant { ttl_ms, .. } = command else { panic!("{command:?}") };
            assert!((MIN_TTL_MS..=MAX_TTL_MS).contains(&ttl_ms), "{ttl_ms}");
            let parsed = serde_json::from_slice::<SessionGrantRequest>(body).map(|r| r.ttl_ms);
            assert_eq!(parsed.ok(), Some(ttl_ms), "axum and serde disagree");
            encodes(&command);
        }
        Err(e) => refused(e),
    }
}

/// An accepted name and session: the name is valid, the session positive
/// and the one serde reads.
fn accepted(name: &str, session: LeaseId, serde_session: Option<u64>) {
    assert!(validate_name(name).is_ok(), "{name:?} accepted");
    assert_ne!(session.0, 0, "session 0 accepted");
    assert_eq!(serde_session, Some(session.0), "axum and serde disagree");
}

/// The key is the candidate key of `session` in `name`.
fn candidate_key_of(key: &str, name: &str, session: LeaseId) {
    assert_eq!(parse_candidate_key(key), Some((name, session)), "{key}");
}

fn campaign(name: &str, body: &[u8]) {
    match campaign_command(name, body) {
        Ok((session, command)) => {
            let parsed = serde_json::from_slice::<CampaignRequest>(body).ok();
            accepted(name, session, parsed.as_ref().map(|r| r.session));
            let value = parsed.map(|r| r.value).unwrap_or_default();
            assert!(value.len() <= MAX_VALUE, "{} bytes accepted", value.len());
            let Command::Txn { success, .. } = &command else { panic!("{command:?}") };
            let [TxnOp::Put { key, value: put, lease }] = success.as_slice() else {
                panic!("{command:?}")
            };
            candidate_key_of(key, name, session);
            assert_eq!((put.as_slice(), *lease), (value.as_bytes(), Some(session)));
            encodes(&command);
        }
        Err(e) => refused(e),
    }
}

fn resign(name: &str, body: &[u8]) {
    match resign_command(name, body) {
        Ok((session, command)) => {
            let parsed = serde_json::from_slice::<ResignRequest>(body).ok();
            accepted(name, session, parsed.map(|r| r.session));
            match (parsed.and_then(|r| r.token), &command) {
                (None, Command::Delete { key, if_mod_revision: None }) => {
                    candidate_key_of(key, name, session)
                }
                (Some(token), Command::Txn { compare, success, failure }) => {
                    let [Compare { key, target: Target::CreateRevision(t), op: CompareOp::Equal }] =
                        compare.as_slice()
                    else {
                        panic!("{command:?}")
                    };
                    assert_eq!(*t, token);
                    assert_eq!(success.as_slice(), [TxnOp::Delete { key: key.clone() }]);
                    assert!(failure.is_empty());
                    candidate_key_of(key, name, session);
                }
                _ => panic!("{command:?}"),
            }
            encodes(&command);
        }
        Err(e) => refused(e),
    }
}

fn proclaim(name: &str, body: &[u8]) {
    match proclaim_request(name, body) {
        Ok((session, value)) => {
            let parsed = serde_json::from_slice::<ProclaimRequest>(body).ok();
            accepted(name, session, parsed.as_ref().map(|r| r.session));
            assert_eq!(parsed.map(|r| r.value.into_bytes()), Some(value.clone()));
            assert!(value.len() <= MAX_VALUE, "{} bytes accepted", value.len());
            for token in [1, u64::MAX] {
                let command = tenure_kv::proclaim(name, session, token, &value)
                    .expect("the recipe takes what the handler accepted");
                encodes(&command);
            }
        }
        Err(e) => refused(e),
    }
}

/// `EVENT\nDATA`: the client reads the raw event without panicking; an
/// event the server's type parses, written as the server writes it, is
/// read by the client as the same observation.
fn observe_event(data: &[u8]) {
    let Some((name, data)) = name_and_body(data) else { return };
    let Ok(text) = std::str::from_utf8(data) else { return };
    let event = |data: String| SseEvent { event: name.to_string(), id: None, data };
    let _ = parse_event("fuzz", &event(text.to_string()));
    let expected = match name {
        "leader" => serde_json::from_str::<ObservedLeaderBody>(text).ok().map(|b| {
            let observed = Observed::Leader {
                session: b.session,
                value: b.value.clone(),
                token: b.token,
                revision: b.revision,
            };
            (serde_json::to_string(&b), observed)
        }),
        "no-leader" => serde_json::from_str::<ObservedNoLeaderBody>(text)
            .ok()
            .map(|b| (serde_json::to_string(&b), Observed::NoLeader { revision: b.revision })),
        "compacted" => serde_json::from_str::<ErrorBody>(text).ok().and_then(|b| {
            let (compacted, current) = (b.compacted?, b.current?);
            Some((serde_json::to_string(&b), Observed::Missed { compacted, current }))
        }),
        _ => {
            let other = parse_event("fuzz", &event(text.to_string()));
            assert!(matches!(other, Ok(None)), "{name:?}: {other:?}");
            None
        }
    };
    let Some((written, observed)) = expected else { return };
    let read = parse_event("fuzz", &event(written.expect("a parsed body serializes")));
    assert_eq!(read.ok(), Some(Some(observed)));
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(body: &[u8]) {
    let Ok(value) = serde_json::from_slice::<T>(body) else { return };
    let json = serde_json::to_vec(&value).expect("a parsed body serializes");
    let again: T = serde_json::from_slice(&json).expect("serialized JSON parses");
    assert_eq!(again, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_reach_the_accepting_paths_and_the_refusals() {
        assert!(grant_command(br#"{"ttl_ms": 10000}"#, None).is_ok());
        assert!(grant_command(br#"{"ttl_ms": 100}"#, None).is_err());
        let session = r#"{"session": 3, "value": "v"}"#.as_bytes();
        assert!(campaign_command("db", session).is_ok());
        assert!(campaign_command("db.eu_1", br#"{"session": 3}"#).is_ok(), "value defaults");
        assert!(campaign_command("a/b", session).is_err());
        assert!(campaign_command("db", br#"{"session": 0, "value": "x"}"#).is_err());
        assert!(campaign_command("db", br#"{"session": 3, "value": "x", "ttl_ms": 1}"#).is_err());
        assert!(resign_command("db", br#"{"session": 3}"#).is_ok());
        assert!(resign_command("db", br#"{"session": -3}"#).is_err());
        assert!(proclaim_request("db", session).is_ok());
        assert!(proclaim_request("db", br#"{"session": 3}"#).is_err(), "a value is required");
        let big = format!(r#"{{"session": 3, "value": "{}"}}"#, "v".repeat(MAX_VALUE + 1));
        assert!(proclaim_request("db", big.as_bytes()).is_err());
        assert!(campaign_command("db", big.as_bytes()).is_err());
        let notice = |id: &str, body: &str| {
            dead_notice(Ok(Path(id.to_string())), Json::from_bytes(body.as_bytes()))
        };
        assert!(notice("2", r#"{"incarnation": 7}"#).is_ok());
        assert!(notice("2", r#"{"incarnation": 0}"#).is_err());
        assert!(notice("0", r#"{"incarnation": 7}"#).is_err());
        // And each seed passes its target (the corpus test runs them too).
        for (_, _, bytes) in crate::seeds::all().into_iter().filter(|s| s.0 == "http_json") {
            run(&bytes);
        }
    }
}
