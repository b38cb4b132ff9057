//! The scripted HTTP servers' shared piece: reading a request's head.

use tenure_client::{Client, Cluster};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// A cluster whose first endpoint nobody listens on and whose second is
/// `listener` (the scripted server): every call first meets a closed port.
#[allow(dead_code)] // Not every test binary that includes this module uses it.
pub async fn behind_a_closed_endpoint(listener: &TcpListener) -> Cluster {
    let up = format!("http://{}", listener.local_addr().unwrap());
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    Cluster::new(Client::default(), vec![down, up]).unwrap()
}

/// Reads a request's head, up to and including the blank line; None when
/// the connection closes first.
pub async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// The value of header `name` (any case) in `head`, trimmed.
#[allow(dead_code)] // Not every test binary that includes this module uses it.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, value) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| value.trim().to_string())
    })
}
