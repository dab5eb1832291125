//! The RESP listener's commands over a real TCP connection to the real
//! daemon: every command and its reply's shape, in RESP2 and RESP3, byte
//! for byte where Redis fixes the shape; errors in Redis's shape with
//! hotq's codes; AUTH with a token.

use redis::Value;

use crate::common::daemon::Daemon;
use crate::common::resp::{Raw, call, call_error, redis};

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(values) => values,
        other => panic!("expected an array, got {other:?}"),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).unwrap(),
        Value::SimpleString(text) => text.clone(),
        Value::Okay => "OK".into(),
        other => panic!("expected a string, got {other:?}"),
    }
}

/// A flat RESP2 map's value for `key`.
fn field(map: &Value, key: &str) -> Value {
    let entries = match map {
        Value::Array(values) => values
            .chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect(),
        Value::Map(entries) => entries.clone(),
        other => panic!("expected a map, got {other:?}"),
    };
    entries
        .into_iter()
        .find(|(name, _)| text(name) == key)
        .unwrap_or_else(|| panic!("no {key} in {map:?}"))
        .1
}

#[tokio::test]
async fn connect_commands_answer_as_redis_does() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    assert_eq!(raw.call(&[b"PING"]).await, "+PONG\r\n");
    assert_eq!(raw.call(&[b"ping", b"hi"]).await, "$2\r\nhi\r\n");
    assert_eq!(raw.call(&[b"ECHO", b"x"]).await, "$1\r\nx\r\n");
    assert_eq!(raw.call(&[b"SELECT", b"0"]).await, "+OK\r\n");
    assert_eq!(
        raw.call(&[b"SELECT", b"1"]).await,
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(raw.call(&[b"CLIENT", b"SETNAME", b"w1"]).await, "+OK\r\n");
    assert_eq!(raw.call(&[b"CLIENT", b"GETNAME"]).await, "$2\r\nw1\r\n");
    assert_eq!(
        raw.call(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"])
            .await,
        "+OK\r\n"
    );
    assert_eq!(
        raw.call(&[b"CLIENT", b"SETINFO", b"lib-ver", b"5.0"]).await,
        "+OK\r\n"
    );
    assert!(raw.call(&[b"CLIENT", b"ID"]).await.starts_with(':'));
    assert!(
        raw.call(&[b"CLIENT", b"INFO"])
            .await
            .contains("lib-name=redis-py")
    );
    let hello2 = raw.call(&[b"HELLO", b"2"]).await;
    assert!(
        hello2.starts_with("*14\r\n$6\r\nserver\r\n$4\r\nhotq\r\n"),
        "{hello2}"
    );
    assert_eq!(
        raw.call(&[b"HELLO", b"4"]).await,
        "-NOPROTO unsupported protocol version\r\n"
    );
    let hello3 = raw.call(&[b"HELLO", b"3", b"SETNAME", b"w2"]).await;
    assert!(hello3.starts_with("%7\r\n"), "{hello3}");
    assert!(hello3.contains("$5\r\nproto\r\n:3\r\n"), "{hello3}");
    assert_eq!(raw.call(&[b"CLIENT", b"GETNAME"]).await, "$2\r\nw2\r\n");
    let count = raw.call(&[b"COMMAND", b"COUNT"]).await;
    assert_eq!(count, format!(":{}\r\n", hotq::resp::command_names().len()));
    let docs = raw.call(&[b"COMMAND", b"DOCS", b"pop"]).await;
    assert!(
        docs.starts_with("%1\r\n$3\r\npop\r\n%3\r\n$7\r\nsummary\r\n"),
        "{docs}"
    );
    let info = raw.call(&[b"COMMAND", b"INFO", b"blpop", b"nosuch"]).await;
    assert!(
        info.starts_with("*2\r\n*10\r\n$5\r\nblpop\r\n:-3\r\n"),
        "{info}"
    );
    assert!(
        info.ends_with("_\r\n"),
        "an unknown command's entry is null: {info}"
    );
    assert!(raw.call(&[b"INFO"]).await.contains("redis_version:"));
    assert_eq!(raw.call(&[b"RESET"]).await, "+RESET\r\n");
    assert_eq!(raw.call(&[b"QUIT"]).await, "+OK\r\n");
    assert!(raw.closed_by_daemon().await);
    daemon.stop().await;
}

#[tokio::test]
async fn errors_keep_redis_s_shape_with_hotq_s_codes_and_the_connection() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    assert_eq!(
        raw.call(&[b"FROB", b"a", b"b"]).await,
        "-ERR unknown command 'FROB', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(
        raw.call(&[b"POP"]).await,
        "-ERR wrong number of arguments for 'pop' command\r\n"
    );
    assert_eq!(
        raw.call(&[b"PQ", b"FROB", b"q"]).await,
        "-ERR unknown subcommand 'FROB'. Try PQ HELP.\r\n"
    );
    assert_eq!(
        raw.call(&[b"POP", b"q", b"SOON"]).await,
        "-ERR syntax error\r\n"
    );
    let refused = raw.call(&[b"POP", b"bad/name"]).await;
    assert!(refused.starts_with("-ERR invalid_queue_name "), "{refused}");
    let refused = raw.call(&[b"POP", b"q", b"WAIT", b"99999999"]).await;
    assert!(
        refused.starts_with("-ERR bad_parameter wait_ms must be at most"),
        "{refused}"
    );
    let refused = raw.call(&[b"POP", b"q", b"MAX", b"0"]).await;
    assert!(
        refused.starts_with("-ERR bad_parameter max must be 1 to"),
        "{refused}"
    );
    let refused = raw.call(&[b"POP", b"q", b"LEASE", b"0"]).await;
    assert!(
        refused.starts_with("-ERR bad_parameter lease_ms must be 1 to"),
        "{refused}"
    );
    // Over `payload_bytes_max` (1 MiB by default).
    let large = vec![b'x'; hotq::envelope::PAYLOAD_BYTES_MAX_DEFAULT + 1];
    let refused = raw.call(&[b"PUSH", b"q", &large]).await;
    assert!(refused.starts_with("-ERR item_too_large "), "{refused}");
    let refused = raw.call(&[b"PUSH", b"q", b""]).await;
    assert!(refused.starts_with("-ERR empty_item "), "{refused}");
    let refused = raw.call(&[b"LPOP", b"q", b"-1"]).await;
    assert_eq!(refused, "-ERR value is out of range, must be positive\r\n");
    let refused = raw.call(&[b"BLPOP", b"q", b"soon"]).await;
    assert_eq!(refused, "-ERR timeout is not a float or out of range\r\n");
    let refused = raw.call(&[b"PQ", b"POP", b"p", b"MIDDLE"]).await;
    assert!(refused.starts_with("-ERR bad_end "), "{refused}");
    // The connection serves on after every refusal.
    assert_eq!(raw.call(&[b"PING"]).await, "+PONG\r\n");
    daemon.stop().await;
}

#[tokio::test]
async fn fifo_commands_answer_their_shapes() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "a", "b", "c"]).await,
        Value::Int(3)
    );
    assert_eq!(call(&mut con, &["PEEK", "jobs"]).await, bulk("a"));
    assert_eq!(call(&mut con, &["POP", "jobs"]).await, bulk("a"));
    assert_eq!(
        call(&mut con, &["POP", "jobs", "MAX", "5"]).await,
        Value::Array(vec![bulk("b"), bulk("c")])
    );
    assert_eq!(call(&mut con, &["POP", "jobs"]).await, Value::Nil);
    assert_eq!(
        call(&mut con, &["POP", "jobs", "MAX", "2"]).await,
        Value::Array(vec![])
    );
    assert_eq!(call(&mut con, &["PEEK", "jobs"]).await, Value::Nil);
    // An option's word as an item: ITEMS ends the options.
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "ITEMS", "DELAY"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["POP", "jobs", "WAIT", "10"]).await,
        bulk("DELAY")
    );
    // Delayed, deduplicated, grouped.
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "DELAY", "600000", "later"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "DEDUP", "id-1", "once"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "DEDUP", "id-1", "once"]).await,
        Value::Int(0)
    );
    assert_eq!(
        call(&mut con, &["PUSH", "jobs", "GROUP", "g1", "x", "y"]).await,
        Value::Int(2)
    );
    let stats = call(&mut con, &["STATS", "jobs"]).await;
    assert_eq!(field(&stats, "queue"), bulk("jobs"));
    assert_eq!(field(&stats, "delayed"), Value::Int(1));
    assert_eq!(
        field(&stats, "depth"),
        Value::Int(2),
        "once, and g1's head: {stats:?}"
    );
    assert_eq!(field(&stats, "paused"), Value::Int(0));
    let purged = call(&mut con, &["PURGE", "jobs"]).await;
    assert_eq!(field(&purged, "delayed"), Value::Int(1));
    assert_eq!(field(&purged, "done"), Value::Int(1));
    daemon.stop().await;
}

#[tokio::test]
async fn leased_pops_acks_riding_and_the_lease_commands() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    let empty = call(&mut con, &["POP", "work", "LEASE", "30000"]).await;
    assert_eq!(
        empty,
        Value::Array(vec![Value::Array(vec![]), Value::Array(vec![])])
    );
    call(&mut con, &["PUSH", "work", "one", "two", "three", "four"]).await;
    let popped = array(call(&mut con, &["POP", "work", "LEASE", "30000"]).await);
    let entry = array(array(popped[0].clone()).remove(0));
    assert_eq!(
        (entry[1].clone(), entry[2].clone()),
        (Value::Int(1), bulk("one"))
    );
    let receipt = text(&entry[0]);
    assert_eq!(receipt.len(), 32);
    // The next pop acks it, riding.
    let popped = array(
        call(
            &mut con,
            &[
                "POP", "work", "LEASE", "30000", "WAIT", "10", "ACK", &receipt, "nope",
            ],
        )
        .await,
    );
    assert_eq!(
        popped[1],
        Value::Array(vec![
            Value::SimpleString("acked".into()),
            Value::SimpleString("invalid".into())
        ])
    );
    let second = text(&array(array(popped[0].clone()).remove(0))[0]);
    // ACK: one outcome per receipt, in order.
    assert_eq!(
        call(&mut con, &["ACK", "work", &second, &receipt, "junk"]).await,
        Value::Array(vec![
            Value::SimpleString("acked".into()),
            Value::SimpleString("unknown_receipt".into()),
            Value::SimpleString("invalid".into()),
        ])
    );
    // EXTEND answers the new expiry; NACK where the item went.
    let popped = array(call(&mut con, &["POP", "work", "LEASE", "30000", "MAX", "2"]).await);
    let entries = array(popped[0].clone());
    assert_eq!(entries.len(), 2);
    let third = text(&array(entries[0].clone())[0]);
    let fourth = text(&array(entries[1].clone())[0]);
    let Value::Int(expiry) = call(&mut con, &["EXTEND", "work", &third, "60000"]).await else {
        panic!("EXTEND answers an integer");
    };
    assert!(expiry > 0);
    let nacked = call(&mut con, &["NACK", "work", &third]).await;
    assert_eq!(field(&nacked, "outcome"), bulk("requeued"));
    let nacked = call(&mut con, &["NACK", "work", &fourth, "DELAY", "600000"]).await;
    assert_eq!(field(&nacked, "outcome"), bulk("delayed"));
    let refused = call_error(&mut con, &["NACK", "work", &fourth]).await;
    assert!(refused.starts_with("ERR unknown_receipt"), "{refused}");
    let leases = call(&mut con, &["LEASES", "work"]).await;
    assert_eq!(field(&leases, "leases"), Value::Array(vec![]));
    // A queue leasing by default answers the long shape to a plain POP.
    call(
        &mut con,
        &["SETTINGS", "work", r#"{"default_lease_ms": 30000}"#],
    )
    .await;
    let popped = array(call(&mut con, &["POP", "work"]).await);
    assert_eq!(array(array(popped[0].clone()).remove(0))[2], bulk("three"));
    let leases = field(
        &call(&mut con, &["LEASES", "work", "LIMIT", "10"]).await,
        "leases",
    );
    assert_eq!(array(leases).len(), 1);
    let settings = call(&mut con, &["SETTINGS", "work"]).await;
    assert_eq!(
        field(&field(&settings, "stored"), "default_lease_ms"),
        Value::Int(30000)
    );
    daemon.stop().await;
}

#[tokio::test]
async fn list_commands_answer_as_redis_s_do_in_resp2_and_resp3() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    assert_eq!(raw.call(&[b"LPUSH", b"l", b"a", b"b"]).await, ":2\r\n");
    assert_eq!(raw.call(&[b"RPUSH", b"l", b"c"]).await, ":3\r\n");
    assert_eq!(raw.call(&[b"LLEN", b"l"]).await, ":3\r\n");
    // FIFO whichever end: oldest first.
    assert_eq!(raw.call(&[b"RPOP", b"l"]).await, "$1\r\na\r\n");
    assert_eq!(
        raw.call(&[b"LPOP", b"l", b"5"]).await,
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n"
    );
    assert_eq!(raw.call(&[b"LPOP", b"l"]).await, "$-1\r\n");
    assert_eq!(raw.call(&[b"LPOP", b"l", b"2"]).await, "*-1\r\n");
    assert_eq!(raw.call(&[b"LPOP", b"l", b"0"]).await, "*0\r\n");
    assert_eq!(raw.call(&[b"BLPOP", b"l", b"m", b"0.05"]).await, "*-1\r\n");
    raw.call(&[b"RPUSH", b"m", b"z"]).await;
    assert_eq!(
        raw.call(&[b"BRPOP", b"l", b"m", b"1"]).await,
        "*2\r\n$1\r\nm\r\n$1\r\nz\r\n"
    );
    raw.call(&[b"HELLO", b"3"]).await;
    assert_eq!(raw.call(&[b"LPOP", b"l"]).await, "_\r\n");
    assert_eq!(raw.call(&[b"LPOP", b"l", b"2"]).await, "_\r\n");
    assert_eq!(raw.call(&[b"BLPOP", b"l", b"0.01"]).await, "_\r\n");
    assert_eq!(
        raw.call(&[b"STATS", b"l"]).await.lines().next(),
        Some("%11")
    );
    daemon.stop().await;
}

#[tokio::test]
async fn priority_and_admin_commands_answer_their_shapes() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut con = redis(&daemon.redis_url()).await;
    assert_eq!(
        call(&mut con, &["PQ", "PUSH", "p", "5", "five"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["PQ", "PUSH", "p", "-2", "low"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["PQ", "PUSH", "p", "9", "DEDUP", "d", "nine"]).await,
        Value::Int(1)
    );
    assert_eq!(
        call(&mut con, &["PQ", "PEEK", "p", "MAX"]).await,
        bulk("nine")
    );
    assert_eq!(
        call(&mut con, &["PQ", "POP", "p", "MIN"]).await,
        bulk("low")
    );
    let popped = array(call(&mut con, &["PQ", "POP", "p", "max", "LEASE", "30000"]).await);
    let receipt = text(&array(array(popped[0].clone()).remove(0))[0]);
    assert_eq!(
        call(&mut con, &["PQ", "ACK", "p", &receipt]).await,
        Value::Array(vec![Value::SimpleString("acked".into())])
    );
    // A FIFO queue of the same name did not issue it.
    assert_eq!(
        call(&mut con, &["ACK", "p", &receipt]).await,
        Value::Array(vec![Value::SimpleString("receipt_queue_mismatch".into())])
    );
    let popped = array(call(&mut con, &["PQ", "POP", "p", "MIN", "LEASE", "30000"]).await);
    let receipt = text(&array(array(popped[0].clone()).remove(0))[0]);
    assert!(matches!(
        call(&mut con, &["PQ", "EXTEND", "p", &receipt, "1000"]).await,
        Value::Int(_)
    ));
    let nacked = call(&mut con, &["PQ", "NACK", "p", &receipt]).await;
    assert_eq!(field(&nacked, "outcome"), bulk("requeued"));
    assert_eq!(
        field(&call(&mut con, &["PQ", "STATS", "p"]).await, "depth"),
        Value::Int(1)
    );
    assert!(!array(call(&mut con, &["PQ", "HELP"]).await).is_empty());
    let paused = call(&mut con, &["PQ", "PAUSE", "p"]).await;
    assert_eq!(field(&paused, "paused"), Value::Int(1));
    assert_eq!(call(&mut con, &["PQ", "POP", "p", "MIN"]).await, Value::Nil);
    call(&mut con, &["PQ", "RESUME", "p"]).await;
    let purged = call(&mut con, &["PQ", "PURGE", "p"]).await;
    assert_eq!(field(&purged, "purged"), Value::Int(1));
    // FIFO admin.
    call(&mut con, &["PUSH", "a1", "x"]).await;
    call(&mut con, &["PUSH", "a2", "y"]).await;
    let page = call(&mut con, &["QUEUES", "LIMIT", "1"]).await;
    let queues = array(field(&page, "queues"));
    assert_eq!((queues.len(), field(&queues[0], "queue")), (1, bulk("a1")));
    let next = text(&field(&page, "next"));
    let page = call(&mut con, &["QUEUES", "AFTER", &next, "KIND", "fifo"]).await;
    assert_eq!(
        field(&array(field(&page, "queues"))[0], "queue"),
        bulk("a2")
    );
    let page = call(&mut con, &["QUEUES", "KIND", "priority"]).await;
    assert!(
        matches!(field(&page, "queues"), Value::Array(_)),
        "{page:?}"
    );
    assert_eq!(
        field(&call(&mut con, &["PAUSE", "a1"]).await, "paused"),
        Value::Int(1)
    );
    assert_eq!(
        field(&call(&mut con, &["STATS", "a1"]).await, "paused"),
        Value::Int(1)
    );
    assert_eq!(
        field(&call(&mut con, &["RESUME", "a1"]).await, "paused"),
        Value::Int(0)
    );
    let deleted = call(&mut con, &["DELETE", "a1"]).await;
    assert_eq!(
        (field(&deleted, "deleted"), field(&deleted, "items")),
        (Value::Int(1), Value::Int(1))
    );
    let refused = call_error(&mut con, &["SETTINGS", "a2", r#"{"no_such": 1}"#]).await;
    assert!(refused.starts_with("ERR invalid_settings"), "{refused}");
    let refused = call_error(&mut con, &["REDRIVE", "a2"]).await;
    assert!(
        refused.starts_with("ERR not_dead_letter_queue"),
        "{refused}"
    );
    assert_eq!(
        call(&mut con, &["REDRIVE", "a2.dead", "MAX", "10"]).await,
        Value::Int(0)
    );
    assert_eq!(call(&mut con, &["LLEN", "a2"]).await, Value::Int(1));
    daemon.stop().await;
}

#[tokio::test]
async fn with_a_token_every_command_needs_auth_first() {
    let daemon = Daemon::start_resp(|config| config.token = Some("s3cret".into())).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    assert_eq!(
        raw.call(&[b"PING"]).await,
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(
        raw.call(&[b"POP", b"q"]).await,
        "-NOAUTH Authentication required.\r\n"
    );
    let refused = raw.call(&[b"HELLO", b"3"]).await;
    assert!(
        refused.starts_with("-NOAUTH HELLO must be called"),
        "{refused}"
    );
    assert_eq!(
        raw.call(&[b"AUTH", b"wrong"]).await,
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(raw.call(&[b"AUTH", b"s3cret"]).await, "+OK\r\n");
    assert_eq!(raw.call(&[b"PING"]).await, "+PONG\r\n");
    let mut hello = Raw::connect(daemon.resp.unwrap()).await;
    let answer = hello
        .call(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"])
        .await;
    assert!(answer.starts_with("%7\r\n"), "{answer}");
    assert_eq!(hello.call(&[b"LLEN", b"q"]).await, ":0\r\n");
    // The redis crate authenticates from its URL.
    let url = format!("redis://:s3cret@{}/", daemon.resp.unwrap());
    let mut con = redis(&url).await;
    assert_eq!(call(&mut con, &["PUSH", "q", "x"]).await, Value::Int(1));
    let url = format!(
        "redis://default:s3cret@{}/?protocol=resp3",
        daemon.resp.unwrap()
    );
    let mut con = redis(&url).await;
    assert_eq!(call(&mut con, &["POP", "q"]).await, bulk("x"));
    // Without a token, AUTH with one word is refused as Redis refuses it.
    let open = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(open.resp.unwrap()).await;
    let refused = raw.call(&[b"AUTH", b"x"]).await;
    assert!(
        refused.starts_with("-ERR AUTH <password> called without any password"),
        "{refused}"
    );
    open.stop().await;
    daemon.stop().await;
}

/// Each command counts in `hotq_resp_commands_total` by outcome, and the
/// queue operations in `hotq_operations_total` as over HTTP (alone: the
/// metrics recorder is the process's).
#[tokio::test]
async fn commands_count_by_outcome_beside_the_http_api_s_operations() {
    if !crate::common::alone::here(
        module_path!(),
        "commands_count_by_outcome_beside_the_http_api_s_operations",
    )
    .await
    {
        return;
    }
    use crate::common::daemon::metric_sum;
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    raw.call(&[b"PUSH", b"counted", b"x"]).await;
    raw.call(&[b"POP", b"counted"]).await;
    raw.call(&[b"POP", b"counted"]).await;
    raw.call(&[b"LPOP", b"counted"]).await;
    raw.call(&[b"FROB"]).await;
    raw.call(&[b"POP", b"bad/name"]).await;
    let url = &daemon.metrics_url;
    let resp = "hotq_resp_commands_total";
    assert_eq!(
        metric_sum(url, resp, &["command=\"pop\"", "outcome=\"ok\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, resp, &["command=\"pop\"", "outcome=\"empty\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, resp, &["command=\"pop\"", "outcome=\"error\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, resp, &["command=\"lpop\"", "outcome=\"empty\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, resp, &["command=\"unknown\"", "outcome=\"error\""]).await,
        1.0
    );
    let ops = "hotq_operations_total";
    let counted = "queue=\"counted\"";
    assert_eq!(
        metric_sum(url, ops, &[counted, "op=\"push\"", "outcome=\"ok\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, ops, &[counted, "op=\"pop\"", "outcome=\"ok\""]).await,
        1.0
    );
    assert_eq!(
        metric_sum(url, ops, &[counted, "op=\"pop\"", "outcome=\"empty\""]).await,
        2.0
    );
    assert_eq!(metric_sum(url, "hotq_resp_connections", &[]).await, 0.0);
    daemon.stop().await;
}

/// `hotq serve` binds the RESP listener where `--resp-listen` or
/// `HOTQ_RESP_LISTEN` says, and none with an empty value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_is_off_with_an_empty_flag_or_environment_value() {
    use crate::common::process;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let (on, by_flag, by_env) = tokio::task::spawn_blocking(move || {
        let on = process::start(&path.join("on"));
        // `serve_args` binds RESP on port 0: these name it themselves.
        let without_resp = |data: &std::path::Path| {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hotq"));
            let args = process::serve_args(data);
            let at = args.iter().position(|arg| arg == "--resp-listen").unwrap();
            command.args(&args[..at]).args(&args[at + 2..]);
            command
        };
        let mut command = without_resp(&path.join("flag"));
        command.args(["--resp-listen", ""]);
        let by_flag = process::start_command(command);
        let mut command = without_resp(&path.join("env"));
        command.env("HOTQ_RESP_LISTEN", "");
        let by_env = process::start_command(command);
        (on, by_flag, by_env)
    })
    .await
    .unwrap();
    let mut raw = Raw::connect(on.resp.parse().unwrap()).await;
    assert_eq!(raw.call(&[b"PING"]).await, "+PONG\r\n");
    assert_eq!((by_flag.resp.as_str(), by_env.resp.as_str()), ("", ""));
    for running in [on, by_flag, by_env] {
        process::terminate(running);
    }
}
