//! `TenureStore` (the `Store` trait over tenure's HTTP API) against a
//! scripted HTTP server on loopback, behind an endpoint nobody listens on:
//! a renewal's send time is read before the request leaves, not when the
//! answer comes; a 404 renewal or wait is `Gone`; a campaign's token is its
//! creation revision; waits are cut to the long-poll limit; resigning or
//! revoking what is already gone is not an error.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_client::store::MAX_WAIT;
use tenure_client::{SessionId, Store, StoreError, TenureStore, Waited};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// How long the scripted server holds a keepalive's answer.
const RENEW_DELAY: Duration = Duration::from_millis(150);

#[derive(Default)]
struct Script {
    /// Every request: its line and body.
    log: Mutex<Vec<(String, String)>>,
    renewals: AtomicU32,
    waits: AtomicU32,
    resigns: AtomicU32,
}

/// Reads one request (head and Content-Length body): its line and body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let head = common::read_head(stream).await?;
    let length = common::header(&head, "content-length").map_or(0, |v| v.parse().unwrap_or(0));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    let line = head.lines().next()?.to_string();
    Some((line, String::from_utf8_lossy(&body).into_owned()))
}

/// The answer to one request of session 7 in election `jobs`.
async fn answer(script: &Script, line: &str) -> (&'static str, &'static str) {
    const OK: &str = "200 OK";
    const GONE: &str = "404 Not Found";
    if line.starts_with("POST /v1/sessions/7/keepalive ") {
        tokio::time::sleep(RENEW_DELAY).await;
        match script.renewals.fetch_add(1, Ordering::SeqCst) {
            0 => (OK, r#"{"id":7,"ttl_ms":2000}"#),
            _ => (GONE, r#"{"error":"no session 7"}"#),
        }
    } else if line.starts_with("POST /v1/sessions ") {
        (OK, r#"{"id":7,"ttl_ms":2000}"#)
    } else if line.starts_with("DELETE /v1/sessions/7 ") {
        (GONE, r#"{"error":"no session 7"}"#)
    } else if line.starts_with("POST /v1/elections/jobs/campaign ") {
        (
            OK,
            r#"{"name":"jobs","session":7,"create_revision":12,"leader":false,"token":null,"ahead":1}"#,
        )
    } else if line.starts_with("GET /v1/elections/jobs/wait?session=7&timeout_ms=") {
        match script.waits.fetch_add(1, Ordering::SeqCst) {
            0 => (
                OK,
                r#"{"name":"jobs","session":7,"create_revision":12,"leader":false,"token":null,"ahead":1}"#,
            ),
            1 => (
                OK,
                r#"{"name":"jobs","session":7,"create_revision":12,"leader":true,"token":12,"ahead":0}"#,
            ),
            _ => (GONE, r#"{"error":"no candidacy"}"#),
        }
    } else if line.starts_with("POST /v1/elections/jobs/resign ") {
        match script.resigns.fetch_add(1, Ordering::SeqCst) {
            0 => (OK, r#"{"revision":13}"#),
            _ => (GONE, r#"{"error":"not a candidate"}"#),
        }
    } else if line.starts_with("GET /v1/elections/jobs/check?token=12 ") {
        (OK, r#"{"current":false,"token":null,"revision":13}"#)
    } else {
        ("400 Bad Request", r#"{"error":"unexpected"}"#)
    }
}

async fn serve(listener: TcpListener, script: Arc<Script>) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else { return };
        let script = script.clone();
        tokio::spawn(async move {
            while let Some((line, body)) = read_request(&mut stream).await {
                script.log.lock().unwrap().push((line.clone(), body));
                let (status, body) = answer(&script, &line).await;
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A store whose first endpoint is closed and whose second is scripted.
async fn setup() -> (TenureStore, Arc<Script>) {
    let script = Arc::new(Script::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cluster = common::behind_a_closed_endpoint(&listener).await;
    tokio::spawn(serve(listener, script.clone()));
    (TenureStore::new(Arc::new(cluster)), script)
}

fn requests(script: &Script, prefix: &str) -> Vec<(String, String)> {
    script.log.lock().unwrap().iter().filter(|(l, _)| l.starts_with(prefix)).cloned().collect()
}

#[tokio::test]
async fn a_renewal_carries_its_send_time_and_the_granted_ttl_until_the_session_is_gone() {
    let (store, script) = setup().await;
    let granted = store.grant(Duration::from_millis(2000)).await.unwrap();
    assert_eq!(granted.session, SessionId(7));
    assert_eq!(granted.ttl, Duration::from_millis(2000));
    let grants = requests(&script, "POST /v1/sessions ");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].1, r#"{"ttl_ms":2000}"#);

    let before = Instant::now();
    let renewed = store.renew(granted.session).await.unwrap();
    let after = Instant::now();
    // The server held the answer for RENEW_DELAY: the send time is the
    // moment before the request left, not the answer's arrival.
    assert!(after - before >= RENEW_DELAY, "{:?}", after - before);
    assert!(renewed.sent >= before && renewed.sent < before + RENEW_DELAY / 2);
    assert_eq!(
        renewed.deadline(),
        renewed.sent + tenure_client::session::trusted_span(renewed.ttl)
    );

    let gone = store.renew(granted.session).await.unwrap_err();
    assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
    // Revoking a session that is already gone is not an error.
    store.revoke(granted.session).await.unwrap();
    assert_eq!(requests(&script, "DELETE /v1/sessions/7 ").len(), 1);
}

#[tokio::test]
async fn a_candidacy_waits_leads_with_its_creation_revision_and_resigns_once() {
    let (store, script) = setup().await;
    let c = store.campaign(SessionId(7), "jobs", "host-a").await.unwrap();
    assert_eq!((c.token, c.leader, c.key.as_str()), (12, false, "0000000000000007"));
    let campaigns = requests(&script, "POST /v1/elections/jobs/campaign ");
    assert_eq!(campaigns.len(), 1, "a campaign is sent once");
    let body: serde_json::Value = serde_json::from_str(&campaigns[0].1).unwrap();
    assert_eq!(body, serde_json::json!({"session": 7, "value": "host-a"}));

    // A wait longer than the long-poll limit is cut to it.
    let first = store.wait(&c, 2 * MAX_WAIT).await.unwrap();
    assert_eq!(first, Waited::Ahead { ahead: 1 });
    let waits = requests(&script, "GET /v1/elections/jobs/wait");
    assert!(waits[0].0.contains(&format!("timeout_ms={} ", MAX_WAIT.as_millis())), "{waits:?}");
    assert_eq!(store.wait(&c, Duration::from_secs(1)).await.unwrap(), Waited::Leads { token: 12 });

    let check = store.check("jobs", 12).await.unwrap();
    assert!(!check.current);
    store.resign(&c).await.unwrap();
    // Resigning again, or waiting on a candidacy that is gone.
    store.resign(&c).await.unwrap();
    let gone = store.wait(&c, Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(gone, StoreError::Gone(_)), "{gone:?}");
}

#[tokio::test]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    let (store, script) = setup().await;
    let e = store.grant(Duration::from_millis(10)).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = store.campaign(SessionId(7), "no spaces", "v").await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = store.campaign(SessionId(7), "jobs", &"x".repeat(5000)).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert!(script.log.lock().unwrap().is_empty());
}
