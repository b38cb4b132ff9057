//! The `Observer` against a scripted observe server on loopback: a
//! resumption the cluster refuses (400: restored with a lower revision) is
//! a gap, reported once, then the state; a stream that drops between
//! `compacted` and the state after it does not report the gap twice.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenure_client::{Client, Cluster, Observed, TenureStore};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What one connection is answered: a status and body, or events (then
/// the stream ends, or stays open).
enum Answer {
    Refused(&'static str),
    Events(Vec<String>, bool),
}

fn leader(id: u64, token: u64) -> String {
    format!(
        "event: leader\nid: {id}\ndata: {{\"session\":1,\"value\":\"a\",\"token\":{token},\"revision\":{id}}}\n\n"
    )
}

fn compacted(compacted: u64, current: u64) -> String {
    format!(
        "event: compacted\ndata: {{\"error\":\"gone\",\"compacted\":{compacted},\"current\":{current}}}\n\n"
    )
}

/// The request's head; its `Last-Event-ID`, if any.
async fn last_event_id(stream: &mut TcpStream) -> Option<Option<String>> {
    let head = common::read_head(stream).await?;
    Some(common::header(&head, "last-event-id"))
}

/// Answers the connections in turn with `script` (given the request's
/// `Last-Event-ID`); records the ids asked with.
async fn serve(
    listener: TcpListener,
    script: impl Fn(usize, Option<&str>) -> Answer + Send + 'static,
    asked: Arc<Mutex<Vec<Option<String>>>>,
) {
    for n in 0.. {
        let Ok((mut stream, _)) = listener.accept().await else { return };
        let Some(id) = last_event_id(&mut stream).await else { continue };
        asked.lock().unwrap().push(id.clone());
        match script(n, id.as_deref()) {
            Answer::Refused(body) => {
                let answer = format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
            Answer::Events(events, stay) => {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            connection: close\r\n\r\n";
                let _ = stream.write_all(head.as_bytes()).await;
                for e in events {
                    let _ = stream.write_all(e.as_bytes()).await;
                }
                if stay {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        drop(stream);
                    });
                }
            }
        }
    }
}

async fn observer(
    script: impl Fn(usize, Option<&str>) -> Answer + Send + 'static,
) -> (tenure_client::Observer, Arc<Mutex<Vec<Option<String>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(serve(listener, script, asked.clone()));
    let cluster = Arc::new(Cluster::new(Client::default(), vec![up]).unwrap());
    (TenureStore::new(cluster).observer("db").unwrap(), asked)
}

async fn next(o: &mut tenure_client::Observer) -> Observed {
    tokio::time::timeout(Duration::from_secs(10), o.next())
        .await
        .expect("an observation in time")
        .expect("an observation")
}

fn at(revision: u64, token: u64) -> Observed {
    Observed::Leader { session: 1, value: "a".into(), token, revision }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_resumption_is_a_gap_then_the_state() {
    let (mut o, asked) = observer(|n, id| match (n, id) {
        (0, None) => Answer::Events(vec![leader(5, 4)], false),
        (_, Some(_)) => Answer::Refused(
            r#"{"error":"cannot resume after revision 5: the store is at revision 3"}"#,
        ),
        (_, None) => Answer::Events(vec![leader(3, 2)], true),
    })
    .await;
    assert_eq!(next(&mut o).await, at(5, 4));
    assert_eq!(next(&mut o).await, Observed::Missed { compacted: 5, current: 3 });
    assert_eq!(next(&mut o).await, at(3, 2), "the state, though a leader was last reported");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked, [None, Some("5".to_string()), None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_dropped_after_compacted_does_not_report_the_gap_twice() {
    let (mut o, asked) = observer(|n, id| match (n, id) {
        // `compacted`, then the stream ends before the state.
        (0, _) => Answer::Events(vec![leader(5, 4), compacted(9, 20)], false),
        (_, Some(_)) => Answer::Events(vec![compacted(9, 20), leader(20, 4)], true),
        (_, None) => Answer::Events(vec![leader(20, 4)], true),
    })
    .await;
    assert_eq!(next(&mut o).await, at(5, 4));
    assert_eq!(next(&mut o).await, Observed::Missed { compacted: 9, current: 20 });
    assert_eq!(next(&mut o).await, at(20, 4), "the state after the gap, though unchanged");
    assert_eq!(asked.lock().unwrap().len(), 2);
}
