//! The web dashboard (`GET /` of every `tenure server`) in a real browser:
//! headless Chromium, driven through chromedriver, against a real 3-node
//! cluster of `tenure server` processes (mutual TLS, HTTPS, API tokens; the
//! process harness in `harness/`). The page is opened the way a person opens
//! it: its URL on one node, the read token typed into its token form.
//!
//! Run them with
//!
//! ```sh
//! cargo test -p tenure --test serial dashboard:: -- --nocapture
//! ```
//!
//! They need `chromium` and `chromedriver` (Debian: `apt-get install chromium
//! chromium-driver`); `TENURE_CHROMIUM` and `TENURE_CHROMEDRIVER` name other
//! binaries. Without them a test prints why and passes as skipped, unless
//! `TENURE_BROWSER_REQUIRE=1` (CI sets it), where that is a failure.
//!
//! Every test saves screenshots (PNG) to
//! `target/dashboard-screenshots/<test>-<step>.png` (under `CARGO_TARGET_DIR`
//! when it is set) and prints their paths; a failing wait saves
//! `<test>-<step>-failed.png` and prints the page's text, the browser console
//! and the servers' logs.
//!
//! HTTPS: the servers' certificates come from the harness's private CA.
//! Chromium is started with `--ignore-certificate-errors-spki-list` naming the
//! SHA-256 of the three nodes' public keys, so it accepts exactly those
//! servers (any other certificate error still fails), and the page is tested
//! over the same HTTPS a deployment serves. `--ignore-certificate-errors`
//! would accept any certificate; turning TLS off would test another server.

use crate::browser::{Browser, DESKTOP};
use crate::harness::{serial, TestCluster, READ_TOKEN};
use hyper::Method;
use serde::Deserialize;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Fast timings, as the other process tests use: a failover takes about one
/// election timeout.
const HEARTBEAT_MS: u64 = 50;
const TIMEOUT_MS: u64 = 500;
/// Bound on a first election, including process start-up on a busy machine.
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);
/// Bound on the page's first complete view (token form, login, first poll).
const PAGE_LOAD_BOUND: Duration = Duration::from_secs(10);
/// Bound on a failover or transfer as the harness sees it.
const CHANGE_BOUND: Duration = Duration::from_secs(10);
/// The bound: once the cluster has a new leader, the page shows it
/// (and the change in its timeline) within this.
const PAGE_BOUND: Duration = Duration::from_secs(2);
/// How often the tests read the page.
const PAGE_POLL: Duration = Duration::from_millis(20);
/// A phone's viewport.
const PHONE: (u32, u32) = (375, 800);
const N: usize = 3;

/// One node card of `#cluster`.
#[derive(Debug, Clone, Deserialize)]
struct Card {
    node: Option<String>,
    state: Option<String>,
}

/// One `<li>` of `#timeline`.
#[derive(Debug, Clone, Deserialize)]
struct Entry {
    term: Option<String>,
    leader: Option<String>,
    cause: Option<String>,
    text: String,
}

/// What the page shows, read in one script run (the DOM contract).
#[derive(Debug, Clone, Deserialize)]
struct Snapshot {
    /// `<body data-node>`, `data-auth`.
    node: Option<String>,
    auth: Option<String>,
    /// `#token-form` is on the page and rendered.
    token_form: bool,
    /// `#leader`'s `data-leader`, `data-term` and text (None: no `#leader`).
    leader: Option<String>,
    term: Option<String>,
    headline: Option<String>,
    /// `#live`'s text.
    live: Option<String>,
    cards: Vec<Card>,
    /// The first (newest) `#timeline li`.
    newest: Option<Entry>,
    timeline_entries: usize,
    /// Required sections that are not on the page.
    missing: Vec<String>,
}

const SNAPSHOT_JS: &str = r#"
const q = (s) => document.querySelector(s);
const shown = (e) => !!e && e.getClientRects().length > 0;
const leader = q('#leader');
const newest = q('#timeline li');
return {
  node: document.body ? document.body.dataset.node ?? null : null,
  auth: document.body ? document.body.dataset.auth ?? null : null,
  token_form: shown(q('#token-form')),
  leader: leader ? leader.dataset.leader ?? null : null,
  term: leader ? leader.dataset.term ?? null : null,
  headline: leader ? leader.innerText : null,
  live: q('#live') ? q('#live').innerText : null,
  cards: [...document.querySelectorAll('#cluster article.node')]
    .map((a) => ({ node: a.dataset.node ?? null, state: a.dataset.state ?? null })),
  newest: newest ? {
    term: newest.dataset.term ?? null,
    leader: newest.dataset.leader ?? null,
    cause: newest.dataset.cause ?? null,
    text: newest.innerText,
  } : null,
  timeline_entries: document.querySelectorAll('#timeline li').length,
  missing: ['#leader', '#live', '#cluster', '#timeline', '#replication', '#elections', '#failovers']
    .filter((s) => !q(s)),
};
"#;

impl Snapshot {
    fn leader_id(&self) -> Option<u64> {
        self.leader.as_deref()?.trim().parse().ok()
    }

    fn term(&self) -> Option<u64> {
        self.term.as_deref()?.trim().parse().ok()
    }

    /// The `data-state` of node `id`'s card.
    fn state_of(&self, id: u64) -> Option<&str> {
        let id = id.to_string();
        self.cards.iter().find(|c| c.node.as_deref() == Some(&id))?.state.as_deref()
    }

    /// The newest timeline entry names `leader`, `term` and `cause`.
    fn newest_is(&self, leader: u64, term: u64, cause: &str) -> bool {
        self.newest.as_ref().is_some_and(|e| {
            e.leader.as_deref() == Some(&leader.to_string())
                && e.term.as_deref() == Some(&term.to_string())
                && e.cause.as_deref() == Some(cause)
        })
    }

    /// The stream state says live (not reconnecting).
    fn is_live(&self) -> bool {
        self.live.as_deref().is_some_and(|t| {
            let t = t.to_lowercase();
            t.contains("live") && !t.contains("reconnect")
        })
    }
}

async fn snapshot(b: &Browser) -> Snapshot {
    let value = b.js(SNAPSHOT_JS, vec![]).await;
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("the page snapshot {value} does not parse: {e}"))
}

/// Saves `<step>-failed.png` and gathers what a person needs to see why:
/// the message, the last snapshot, the page's text, the console and the
/// servers' logs.
async fn failure(b: &Browser, c: &TestCluster, step: &str, msg: &str, last: &Snapshot) -> String {
    b.screenshot(&format!("{step}-failed")).await;
    let text = b.page_text().await;
    let console: Vec<String> =
        b.console().await.iter().map(|e| format!("  {} {}", e.level, e.message)).collect();
    format!(
        "{step}: {msg}\nlast snapshot: {last:#?}\n--- page text ---\n{text}\n--- browser console ---\n{}\n{}",
        console.join("\n"),
        c.logs()
    )
}

/// Reads the page every [`PAGE_POLL`] until `ok` holds; fails after `bound`.
async fn wait_page(
    b: &Browser,
    c: &TestCluster,
    step: &str,
    bound: Duration,
    ok: impl Fn(&Snapshot) -> bool,
) -> Snapshot {
    let since = Instant::now();
    loop {
        let s = snapshot(b).await;
        if ok(&s) {
            return s;
        }
        if since.elapsed() > bound {
            panic!("{}", failure(b, c, step, &format!("not shown within {bound:?}"), &s).await);
        }
        tokio::time::sleep(PAGE_POLL).await;
    }
}

/// The certificates Chromium accepts: the nodes'.
fn node_certs(c: &TestCluster) -> Vec<PathBuf> {
    c.servers.iter().map(|s| c.dir.path().join(format!("certs/node-{}.pem", s.id))).collect()
}

fn id(c: &TestCluster, i: usize) -> u64 {
    c.servers[i].id
}

/// Opens the dashboard on node `i` as a person does: its URL, then the read
/// token typed into the token form. Returns once the page names a leader
/// and shows every node's card.
async fn open_dashboard(c: &TestCluster, b: &Browser, i: usize) -> Snapshot {
    b.goto(&format!("{}/", c.endpoint(i))).await;
    let node = id(c, i).to_string();
    let s = wait_page(b, c, "token-form", PAGE_LOAD_BOUND, |s| {
        s.node.as_deref() == Some(&node)
            && s.auth.is_some()
            && (s.token_form || s.auth.as_deref() != Some("token"))
    })
    .await;
    assert_eq!(s.auth.as_deref(), Some("token"), "the servers require tokens: {s:#?}");
    b.screenshot("token-form").await;
    b.type_into("#token", READ_TOKEN).await;
    b.click("#token-form [type=submit], #token-form button:not([type])").await;
    wait_page(b, c, "first-view", PAGE_LOAD_BOUND, |s| {
        !s.token_form && s.leader_id().is_some() && s.cards.len() == N
    })
    .await
}

/// Waits until the page names `leader` in `term`, with the leader's card a
/// leader and every other card a follower.
async fn wait_page_agrees(
    c: &TestCluster,
    b: &Browser,
    step: &str,
    leader: usize,
    term: u64,
) -> Snapshot {
    let leader_id = id(c, leader);
    wait_page(b, c, step, PAGE_LOAD_BOUND, |s| {
        s.leader_id() == Some(leader_id)
            && s.term() == Some(term)
            && (0..N).all(|i| {
                let want = if i == leader { "leader" } else { "follower" };
                s.state_of(id(c, i)) == Some(want)
            })
    })
    .await
}

/// A leadership change as the cluster and the page saw it.
struct Change {
    /// The new leader (index) and term, from the servers' `/v1/status`.
    leader: usize,
    term: u64,
    /// When the harness first saw the new leader.
    cluster_at: Instant,
    /// When `#leader` first named a leader other than the old one in a higher term.
    page_leader_at: Instant,
    /// When the page showed everything `shown` asks for.
    page_at: Instant,
    page: Snapshot,
}

/// Polls `among`'s `/v1/status` and the page together, until the page shows
/// the new leader in full (`shown(page, new leader id, new term)`), at most
/// [`PAGE_BOUND`] after the cluster has it. `old` is the leader (index) and
/// term before the change.
async fn watch_change(
    c: &TestCluster,
    b: &Browser,
    step: &str,
    among: &[usize],
    old: (usize, u64),
    since: Instant,
    shown: impl Fn(&Snapshot, u64, u64) -> bool,
) -> Change {
    let (old_leader, old_term) = (id(c, old.0), old.1);
    let mut cluster: Option<(usize, u64, Instant)> = None;
    let mut page_leader_at = None;
    loop {
        if cluster.is_none() {
            for &i in among {
                if let Some(st) = c.status(i).await {
                    let term = st["term"].as_u64().unwrap_or(0);
                    if st["role"] == "leader" && term > old_term {
                        cluster = Some((i, term, Instant::now()));
                        break;
                    }
                }
            }
        }
        let s = snapshot(b).await;
        let now = Instant::now();
        if page_leader_at.is_none()
            && s.leader_id().is_some_and(|l| l != old_leader)
            && s.term().is_some_and(|t| t > old_term)
        {
            page_leader_at = Some(now);
        }
        if let Some((leader, term, cluster_at)) = cluster {
            if shown(&s, id(c, leader), term) {
                return Change {
                    leader,
                    term,
                    cluster_at,
                    page_leader_at: page_leader_at.unwrap_or(now),
                    page_at: now,
                    page: s,
                };
            }
            if now > cluster_at + PAGE_BOUND {
                let msg = format!(
                    "node {} leads term {term} since {:?} after the change began; the page does \
                     not show it in full within {PAGE_BOUND:?}",
                    id(c, leader),
                    cluster_at - since
                );
                panic!("{}", failure(b, c, step, &msg, &s).await);
            }
        } else if now > since + CHANGE_BOUND {
            let msg = format!("no new leader among {among:?} within {CHANGE_BOUND:?}");
            panic!("{}", failure(b, c, step, &msg, &s).await);
        }
        tokio::time::sleep(PAGE_POLL).await;
    }
}

/// Page layout facts at the current window size.
#[derive(Debug, Deserialize)]
struct Layout {
    inner_width: f64,
    inner_height: f64,
    scroll_width: f64,
    /// `#leader`'s box and whether it is rendered visibly.
    left: f64,
    right: f64,
    top: f64,
    width: f64,
    height: f64,
    visible: bool,
}

const LAYOUT_JS: &str = r#"
const e = document.querySelector('#leader');
const r = e.getBoundingClientRect();
const st = getComputedStyle(e);
return {
  inner_width: window.innerWidth,
  inner_height: window.innerHeight,
  scroll_width: document.documentElement.scrollWidth,
  left: r.left, right: r.right, top: r.top, width: r.width, height: r.height,
  visible: st.display !== 'none' && st.visibility !== 'hidden' && parseFloat(st.opacity) > 0,
};
"#;

/// At the window's current size: no horizontal overflow, and the leader
/// headline rendered, inside the viewport's width and above the fold.
async fn assert_layout(c: &TestCluster, b: &Browser, step: &str) -> Layout {
    let value = b.js(LAYOUT_JS, vec![]).await;
    let l: Layout = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("layout {value} does not parse: {e}"));
    let problems: Vec<&str> = [
        (l.scroll_width > l.inner_width, "horizontal overflow: scrollWidth > innerWidth"),
        (!(l.visible && l.width > 0.0 && l.height > 0.0), "#leader is not rendered"),
        (l.left < 0.0 || l.right > l.inner_width + 0.5, "#leader is wider than the viewport"),
        (l.top < 0.0 || l.top >= l.inner_height, "#leader is not in the first screen"),
    ]
    .into_iter()
    .filter_map(|(bad, what)| bad.then_some(what))
    .collect();
    if !problems.is_empty() {
        let s = snapshot(b).await;
        let msg = format!("{problems:?}: {l:?}");
        panic!("{}", failure(b, c, step, &msg, &s).await);
    }
    l
}

fn all() -> Vec<usize> {
    (0..N).collect()
}

/// Opened on a follower: the token form, then the leader named (the one the
/// servers report), three node cards, the live stream, every section; no
/// console errors; laid out at 1280×800 and at a phone's 375 px.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_follower_the_page_names_the_leader_on_desktop_and_phone() {
    let test = "names-leader";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let c = TestCluster::start(N, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let b = Browser::start(&tools, test, &node_certs(&c)).await;
    let (leader, _) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let follower = (leader + 1) % N;
    open_dashboard(&c, &b, follower).await;
    // A slow start may have moved leadership since: the page must show what
    // the servers say now.
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    assert_ne!(leader, follower, "leadership moved to the page's node during start-up");
    wait_page_agrees(&c, &b, "cards", leader, term).await;
    let s = wait_page(&b, &c, "live", PAGE_LOAD_BOUND, |s| {
        s.is_live() && s.leader_id() == Some(id(&c, leader)) && s.term() == Some(term)
    })
    .await;
    assert_eq!(s.node, Some(id(&c, follower).to_string()), "served by the follower");
    let headline = s.headline.clone().unwrap_or_default();
    assert!(
        headline.contains(&format!("Node {}", id(&c, leader))),
        "the headline {headline:?} does not name node {}",
        id(&c, leader)
    );
    assert!(s.missing.is_empty(), "sections missing from the page: {:?}", s.missing);
    let mut ids: Vec<String> = s.cards.iter().filter_map(|c| c.node.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["1", "2", "3"], "one card per node: {:?}", s.cards);
    eprintln!("headline: {headline:?}; stream: {:?}; cards: {:?}", s.live, s.cards);

    let desktop = assert_layout(&c, &b, "desktop").await;
    assert_eq!(desktop.inner_width as u32, DESKTOP.0, "the desktop viewport's width");
    b.screenshot("desktop").await;

    let width = b.set_window_size(PHONE.0, PHONE.1).await;
    assert_eq!(width, u64::from(PHONE.0), "the phone viewport's width");
    let phone = assert_layout(&c, &b, "phone").await;
    eprintln!("phone: {phone:?}");
    b.screenshot("phone").await;
    b.assert_no_console_errors("end").await;
    b.close().await;
}

/// SIGKILL of the leader, the page open on a follower: within 2 s of the
/// cluster having a new leader, the page names it, shows the killed node
/// down, and its timeline's newest entry is the new leader and term with
/// cause `crash`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_of_the_leader_the_page_shows_the_new_leader_and_the_crash() {
    let test = "sigkill";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let mut c = TestCluster::start(N, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let b = Browser::start(&tools, test, &node_certs(&c)).await;
    let (leader, _) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let serving = (leader + 1) % N;
    open_dashboard(&c, &b, serving).await;
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    // The page must be served by a node that survives.
    assert_ne!(
        leader,
        serving,
        "leadership moved to the page's node during start-up\n{}",
        c.logs()
    );
    let before = wait_page_agrees(&c, &b, "before", leader, term).await;
    b.screenshot("before").await;

    let killed = id(&c, leader);
    let survivors: Vec<usize> = all().into_iter().filter(|&i| i != leader).collect();
    let killed_at = Instant::now();
    c.crash(leader);
    let change = watch_change(&c, &b, "after", &survivors, (leader, term), killed_at, |s, l, t| {
        s.leader_id() == Some(l)
            && s.term() == Some(t)
            && s.newest_is(l, t, "crash")
            && s.state_of(killed) == Some("down")
    })
    .await;
    b.screenshot("after").await;
    b.full_page_screenshot("after-full").await;
    let newest = change.page.newest.as_ref().unwrap();
    eprintln!(
        "SIGKILL of node {killed} (term {term}): the cluster had node {} in term {} after {:?}; \
         the page named it after {:?} and showed it with the crash entry and node {killed} down \
         after {:?} ({:?} after the cluster); newest timeline entry: {:?}",
        id(&c, change.leader),
        change.term,
        change.cluster_at - killed_at,
        change.page_leader_at - killed_at,
        change.page_at - killed_at,
        change.page_at.saturating_duration_since(change.cluster_at),
        newest.text
    );
    assert!(change.page_at.saturating_duration_since(change.cluster_at) <= PAGE_BOUND);
    assert!(survivors.contains(&change.leader));
    assert!(
        change.page.timeline_entries > before.timeline_entries,
        "the timeline did not grow: {} entries before, {} after",
        before.timeline_entries,
        change.page.timeline_entries
    );
    b.assert_no_console_errors("after").await;
    b.close().await;
}

/// A transfer (POST /v1/transfer, admin token), the page open on the old
/// leader: the page names the target and the newest timeline entry has cause
/// `transfer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_transfer_the_page_shows_the_transfer_as_the_cause() {
    let test = "transfer";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let c = TestCluster::start(N, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let b = Browser::start(&tools, test, &node_certs(&c)).await;
    let (leader, _) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    open_dashboard(&c, &b, leader).await;
    let (leader, term) = c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    wait_page_agrees(&c, &b, "before", leader, term).await;
    b.screenshot("before").await;

    let target = (leader + 2) % N;
    let to = id(&c, target);
    let body = format!("{{\"to\": {to}}}");
    // The target's first acknowledgement may still be on its way to the
    // leader, which answers 409 until it arrives (as cluster.rs, retry).
    let since = Instant::now();
    let at = loop {
        let at = Instant::now();
        let reply = c
            .request(leader, Method::POST, "/v1/transfer", Some(("application/json", &body)))
            .await;
        match reply {
            Some((200, _, _)) => break at,
            Some((409, _, _)) if since.elapsed() < Duration::from_secs(2) => {}
            other => panic!("transfer to node {to}: {other:?}\n{}", c.logs()),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let old = id(&c, leader);
    let change = watch_change(&c, &b, "after", &all(), (leader, term), at, |s, l, t| {
        s.leader_id() == Some(l)
            && s.term() == Some(t)
            && s.newest_is(l, t, "transfer")
            && s.state_of(l) == Some("leader")
            && s.state_of(old) == Some("follower")
    })
    .await;
    b.screenshot("after").await;
    b.full_page_screenshot("after-full").await;
    assert_eq!(change.leader, target, "leadership went elsewhere\n{}", c.logs());
    eprintln!(
        "transfer from node {old} to node {to}: the cluster had it in term {} after {:?}; the page \
         named it after {:?} and showed the transfer entry after {:?}; newest timeline entry: {:?}",
        change.term,
        change.cluster_at - at,
        change.page_leader_at - at,
        change.page_at - at,
        change.page.newest.as_ref().unwrap().text
    );
    b.assert_no_console_errors("after").await;
    b.close().await;
}

/// The browser harness itself can fail a test: it sees a page's console
/// error, and its screenshots are PNG files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_harness_sees_console_errors_and_saves_screenshots() {
    let test = "harness";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let b = Browser::start(&tools, test, &[]).await;
    b.goto(
        "data:text/html,<title>t</title><p>harness page</p>\
         <script>console.error('deliberate error from the harness test')</script>",
    )
    .await;
    assert!(b.page_text().await.contains("harness page"));
    let width = b.js("return window.innerWidth;", vec![]).await;
    assert_eq!(width, DESKTOP.0, "the desktop viewport's width");
    let console = b.console().await;
    assert!(
        console.iter().any(|e| e.level == "SEVERE" && e.message.contains("deliberate error")),
        "the console error was not read: {console:?}"
    );
    let width = b.set_window_size(PHONE.0, PHONE.1).await;
    assert_eq!(width, u64::from(PHONE.0), "the phone viewport's width");
    let path = b.screenshot("phone").await;
    let png = std::fs::read(&path).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 100, "{}", path.display());
    let value: Value = b.js("return 6 * 7;", vec![]).await;
    assert_eq!(value, 42);
    b.close().await;
}

/// Chromium accepts the nodes' certificates (their public keys, from the
/// harness's private CA) and no others: the same HTTPS URL that loads with
/// the nodes' keys trusted shows Chromium's certificate error without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_accepts_the_nodes_certificates_and_no_others() {
    let test = "certificates";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let c = TestCluster::start(1, HEARTBEAT_MS, TIMEOUT_MS);
    c.wait_agreement(&[0], FIRST_ELECTION_BOUND).await;
    let url = format!("{}/healthz", c.endpoint(0));
    let (code, _, expected) = c.request(0, Method::GET, "/healthz", None).await.unwrap();
    assert_eq!(code, 200, "{expected}");

    let trusting = Browser::start(&tools, test, &node_certs(&c)).await;
    trusting.goto(&url).await;
    let text = trusting.page_text().await;
    assert_eq!(text.trim(), expected.trim(), "{url} with the nodes' keys trusted");
    // (/healthz is no page: the favicon's 404 is in the console, no certificate error.)
    let console = trusting.console().await;
    assert!(!console.iter().any(|e| e.message.contains("ERR_CERT")), "{console:?}");
    trusting.close().await;

    let other = Browser::start(&tools, test, &[]).await;
    // Chromium answers the navigation with its interstitial (or an error).
    let _ = tokio::time::timeout(Duration::from_secs(10), other.client().goto(&url)).await;
    let text = other.page_text().await;
    assert!(!text.contains(expected.trim()), "{url} loaded without the nodes' keys trusted");
    eprintln!("without the nodes' keys: {:?}", text.lines().next().unwrap_or(""));
    other.close().await;
}

/// The servers without `--peer-http` for nodes 1 and 2 (they learn each
/// other's HTTP addresses at the peer handshake), and with a wrong one for
/// node 3 (a closed port): on node 1's page, nodes 1 and 2 show their
/// roles, and node 3, connected but unread, is "unknown", not DOWN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_are_read_without_peer_http_and_a_live_unread_node_is_unknown() {
    let test = "unknown-not-down";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let mut c = TestCluster::new(N, HEARTBEAT_MS, TIMEOUT_MS);
    let closed = crate::harness::free_ports(1)[0];
    c.peer_http = format!("3=127.0.0.1:{closed}");
    for i in 0..N {
        c.spawn(i);
    }
    c.wait_agreement(&all(), FIRST_ELECTION_BOUND).await;
    let b = Browser::start(&tools, test, &node_certs(&c)).await;
    open_dashboard(&c, &b, 0).await;
    let role = |s: &Snapshot, i: usize| s.state_of(id(&c, i)).map(str::to_string);
    let s = wait_page(&b, &c, "unknown", PAGE_LOAD_BOUND, |s| {
        let known = |r: Option<String>| matches!(r.as_deref(), Some("leader" | "follower"));
        known(role(s, 0)) && known(role(s, 1)) && role(s, 2).as_deref() == Some("unknown")
    })
    .await;
    eprintln!("cards: {:?}", s.cards);
    let text = b.page_text().await;
    assert!(text.contains("Status unknown (node 1 is connected to it)"), "{text}");
    assert!(!text.contains("DOWN"), "{text}");
    b.screenshot("unknown").await;
    b.close().await;
}
