//! Headless Chromium driven through chromedriver (WebDriver), for tests that
//! look at the web dashboard the way a person does.
//!
//! [`tools`] finds `chromium` and `chromedriver` (`TENURE_CHROMIUM` and
//! `TENURE_CHROMEDRIVER` name them; `PATH` otherwise). When one is missing a
//! test skips with the reason, unless `TENURE_BROWSER_REQUIRE=1` (CI), where
//! it fails.
//!
//! [`Browser::start`] runs chromedriver on a free loopback port in a process
//! group of its own, with a private profile directory; dropping the
//! [`Browser`] (also when a test panics) kills that group — chromedriver and
//! every Chromium process it started — and removes the profile.
//!
//! Every browser console message is collected; [`Browser::assert_no_console_errors`]
//! fails on any `SEVERE` entry (a JavaScript exception, `console.error`, a
//! failed request). Screenshots go to `<target>/dashboard-screenshots/<test>-<step>.png`.

#![allow(dead_code)]

use fantoccini::wd::{Capabilities, Locator, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// How long chromedriver may take to listen after it starts.
const DRIVER_START_BOUND: Duration = Duration::from_secs(15);
/// How long one WebDriver command may take (a page load included).
const COMMAND_BOUND: Duration = Duration::from_secs(30);
/// The tallest window a full-page screenshot makes.
const FULL_PAGE_MAX_HEIGHT: u32 = 8000;
/// The desktop window every session starts with.
pub const DESKTOP: (u32, u32) = (1280, 800);

/// The two programs a browser test needs.
#[derive(Debug, Clone)]
pub struct Tools {
    pub chromium: PathBuf,
    pub chromedriver: PathBuf,
}

/// An executable regular file.
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program named by environment variable `var`, else the first of
/// `names` on `PATH`.
fn find(var: &str, names: &[&str]) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!("{var}={} is not an executable file", path.display()))
        };
    }
    let dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|path| is_executable(path))
        .ok_or_else(|| format!("none of {names:?} is on PATH (or set {var})"))
}

/// Chromium and chromedriver, or why not.
pub fn find_tools() -> Result<Tools, String> {
    let chromium =
        find("TENURE_CHROMIUM", &["chromium", "chromium-browser", "google-chrome", "chrome"])?;
    let chromedriver = find("TENURE_CHROMEDRIVER", &["chromedriver"])?;
    Ok(Tools { chromium, chromedriver })
}

/// The tools for `test`; None (the test should return: skipped) when one is
/// missing, after saying why. With `TENURE_BROWSER_REQUIRE=1` a missing tool
/// fails the test instead.
pub fn tools(test: &str) -> Option<Tools> {
    match find_tools() {
        Ok(tools) => Some(tools),
        Err(why) if std::env::var("TENURE_BROWSER_REQUIRE").as_deref() == Ok("1") => {
            panic!("{test}: {why}; TENURE_BROWSER_REQUIRE=1 makes that a failure (Debian: apt-get install chromium chromium-driver)")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why} (Debian: apt-get install chromium chromium-driver)");
            None
        }
    }
}

/// `<target>/dashboard-screenshots`: `CARGO_TARGET_DIR` if set (relative to
/// the workspace root, where cargo runs), else the workspace's `target`.
pub fn screenshot_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.ancestors().nth(2).unwrap_or(manifest);
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    };
    target.join("dashboard-screenshots")
}

/// One DER element at the start of `der`: (header length, total length).
fn der_element(der: &[u8]) -> (usize, usize) {
    assert!(der.len() >= 2, "truncated DER");
    let first = der[1] as usize;
    let (len, header) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        assert!((1..=4).contains(&n) && der.len() >= 2 + n, "bad DER length");
        (der[2..2 + n].iter().fold(0usize, |len, &b| len << 8 | b as usize), 2 + n)
    };
    assert!(der.len() >= header + len, "truncated DER");
    (header, header + len)
}

/// The DER SubjectPublicKeyInfo of an X.509 certificate.
pub fn subject_public_key_info(cert: &[u8]) -> &[u8] {
    // Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
    //   serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo, ... } ... }
    let (header, _) = der_element(cert);
    let tbs = &cert[header..];
    let (header, _) = der_element(tbs);
    let mut rest = &tbs[header..];
    let skip = if rest.first() == Some(&0xa0) { 6 } else { 5 };
    for _ in 0..skip {
        let (_, total) = der_element(rest);
        rest = &rest[total..];
    }
    assert_eq!(rest.first(), Some(&0x30), "SubjectPublicKeyInfo is a SEQUENCE");
    let (_, total) = der_element(rest);
    &rest[..total]
}

/// base64(SHA-256(SubjectPublicKeyInfo)) of every certificate in the PEM
/// files: what Chromium's `--ignore-certificate-errors-spki-list` takes.
pub fn spki_hashes(pem_files: &[PathBuf]) -> Vec<String> {
    use base64::Engine;
    let mut hashes = Vec::new();
    for file in pem_files {
        let certs = CertificateDer::pem_file_iter(file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!certs.is_empty(), "{} holds no certificate", file.display());
        for cert in certs {
            let digest = Sha256::digest(subject_public_key_info(&cert));
            hashes.push(base64::engine::general_purpose::STANDARD.encode(digest));
        }
    }
    hashes
}

/// chromedriver in its own process group; killing the group on drop also
/// ends the Chromium processes it started.
struct Driver {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Driver {
    fn start(tools: &Tools, dir: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = dir.join("chromedriver.log");
        let out = File::create(&log).expect("chromedriver log");
        let child = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", tools.chromedriver.display()));
        let mut driver = Driver { child, port, log };
        let since = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = driver.child.try_wait().unwrap() {
                panic!("chromedriver exited ({status}) before listening:\n{}", driver.log_text());
            }
            assert!(
                since.elapsed() < DRIVER_START_BOUND,
                "chromedriver did not listen on port {port} within {DRIVER_START_BOUND:?}:\n{}",
                driver.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        driver
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group's id is chromedriver's pid (process_group(0)).
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// chromedriver's log endpoint (a Selenium extension to WebDriver): the
/// browser console entries since the last call.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (hyper::Method, Option<String>) {
        (hyper::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

/// One browser console entry.
#[derive(Debug, Clone)]
pub struct ConsoleEntry {
    pub level: String,
    pub message: String,
}

/// A headless Chromium session for one test.
pub struct Browser {
    client: Client,
    test: String,
    console: Mutex<Vec<ConsoleEntry>>,
    // Dropped in this order: the processes, then their profile directory.
    driver: Driver,
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session for `test`.
    /// Chromium accepts HTTPS servers whose certificate's public key is in
    /// one of `trusted_certs` (PEM files), and no other certificate errors.
    pub async fn start(tools: &Tools, test: &str, trusted_certs: &[PathBuf]) -> Browser {
        let dir = tempfile::Builder::new().prefix("tenure-browser-").tempdir().unwrap();
        let driver = Driver::start(tools, dir.path());
        let profile = dir.path().join("profile");
        let mut args = vec![
            "--headless=new".to_string(),
            // Containers and CI run as root, where Chromium's sandbox cannot start.
            "--no-sandbox".to_string(),
            "--disable-gpu".to_string(),
            format!("--window-size={},{}", DESKTOP.0, DESKTOP.1),
            format!("--user-data-dir={}", profile.display()),
        ];
        if !trusted_certs.is_empty() {
            args.push(format!(
                "--ignore-certificate-errors-spki-list={}",
                spki_hashes(trusted_certs).join(",")
            ));
        }
        let caps: Capabilities = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": tools.chromium,
                "args": args,
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }))
        .unwrap();
        let url = format!("http://127.0.0.1:{}", driver.port);
        let mut builder = ClientBuilder::new(HttpConnector::new());
        let session = builder.capabilities(caps).connect(&url);
        let client = match tokio::time::timeout(COMMAND_BOUND, session).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!("no browser session: {e}\n{}", driver.log_text()),
            Err(_) => panic!("no browser session within {COMMAND_BOUND:?}\n{}", driver.log_text()),
        };
        Browser { client, test: test.to_string(), console: Mutex::new(Vec::new()), driver, dir }
    }

    /// The WebDriver client, for what the helpers below do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Opens `url` (waits for the page's load event).
    pub async fn goto(&self, url: &str) {
        bounded("goto", self.client.goto(url)).await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page
    /// and returns what it returns.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        bounded("execute script", self.client.execute(script, args)).await
    }

    /// The page's visible text.
    pub async fn page_text(&self) -> String {
        match self.js("return document.body ? document.body.innerText : '';", vec![]).await {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }

    /// Types `text` into the element `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = bounded(css, self.client.find(Locator::Css(css))).await;
        bounded(css, element.send_keys(text)).await;
    }

    /// Clicks the element `css`.
    pub async fn click(&self, css: &str) {
        let element = bounded(css, self.client.find(Locator::Css(css))).await;
        bounded(css, element.click()).await;
    }

    /// Resizes the window; returns the page's `innerWidth`.
    pub async fn set_window_size(&self, width: u32, height: u32) -> u64 {
        bounded("set window size", self.client.set_window_size(width, height)).await;
        self.js("return window.innerWidth;", vec![]).await.as_u64().unwrap_or(0)
    }

    /// Saves a screenshot of the window as `<test>-<step>.png` and prints
    /// where.
    pub async fn screenshot(&self, step: &str) -> PathBuf {
        let png = bounded("screenshot", self.client.screenshot()).await;
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "the screenshot is not a PNG");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let path = dir.join(format!("{}-{step}.png", self.test));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Saves the whole page, below the fold too, as `<test>-<step>.png`: the
    /// window is made as tall as the page for the shot, then restored.
    pub async fn full_page_screenshot(&self, step: &str) -> PathBuf {
        let size = self
            .js(
                "return [window.outerWidth, window.outerHeight, window.innerHeight, \
                 document.documentElement.scrollHeight];",
                vec![],
            )
            .await;
        let [width, outer, inner, page] =
            [0, 1, 2, 3].map(|i| size[i].as_f64().unwrap_or(0.0).ceil() as u32);
        let tall = page.clamp(inner, FULL_PAGE_MAX_HEIGHT) + outer.saturating_sub(inner);
        bounded("set window size", self.client.set_window_size(width, tall)).await;
        let path = self.screenshot(step).await;
        bounded("set window size", self.client.set_window_size(width, outer)).await;
        path
    }

    /// Every console entry so far (chromedriver hands each out once; they
    /// are kept here).
    pub async fn console(&self) -> Vec<ConsoleEntry> {
        let value = bounded("read the browser log", self.client.issue_cmd(BrowserLog)).await;
        let entries = value.get("value").unwrap_or(&value).as_array().cloned().unwrap_or_default();
        let mut console = self.console.lock().unwrap();
        for e in entries {
            console.push(ConsoleEntry {
                level: e["level"].as_str().unwrap_or("?").to_string(),
                message: e["message"].as_str().unwrap_or("").to_string(),
            });
        }
        console.clone()
    }

    /// Fails (after a screenshot `<step>-console`) if the browser logged any
    /// `SEVERE` entry; prints every entry at `WARNING` and above.
    pub async fn assert_no_console_errors(&self, step: &str) {
        let entries = self.console().await;
        let mut shown = String::new();
        for e in entries.iter().filter(|e| e.level == "SEVERE" || e.level == "WARNING") {
            let _ = writeln!(shown, "  {} {:?}", e.level, e.message);
        }
        if !shown.is_empty() {
            eprintln!("{}: browser console at {step}:\n{shown}", self.test);
        }
        if entries.iter().any(|e| e.level == "SEVERE") {
            self.screenshot(&format!("{step}-console")).await;
            panic!("{}: the browser console has errors at {step}:\n{shown}", self.test);
        }
    }

    /// Ends the session (Chromium quits); the processes go on drop.
    pub async fn close(self) {
        let Browser { client, driver, dir, .. } = self;
        let _ = tokio::time::timeout(COMMAND_BOUND, client.close()).await;
        drop(driver);
        drop(dir);
    }
}

/// Awaits one WebDriver command, at most [`COMMAND_BOUND`]; panics on error.
async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(COMMAND_BOUND, fut).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("WebDriver {what}: {e}"),
        Err(_) => panic!("WebDriver {what}: no answer within {COMMAND_BOUND:?}"),
    }
}
