//! A client that hangs up while its pop waits, after sending more bytes on
//! the same connection (a pipelined request, or only a trailing CRLF):
//! hyper does not look for the close while unread bytes are buffered, so
//! the daemon watches the connection itself. Its pops must leave the line,
//! and items pushed afterwards must stay in the queue. A client that stays
//! connected still gets an answer to each pipelined request.

use crate::common;

use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Clients hanging up in each scenario.
const CLIENTS: usize = 20;
/// Long enough that no pop ends by its own wait while a test runs.
const WAIT_MS: u64 = 600_000;
/// How long a test waits for an event the daemon reports.
const BOUND: Duration = Duration::from_secs(60);

fn pop_request(queue: &str) -> String {
    format!(
        "POST /v1/queues/{queue}/pop?wait_ms={WAIT_MS} HTTP/1.1\r\nHost: hotq\r\ncontent-length: 0\r\n\r\n"
    )
}

async fn start(requests_in_memory: bool) -> Daemon {
    Daemon::start(|config| {
        config.wait_max_ms = WAIT_MS;
        config.staging.requests_in_memory = requests_in_memory;
    })
    .await
}

/// Waits until `queue` has `count` waiting pops.
async fn until_waiting(url: &str, queue: &str, count: i64) {
    common::eventually(
        &format!("{count} waiting pops on {queue}"),
        BOUND,
        || async { Client::new(url).stats(queue).await.waiting == count },
    )
    .await;
}

/// How a client leaves after its pop and its extra bytes.
#[derive(Clone, Copy, Debug)]
enum Leave {
    /// `close`: a FIN.
    Close,
    /// `SO_LINGER` 0: a reset.
    Reset,
}

/// `CLIENTS` clients each send a waiting pop and then `extra` on the same
/// connection, and leave; then as many items are pushed. Every item must
/// stay in the queue.
async fn hang_ups_take_nothing(requests_in_memory: bool, extra: &str, leave: Leave) {
    let daemon = start(requests_in_memory).await;
    let url = &daemon.url;
    let queue = "gone";
    let address = url.strip_prefix("http://").unwrap();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let bytes = format!("{}{extra}", pop_request(queue));
        stream.write_all(bytes.as_bytes()).await.unwrap();
        clients.push(stream);
    }
    until_waiting(url, queue, CLIENTS as i64).await;
    for stream in clients {
        if let Leave::Reset = leave {
            stream.set_zero_linger().unwrap();
        }
        drop(stream);
    }
    // The daemon noticed every hang-up: no pop is left to take an item.
    until_waiting(url, queue, 0).await;
    for i in 0..CLIENTS {
        Client::new(url).push(queue, format!("item-{i}")).await;
    }
    let after = Client::new(url).stats(queue).await;
    assert_eq!(
        (after.depth, after.waiting),
        (CLIENTS as i64, 0),
        "an item was taken for a client that had hung up: {after}"
    );
    for i in 0..CLIENTS {
        let item = http()
            .post(format!("{url}/v1/queues/{queue}/pop"))
            .send()
            .await
            .unwrap();
        assert_eq!(item.text().await.unwrap(), format!("item-{i}"));
    }
    daemon.stop().await;
}

async fn trailing_crlf(requests_in_memory: bool) {
    hang_ups_take_nothing(requests_in_memory, "\r\n", Leave::Close).await
}

async fn pipelined_request(requests_in_memory: bool) {
    hang_ups_take_nothing(requests_in_memory, &pop_request("gone"), Leave::Close).await
}

async fn pipelined_request_then_reset(requests_in_memory: bool) {
    hang_ups_take_nothing(requests_in_memory, &pop_request("gone"), Leave::Reset).await
}

async fn nothing_more(requests_in_memory: bool) {
    hang_ups_take_nothing(requests_in_memory, "", Leave::Close).await
}

in_both_request_modes!(trailing_crlf: a_hang_up_after_a_trailing_crlf_takes_nothing, a_hang_up_after_a_trailing_crlf_takes_nothing_stored);
in_both_request_modes!(pipelined_request: a_hang_up_after_a_pipelined_request_takes_nothing, a_hang_up_after_a_pipelined_request_takes_nothing_stored);
in_both_request_modes!(pipelined_request_then_reset: a_reset_after_a_pipelined_request_takes_nothing, a_reset_after_a_pipelined_request_takes_nothing_stored);
in_both_request_modes!(nothing_more: a_hang_up_with_nothing_more_takes_nothing, a_hang_up_with_nothing_more_takes_nothing_stored);

/// One HTTP/1.1 response read off a raw stream.
struct RawResponse {
    status: u16,
    body: Vec<u8>,
}

/// Most bytes of responses one test reads.
const RESPONSE_BYTES_MAX: usize = 1 << 20;

/// Reads `count` responses from `stream`, pipelined, within [`BOUND`]
/// (the daemon answers with `content-length` bodies).
async fn read_responses(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    count: usize,
) -> Vec<RawResponse> {
    let mut buffer = Vec::new();
    let mut responses = Vec::new();
    tokio::time::timeout(BOUND, async {
        while responses.len() < count {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut head = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(head_len) = head.parse(&buffer).unwrap() {
                let length: usize = head
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                    .unwrap_or(0);
                if buffer.len() >= head_len + length {
                    let status = head.code.unwrap();
                    let body = buffer[head_len..head_len + length].to_vec();
                    buffer.drain(..head_len + length);
                    responses.push(RawResponse { status, body });
                    continue;
                }
            }
            assert!(buffer.len() < RESPONSE_BYTES_MAX, "responses too large");
            let mut chunk = [0u8; 8192];
            let read = stream.read(&mut chunk).await.unwrap();
            assert!(
                read > 0,
                "the daemon closed after {} responses",
                responses.len()
            );
            buffer.extend_from_slice(&chunk[..read]);
        }
    })
    .await
    .expect("pipelined responses in time");
    responses
}

/// A client that stays connected gets both answers of a pipelined pair:
/// a waiting pop, then a stats request; then a third request on the
/// same connection.
async fn pipelined_pair_answered(requests_in_memory: bool) {
    let daemon = start(requests_in_memory).await;
    let url = &daemon.url;
    let queue = "stays";
    let address = url.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).await.unwrap();
    let stats_request = format!("GET /v1/queues/{queue} HTTP/1.1\r\nHost: hotq\r\n\r\n");
    let pair = format!("{}{stats_request}", pop_request(queue));
    stream.write_all(pair.as_bytes()).await.unwrap();
    until_waiting(url, queue, 1).await;
    Client::new(url).push(queue, "for-the-pipeliner").await;
    let responses = read_responses(&mut stream, 2).await;
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].body, b"for-the-pipeliner");
    assert_eq!(responses[1].status, 200);
    let stats: Value = serde_json::from_slice(&responses[1].body).unwrap();
    assert_eq!(
        (stats["depth"].as_i64(), stats["waiting"].as_i64()),
        (Some(0), Some(0))
    );
    // The connection still serves.
    stream.write_all(stats_request.as_bytes()).await.unwrap();
    let more = read_responses(&mut stream, 1).await;
    assert_eq!(more[0].status, 200);
    daemon.stop().await;
}

in_both_request_modes!(pipelined_pair_answered: a_pipelined_pair_gets_both_answers, a_pipelined_pair_gets_both_answers_stored);

/// A large push pipelined behind a waiting pop: the watch reads at most
/// [`hotq::server::hangup::READ_AHEAD_BYTES_MAX`] of it ahead and then
/// stops; once the pop is answered, the push is read in full and served.
async fn pipelined_large_push_served(requests_in_memory: bool) {
    use base64::Engine;
    let daemon = start(requests_in_memory).await;
    let url = &daemon.url;
    let queue = "large";
    let address = url.strip_prefix("http://").unwrap();
    let items: Vec<String> = (0..4u8)
        .map(|i| base64::engine::general_purpose::STANDARD.encode(vec![b'a' + i; 90_000]))
        .collect();
    let body = serde_json::to_string(&items).unwrap();
    assert!(body.len() > 4 * hotq::server::hangup::READ_AHEAD_BYTES_MAX);
    let pipelined_push = format!(
        "POST /v1/queues/{queue}/items:batch HTTP/1.1\r\nHost: hotq\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(pop_request(queue).as_bytes())
        .await
        .unwrap();
    until_waiting(url, queue, 1).await;
    // More than the watch reads ahead; the rest waits in the sockets.
    let (mut read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        write.write_all(pipelined_push.as_bytes()).await.unwrap();
        write
    });
    Client::new(url).push(queue, "first").await;
    let responses = read_responses(&mut read, 2).await;
    let _write = writer.await.unwrap();
    assert_eq!(
        (responses[0].status, &responses[0].body[..]),
        (200, &b"first"[..])
    );
    assert_eq!(
        responses[1].status,
        201,
        "{}",
        String::from_utf8_lossy(&responses[1].body)
    );
    assert_eq!(Client::new(url).stats(queue).await.depth, 4);
    daemon.stop().await;
}

in_both_request_modes!(pipelined_large_push_served: a_large_push_pipelined_behind_a_waiting_pop_is_served, a_large_push_pipelined_behind_a_waiting_pop_is_served_stored);
