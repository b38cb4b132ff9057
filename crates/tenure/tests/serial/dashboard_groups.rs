//! The dashboard's groups view (docs/DASHBOARD.md) in a real browser:
//! headless Chromium through chromedriver, against a real 3-node cluster
//! of `tenure server` processes (mutual TLS, HTTPS, API tokens), with a
//! real group of partitions: two members of eight partitions, the second
//! joining once the first owns all eight, so that the keeper moves four.
//! The page is opened on a follower, the read token typed in: the view
//! lists the group and shows every owner with the partitions the API
//! gives it, the map, and the leader's moves.
//!
//! Needs `chromium` and `chromedriver` as `dashboard.rs` does: without
//! them the test prints why and passes as skipped, unless
//! `TENURE_BROWSER_REQUIRE=1`, where that is a failure. Screenshots go to
//! `target/dashboard-screenshots/groups-*.png`.

use crate::browser::Browser;
use crate::harness::{serial, TestCluster, APP_TOKEN, READ_TOKEN};
use hyper::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 50;
const TIMEOUT_MS: u64 = 500;
const N: usize = 3;
/// Bound on a first election, including process start-up on a busy machine.
const FIRST_ELECTION_BOUND: Duration = Duration::from_secs(10);
/// Bound on the keeper settling the group (grants, releases, grants again).
const SETTLE_BOUND: Duration = Duration::from_secs(15);
/// Bound on the page showing what the API says.
const PAGE_BOUND: Duration = Duration::from_secs(10);
/// A phone's viewport.
const PHONE: (u32, u32) = (375, 800);
const GROUP: &str = "orders";

/// The groups view, read in one script run (the DOM contract of
/// `src/dashboard/README.md`).
#[derive(Debug, Deserialize)]
struct View {
    token_form: bool,
    /// `data-group` of the group buttons.
    groups: Vec<String>,
    /// `#group-detail`'s `data-group`.
    shown: Option<String>,
    /// `#group-owners` rows: member id and how many it owns.
    owners: Vec<(String, String)>,
    /// `#group-map` cells: partition and owner (empty: none).
    cells: Vec<(String, String)>,
    /// `#group-stats`: `data-measured`, `data-moves`.
    measured: Option<String>,
    moves: Option<String>,
    text: String,
    scroll_width: f64,
    inner_width: f64,
}

const VIEW_JS: &str = r#"
const q = (s) => document.querySelector(s);
const shown = (e) => !!e && e.getClientRects().length > 0;
const detail = q('#group-detail');
const stats = q('#group-stats');
return {
  token_form: shown(q('#token-form')),
  groups: [...document.querySelectorAll('#groups .group-list button[data-group]')].map((b) => b.dataset.group),
  shown: detail ? detail.dataset.group ?? null : null,
  owners: [...document.querySelectorAll('#group-owners tbody tr[data-member]')]
    .map((r) => [r.dataset.member, r.dataset.owned ?? '']),
  cells: [...document.querySelectorAll('#group-map li.cell')]
    .map((c) => [c.dataset.partition ?? '', c.dataset.owner ?? '']),
  measured: stats ? stats.dataset.measured ?? null : null,
  moves: stats ? stats.dataset.moves ?? null : null,
  text: q('#groups') ? q('#groups').innerText : '',
  scroll_width: document.documentElement.scrollWidth,
  inner_width: window.innerWidth,
};
"#;

async fn view(b: &Browser) -> View {
    let value = b.js(VIEW_JS, vec![]).await;
    serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("the view {value} does not parse: {e}"))
}

/// Reads the view until `ok` holds; fails after `bound` with a screenshot,
/// the view, the console and the servers' logs.
async fn wait_view(
    b: &Browser,
    c: &TestCluster,
    step: &str,
    bound: Duration,
    ok: impl Fn(&View) -> bool,
) -> View {
    let since = Instant::now();
    loop {
        let v = view(b).await;
        if ok(&v) {
            return v;
        }
        if since.elapsed() > bound {
            b.screenshot(&format!("{step}-failed")).await;
            let console: Vec<String> =
                b.console().await.iter().map(|e| format!("  {} {}", e.level, e.message)).collect();
            panic!(
                "{step}: not shown within {bound:?}\nlast view: {v:#?}\n--- browser console ---\n{}\n{}",
                console.join("\n"),
                c.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `method path` with the application's write token; the answer's JSON (200 asserted).
async fn app(c: &TestCluster, i: usize, method: Method, path: &str, body: Value) -> Value {
    let text = body.to_string();
    let body = (method != Method::GET).then_some(("application/json", text.as_str()));
    let r = c
        .request_within(Duration::from_secs(5), i, Some(APP_TOKEN), method.clone(), path, body)
        .await
        .unwrap_or_else(|| panic!("{method} {path}: no answer\n{}", c.logs()));
    assert_eq!(r.status, 200, "{method} {path}: {}", r.text);
    r.json
}

/// Plays member `session`: releases what it is asked to give up; returns
/// how many partitions it owns and whether it was asked to release any.
async fn serve_releases(c: &TestCluster, i: usize, session: u64) -> (usize, bool) {
    let path = format!("/v1/groups/{GROUP}/assignment?session={session}");
    let a = app(c, i, Method::GET, &path, Value::Null).await;
    let owned = a["owned"].as_array().unwrap().clone();
    let mut asked = false;
    for o in &owned {
        if o["release"] == true {
            asked = true;
            let body =
                json!({"session": session, "partition": o["partition"], "epoch": o["epoch"]});
            let r = c
                .request_within(
                    Duration::from_secs(5),
                    i,
                    Some(APP_TOKEN),
                    Method::POST,
                    &format!("/v1/groups/{GROUP}/release"),
                    Some(("application/json", &body.to_string())),
                )
                .await
                .expect("a release answers");
            assert!([200, 409].contains(&r.status), "{}", r.text);
        }
    }
    (owned.len(), asked)
}

/// Polls until `f` returns `Some`, at most `bound`.
async fn eventually<T, F, Fut>(what: &str, bound: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let since = Instant::now();
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(since.elapsed() < bound, "{what}: not within {bound:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn node_certs(c: &TestCluster) -> Vec<PathBuf> {
    c.servers.iter().map(|s| c.dir.path().join(format!("certs/node-{}.pem", s.id))).collect()
}

/// On a follower, the groups view shows a real group: its name, each
/// owner with the partitions the API gives it (in the owners' table and
/// on the map) and the leader's moves; no console errors; no horizontal
/// scroll at a phone's width.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_follower_the_groups_view_shows_the_owners_and_the_moves() {
    let test = "groups";
    let Some(tools) = crate::browser::tools(test) else { return };
    let _serial = serial().await;
    let c = TestCluster::start(N, HEARTBEAT_MS, TIMEOUT_MS);
    let all: Vec<usize> = (0..N).collect();
    let (leader, _) = c.wait_agreement(&all, FIRST_ELECTION_BOUND).await;
    let follower = (leader + 1) % N;

    // A owns all eight; B joins; A gives four up and B takes them.
    let session = |i| {
        let c = &c;
        async move {
            app(c, i, Method::POST, "/v1/sessions", json!({"ttl_ms": 600000})).await["id"]
                .as_u64()
                .unwrap()
        }
    };
    let (a, b) = (session(follower).await, session(follower).await);
    let join = format!("/v1/groups/{GROUP}/join");
    app(
        &c,
        follower,
        Method::POST,
        &join,
        json!({"session": a, "partitions": 8, "stabilise_ms": 0}),
    )
    .await;
    eventually("A owns 8", SETTLE_BOUND, || async {
        (serve_releases(&c, follower, a).await.0 == 8).then_some(())
    })
    .await;
    app(&c, follower, Method::POST, &join, json!({"session": b})).await;
    eventually("A and B own 4 each", SETTLE_BOUND, || async {
        let (mine, asked) = serve_releases(&c, follower, a).await;
        let (theirs, _) = serve_releases(&c, follower, b).await;
        (mine == 4 && theirs == 4 && !asked).then_some(())
    })
    .await;
    let g = app(&c, follower, Method::GET, &format!("/v1/groups/{GROUP}"), Value::Null).await;
    let mut want: BTreeMap<String, usize> = BTreeMap::new();
    let mut want_cells: Vec<(String, String)> =
        (0..8).map(|p| (p.to_string(), String::new())).collect();
    for o in g["owners"].as_array().unwrap() {
        let member = o["member"].as_str().unwrap().to_string();
        *want.entry(member.clone()).or_default() += 1;
        want_cells[o["partition"].as_u64().unwrap() as usize].1 = member;
    }
    assert_eq!(want.values().copied().collect::<Vec<_>>(), [4, 4], "{g}");
    let moves = g["stats"]["moves"].as_u64().expect("the leader's figures");
    assert_eq!(moves, 4, "{g}");

    let b_ = Browser::start(&tools, test, &node_certs(&c)).await;
    let (leader_now, _) = c.wait_agreement(&all, FIRST_ELECTION_BOUND).await;
    assert_ne!(leader_now, follower, "leadership moved to the page's node\n{}", c.logs());
    b_.goto(&format!("{}/", c.endpoint(follower))).await;
    wait_view(&b_, &c, "token-form", PAGE_BOUND, |v| v.token_form).await;
    b_.type_into("#token", READ_TOKEN).await;
    b_.click("#token-form [type=submit], #token-form button:not([type])").await;
    let v = wait_view(&b_, &c, "groups-view", PAGE_BOUND, |v| {
        let owners: BTreeMap<String, usize> =
            v.owners.iter().map(|(m, n)| (m.clone(), n.parse().unwrap_or(usize::MAX))).collect();
        v.groups.contains(&GROUP.to_string())
            && v.shown.as_deref() == Some(GROUP)
            && owners == want
            && v.cells == want_cells
            && v.measured.as_deref() == Some("true")
            && v.moves.as_deref() == Some(&moves.to_string())
    })
    .await;
    assert!(v.text.contains("4 moves"), "{}", v.text);
    assert!(!v.text.contains("null") && !v.text.contains("undefined"), "{}", v.text);
    for id in want.keys() {
        assert!(v.text.contains(id.as_str()), "the view names member {id}: {}", v.text);
    }
    let to_groups = "document.querySelector('#groups').scrollIntoView(); return true;";
    b_.js(to_groups, vec![]).await;
    b_.screenshot("desktop").await;
    b_.set_window_size(PHONE.0, PHONE.1).await;
    let v = wait_view(&b_, &c, "phone", PAGE_BOUND, |v| v.inner_width as u32 == PHONE.0).await;
    assert!(v.scroll_width <= v.inner_width, "horizontal scroll at {} px: {v:#?}", PHONE.0);
    b_.js(to_groups, vec![]).await;
    b_.screenshot("phone").await;
    b_.assert_no_console_errors("end").await;
    b_.close().await;
}
