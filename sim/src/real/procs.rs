//! The `sluice-node` processes of a real-process chaos run, each started
//! inside its node's network namespace (`ip netns exec`), its output in a
//! log file per start, and what the nemesis does to a process: `kill -9`,
//! `SIGSTOP`/`SIGCONT`, and wall-clock steps through libfaketime's
//! timestamp file. Dropping a [`Proc`] resumes and kills it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::net::run;

/// Where Debian and Fedora put libfaketime (the multi-threaded build).
const FAKETIME_LIBS: [&str; 3] = [
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib64/faketime/libfaketimeMT.so.1",
];
/// Pause between looks at a starting process's log.
const READY_POLL: Duration = Duration::from_millis(50);

/// libfaketime's preload library, if installed.
pub fn faketime_lib() -> Option<&'static str> {
    FAKETIME_LIBS.into_iter().find(|p| Path::new(p).exists())
}

/// The `sluice-node` executable: `SLUICE_NODE_BIN`, else beside the test
/// executable's directory (`target/<profile>/sluice-node`, which
/// `cargo test --workspace` builds).
pub fn node_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("SLUICE_NODE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("sluice-node"))
        .ok_or("no target directory")?;
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: run `cargo build -p sluice-node` (or test the whole workspace)",
            path.display()
        ))
    }
}

/// One node process and how to start it again.
#[derive(Debug)]
pub struct Proc {
    name: String,
    ns: String,
    args: Vec<String>,
    dir: PathBuf,
    /// libfaketime's timestamp file, when the process runs under it.
    clock_file: Option<PathBuf>,
    child: Option<Child>,
    starts: u32,
    paused: bool,
}

impl Proc {
    /// A process `name` (not started) running `sluice-node args` in `ns`,
    /// logging into `dir`; under libfaketime when `faketime` is given.
    pub fn new(name: &str, ns: &str, args: Vec<String>, dir: &Path, faketime: bool) -> Self {
        let clock_file = faketime.then(|| dir.join(format!("{name}.faketime")));
        if let Some(f) = &clock_file {
            let _ = std::fs::write(f, "+0\n");
        }
        Self {
            name: name.to_owned(),
            ns: ns.to_owned(),
            args,
            dir: dir.to_owned(),
            clock_file,
            child: None,
            starts: 0,
            paused: false,
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it runs (started and not killed).
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    /// Starts it and waits (up to `timeout`) for a log line holding `ready`.
    pub async fn start(&mut self, ready: &str, timeout: Duration) -> Result<(), String> {
        let bin = node_binary()?;
        self.starts += 1;
        let log_path = self.dir.join(format!("{}.{}.log", self.name, self.starts));
        let log = std::fs::File::create(&log_path).map_err(|e| format!("log: {e}"))?;
        let err = log.try_clone().map_err(|e| format!("log: {e}"))?;
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.ns])
            .arg(&bin)
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("SLUICE_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if let (Some(file), Some(lib)) = (&self.clock_file, faketime_lib()) {
            // Wall clock only: tokio's timers and the controller's liveness
            // run on the monotonic clock, as an NTP step leaves it alone.
            command
                .env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
        let child = command
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.name))?;
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if text.contains(ready) {
                return Ok(());
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || tokio::time::Instant::now() > deadline {
                self.kill9();
                return Err(format!(
                    "{} did not print {ready:?} ({exited:?}); log {}:\n{text}",
                    self.name,
                    log_path.display()
                ));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// `kill -9` (resumed first if paused, so it really dies now).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            if self.paused {
                signal(c.id(), "-CONT");
                self.paused = false;
            }
            let _ = c.wait();
        }
    }

    /// `SIGSTOP`.
    pub fn pause(&mut self) {
        if let Some(c) = &self.child {
            signal(c.id(), "-STOP");
            self.paused = true;
        }
    }

    /// `SIGCONT`.
    pub fn resume(&mut self) {
        if let Some(c) = &self.child {
            if self.paused {
                signal(c.id(), "-CONT");
            }
        }
        self.paused = false;
    }

    /// Sets its wall clock `by_s` away from the real one (0: back in step).
    /// `false` when it does not run under libfaketime.
    pub fn set_clock_offset(&self, by_s: i64) -> bool {
        match &self.clock_file {
            Some(f) if faketime_lib().is_some() => std::fs::write(f, format!("{by_s:+}\n")).is_ok(),
            _ => false,
        }
    }
}

/// Sends `signal` (`-STOP`, `-CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let _ = run("kill", &[signal, &pid.to_string()]);
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}
