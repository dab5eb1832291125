//! What the command line prints for people: every answer as `key value`
//! lines or a table, each line ending in a newline. Pure functions from
//! the daemon's answers (the server's own answer types) to text, so the
//! tests and `docs/cli.md` check them without a daemon; `--json` prints
//! the daemon's JSON instead (see [`super::http::emit`]).

use crate::console::api::PauseAnswer;
use crate::server::admin_routes::{DeleteAnswer, LeaseList, PurgeAnswer, QueueList};
use crate::server::items::{AckBatchAnswer, PushAnswer, QueueStats, RedriveAnswer};
use crate::server::leases::{ExtendAnswer, NackAnswer, NackOutcome};
use crate::server::settings_routes::SettingsAnswer;

/// `key value` lines, the keys padded to one column.
fn pairs(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(key, value)| format!("{key:<width$}  {value}\n"))
        .collect()
}

/// A table: a header line, then one line per row, columns padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut text = line(header.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

fn optional<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |value| value.to_string())
}

fn ms(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |ms| format!("{ms} ms"))
}

/// `hotq stats`, `hotq pq stats`.
pub fn stats(stats: &QueueStats) -> String {
    let mut rows = vec![
        ("queue", stats.queue.clone()),
        ("depth", stats.depth.to_string()),
        ("grouped", stats.grouped.to_string()),
        ("waiting", stats.waiting.to_string()),
        ("leased", stats.leased.to_string()),
        ("delayed", stats.delayed.to_string()),
        ("expired", stats.expired.to_string()),
        ("oldest", ms(stats.oldest_item_age_ms)),
        ("dead_letter", stats.dead_letter.to_string()),
        ("paused", stats.paused.to_string()),
    ];
    // Only a queue with fairness keys shows them: `key=items`, largest first.
    if let Some(keys) = stats.fair_backlog.as_ref().filter(|keys| !keys.is_empty()) {
        let shown: Vec<String> = keys
            .iter()
            .map(|key| format!("{:?}={}", key.key, key.items))
            .collect();
        rows.push(("fair_backlog", shown.join(" ")));
    }
    pairs(&rows)
}

/// `hotq push`, `hotq pq push`: one answer per batch sent. A push that
/// stored nothing because of its dedup id says so.
pub fn pushed(answer: &PushAnswer, dedup_id: Option<&str>) -> String {
    if answer.duplicate == Some(true) {
        let id = dedup_id.map_or(String::new(), |id| format!(" {id:?}"));
        return format!("duplicate: not pushed (dedup id{id} seen within the dedup window)\n");
    }
    let mut text = format!("pushed {}", answer.pushed);
    if let Some(at) = answer.visible_at_ms {
        text.push_str(&format!(", visible at {at} ms"));
    }
    if let Some(left_out) = &answer.duplicates {
        text.push_str(&format!(", {} duplicates left out", left_out.len()));
    }
    text.push('\n');
    text
}

/// `hotq ack` (one line per receipt: `receipt outcome`).
pub fn acked(answer: &AckBatchAnswer) -> String {
    answer
        .results
        .iter()
        .map(|result| format!("{} {}\n", result.receipt, result.outcome))
        .collect()
}

/// `hotq nack`.
pub fn nacked(answer: &NackAnswer) -> String {
    match answer.outcome {
        NackOutcome::Requeued => "requeued\n".to_string(),
        NackOutcome::Expired => "expired: dropped, its retention had ended\n".to_string(),
        NackOutcome::Delayed => format!("delayed until {}\n", optional(answer.visible_at_ms)),
        NackOutcome::DeadLettered => {
            format!(
                "dead-lettered to {}\n",
                optional(answer.dead_letter_queue.as_ref())
            )
        }
    }
}

/// `hotq extend`.
pub fn extended(answer: &ExtendAnswer) -> String {
    format!("lease expires at {} ms\n", answer.lease_expires_at_ms)
}

/// `hotq pause`, `hotq resume` (and `hotq pq ...`).
pub fn paused(answer: &PauseAnswer) -> String {
    let verb = if answer.paused { "paused" } else { "resumed" };
    format!("{verb} {}\n", answer.queue)
}

/// `hotq redrive`.
pub fn redriven(answer: &RedriveAnswer) -> String {
    format!("redriven {}\n", answer.redriven)
}

/// `hotq purge`.
pub fn purged(queue: &str, answer: &PurgeAnswer) -> String {
    let more = if answer.done {
        ""
    } else {
        " (a bound stopped it: run it again)"
    };
    format!(
        "purged {} from {queue}: {} visible, {} delayed{more}\n",
        answer.purged, answer.items, answer.delayed
    )
}

/// `hotq delete`: a queue that held nothing says so.
pub fn deleted(queue: &str, answer: &DeleteAnswer) -> String {
    let held = answer.items + answer.delayed + answer.leased + answer.results;
    if held == 0 {
        return format!("{queue} held nothing: no items, leases or delayed items to delete\n");
    }
    format!(
        "deleted {queue}: {} visible, {} delayed, {} leased, {} uncollected\n",
        answer.items, answer.delayed, answer.leased, answer.results
    )
}

/// `hotq queues`: a table, and the `--after` of the next page if any.
pub fn queues(list: &QueueList) -> String {
    let rows: Vec<Vec<String>> = list
        .queues
        .iter()
        .map(|q| {
            vec![
                q.queue.clone(),
                q.depth.to_string(),
                q.grouped.to_string(),
                q.leased.to_string(),
                q.delayed.to_string(),
                q.waiting.to_string(),
                ms(q.oldest_item_age_ms),
                if q.dead_letter { "yes" } else { "no" }.to_string(),
                if q.paused { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    let header = [
        "QUEUE",
        "DEPTH",
        "GROUPED",
        "LEASED",
        "DELAYED",
        "WAITING",
        "OLDEST",
        "DEAD_LETTER",
        "PAUSED",
    ];
    let mut text = table(&header, &rows);
    if let Some(next) = &list.next {
        text.push_str(&format!("next page: --after {next}\n"));
    }
    text
}

/// `hotq leases`: a table, and the `--after` of the next page if any.
pub fn leases(list: &LeaseList) -> String {
    let rows: Vec<Vec<String>> = list
        .leases
        .iter()
        .map(|lease| {
            vec![
                lease.receipt.clone(),
                lease.delivery_count.to_string(),
                lease.lease_expires_at_ms.to_string(),
                lease.enqueued_at_ms.to_string(),
                optional(lease.group.as_ref()),
            ]
        })
        .collect();
    let header = [
        "RECEIPT",
        "DELIVERIES",
        "EXPIRES_AT_MS",
        "ENQUEUED_AT_MS",
        "GROUP",
    ];
    let mut text = table(&header, &rows);
    if let Some(next) = &list.next {
        text.push_str(&format!("next page: --after {next}\n"));
    }
    text
}

/// `hotq settings`: the settings in force, each marked `(set)` when the
/// queue set it, else `(default)`.
pub fn settings(answer: &SettingsAnswer) -> String {
    let (effective, stored) = (&answer.settings, &answer.stored);
    // A number, or what its absence means.
    let or = |n: Option<u64>, none: &str| n.map_or_else(|| none.to_string(), |n| n.to_string());
    let rows = [
        (
            "max_deliveries",
            or(effective.max_deliveries.map(u64::from), "unlimited"),
            stored.max_deliveries.is_some(),
        ),
        (
            "default_lease_ms",
            or(effective.default_lease_ms, "none"),
            stored.default_lease_ms.is_some(),
        ),
        (
            "dead_letter_queue",
            effective.dead_letter_queue.clone().unwrap_or("none".into()),
            stored.dead_letter_queue.is_some(),
        ),
        (
            "dedup_window_ms",
            effective.dedup_window_ms.to_string(),
            stored.dedup_window_ms.is_some(),
        ),
        (
            "delivery_delay_ms",
            effective.delivery_delay_ms.to_string(),
            stored.delivery_delay_ms.is_some(),
        ),
        (
            "paused",
            effective.paused.to_string(),
            stored.paused.is_some(),
        ),
        (
            "retention_ms",
            or(effective.retention_ms, "none"),
            stored.retention_ms.is_some(),
        ),
        (
            "pop_rate_max",
            or(effective.pop_rate_max, "unlimited"),
            stored.pop_rate_max.is_some(),
        ),
        (
            // In force only with `pop_rate_max`; its default follows it.
            "pop_rate_burst",
            or(effective.pop_rate_burst, "none"),
            stored.pop_rate_burst.is_some(),
        ),
        (
            "leases_max",
            or(effective.leases_max, "unlimited"),
            stored.leases_max.is_some(),
        ),
        (
            "leases_per_key_max",
            or(effective.leases_per_key_max, "unlimited"),
            stored.leases_per_key_max.is_some(),
        ),
        (
            "pop_rate_per_key_max",
            or(effective.pop_rate_per_key_max, "unlimited"),
            stored.pop_rate_per_key_max.is_some(),
        ),
    ];
    let source = |set: bool| if set { "(set)" } else { "(default)" };
    let mut lines = vec![("queue", answer.queue.clone())];
    lines.extend(
        rows.into_iter()
            .map(|(key, value, set)| (key, format!("{value} {}", source(set)))),
    );
    pairs(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_and_end_every_line() {
        let text = table(&["A", "LONGER"], &[vec!["wide-cell".into(), "1".into()]]);
        assert_eq!(text, "A          LONGER\nwide-cell  1\n");
    }

    #[test]
    fn a_delete_of_nothing_says_so() {
        let answer = DeleteAnswer {
            deleted: true,
            items: 0,
            delayed: 0,
            leased: 0,
            results: 0,
            done: true,
        };
        assert_eq!(
            deleted("never", &answer),
            "never held nothing: no items, leases or delayed items to delete\n"
        );
    }

    #[test]
    fn a_duplicate_push_is_a_line_of_its_own() {
        let answer = PushAnswer {
            pushed: 0,
            visible_at_ms: None,
            duplicate: Some(true),
            duplicates: Some(vec![0]),
        };
        assert_eq!(
            pushed(&answer, Some("order-42")),
            "duplicate: not pushed (dedup id \"order-42\" seen within the dedup window)\n"
        );
    }
}
