//! The scripted HTTP servers' shared piece: reading a request's head.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

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
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, value) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| value.trim().to_string())
    })
}
