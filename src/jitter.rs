//! Test-only timing perturbation, to widen race windows on purpose.
//!
//! `HOTQ_JITTER` names points (comma-separated, or `all`) where a debug
//! build sleeps a random 0 to `HOTQ_JITTER_US` µs (default 2,000). Read
//! once. A release build compiles every call away.

/// Sleeps a random while at `point` when `HOTQ_JITTER` names it (debug
/// builds only).
#[cfg(debug_assertions)]
pub fn pause(point: &'static str) {
    use std::sync::OnceLock;
    static SETTINGS: OnceLock<Option<(Vec<String>, u64)>> = OnceLock::new();
    let settings = SETTINGS.get_or_init(|| {
        let points = std::env::var("HOTQ_JITTER").ok()?;
        let us = std::env::var("HOTQ_JITTER_US")
            .ok()
            .and_then(|us| us.parse().ok())
            .unwrap_or(2_000);
        Some((points.split(',').map(str::to_string).collect(), us))
    });
    let Some((points, us)) = settings else {
        return;
    };
    if points.iter().any(|p| p == point || p == "all") && *us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(rand::random::<u64>() % us));
    }
}

/// Does nothing (release build).
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn pause(_point: &'static str) {}
