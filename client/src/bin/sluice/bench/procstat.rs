//! CPU time and resident memory of a process from Linux's /proc, for the
//! per-message CPU cost of the broker (`--broker-pid`) and of the bench
//! itself. Elsewhere, or for a process that has gone, the figures are
//! simply absent.

use std::time::Duration;

/// Clock ticks per second of /proc's CPU times (`USER_HZ`, 100 on every
/// Linux architecture that matters here).
const USER_HZ: u64 = 100;

/// A process: `self` or a PID.
#[derive(Clone, Debug)]
pub struct Proc(String);

impl Proc {
    /// This process.
    pub fn me() -> Self {
        Self("self".to_owned())
    }

    /// Process `pid`.
    pub fn pid(pid: u32) -> Self {
        Self(pid.to_string())
    }

    /// User plus system CPU time so far, all threads.
    pub fn cpu(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0)).ok()?;
        cpu_of(&stat)
    }

    /// Resident set size, KiB: all of it, and its anonymous part (heap
    /// and stacks, without mapped files such as CommitLog segments).
    pub fn rss_kib(&self) -> Option<(u64, Option<u64>)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0)).ok()?;
        Some((
            status_kib(&status, "VmRSS:")?,
            status_kib(&status, "RssAnon:"),
        ))
    }
}

/// `utime + stime` from a /proc/PID/stat line. The command name may hold
/// spaces and parentheses, so fields are counted after its last `)`.
fn cpu_of(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the name: state (3), ppid … cmajflt (4–12), utime (14), stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_read_after_a_name_with_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 127 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(cpu_of(stat), Some(Duration::from_secs(3)));
        assert_eq!(cpu_of("garbage"), None);
    }

    #[test]
    fn rss_comes_from_vmrss_and_rssanon() {
        let status = "Name:\tx\nVmRSS:\t  1234 kB\nRssAnon:\t 200 kB\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(1234));
        assert_eq!(status_kib(status, "RssAnon:"), Some(200));
        assert_eq!(status_kib("Name:\tx\n", "VmRSS:"), None);
    }
}
