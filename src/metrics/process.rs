//! The standard `process_*` metrics, read from `/proc/self` at each scrape
//! and rendered as Prometheus text next to the recorder's.
//!
//! Read by hand rather than through a crate (`metrics-process`): the five
//! numbers are a few lines of `/proc` parsing, while the crate would add a
//! dependency tree for other platforms hotq does not run on. They are
//! rendered here, not recorded through the `metrics` facade, because its
//! counters are integers and `process_cpu_seconds_total` is fractional
//! (a gauge of that name would fail `promtool check metrics`).
//! Off Linux (no `/proc/self`) nothing is rendered.

use std::fmt::Write;

/// Linux reports process times in USER_HZ, which the kernel ABI fixes at
/// 100 on every architecture Rust targets (`sysconf(_SC_CLK_TCK)`).
const TICKS_PER_SECOND: f64 = 100.0;

/// The process metrics as Prometheus text (empty where `/proc` is absent).
pub fn render() -> String {
    let mut out = String::new();
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return out;
    };
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15, starttime 22.
    let fields: Vec<&str> = match stat.rfind(')') {
        Some(end) => stat[end + 1..].split_whitespace().collect(),
        None => return out,
    };
    let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        metric(
            &mut out,
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (user + system) / TICKS_PER_SECOND,
        );
    }
    if let Some(rss_bytes) = status_kib("VmRSS").map(|kib| kib * 1024.0) {
        metric(
            &mut out,
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            rss_bytes,
        );
    }
    if let Some(virtual_bytes) = status_kib("VmSize").map(|kib| kib * 1024.0) {
        metric(
            &mut out,
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            virtual_bytes,
        );
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        metric(
            &mut out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            entries.count() as f64,
        );
    }
    if let Some(max) = max_fds() {
        metric(
            &mut out,
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    if let (Some(start_ticks), Some(boot)) = (field(22), boot_time_s()) {
        metric(
            &mut out,
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot + start_ticks / TICKS_PER_SECOND,
        );
    }
    out
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name} {value}");
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(key: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|line| line.split(':').next() == Some(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The soft limit on open files, from `/proc/self/limits`.
fn max_fds() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The machine's boot time, from `/proc/stat`'s `btime` line.
fn boot_time_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_process_metric_is_read_on_linux() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let text = render();
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
                .parse()
                .unwrap();
            // CPU is counted in clock ticks (10 ms): a test process may
            // not have used one yet, so only it may read 0.
            let floor_ok = if name == "process_cpu_seconds_total" {
                value >= 0.0
            } else {
                value > 0.0
            };
            assert!(floor_ok, "{name} = {value}");
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started: f64 = text
            .lines()
            .find_map(|line| line.strip_prefix("process_start_time_seconds "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(started <= now + 1.0, "started {started}, now {now}");
    }
}
