//! The RESP listener under pipelines, bad input and clients that leave:
//! a pipeline's pops each get their own item in order; garbage, a
//! 600 MB bulk length or a half-sent frame costs at most that one
//! connection while the daemon serves others; a client that closes its
//! connection mid-BLPOP (one key or several) loses no item; the
//! connection limit answers as Redis does.

use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::resp::{Raw, encode};

/// A pipeline of pushes and pops in one write: every reply in order, each
/// pop its own item.
#[tokio::test]
async fn a_pipeline_is_answered_in_order_each_pop_its_own_item() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    let mut pipeline = Vec::new();
    for i in 0..200 {
        pipeline.extend(encode(&[b"PUSH", b"p", format!("item-{i}").as_bytes()]));
    }
    for _ in 0..201 {
        pipeline.extend(encode(&[b"POP", b"p"]));
    }
    raw.send(&pipeline).await;
    for _ in 0..200 {
        assert_eq!(raw.reply().await, ":1\r\n");
    }
    for i in 0..200 {
        let item = format!("item-{i}");
        assert_eq!(raw.reply().await, format!("${}\r\n{item}\r\n", item.len()));
    }
    assert_eq!(raw.reply().await, "$-1\r\n");
    // The redis crate's pipeline, leased, acks riding on the next pop.
    let mut con = crate::common::resp::redis(&daemon.redis_url()).await;
    let mut push = redis::pipe();
    for i in 0..50 {
        push.cmd("RPUSH").arg("q").arg(format!("x{i}"));
    }
    let depths: Vec<i64> = push.query_async(&mut con).await.unwrap();
    assert_eq!(depths, (1..=50).collect::<Vec<i64>>());
    let mut pops = redis::pipe();
    for _ in 0..50 {
        pops.cmd("LPOP").arg("q");
    }
    let items: Vec<String> = pops.query_async(&mut con).await.unwrap();
    assert_eq!(items, (0..50).map(|i| format!("x{i}")).collect::<Vec<_>>());
    daemon.stop().await;
}

/// Garbage bytes: an error line, then that connection closes; a 600 MB
/// bulk length: refused once `buffer_max_bytes` is buffered, that
/// connection closed; a half-sent frame waits, harmless, and is answered
/// when it is whole. Another connection is served throughout.
#[tokio::test]
async fn bad_input_costs_only_its_own_connection() {
    let daemon = Daemon::start_resp(|config| config.resp.buffer_max_bytes = 256 * 1024).await;
    let address = daemon.resp.unwrap();
    let mut other = Raw::connect(address).await;
    let served = async |other: &mut Raw| {
        assert_eq!(other.call(&[b"PUSH", b"ok", b"x"]).await, ":1\r\n");
        assert_eq!(other.call(&[b"POP", b"ok"]).await, "$1\r\nx\r\n");
    };

    let mut half = Raw::connect(address).await;
    half.send(b"*2\r\n$3\r\nPOP\r\n$4\r\nha").await;
    served(&mut other).await;

    let mut garbage = Raw::connect(address).await;
    garbage.send(b"\x00\x13\x37 garbage\r\n").await;
    let refused = garbage.reply().await;
    assert!(refused.starts_with("-ERR Protocol error"), "{refused}");
    assert!(garbage.closed_by_daemon().await);
    served(&mut other).await;

    let mut huge = Raw::connect(address).await;
    huge.send(b"*3\r\n$4\r\nPUSH\r\n$1\r\nq\r\n$600000000\r\n")
        .await;
    let chunk = vec![b'x'; 64 * 1024];
    // Sends until the daemon refuses (at 256 kB), bounded far below 600 MB.
    for _ in 0..64 {
        if tokio::io::AsyncWriteExt::write_all(&mut huge.stream, &chunk)
            .await
            .is_err()
        {
            break;
        }
        served(&mut other).await;
    }
    let refused = huge.reply_within(Duration::from_secs(30)).await;
    let refused = refused.expect("an error line before the close");
    assert!(
        refused.starts_with("-ERR Protocol error: a request larger than"),
        "{refused}"
    );
    assert!(huge.closed_by_daemon().await);
    served(&mut other).await;

    let mut long = Raw::connect(address).await;
    long.send(b"*1000000\r\n$4\r\nPUSH\r\n").await;
    let refused = long.reply().await;
    assert!(
        refused.starts_with("-ERR Protocol error: invalid multibulk length"),
        "{refused}"
    );
    assert!(long.closed_by_daemon().await);
    served(&mut other).await;

    // The half-sent pop, made whole, is answered (nothing in queue "hang").
    half.send(b"ng\r\n").await;
    assert_eq!(half.reply().await, "$-1\r\n");
    // Unknown commands and wrong arities in the middle of a pipeline.
    let mut pipeline = encode(&[b"NOPE"]);
    pipeline.extend(encode(&[b"LLEN"]));
    pipeline.extend(encode(&[b"PING"]));
    other.send(&pipeline).await;
    assert!(
        other
            .reply()
            .await
            .starts_with("-ERR unknown command 'NOPE'")
    );
    assert!(
        other
            .reply()
            .await
            .starts_with("-ERR wrong number of arguments for 'llen'")
    );
    assert_eq!(other.reply().await, "+PONG\r\n");
    daemon.stop().await;
}

/// Past `resp.connections_max`, a connection is answered as Redis answers
/// one past `maxclients`, and closed; one freed makes room.
#[tokio::test]
async fn connections_past_the_limit_are_refused_in_redis_s_words() {
    let daemon = Daemon::start_resp(|config| config.resp.connections_max = 2).await;
    let address = daemon.resp.unwrap();
    let mut first = Raw::connect(address).await;
    let mut second = Raw::connect(address).await;
    assert_eq!(first.call(&[b"PING"]).await, "+PONG\r\n");
    assert_eq!(second.call(&[b"PING"]).await, "+PONG\r\n");
    let mut third = Raw::connect(address).await;
    assert_eq!(
        third.reply().await,
        "-ERR max number of clients reached\r\n"
    );
    assert!(third.closed_by_daemon().await);
    drop(first);
    // The freed permit is seen once the daemon notices the close.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut again = Raw::connect(address).await;
        again.command(&[b"PING"]).await;
        match again.reply().await.as_str() {
            "+PONG\r\n" => break,
            refused => assert!(
                refused.starts_with("-ERR max number") && tokio::time::Instant::now() < deadline,
                "{refused}"
            ),
        }
        tokio::task::yield_now().await;
    }
    daemon.stop().await;
}

/// Waits until `queue` has `n` pops waiting on it (its stats' `waiting`).
async fn until_waiting(other: &mut Raw, queue: &[u8], n: usize) {
    let expected = format!("$7\r\nwaiting\r\n:{n}\r\n");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !other.call(&[b"STATS", queue]).await.contains(&expected) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no waiting pop on the queue"
        );
        tokio::task::yield_now().await;
    }
}

/// A client closes its connection while its BLPOP waits (one key, then
/// three), and items are pushed at once: each reaches the next pop, none
/// is lost or taken twice.
#[tokio::test]
async fn a_connection_closed_mid_blpop_loses_no_item() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let address = daemon.resp.unwrap();
    let mut other = Raw::connect(address).await;
    for round in 0..10 {
        let keys: &[&[u8]] = if round % 2 == 0 {
            &[b"k1"]
        } else {
            &[b"k1", b"k2", b"k3"]
        };
        let mut waiter = Raw::connect(address).await;
        let mut command: Vec<&[u8]> = vec![b"BLPOP"];
        command.extend(keys);
        command.push(b"0");
        waiter.command(&command).await;
        until_waiting(&mut other, b"k1", 1).await;
        // Close, and push to every key in the same moment.
        drop(waiter);
        let mut pushes = Vec::new();
        for key in keys {
            pushes.extend(encode(&[b"RPUSH", key, format!("r{round}").as_bytes()]));
        }
        other.send(&pushes).await;
        for _ in keys {
            assert!(other.reply().await.starts_with(':'));
        }
        for key in keys {
            let item = format!("r{round}");
            let popped = other.call(&[b"POP", key, b"WAIT", b"10000"]).await;
            assert_eq!(popped, format!("$2\r\n{item}\r\n"), "round {round}");
            assert_eq!(other.call(&[b"LLEN", key]).await, ":0\r\n");
        }
    }
    daemon.stop().await;
}

/// A BLPOP over several keys, with an item pushed to each at once: one
/// comes back, the other stays in its queue (given back if a pop took it).
#[tokio::test]
async fn blpop_over_several_keys_takes_one_item_and_leaves_the_rest() {
    let daemon = Daemon::start_resp(|_| {}).await;
    let address = daemon.resp.unwrap();
    let mut other = Raw::connect(address).await;
    for round in 0..10 {
        let mut waiter = Raw::connect(address).await;
        waiter.command(&[b"BLPOP", b"a", b"b", b"30"]).await;
        until_waiting(&mut other, b"b", 1).await;
        let mut pushes = encode(&[b"RPUSH", b"a", b"from-a"]);
        pushes.extend(encode(&[b"RPUSH", b"b", b"from-b"]));
        other.send(&pushes).await;
        other.reply().await;
        other.reply().await;
        let answer = waiter.reply().await;
        let (took, left): (&[u8], &[u8]) = if answer.contains("from-a") {
            (b"a", b"b")
        } else {
            (b"b", b"a")
        };
        let key = String::from_utf8_lossy(took);
        assert!(
            answer.starts_with(&format!("*2\r\n$1\r\n{key}\r\n")),
            "round {round}: {answer}"
        );
        // The other item is in its queue, or comes back to it.
        let left_item = format!("from-{}", String::from_utf8_lossy(left));
        let popped = other.call(&[b"POP", left, b"WAIT", b"10000"]).await;
        assert_eq!(
            popped,
            format!("${}\r\n{left_item}\r\n", left_item.len()),
            "round {round}"
        );
        assert_eq!(other.call(&[b"LLEN", b"a"]).await, ":0\r\n");
        assert_eq!(other.call(&[b"LLEN", b"b"]).await, ":0\r\n");
    }
    daemon.stop().await;
}

/// Before `AUTH`, a connection to a daemon with a token may send only a
/// small request: a large one is refused and the connection closed.
#[tokio::test]
async fn before_auth_a_large_request_is_refused() {
    let daemon = Daemon::start_resp(|config| config.token = Some("t0ken".into())).await;
    let mut raw = Raw::connect(daemon.resp.unwrap()).await;
    raw.send(b"*2\r\n$4\r\nAUTH\r\n$300000\r\n").await;
    let chunk = vec![b'x'; 16 * 1024];
    for _ in 0..8 {
        if tokio::io::AsyncWriteExt::write_all(&mut raw.stream, &chunk)
            .await
            .is_err()
        {
            break;
        }
    }
    let refused = raw.reply().await;
    assert!(
        refused.starts_with("-ERR Protocol error: a request larger than 65536"),
        "{refused}"
    );
    assert!(raw.closed_by_daemon().await);
    let mut authed = Raw::connect(daemon.resp.unwrap()).await;
    assert_eq!(authed.call(&[b"AUTH", b"t0ken"]).await, "+OK\r\n");
    let large = vec![b'y'; 90_000];
    assert_eq!(authed.call(&[b"PUSH", b"q", &large]).await, ":1\r\n");
    daemon.stop().await;
}

/// A `BLPOP` without end ends when the daemon shuts down: it answers nil
/// (or its connection closes), and the daemon stops within its grace.
#[tokio::test]
async fn a_blpop_without_end_ends_at_shutdown() {
    let daemon = Daemon::start_resp(|config| config.shutdown_grace_ms = 20_000).await;
    let address = daemon.resp.unwrap();
    let mut waiter = Raw::connect(address).await;
    waiter.command(&[b"BLPOP", b"idle", b"0"]).await;
    let mut other = Raw::connect(address).await;
    until_waiting(&mut other, b"idle", 1).await;
    let stopped = tokio::time::timeout(Duration::from_secs(60), daemon.stop()).await;
    assert!(stopped.is_ok(), "the daemon stopped within its grace");
    match waiter.reply_within(Duration::from_secs(30)).await {
        None => {}
        Some(reply) => assert_eq!(reply, "*-1\r\n"),
    }
}
