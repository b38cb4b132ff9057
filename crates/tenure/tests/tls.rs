//! TLS end to end, with real `tenure server` processes: certificates from
//! `tenure cert`, HTTPS for the clients with `--cacert`, clear errors for
//! files that cannot work (before anything is bound), the explicit insecure
//! mode, and a flood of refused peer connections that logs a count, not a
//! line each.

mod harness;

use harness::{serial, TestCluster};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 20;
const TIMEOUT_MS: u64 = 200;
/// What the CLI says of a port that asks for a client certificate.
const CERTIFICATE_PORT: &str =
    "peer port (--listen) or etcd listener (--etcd-listen), not its API port";
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);

/// Runs the `tenure` binary (with the test servers' admin token in
/// `TENURE_TOKEN`); returns (success, stdout, stderr).
fn tenure(args: &[&str], env: &[(&str, &std::path::Path)]) -> (bool, String, String) {
    let mut c = Command::new(harness::exe());
    c.args(args).env("TENURE_TOKEN", harness::ADMIN_TOKEN);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_talks_https_with_the_cluster_ca() {
    let _serial = serial().await;
    let c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    let (leader, _) = c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    let plain: Vec<String> =
        (0..3).map(|i| format!("127.0.0.1:{}", c.servers[i].http_port)).collect();
    let endpoints = plain.join(",");
    let ca = c.ca();

    // --cacert: endpoints without a scheme are https, checked against the CA.
    let (ok, out, err) =
        tenure(&["status", "--endpoints", &endpoints, "--cacert", ca.to_str().unwrap()], &[]);
    assert!(ok, "{out}{err}");
    assert!(out.contains(&format!("https://{}", plain[leader])), "{out}");
    assert!(out.contains("leader"), "{out}");
    // HTTPS and tokens together: the CA alone is not enough to be answered.
    let out = Command::new(harness::exe())
        .args(["status", "--endpoints", &endpoints, "--cacert", ca.to_str().unwrap()])
        .env_remove("TENURE_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && text.contains("the server wants a token"), "{text}");
    // The same from TENURE_CACERT.
    let (ok, out, _) = tenure(&["status", "--endpoints", &endpoints], &[("TENURE_CACERT", &ca)]);
    assert!(ok && out.contains("https://"), "{out}");

    // Without the CA: plain HTTP gets the server's advice, https is refused here.
    let (ok, out, _) = tenure(&["status", "--endpoints", &endpoints], &[]);
    assert!(!ok && out.contains("speaks HTTPS only"), "{out}");
    let https = format!("https://{}", plain[0]);
    let (ok, _, err) = tenure(&["status", "--endpoints", &https], &[]);
    assert!(!ok && err.contains("--cacert"), "{err}");

    // A CA that did not sign the servers' certificates: no answer is trusted.
    let other = c.dir.path().join("other-ca");
    harness::tenure_cert(&["--out", other.to_str().unwrap(), "--nodes", "1"]);
    let other_ca = other.join("ca.pem");
    let (ok, out, _) =
        tenure(&["status", "--endpoints", &endpoints, "--cacert", other_ca.to_str().unwrap()], &[]);
    assert!(!ok && out.contains("not signed by the CA of --cacert"), "{out}");
    // A peer port instead of an API port: it asks for a client certificate.
    let peer = format!("127.0.0.1:{}", c.servers[0].peer_port);
    let (ok, out, _) =
        tenure(&["status", "--endpoints", &peer, "--cacert", ca.to_str().unwrap()], &[]);
    assert!(!ok && out.contains(CERTIFICATE_PORT), "{out}");
    // `tenure kv`, which asks every endpoint again until --wait-ms runs
    // out, gives up at once on a peer port and on a CA that does not fit:
    // no retry mends them. (It waited out the whole --wait-ms before.)
    for (endpoints, cacert, said) in [
        (&peer, &ca, CERTIFICATE_PORT),
        (&endpoints, &other_ca, "not signed by the CA of --cacert"),
    ] {
        // A write too: refused at TLS, it cannot have been applied (no
        // "outcome unknown").
        for command in [&["get", "k"][..], &["put", "k", "v"]] {
            let started = Instant::now();
            let flags = ["--endpoints", endpoints, "--wait-ms", "60000", "--cacert"];
            let args = [&["kv"][..], command, &flags, &[cacert.to_str().unwrap()]].concat();
            let (ok, out, err) = tenure(&args, &[]);
            assert!(!ok && err.contains(said), "{command:?}: {out}{err}");
            assert!(err.contains("asking again would not help"), "{command:?}: {out}{err}");
            assert!(started.elapsed() < Duration::from_secs(30), "{:?}: {err}", started.elapsed());
        }
    }
    // An empty TENURE_CACERT is no CA, as if unset (an `export TENURE_CACERT=`).
    let (ok, out, err) =
        tenure(&["status", "--endpoints", &endpoints], &[("TENURE_CACERT", "".as_ref())]);
    assert!(!ok && out.contains("speaks HTTPS only"), "{out}{err}");

    // A client that sends the address as the TLS server name (TLS forbids
    // it; gRPC's C core does it, here openssl): answered, and not logged.
    let sni = Command::new("openssl")
        .args(["s_client", "-connect", &plain[0], "-servername", "127.0.0.1", "-CAfile"])
        .arg(&ca)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl runs");
    let said = String::from_utf8_lossy(&sni.stdout);
    assert!(said.contains("Verify return code: 0"), "{said}");
    let log = std::fs::read_to_string(&c.servers[0].log).unwrap();
    assert!(!log.contains("Illegal SNI"), "{log}");

    // transfer over https.
    let to = c.servers[(leader + 1) % 3].id.to_string();
    let (ok, out, err) =
        tenure(&["transfer", "--to", &to, "--endpoints", &endpoints], &[("TENURE_CACERT", &ca)]);
    assert!(ok && out.contains("leadership moved"), "{out}{err}");
}

/// A port that asks for a client certificate and closes the connection
/// without a word once the handshake is done (as a peer port does when its
/// TLS 1.3 alert comes too late to be read): the CLI still says it is a
/// peer port, not "connection was not ready". And it says it at all: the
/// CLI's write to the closed socket raises SIGPIPE, which killed `tenure
/// status` silently (exit 141, nothing printed) in 10 runs of 15 before
/// its handler looked at whether stdout was what broke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_asks_for_a_certificate_then_hangs_up_is_named_a_peer_port() {
    use rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls;
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    harness::tenure_cert(&["--out", certs.to_str().unwrap(), "--nodes", "1"]);
    let ca = certs.join("ca.pem");
    let roots = std::sync::Arc::new(tenure_node::tls::read_roots(&ca).unwrap());
    let provider = tenure_node::tls::provider();
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
            .allow_unauthenticated()
            .build()
            .unwrap();
    let chain = rustls::pki_types::CertificateDer::pem_file_iter(certs.join("node-1.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_file(certs.join("node-1-key.pem")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            // Handshake, then hang up: no alert, no answer.
            drop(acceptor.accept(tcp).await);
        }
    });
    let endpoint = format!("127.0.0.1:{port}");
    let cli = tokio::task::spawn_blocking(move || {
        tenure(&["status", "--endpoints", &endpoint, "--cacert", ca.to_str().unwrap()], &[])
    });
    let (ok, out, err) = cli.await.unwrap();
    server.abort();
    assert!(!ok && out.contains(CERTIFICATE_PORT), "{out}{err}");
}

#[test]
fn without_certificates_or_the_opt_out_the_server_refuses_to_start() {
    let (ok, _, err) = tenure(&["server", "--id", "1"], &[]);
    assert!(!ok);
    assert!(err.contains("no TLS certificate") && err.contains("tenure cert"), "{err}");
    assert!(err.contains("--insecure-no-tls"), "{err}");
}

#[test]
fn a_file_that_cannot_work_is_named_before_any_port_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    harness::tenure_cert(&["--out", certs.to_str().unwrap(), "--nodes", "1,2"]);
    // Hold the ports: had the server bound first, the error would be about them.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (http_addr, peer_addr) = (http.local_addr().unwrap(), peer.local_addr().unwrap());
    let run = |cert: &str, key: &str, ca: &str| {
        let f = |name: &str| certs.join(name).to_str().unwrap().to_string();
        let peers = format!("1={peer_addr}");
        let http = http_addr.to_string();
        let args = [
            "server",
            "--insecure-open-api",
            "--id",
            "1",
            "--peers",
            &peers,
            "--single-node",
            "--http",
            &http,
            "--tls-cert",
            &f(cert),
            "--tls-key",
            &f(key),
            "--tls-ca",
            &f(ca),
        ];
        let (ok, _, err) = tenure(&args, &[]);
        assert!(!ok, "the server started with {cert} {key} {ca}");
        assert!(!err.contains("cannot listen"), "it bound first: {err}");
        err
    };
    let err = run("node-1.pem", "node-1.pem", "ca.pem");
    assert!(
        err.contains("key file") && err.contains("node-1.pem") && err.contains("no private key"),
        "{err}"
    );
    let err = run("node-1.pem", "node-2-key.pem", "ca.pem");
    assert!(err.contains("does not belong to the certificate"), "{err}");
    let err = run("node-2.pem", "node-2-key.pem", "ca.pem");
    assert!(err.contains("does not name node-1.tenure"), "{err}");
    // Made for node 1 of cluster "prod", started without --cluster-id: the
    // fix is the cluster id, not a new certificate.
    let prod = certs.join("prod");
    std::fs::create_dir_all(&prod).unwrap();
    for f in ["ca.pem", "ca-key.pem"] {
        std::fs::copy(certs.join(f), prod.join(f)).unwrap();
    }
    let out = prod.to_str().unwrap();
    harness::tenure_cert(&["--out", out, "--nodes", "1", "--cluster-id", "prod"]);
    let err = run("prod/node-1.pem", "prod/node-1-key.pem", "ca.pem");
    assert!(
        err.contains("it names node-1.prod") && err.contains("start it with --cluster-id prod"),
        "{err}"
    );
    let err = run("node-1.pem", "node-1-key.pem", "missing.pem");
    assert!(err.contains("cannot read the CA file") && err.contains("missing.pem"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_insecure_mode_warns_at_start_and_works() {
    let _serial = serial().await;
    let mut c = TestCluster::new(3, HEARTBEAT_MS, TIMEOUT_MS);
    for i in 0..3 {
        c.servers[i].tls = false;
        c.spawn(i);
    }
    let (leader, _) = c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    assert!(c.endpoint(leader).starts_with("http://"));
    let log = std::fs::read_to_string(&c.servers[leader].log).unwrap();
    assert!(log.contains("INSECURE: peer connections run without TLS"), "{log}");
    assert!(log.contains("INSECURE: the HTTP API runs without TLS"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_peer_connections_logs_a_count_not_a_line_each() {
    let _serial = serial().await;
    let mut c = TestCluster::start(3, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&[0, 1, 2], FIRST_ELECTION_BOUND).await;
    let before = std::fs::metadata(&c.servers[0].log).unwrap().len();
    let addr = format!("127.0.0.1:{}", c.servers[0].peer_port);
    let flood = 300;
    let since = Instant::now();
    for _ in 0..flood {
        // Plain bytes on the TLS port: refused, told why, closed.
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"\0\0\0\x05hello");
        let _ = s.read_to_end(&mut Vec::new());
    }
    let flooded_for = since.elapsed();
    c.signal(0, nix::sys::signal::Signal::SIGTERM);
    c.wait_exit(0, Duration::from_secs(10));
    let log = std::fs::read_to_string(&c.servers[0].log).unwrap();
    let one_by_one = log
        .lines()
        .filter(|l| l.contains("refused a peer connection") && l.contains("requires TLS"));
    assert!(one_by_one.count() <= 5, "{log}");
    let summaries: Vec<&str> = log.lines().filter(|l| l.contains("(summary)")).collect();
    let counted: u64 = summaries
        .iter()
        .filter_map(|l| l.split("refused=").nth(1)?.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    assert!(
        counted + 5 >= flood,
        "{flood} refusals in {flooded_for:?}, {counted} summarised: {summaries:#?}"
    );
    let grown = std::fs::metadata(&c.servers[0].log).unwrap().len() - before;
    assert!(grown < 16 * 1024, "the log grew by {grown} bytes for {flood} refusals");
}
