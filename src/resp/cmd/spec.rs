//! The command table: every command served, as `COMMAND`, `COMMAND DOCS`
//! and docs/resp.md describe it (tests/it/docs_stay_true checks that the
//! page and this table name the same commands).

use bytes::Bytes;

use super::CmdError;

/// One command (or one subcommand of a container such as `PQ`).
#[derive(Debug)]
pub struct Spec {
    /// Its name, lower-case as Redis names commands; a subcommand is
    /// `container|sub` (`pq|push`).
    pub name: &'static str,
    /// Redis's arity, the name (and subcommand) included: `n` exactly
    /// `n` words, `-n` at least `n`.
    pub arity: i64,
    /// `COMMAND`'s flags (`write`, `readonly`, `fast`, `blocking`, …).
    pub flags: &'static [&'static str],
    /// Position of the first key (the queue), 0 for none.
    pub first_key: i64,
    /// Position of the last key (-1: the last argument, -2: the one
    /// before it).
    pub last_key: i64,
    /// Step between keys.
    pub step: i64,
    /// `COMMAND DOCS`' group.
    pub group: &'static str,
    /// `COMMAND DOCS`' summary.
    pub summary: &'static str,
    /// Runs before `AUTH` (`AUTH`, `HELLO`, `QUIT`, `RESET`).
    pub no_auth: bool,
    /// Touches the store: refused with `store_unavailable` once it failed.
    pub uses_store: bool,
    /// May take items: the connection closing while it runs drops it, and
    /// what it took goes back.
    pub takes_items: bool,
    /// A container's subcommands.
    pub subcommands: &'static [Spec],
}

/// A command's table entry with the defaults of a queue command.
const fn queue_cmd(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    group: &'static str,
    summary: &'static str,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        step: 1,
        group,
        summary,
        no_auth: false,
        uses_store: true,
        takes_items: false,
        subcommands: &[],
    }
}

/// A connection or server command (no key, no store).
const fn conn_cmd(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    no_auth: bool,
    summary: &'static str,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "connection",
        summary,
        no_auth,
        uses_store: false,
        takes_items: false,
        subcommands: &[],
    }
}

/// A command that may take items (see [`Spec::takes_items`]).
const fn taking(spec: Spec) -> Spec {
    Spec {
        takes_items: true,
        ..spec
    }
}

/// A command that names no queue.
const fn keyless(spec: Spec) -> Spec {
    Spec {
        first_key: 0,
        last_key: 0,
        step: 0,
        ..spec
    }
}

/// A priority-queue subcommand: `PQ <sub> <queue> …`, the queue third.
const fn pq_cmd(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    summary: &'static str,
) -> Spec {
    Spec {
        first_key: 2,
        last_key: 2,
        ..queue_cmd(name, arity, flags, "priority", summary)
    }
}

const W: &[&str] = &["write"];
const WF: &[&str] = &["write", "fast"];
const RF: &[&str] = &["readonly", "fast"];
const WB: &[&str] = &["write", "blocking"];

/// `PQ`'s subcommands.
pub const PQ_SUBCOMMANDS: &[Spec] = &[
    pq_cmd(
        "pq|push",
        -5,
        WF,
        "PQ PUSH queue priority [DELAY ms] [DEDUP id] [RETENTION ms] [FAIR key] [ITEMS] item: pushes one item with a priority; the number pushed",
    ),
    taking(pq_cmd(
        "pq|pop",
        -4,
        WB,
        "PQ POP queue MIN|MAX [WAIT ms] [LEASE ms] [MAX n] [ACK receipt ...]: pops from either end, as POP answers",
    )),
    pq_cmd(
        "pq|peek",
        4,
        RF,
        "PQ PEEK queue MIN|MAX: the item at that end, not taken, or nil",
    ),
    pq_cmd("pq|stats", 3, RF, "PQ STATS queue: the queue's stats"),
    pq_cmd(
        "pq|ack",
        -4,
        WF,
        "PQ ACK queue receipt [receipt ...]: acks leases; one outcome per receipt",
    ),
    pq_cmd(
        "pq|nack",
        -4,
        WF,
        "PQ NACK queue receipt [DELAY ms]: returns a leased item under its priority; where it went",
    ),
    pq_cmd(
        "pq|extend",
        5,
        WF,
        "PQ EXTEND queue receipt lease_ms: moves a lease's expiry; the new expiry",
    ),
    pq_cmd(
        "pq|leases",
        -3,
        &["readonly"],
        "PQ LEASES queue [LIMIT n] [AFTER cursor]: one page of the leases in flight",
    ),
    pq_cmd(
        "pq|purge",
        3,
        W,
        "PQ PURGE queue: drops the visible and delayed items",
    ),
    pq_cmd(
        "pq|delete",
        3,
        W,
        "PQ DELETE queue: deletes the queue and all it holds",
    ),
    pq_cmd(
        "pq|settings",
        -3,
        W,
        "PQ SETTINGS queue [json]: the queue's settings, changed by a JSON object",
    ),
    pq_cmd(
        "pq|pause",
        3,
        W,
        "PQ PAUSE queue: takes pushes, hands nothing out",
    ),
    pq_cmd("pq|resume", 3, W, "PQ RESUME queue: hands items out again"),
    keyless(pq_cmd(
        "pq|help",
        2,
        &["loading", "stale"],
        "PQ HELP: the subcommands",
    )),
];

/// Every command served.
pub const COMMANDS: &[Spec] = &[
    conn_cmd(
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        true,
        "HELLO [protover [AUTH username password] [SETNAME name]]: picks RESP2 or RESP3, authenticates; the server's map",
    ),
    conn_cmd(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        true,
        "AUTH [username] token: presents the daemon's token",
    ),
    conn_cmd(
        "client",
        -2,
        &["noscript", "loading", "stale"],
        false,
        "CLIENT SETNAME|GETNAME|SETINFO|ID|INFO: names the connection",
    ),
    conn_cmd(
        "select",
        2,
        &["loading", "stale", "fast"],
        false,
        "SELECT 0: the one database",
    ),
    conn_cmd(
        "ping",
        -1,
        &["fast"],
        false,
        "PING [message]: PONG, or the message",
    ),
    conn_cmd("echo", 2, &["fast"], false, "ECHO message: the message"),
    conn_cmd(
        "quit",
        -1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        true,
        "QUIT: OK, then the connection closes",
    ),
    conn_cmd(
        "reset",
        1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        true,
        "RESET: back to RESP2, no name, and unauthenticated when a token is set",
    ),
    Spec {
        group: "server",
        ..conn_cmd(
            "command",
            -1,
            &["loading", "stale"],
            false,
            "COMMAND [COUNT|LIST|INFO name ...|DOCS [name ...]]: the commands served",
        )
    },
    Spec {
        group: "server",
        ..conn_cmd(
            "info",
            -1,
            &["loading", "stale"],
            false,
            "INFO [section]: the server's version and mode",
        )
    },
    queue_cmd(
        "push",
        -3,
        WF,
        "fifo",
        "PUSH queue [DELAY ms] [GROUP group] [DEDUP id] [RETENTION ms] [FAIR key] [ITEMS] item [item ...]: pushes items in one commit; the number pushed",
    ),
    taking(queue_cmd(
        "pop",
        -2,
        WB,
        "fifo",
        "POP queue [WAIT ms] [LEASE ms] [MAX n] [ACK receipt ...]: pops the oldest items, leased or not, acks riding",
    )),
    queue_cmd(
        "peek",
        2,
        RF,
        "fifo",
        "PEEK queue: the oldest item, not taken, or nil",
    ),
    queue_cmd(
        "stats",
        2,
        RF,
        "fifo",
        "STATS queue: depth, waiting, leased, delayed, grouped, oldest age, paused, dead letter",
    ),
    queue_cmd(
        "ack",
        -3,
        WF,
        "leases",
        "ACK queue receipt [receipt ...]: acks leases in shared commits; one outcome per receipt",
    ),
    queue_cmd(
        "nack",
        -3,
        WF,
        "leases",
        "NACK queue receipt [DELAY ms]: returns a leased item, now or later, or dead-letters it; where it went",
    ),
    queue_cmd(
        "extend",
        4,
        WF,
        "leases",
        "EXTEND queue receipt lease_ms: moves a lease's expiry to lease_ms from now; the new expiry",
    ),
    queue_cmd(
        "redrive",
        -2,
        W,
        "leases",
        "REDRIVE queue [MAX n]: moves a dead-letter queue's items back; how many",
    ),
    keyless(queue_cmd(
        "queues",
        -1,
        &["readonly"],
        "admin",
        "QUEUES [KIND fifo|priority] [LIMIT n] [AFTER queue]: one page of queues with their stats",
    )),
    queue_cmd(
        "leases",
        -2,
        &["readonly"],
        "admin",
        "LEASES queue [LIMIT n] [AFTER cursor]: one page of the leases in flight",
    ),
    queue_cmd(
        "purge",
        2,
        W,
        "admin",
        "PURGE queue: drops the visible and delayed items (leases stay)",
    ),
    queue_cmd(
        "delete",
        2,
        W,
        "admin",
        "DELETE queue: deletes the queue and all it holds",
    ),
    queue_cmd(
        "settings",
        -2,
        W,
        "admin",
        "SETTINGS queue [json]: the queue's settings; a JSON object changes them",
    ),
    queue_cmd(
        "pause",
        2,
        W,
        "admin",
        "PAUSE queue: takes pushes, hands nothing out",
    ),
    queue_cmd(
        "resume",
        2,
        W,
        "admin",
        "RESUME queue: hands items out again",
    ),
    Spec {
        first_key: 0,
        last_key: 0,
        step: 0,
        subcommands: PQ_SUBCOMMANDS,
        ..queue_cmd(
            "pq",
            -2,
            &[],
            "priority",
            "PQ <subcommand>: priority queues (PQ HELP lists them)",
        )
    },
    queue_cmd(
        "lpush",
        -3,
        WF,
        "list",
        "LPUSH key element [element ...]: enqueues at the tail (a hotq queue is FIFO); the depth after",
    ),
    queue_cmd(
        "rpush",
        -3,
        WF,
        "list",
        "RPUSH key element [element ...]: enqueues at the tail; the depth after",
    ),
    taking(queue_cmd(
        "lpop",
        -2,
        WF,
        "list",
        "LPOP key [count]: the oldest item (or up to count), or nil",
    )),
    taking(queue_cmd(
        "rpop",
        -2,
        WF,
        "list",
        "RPOP key [count]: the oldest item too (a hotq queue is FIFO), or nil",
    )),
    taking(Spec {
        last_key: -2,
        ..queue_cmd(
            "blpop",
            -3,
            WB,
            "list",
            "BLPOP key [key ...] timeout: [key, item] from the first key with one, waiting up to timeout seconds (0: no end), or nil",
        )
    }),
    taking(Spec {
        last_key: -2,
        ..queue_cmd(
            "brpop",
            -3,
            WB,
            "list",
            "BRPOP key [key ...] timeout: as BLPOP (a hotq queue is FIFO)",
        )
    }),
    queue_cmd(
        "llen",
        2,
        RF,
        "list",
        "LLEN key: the queue's depth (visible items)",
    ),
];

fn find(table: &'static [Spec], name: &[u8]) -> Option<&'static Spec> {
    table.iter().find(|spec| {
        let short = spec.name.rsplit('|').next().unwrap_or(spec.name);
        short.as_bytes().eq_ignore_ascii_case(name)
    })
}

fn arity_fits(arity: i64, words: usize) -> bool {
    let words = words as i64;
    if arity >= 0 {
        words == arity
    } else {
        words >= -arity
    }
}

/// Why [`lookup`] found no command to run: the command named, when it is
/// served (its arity was wrong), and the error Redis gives.
pub type NotFound = (Option<&'static Spec>, CmdError);

/// The command `words` names (its name first) and how many words name it
/// (2 for a subcommand), its arity checked; else the error Redis gives.
pub fn lookup(words: &[Bytes]) -> Result<(&'static Spec, usize), NotFound> {
    let name = words.first().map(|word| &word[..]).unwrap_or_default();
    let Some(spec) = find(COMMANDS, name) else {
        return Err((None, unknown_command(words)));
    };
    let (spec, named_by) = match (spec.subcommands, words.get(1)) {
        ([], _) | (_, None) => (spec, 1),
        (subcommands, Some(sub)) => match find(subcommands, sub) {
            Some(sub_spec) => (sub_spec, 2),
            None => {
                let line = format!(
                    "ERR unknown subcommand '{}'. Try {} HELP.",
                    shown(sub, 128),
                    spec.name.to_ascii_uppercase()
                );
                return Err((None, CmdError::Line(line)));
            }
        },
    };
    if !arity_fits(spec.arity, words.len()) {
        let line = format!("ERR wrong number of arguments for '{}' command", spec.name);
        return Err((Some(spec), CmdError::Line(line)));
    }
    Ok((spec, named_by))
}

/// `bytes` as text in an error line, cut to `max` bytes.
fn shown(bytes: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(max)]).into_owned()
}

/// Redis's words for a command it does not know.
fn unknown_command(words: &[Bytes]) -> CmdError {
    let name = words
        .first()
        .map(|word| shown(word, 128))
        .unwrap_or_default();
    let mut line = format!("ERR unknown command '{name}', with args beginning with: ");
    for arg in words.iter().skip(1) {
        if line.len() >= 256 {
            break;
        }
        line.push_str(&format!("'{}' ", shown(arg, 128)));
    }
    CmdError::Line(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<Bytes> {
        text.split(' ')
            .map(|word| Bytes::from(word.to_string()))
            .collect()
    }

    #[test]
    fn names_are_found_in_any_case_and_arities_checked() {
        let (spec, named) = lookup(&words("pop jobs")).unwrap();
        assert_eq!((spec.name, named), ("pop", 1));
        let (spec, named) = lookup(&words("Pq PUSH jobs 1 x")).unwrap();
        assert_eq!((spec.name, named), ("pq|push", 2));
        let error = |text| match lookup(&words(text)) {
            Err((_, CmdError::Line(line))) => line,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            error("POP"),
            "ERR wrong number of arguments for 'pop' command"
        );
        assert_eq!(
            error("pq push jobs"),
            "ERR wrong number of arguments for 'pq|push' command"
        );
        assert_eq!(
            error("FROB a b"),
            "ERR unknown command 'FROB', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            error("pq frob"),
            "ERR unknown subcommand 'frob'. Try PQ HELP."
        );
    }

    #[test]
    fn every_command_has_a_summary_and_a_group() {
        for spec in COMMANDS.iter().chain(PQ_SUBCOMMANDS) {
            assert!(
                !spec.summary.is_empty() && !spec.group.is_empty(),
                "{}",
                spec.name
            );
            assert!(spec.arity != 0, "{}", spec.name);
        }
    }
}
