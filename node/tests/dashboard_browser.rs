//! The web dashboard in a real browser: headless Chromium driven over the
//! W3C `WebDriver` protocol (chromedriver, JSON over HTTP with ureq) against
//! a live node. Opens every page, checks what it shows, creates a topic
//! through the form and checks it over the wire, and saves a screenshot of
//! each page under `target/dashboard-screenshots/`.
//!
//! Skipped (with a message) when chromium or chromedriver is missing;
//! `.ci/test` installs them.

mod dashboard_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use dashboard_support::{admin, row, seed, topic_exists, BODY, GROUP, KEY, TOPIC};
use serde_json::{json, Value};
use support::{free_port, Client, Node};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The W3C element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A tool's path: the environment variable `var` if set, else `default`.
fn tool(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

#[expect(
    clippy::disallowed_methods,
    reason = "a real browser runs on the wall clock; the test polls it"
)]
fn pause(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A chromedriver process and one browser session on it; both end on drop.
struct Browser {
    driver: Child,
    http: ureq::Agent,
    base: String,
    session: String,
    profile: tempfile::TempDir,
    chromium: String,
}

impl Browser {
    fn start(driver: &str, chromium: &str) -> Self {
        let port = free_port();
        let driver = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        let mut b = Self {
            driver,
            http: ureq::Agent::new_with_config(config),
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            profile: tempfile::tempdir().expect("profile dir"),
            chromium: chromium.to_owned(),
        };
        b.wait_ready();
        b.session = b.new_session();
        // Finding an element waits for it (a submitted form's answer page
        // may still be loading when the click returns).
        let timeouts = json!({"implicit": 15_000, "pageLoad": 30_000});
        b.call("POST", &b.s("/timeouts"), Some(timeouts));
        b
    }

    fn wait_ready(&self) {
        for _ in 0..200 {
            let ready = self
                .http
                .get(format!("{}/status", self.base))
                .call()
                .ok()
                .and_then(|r| r.into_body().read_to_string().ok())
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
                .is_some_and(|v| v["value"]["ready"] == true);
            if ready {
                return;
            }
            pause(100);
        }
        panic!("chromedriver did not become ready");
    }

    fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let response = match (method, body) {
            ("GET", _) => self.http.get(&url).call(),
            ("DELETE", _) => self.http.delete(&url).call(),
            (_, body) => self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .send(body.unwrap_or_else(|| json!({})).to_string()),
        }
        .map_err(|e| format!("{method} {path}: {e}"))?;
        let text = response
            .into_body()
            .read_to_string()
            .map_err(|e| format!("{method} {path}: {e}"))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{text}: {e}"))?;
        if v["value"]["error"].is_null() {
            Ok(v["value"].clone())
        } else {
            Err(format!("{method} {path}: {text}"))
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A browser session; Chromium starting on a loaded machine sometimes
    /// exits at once, so up to three tries, each with a fresh profile.
    fn new_session(&self) -> String {
        let mut last = String::new();
        for attempt in 0..3 {
            match self.try_session(attempt) {
                Ok(id) => return id,
                Err(e) => last = e,
            }
            pause(500);
        }
        panic!("no browser session: {last}");
    }

    fn try_session(&self, attempt: u32) -> Result<String, String> {
        let dir = self.profile.path().join(format!("profile-{attempt}"));
        let profile = format!("--user-data-dir={}", dir.display());
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            &profile,
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": self.chromium, "args": args},
        }}});
        let v = self.try_call("POST", "/session", Some(caps))?;
        v["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no session id in {v}"))
    }

    fn s(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    /// Navigates to `url` and waits until the page source holds `marker`
    /// (navigating once more if it does not within 7.5 s); returns the
    /// source.
    fn open(&self, url: &str, marker: &str) -> String {
        let mut source = String::new();
        for _ in 0..2 {
            self.call("POST", &self.s("/url"), Some(json!({ "url": url })));
            for _ in 0..75 {
                source = self.source();
                if source.contains(marker) {
                    return source;
                }
                pause(100);
            }
        }
        panic!("{url} never showed {marker:?}: {source}");
    }

    fn source(&self) -> String {
        self.call("GET", &self.s("/source"), None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn find(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            &self.s("/element"),
            Some(json!({"using": "css selector", "value": css})),
        );
        v[ELEMENT].as_str().expect("element id").to_owned()
    }

    fn text(&self, css: &str) -> String {
        let id = self.find(css);
        let v = self.call("GET", &self.s(&format!("/element/{id}/text")), None);
        v.as_str().unwrap_or_default().to_owned()
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.call("POST", &self.s(&format!("/element/{id}/clear")), None);
        let body = json!({ "text": text });
        self.call("POST", &self.s(&format!("/element/{id}/value")), Some(body));
    }

    fn click(&self, css: &str) {
        let id = self.find(css);
        self.call("POST", &self.s(&format!("/element/{id}/click")), None);
    }

    fn screenshot(&self, dir: &Path, name: &str) {
        let v = self.call("GET", &self.s("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64 PNG"))
            .expect("valid base64");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self
                .http
                .delete(format!("{}/session/{}", self.base, self.session))
                .call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `target/dashboard-screenshots/` beside the node binary's profile dir.
fn screenshot_dir() -> PathBuf {
    let bin = support::node_binary();
    let target = bin
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let dir = target.join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

#[test]
fn every_page_in_a_browser_and_a_topic_created_through_the_form() {
    let (driver, chromium) = (
        tool("SLUICE_CHROMEDRIVER", CHROMEDRIVER),
        tool("SLUICE_CHROMIUM", CHROMIUM),
    );
    if !Path::new(&driver).exists() || !Path::new(&chromium).exists() {
        eprintln!("skipped: chromium/chromedriver not installed (apt-get install chromium chromium-driver)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), "async");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let wire = admin(&node.namesrv, None);
    let client = Client::new(&node.broker);
    rt.block_on(seed(&wire, &client));
    let shots = screenshot_dir();
    let browser = Browser::start(&driver, &chromium);
    let web = &node.http;

    // Traffic on another topic while the cluster page's chart polls.
    let traffic = rt.spawn(traffic(node.broker.clone()));
    cluster_page(&browser, web, &shots);
    traffic.abort();
    let marker = format!("id=\"topic-{TOPIC}\"");
    let source = browser.open(&format!("{web}/topics"), &marker);
    let dash = row(&source, &marker);
    let queue = |q: i32, max: i64| {
        format!("<td>broker-a</td><td class=\"n\">{q}</td><td class=\"n\">0</td><td class=\"n\">{max}</td>")
    };
    assert!(dash.contains(&queue(0, 3)), "queue 0 holds 3: {dash}");
    assert!(dash.contains(&queue(1, 2)), "queue 1 holds 2: {dash}");
    browser.screenshot(&shots, "topics");

    browser.open(&format!("{web}/groups/{GROUP}"), "id=\"total-lag\"");
    assert_eq!(browser.text("#total-lag"), "4", "lag 2 + 2");
    browser.screenshot(&shots, "group");

    browser.open(&format!("{web}/messages"), "id=\"lookup-key\"");
    browser.type_into("#by-key input[name=topic]", TOPIC);
    browser.type_into("#lookup-key", KEY);
    browser.click("#lookup-button");
    assert_eq!(
        browser.text("pre.body"),
        BODY,
        "the body, escaped in HTML, reads as sent"
    );
    browser.screenshot(&shots, "message");

    browser.open(&format!("{web}/timers"), "Open transactions");
    browser.screenshot(&shots, "timers");

    browser.open(&format!("{web}/topics"), "id=\"new-topic\"");
    browser.type_into("#new-topic", "BrowserMade");
    browser.click("#create-button");
    assert!(
        browser.text("p.ok").contains("BrowserMade"),
        "{}",
        browser.source()
    );
    assert!(
        rt.block_on(topic_exists(&wire, "BrowserMade")),
        "the form created it on the wire"
    );
    browser.screenshot(&shots, "topic-created");
    drop(client);
}

/// Sends to `DashTraffic` every 20 ms until aborted.
async fn traffic(broker: String) {
    let c = Client::new(&broker);
    for i in 0..2000 {
        dashboard_support::send(&c, "DashTraffic", 0, &format!("tick {i}"), &[], None).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The cluster page, once the live chart has drawn inbound traffic from
/// `/api/stats`.
fn cluster_page(browser: &Browser, web: &str, shots: &Path) {
    browser.open(&format!("{web}/"), "<td>broker-a</td>");
    let role = browser.text("table tr:nth-child(2) td:nth-child(5)");
    assert_eq!(role, "ASYNC_MASTER", "{}", browser.source());
    assert!(browser.source().contains("<td>broker-a</td>"));
    let mut rate = 0.0;
    for _ in 0..150 {
        rate = browser.text("#rin").parse::<f64>().unwrap_or(0.0);
        if rate > 0.0 {
            break;
        }
        pause(100);
    }
    assert!(
        rate > 0.0,
        "the chart script read a rising messages_in_total"
    );
    pause(3000);
    let points = browser.find("#lin");
    let v = browser.call(
        "GET",
        &browser.s(&format!("/element/{points}/attribute/points")),
        None,
    );
    let drawn = v.as_str().map_or(0, |p| p.split(' ').count());
    assert!(drawn >= 2, "the chart drew a line: {v}");
    browser.screenshot(shots, "cluster");
}
