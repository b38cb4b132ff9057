//! The key-value API's JSON to and from the store's commands and answers,
//! and the checks on keys: pure functions, tested without a server.

use super::error::ApiError;
use axum::http::StatusCode;
use tenure_api::{
    value_from, CompareBody, CompareOpName, KvBody, TargetName, TxnBody, TxnOpBody, TxnRequest,
    TxnResponseBody,
};
use tenure_kv::{Command, Compare, CompareOp, InvalidCommand, LeaseId, OpResponse, Target, TxnOp};

/// The API's body of `kv`: its value as a string, or in base64 if it is
/// not UTF-8.
pub fn kv_body(kv: &tenure_kv::KeyValue) -> KvBody {
    let (value, value_base64) = KvBody::encode_value(&kv.value);
    KvBody {
        key: kv.key.clone(),
        value,
        value_base64,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        lease: kv.lease.map(|l| l.0),
    }
}

/// Checks a key against the store's rules (not empty, at most
/// [`tenure_kv::MAX_KEY_BYTES`], no control character): the store's own
/// check of a command on that key, so the two cannot disagree.
pub fn check_key(key: &str) -> Result<(), InvalidCommand> {
    Command::Delete { key: key.to_string(), if_mod_revision: None }.validate()
}

/// Checks a prefix: as a key, but it may be empty (every key).
pub fn check_prefix(prefix: &str) -> Result<(), InvalidCommand> {
    match prefix {
        "" => Ok(()),
        p => check_key(p),
    }
}

/// The answer to a command over the store's limits: 413 for a value too
/// large, 400 otherwise; nothing was written.
pub fn invalid(e: &InvalidCommand) -> ApiError {
    let status = match e {
        InvalidCommand::ValueTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, format!("{e}; nothing was written"))
}

fn bad(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// The command of a `POST /v1/txn` body, or 400 naming the part that is
/// wrong (its limits are checked when it is proposed).
pub fn txn_command(request: TxnRequest) -> Result<Command, ApiError> {
    let compare = request
        .compare
        .into_iter()
        .enumerate()
        .map(|(i, c)| compare(c).map_err(|e| bad(format!("compare[{i}]: {e}"))))
        .collect::<Result<_, _>>()?;
    let branch = |name: &str, ops: Vec<TxnOpBody>| {
        ops.into_iter()
            .enumerate()
            .map(|(i, op)| txn_op(op).map_err(|e| bad(format!("{name}[{i}]: {e}"))))
            .collect::<Result<Vec<_>, _>>()
    };
    let success = branch("success", request.success)?;
    let failure = branch("failure", request.failure)?;
    Ok(Command::Txn { compare, success, failure })
}

fn compare(c: CompareBody) -> Result<Compare, String> {
    let op = match c.op {
        CompareOpName::Equal => CompareOp::Equal,
        CompareOpName::NotEqual => CompareOp::NotEqual,
        CompareOpName::Less => CompareOp::Less,
        CompareOpName::Greater => CompareOp::Greater,
    };
    let number = |what: &str| match (&c.value, &c.value_base64) {
        (_, Some(_)) => Err(format!("\"value_base64\" is for \"target\": \"value\"; {what}")),
        (Some(v), None) => v.as_u64().ok_or_else(|| format!("\"value\" is {v}; {what}")),
        (None, None) => Err(format!("\"value\" is missing; {what}")),
    };
    let target = match c.target {
        TargetName::ModRevision => {
            Target::ModRevision(number("a mod_revision is a number, 0 for absent")?)
        }
        TargetName::CreateRevision => {
            Target::CreateRevision(number("a create_revision is a number, 0 for absent")?)
        }
        TargetName::Version => Target::Version(number("a version is a number, 0 for absent")?),
        TargetName::Value => {
            let text = match &c.value {
                None => None,
                Some(serde_json::Value::String(s)) => Some(s.as_str()),
                Some(v) => return Err(format!("\"value\" is {v}; a value is a string")),
            };
            match value_from(text, c.value_base64.as_deref())? {
                Some(bytes) => Target::Value(bytes),
                None => return Err("\"value\" (or \"value_base64\") is missing".to_string()),
            }
        }
    };
    Ok(Compare { key: c.key, target, op })
}

fn txn_op(op: TxnOpBody) -> Result<TxnOp, String> {
    Ok(match op {
        TxnOpBody::Put { key, value, value_base64, lease } => {
            match value_from(value.as_deref(), value_base64.as_deref())? {
                Some(value) => TxnOp::Put { key, value, lease: lease.map(LeaseId) },
                None => return Err("a put needs \"value\" (or \"value_base64\")".to_string()),
            }
        }
        TxnOpBody::Delete { key } => TxnOp::Delete { key },
        TxnOpBody::Get { key } => TxnOp::Get { key },
    })
}

/// The answer to a committed transaction.
pub fn txn_body(
    succeeded: bool,
    revision: u64,
    fencing_token: u64,
    responses: &[OpResponse],
) -> TxnBody {
    let kv = |kv: &Option<tenure_kv::KeyValue>| kv.as_ref().map(kv_body);
    let responses = responses
        .iter()
        .map(|r| match r {
            OpResponse::Put { prev } => TxnResponseBody::Put { prev: kv(prev) },
            OpResponse::Delete { prev } => TxnResponseBody::Delete { prev: kv(prev) },
            OpResponse::Get { kv: found } => TxnResponseBody::Get { kv: kv(found) },
        })
        .collect();
    TxnBody { succeeded, revision, fencing_token, responses }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Json;
    use tenure_kv::{KeyValue, MAX_KEY_BYTES, MAX_TXN_OPS};

    /// The command of a JSON body, or the error message and status.
    fn parse(json: &str) -> Result<Command, (StatusCode, String)> {
        let request = Json::<TxnRequest>::from_bytes(json.as_bytes())
            .map_err(|r| (StatusCode::BAD_REQUEST, r.body_text()))?;
        let command = txn_command(request.0).map_err(|e| (e.status, e.body.error))?;
        command.validate().map_err(|e| {
            let a = invalid(&e);
            (a.status, a.body.error)
        })?;
        Ok(command)
    }

    fn error(json: &str) -> String {
        let (status, message) = parse(json).unwrap_err();
        assert!(status.is_client_error(), "{status}: {message}");
        message
    }

    #[test]
    fn a_txn_body_becomes_the_stores_command() {
        let json = r#"{
            "compare": [
                {"key": "lock", "target": "mod_revision", "op": "=", "value": 0},
                {"key": "cfg", "target": "value", "op": "!=", "value": "old"},
                {"key": "cfg", "target": "version", "op": "<", "value": 5},
                {"key": "bin", "target": "value", "op": ">", "value_base64": "/wA="},
                {"key": "cfg", "target": "create_revision", "op": ">", "value": 1}
            ],
            "success": [{"put": {"key": "lock", "value": "me"}}, {"delete": {"key": "old"}}],
            "failure": [{"get": {"key": "lock"}}, {"put": {"key": "b", "value_base64": "AAE="}}]
        }"#;
        let expected = Command::Txn {
            compare: vec![
                Compare {
                    key: "lock".into(),
                    target: Target::ModRevision(0),
                    op: CompareOp::Equal,
                },
                Compare {
                    key: "cfg".into(),
                    target: Target::Value(b"old".to_vec()),
                    op: CompareOp::NotEqual,
                },
                Compare { key: "cfg".into(), target: Target::Version(5), op: CompareOp::Less },
                Compare {
                    key: "bin".into(),
                    target: Target::Value(vec![0xff, 0]),
                    op: CompareOp::Greater,
                },
                Compare {
                    key: "cfg".into(),
                    target: Target::CreateRevision(1),
                    op: CompareOp::Greater,
                },
            ],
            success: vec![
                TxnOp::Put { key: "lock".into(), value: b"me".to_vec(), lease: None },
                TxnOp::Delete { key: "old".into() },
            ],
            failure: vec![
                TxnOp::Get { key: "lock".into() },
                TxnOp::Put { key: "b".into(), value: vec![0, 1], lease: None },
            ],
        };
        assert_eq!(parse(json), Ok(expected));
        // Every part may be left out: an empty transaction does nothing.
        assert_eq!(
            parse("{}"),
            Ok(Command::Txn { compare: vec![], success: vec![], failure: vec![] })
        );
    }

    #[test]
    fn a_malformed_txn_is_refused_naming_what_is_wrong() {
        let cases: &[(&str, &str)] = &[
            ("not json", "expected"),
            (r#"{"compare": {}}"#, "compare"),
            (r#"{"succes": []}"#, "unknown field `succes`"),
            (r#"{"success": [{"putt": {"key": "a"}}]}"#, "unknown variant `putt`"),
            (r#"{"success": [{"put": {"key": "a"}}]}"#, "success[0]: a put needs \"value\""),
            (r#"{"success": [{"put": {"value": "v"}}]}"#, "missing field `key`"),
            (
                r#"{"failure": [{"get": {"key": "a"}}, {"put": {"key": "a", "value": "x", "value_base64": "eA=="}}]}"#,
                "failure[1]: give \"value\" or \"value_base64\", not both",
            ),
            (r#"{"success": [{"put": {"key": "a", "value_base64": "%%"}}]}"#, "not base64"),
            (
                r#"{"compare": [{"key": "a", "target": "size", "op": "=", "value": 1}]}"#,
                "unknown variant `size`",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "version", "op": "==", "value": 1}]}"#,
                "unknown variant `==`",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "version", "op": "=", "value": "1"}]}"#,
                "compare[0]: \"value\" is \"1\"; a version is a number",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "mod_revision", "op": "=", "value": -1}]}"#,
                "a mod_revision is a number",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "mod_revision", "op": "="}]}"#,
                "\"value\" is missing",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "value", "op": "=", "value": 3}]}"#,
                "a value is a string",
            ),
            (
                r#"{"compare": [{"key": "a", "target": "version", "op": "=", "value_base64": "AA=="}]}"#,
                "\"value_base64\" is for \"target\": \"value\"",
            ),
            (r#"{"success": [{"put": {"key": "", "value": "v"}}]}"#, "the key is empty"),
            (
                r#"{"success": [{"put": {"key": "a", "value": "1"}}, {"delete": {"key": "a"}}]}"#,
                "writes key \"a\" twice",
            ),
        ];
        for (json, expected) in cases {
            let message = error(json);
            assert!(message.contains(expected), "{json}: {message:?} lacks {expected:?}");
        }
        let many = format!(
            r#"{{"success": [{}]}}"#,
            vec![r#"{"get": {"key": "k"}}"#; MAX_TXN_OPS + 1].join(",")
        );
        assert_eq!(parse(&many).unwrap_err().0, StatusCode::BAD_REQUEST);
        let big = format!(
            r#"{{"success": [{{"put": {{"key": "k", "value": "{}"}}}}]}}"#,
            "x".repeat(tenure_kv::MAX_VALUE_BYTES + 1)
        );
        assert_eq!(parse(&big).unwrap_err().0, StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn keys_follow_the_stores_rules() {
        assert!(check_key("a/b c/ü").is_ok());
        assert_eq!(check_key(""), Err(InvalidCommand::EmptyKey));
        assert_eq!(check_key("a\u{7f}"), Err(InvalidCommand::ControlCharacter));
        assert_eq!(check_key("a\tb"), Err(InvalidCommand::ControlCharacter));
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert_eq!(check_key(&long), Err(InvalidCommand::KeyTooLong(MAX_KEY_BYTES + 1)));
        assert!(check_key(&long[1..]).is_ok());
        assert!(check_prefix("").is_ok());
        assert!(check_prefix("a\n").is_err());
        let e = invalid(&InvalidCommand::EmptyKey);
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.body.error.contains("nothing was written"));
        assert_eq!(
            invalid(&InvalidCommand::ValueTooLarge(1)).status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }

    #[test]
    fn answers_carry_text_as_text_and_other_bytes_in_base64() {
        let kv = |value: &[u8]| KeyValue {
            key: "k".into(),
            value: value.to_vec(),
            create_revision: 1,
            mod_revision: 2,
            version: 2,
            lease: None,
        };
        let body = txn_body(
            true,
            2,
            7,
            &[
                OpResponse::Put { prev: Some(kv(b"text")) },
                OpResponse::Get { kv: Some(kv(&[0xff, 0xfe])) },
                OpResponse::Delete { prev: None },
            ],
        );
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["fencing_token"], 7);
        assert_eq!(json["responses"][0]["put"]["prev"]["value"], "text");
        assert!(json["responses"][0]["put"]["prev"].get("value_base64").is_none());
        let get = &json["responses"][1]["get"]["kv"];
        assert_eq!(get["value_base64"], "//4=");
        assert!(get.get("value").is_none(), "{get}");
        assert!(json["responses"][2]["delete"]["prev"].is_null());
        // And back: the CLI reads the same bodies.
        let back: TxnBody = serde_json::from_value(json).unwrap();
        let TxnResponseBody::Get { kv: Some(got) } = &back.responses[1] else { panic!("a get") };
        assert_eq!(got.value_bytes(), Ok(vec![0xff, 0xfe]));
    }
}
