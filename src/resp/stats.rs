//! The RESP listener's metrics: commands by command and outcome
//! (`hotq_resp_commands_total`), connections open, connections the daemon
//! closed and why. Registered when the listener is mounted (every series
//! at 0 from start-up), counted through handles kept here, so a command
//! costs no registry look-up.

use std::collections::HashMap;
use std::sync::OnceLock;

use metrics::Counter;

use super::cmd::Spec;
use super::cmd::spec::{COMMANDS, PQ_SUBCOMMANDS};
use crate::metrics::{RESP_CLOSED, RESP_COMMANDS, RESP_CONNECTIONS};

/// A command's outcomes, as labelled.
const OUTCOMES: [&str; 3] = ["ok", "empty", "error"];
/// Why the daemon closed a connection, as labelled.
const CLOSED_REASONS: [&str; 3] = ["connections_max", "protocol", "buffer_max_bytes"];
/// The `command` label of a request naming no command served.
const UNKNOWN: &str = "unknown";

struct Handles {
    /// One row per command of [`COMMANDS`] then [`PQ_SUBCOMMANDS`], then
    /// one for unknown commands; one counter per outcome.
    commands: Vec<[Counter; 3]>,
    /// A command's row, by name (the table is a `const`: its entries'
    /// addresses are not one per command).
    rows: HashMap<&'static str, usize>,
    closed: [Counter; 3],
}

static HANDLES: OnceLock<Handles> = OnceLock::new();

fn specs() -> impl Iterator<Item = &'static Spec> {
    COMMANDS.iter().chain(PQ_SUBCOMMANDS)
}

/// Registers every series at 0 and keeps their handles (once per
/// process; the metrics recorder is installed first).
pub fn register() {
    HANDLES.get_or_init(|| {
        let row = |command: &'static str| {
            OUTCOMES.map(|outcome| {
                let counter =
                    metrics::counter!(RESP_COMMANDS, "command" => command, "outcome" => outcome);
                counter.absolute(0);
                counter
            })
        };
        let mut commands: Vec<[Counter; 3]> = specs().map(|spec| row(spec.name)).collect();
        commands.push(row(UNKNOWN));
        let closed = CLOSED_REASONS.map(|reason| {
            let counter = metrics::counter!(RESP_CLOSED, "reason" => reason);
            counter.absolute(0);
            counter
        });
        metrics::gauge!(RESP_CONNECTIONS).set(0.0);
        let rows = specs()
            .enumerate()
            .map(|(row, spec)| (spec.name, row))
            .collect();
        Handles {
            commands,
            rows,
            closed,
        }
    });
}

/// Counts one command (`None`: not a command served) with `outcome`.
pub fn command(spec: Option<&'static Spec>, outcome: &'static str) {
    let Some(handles) = HANDLES.get() else {
        return;
    };
    let row = spec
        .and_then(|spec| handles.rows.get(spec.name).copied())
        .unwrap_or(handles.commands.len() - 1);
    let column = OUTCOMES
        .iter()
        .position(|known| *known == outcome)
        .unwrap_or(2);
    handles.commands[row][column].increment(1);
}

/// Counts a connection the daemon closed (or refused) for `reason`.
pub fn closed(reason: &'static str) {
    if let Some(handles) = HANDLES.get() {
        let column = CLOSED_REASONS
            .iter()
            .position(|known| *known == reason)
            .unwrap_or(0);
        handles.closed[column].increment(1);
    }
}

/// A connection opened.
pub fn connection_opened() {
    metrics::gauge!(RESP_CONNECTIONS).increment(1.0);
}

/// A connection closed.
pub fn connection_closed() {
    metrics::gauge!(RESP_CONNECTIONS).decrement(1.0);
}
