//! The API's tokens against real `tenure server` processes: an anonymous or
//! read-only caller cannot move leadership, the CLI says what to do, and a
//! flood of refused requests leaves a summary in the log, not a line each,
//! and never a token.

use crate::harness::{serial, TestCluster, ADMIN_TOKEN, READ_TOKEN};
use hyper::Method;
use nix::sys::signal::Signal;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tenure_server::http::{MAX_CONNECTIONS, REJECTION_LOG_INTERVAL};

const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// Bound on a first election, including process start-up on a busy machine.
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);

/// Runs the CLI with `args` against `c` (trusting its CA), without
/// `TENURE_TOKEN` unless `token_env` gives it.
fn cli(c: &TestCluster, args: &[&str], token_env: Option<&str>) -> Output {
    let mut command = Command::new(crate::harness::exe());
    command.args(args).env_remove("TENURE_TOKEN").env("TENURE_CACERT", c.ca());
    if let Some(token) = token_env {
        command.env("TENURE_TOKEN", token);
    }
    command.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_token_moves_leadership() {
    let _serial = serial().await;
    let n = 3;
    let c = TestCluster::start(n, HEARTBEAT_MS, TIMEOUT_MS);
    let all: Vec<usize> = (0..n).collect();
    let (leader, term) = c.wait_agreement(&all, FIRST_ELECTION_BOUND).await;
    let target = (leader + 1) % n;
    let body = format!("{{\"to\": {}}}", c.servers[target].id);
    let json = Some(("application/json", body.as_str()));

    // The attack: anonymous transfers in a loop, to every node.
    let since = Instant::now();
    let mut refused = 0;
    while since.elapsed() < Duration::from_secs(1) {
        for i in 0..n {
            let r = c.request_as(i, None, Method::POST, "/v1/transfer", json).await.unwrap();
            assert_eq!(r.status, 401, "{}", r.text);
            assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"tenure\"");
            assert!(
                r.json["error"].as_str().unwrap().contains("needs a bearer token"),
                "{}",
                r.text
            );
            refused += 1;
        }
    }
    let wrong = "not-a-token-of-this-cluster";
    let r = c.request_as(leader, Some(wrong), Method::POST, "/v1/transfer", json).await.unwrap();
    assert_eq!(r.status, 401, "{}", r.text);
    assert!(r.headers["www-authenticate"].to_str().unwrap().contains("invalid_token"));
    let r = c.request_as(leader, Some(READ_TOKEN), Method::POST, "/v1/transfer", json).await;
    let r = r.unwrap();
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.json["error"], "this token's role is read; POST /v1/transfer needs admin");
    // No leader change: the same leader and term everywhere.
    assert_eq!(c.wait_agreement(&all, FIRST_ELECTION_BOUND).await, (leader, term));
    eprintln!("{refused} anonymous transfers refused; leader and term unchanged");

    // The CLI without a token, with a read token, with a world-readable file.
    let endpoints = (0..n).map(|i| c.endpoint(i)).collect::<Vec<_>>().join(",");
    let to = c.servers[target].id.to_string();
    let transfer = ["transfer", "--endpoints", &endpoints, "--to", &to];
    let out = cli(&c, &transfer, None);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(
            "the server wants a token: pass --token or --token-file, or set TENURE_TOKEN"
        ),
        "{}",
        text(&out)
    );
    let out = cli(&c, &transfer, Some(READ_TOKEN));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("this token's role is read; POST /v1/transfer needs admin"),
        "{}",
        text(&out)
    );
    let out = cli(&c, &["status", "--endpoints", &endpoints], None);
    assert!(!out.status.success(), "no status without a token");
    assert!(
        text(&out).contains("refused (") && text(&out).contains("TENURE_TOKEN"),
        "{}",
        text(&out)
    );
    let out = cli(&c, &["watch", "--endpoints", &endpoints], None);
    assert!(!out.status.success(), "watch gives up on a refused token");
    assert!(text(&out).contains("the server wants a token"), "{}", text(&out));
    let open_file = c.dir.path().join("open.token");
    std::fs::write(&open_file, ADMIN_TOKEN).unwrap();
    std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut with_file = transfer.to_vec();
    with_file.extend(["--token-file", open_file.to_str().unwrap()]);
    let out = cli(&c, &with_file, None);
    assert!(text(&out).contains("readable by every user"), "{}", text(&out));
    assert_eq!(c.wait_agreement(&all, FIRST_ELECTION_BOUND).await, (leader, term));

    // An admin token moves it.
    let out = cli(&c, &transfer, Some(ADMIN_TOKEN));
    assert!(out.status.success(), "{}", text(&out));
    let (now, new_term) = c.wait_agreement(&all, FIRST_ELECTION_BOUND).await;
    assert_eq!(now, target);
    assert!(new_term > term);
    // Reads with the read token, the probes without any.
    let out = cli(&c, &["status", "--json", "--endpoints", &endpoints], Some(READ_TOKEN));
    assert!(out.status.success(), "{}", text(&out));
    let r = c.request_as(now, None, Method::GET, "/v1/is-leader", None).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    let r = c.request_as(now, None, Method::GET, "/healthz", None).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Sends `GET /healthz` with the admin token (which proves the connection,
/// so it holds one of the places strangers cannot take) on a new HTTPS
/// connection to server `i` and reads the status line; returns the status
/// and the connection (kept open by the caller).
async fn healthz_on_new_connection(
    c: &TestCluster,
    i: usize,
) -> (u16, crate::harness::HttpsStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = c.connect_https(i).await;
    let request =
        format!("GET /healthz HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut byte)).await;
        assert_eq!(n.unwrap().unwrap(), 1, "the server answers");
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head).split(' ').nth(1).unwrap().parse().unwrap();
    (status, conn)
}

/// The `refused=N` field of a summary line.
fn refused_count(line: &str) -> u64 {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("refused=")).unwrap();
    field.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_requests_is_logged_as_a_summary_and_no_token_is_logged() {
    let _serial = serial().await;
    let mut c = TestCluster::new(1, HEARTBEAT_MS, TIMEOUT_MS);
    // The most verbose logs there are: no token may appear even there.
    // (rustls' own handshake traces, on since tonic turns on its `logging`
    // feature, are kept at info: they are not this code's, and a token
    // only ever travels inside the encrypted HTTP it cannot see.)
    c.env.push(("RUST_LOG".into(), "trace,rustls=info".into()));
    c.spawn(0);
    c.wait_leader(&[0], 0, Instant::now(), FIRST_ELECTION_BOUND).await;
    let before = std::fs::read_to_string(&c.servers[0].log).unwrap().lines().count();

    let per_kind = 200;
    let since = Instant::now();
    let json = Some(("application/json", "{\"to\": 2}"));
    for i in 0..per_kind {
        let r = c.request_as(0, None, Method::GET, "/v1/status", None).await.unwrap();
        assert_eq!(r.status, 401);
        let bad = format!("flood-bad-token-{i:04}-zz");
        let r = c.request_as(0, Some(&bad), Method::GET, "/metrics", None).await.unwrap();
        assert_eq!(r.status, 401);
        let r = c.request_as(0, Some(READ_TOKEN), Method::POST, "/v1/transfer", json).await;
        assert_eq!(r.unwrap().status, 403);
    }
    // Proven connections up to the cap, held open; then some over it, each
    // refused with 503.
    let mut held = Vec::new();
    let over_cap = 20;
    let mut refused_connections = 0;
    while refused_connections < over_cap {
        let (status, conn) = healthz_on_new_connection(&c, 0).await;
        match status {
            200 => held.push(conn),
            503 => refused_connections += 1,
            other => panic!("GET /healthz answered {other}"),
        }
        assert!(held.len() <= MAX_CONNECTIONS, "no cap after {} connections", held.len());
    }
    drop(held);
    let flood = since.elapsed();
    assert_eq!(
        c.request_as(0, Some(ADMIN_TOKEN), Method::GET, "/v1/status", None).await.unwrap().status,
        200
    );
    // A graceful stop writes the summary of the last interval.
    c.signal(0, Signal::SIGTERM);
    assert!(c.wait_exit(0, Duration::from_secs(10)).success());

    let log = std::fs::read_to_string(&c.servers[0].log).unwrap();
    let during: Vec<&str> = log.lines().skip(before).collect();
    let summaries: Vec<&str> =
        during.iter().copied().filter(|l| l.contains("HTTP requests refused")).collect();
    // One line per interval the flood spanned (and one for a partial one).
    let bound = 1 + (flood.as_secs_f64() / REJECTION_LOG_INTERVAL.as_secs_f64()).ceil() as usize;
    assert!(
        !summaries.is_empty() && summaries.len() <= bound,
        "{} summaries for a flood of {flood:?} (at most {bound}):\n{}",
        summaries.len(),
        summaries.join("\n")
    );
    let counted: u64 = summaries.iter().map(|l| refused_count(l)).sum();
    assert_eq!(counted, 3 * per_kind as u64 + over_cap, "{}", summaries.join("\n"));
    if summaries.len() == 1 {
        let s = summaries[0];
        for part in [
            "401 no token: 200",
            "401 invalid token: 200",
            "403 role too low: 200",
            "503 too many connections: 20",
        ] {
            assert!(s.contains(part), "{s}");
        }
        assert!(s.contains("most from 127.0.0.1 (620)"), "{s}");
    }
    // No line per refused request or connection: the whole log of the flood,
    // at trace level, is a handful of lines (start-up, stop, the summary).
    assert!(
        during.len() < 20,
        "{} log lines for {} refusals:\n{}",
        during.len(),
        counted,
        during.join("\n")
    );
    // No token, good or bad, anywhere in the log.
    for secret in [ADMIN_TOKEN, READ_TOKEN, "flood-bad-token"] {
        assert!(!log.contains(secret), "the log shows a token ({secret})");
    }
    eprintln!(
        "{} requests refused in {flood:?}: {} summary line(s), {} log lines at trace level",
        3 * per_kind as u64 + over_cap,
        summaries.len(),
        during.len()
    );
}
