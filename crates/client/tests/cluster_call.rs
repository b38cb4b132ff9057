//! `Cluster::call` over endpoints that fail differently: a live node that
//! answers 503 (no leader) before a dead one. What the live node said is
//! the answer, not the dead node's silence (`tenure member` hid "no leader
//! is known" behind "connection refused" of whichever endpoint came last).

mod common;

use std::time::Duration;
use tenure_client::cluster::Retry;
use tenure_client::{Client, Cluster};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

#[tokio::test]
async fn a_live_nodes_503_is_the_answer_when_the_last_endpoint_is_dead() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = format!("http://{}", listener.local_addr().unwrap());
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        common::read_head(&mut stream).await.unwrap();
        let body = r#"{"error":"no leader is known right now"}"#;
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(answer.as_bytes()).await.unwrap();
    });
    let cluster = Cluster::new(Client::default(), vec![up.clone(), down]).unwrap();
    let (url, answer) = cluster
        .call(hyper::Method::GET, "/v1/members", None, Duration::from_secs(5), Retry::Idempotent)
        .await
        .expect("the live node's answer");
    assert_eq!(url, format!("{up}/v1/members"));
    assert_eq!(answer.status, hyper::StatusCode::SERVICE_UNAVAILABLE);
    server.await.unwrap();
}
