//! Tests of [`super`]: the real client against raw TCP servers that
//! answer with exactly the bytes each case needs.

use super::*;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A raw TCP server answering each request, on any connection, with the
/// next of `answers` (`None`: never answer). Returns the endpoint and
/// the count of connections accepted.
async fn server(answers: Vec<Option<Vec<u8>>>, limits: Limits) -> (Endpoint, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/prefix/", listener.local_addr().unwrap());
    let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            let answers = answers.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0u8; 4_096];
                loop {
                    let read = stream.read(&mut buffer).await.unwrap_or(0);
                    if read == 0 {
                        return;
                    }
                    head.extend_from_slice(&buffer[..read]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        let request = String::from_utf8_lossy(&head[..end]).to_string();
                        head.drain(..end + 4);
                        assert!(request.starts_with("POST /prefix/"), "{request}");
                        assert!(request.contains("authorization: Bearer t0k"), "{request}");
                        let answer = answers.lock().pop_front().flatten();
                        match answer {
                            Some(answer) => stream.write_all(&answer).await.unwrap(),
                            None => std::future::pending::<()>().await,
                        }
                    }
                }
            });
        }
    });
    let endpoint = Endpoint::resolve(&url, Some("t0k"), limits).await.unwrap();
    (endpoint, accepted)
}

fn ok(body: &str) -> Option<Vec<u8>> {
    Some(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nhotq-receipt: r-1\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

#[tokio::test]
async fn keeps_one_connection_and_reads_receipts() {
    let (endpoint, accepted) = server(
        vec![
            ok("one"),
            Some(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
            ok("two"),
        ],
        Limits::default(),
    )
    .await;
    let target = endpoint.target("/v1/queues/q/pop").unwrap();
    let mut connection = Connection::new(endpoint);
    let first = connection.post(&target, TIMEOUT).await.unwrap();
    assert_eq!((first.status, &first.body[..]), (200, &b"one"[..]));
    assert_eq!(first.receipt.as_deref(), Some("r-1"));
    assert_eq!(connection.post(&target, TIMEOUT).await.unwrap().status, 204);
    assert_eq!(
        &connection.post(&target, TIMEOUT).await.unwrap().body[..],
        b"two"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one keep-alive connection"
    );
}

#[tokio::test]
async fn refuses_bodies_over_the_limit() {
    let limits = Limits {
        body_bytes_max: 8,
        ..Limits::default()
    };
    let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n12345\r\n5\r\n67890\r\n0\r\n\r\n";
    let (endpoint, _) = server(
        vec![ok("123456789"), Some(chunked.to_vec()), ok("12345678")],
        limits,
    )
    .await;
    let target = endpoint.target("/pop").unwrap();
    let mut connection = Connection::new(endpoint);
    // Announced too long, and found too long while reading.
    for _ in 0..2 {
        let refused = connection.post(&target, TIMEOUT).await.unwrap_err();
        assert!(
            matches!(refused, ClientError::BodyTooLarge { body_bytes_max: 8 }),
            "{refused}"
        );
    }
    assert_eq!(
        connection.post(&target, TIMEOUT).await.unwrap().body.len(),
        8
    );
}

#[tokio::test]
async fn refuses_heads_over_the_limit() {
    let limits = Limits {
        header_bytes_max: 1_024,
        ..Limits::default()
    };
    let long = format!(
        "HTTP/1.1 200 OK\r\nx-long: {}\r\ncontent-length: 0\r\n\r\n",
        "a".repeat(4_096)
    );
    let (endpoint, _) = server(vec![Some(long.into_bytes())], limits).await;
    let target = endpoint.target("/pop").unwrap();
    let refused = Connection::new(endpoint)
        .post(&target, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClientError::Http(e) if e.is_parse_too_large()),
        "{refused}"
    );
}

#[tokio::test]
async fn times_out_and_reconnects() {
    let (endpoint, accepted) = server(vec![None, ok("later")], Limits::default()).await;
    let target = endpoint.target("/pop").unwrap();
    let mut connection = Connection::new(endpoint);
    let silent = connection
        .post(&target, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(silent, ClientError::Timeout { timeout_ms: 50 }),
        "{silent}"
    );
    assert_eq!(
        &connection.post(&target, TIMEOUT).await.unwrap().body[..],
        b"later"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "a fresh connection after the timeout"
    );
}

#[tokio::test]
async fn reconnects_after_the_daemon_closes() {
    let close = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\nend".to_vec();
    let (endpoint, accepted) = server(vec![Some(close), ok("new")], Limits::default()).await;
    let target = endpoint.target("/pop").unwrap();
    let mut connection = Connection::new(endpoint);
    assert_eq!(
        &connection.post(&target, TIMEOUT).await.unwrap().body[..],
        b"end"
    );
    assert_eq!(
        &connection.post(&target, TIMEOUT).await.unwrap().body[..],
        b"new"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn rejects_bad_urls_and_tokens() {
    for url in [
        "https://127.0.0.1:1",
        "127.0.0.1:1",
        "http://127.0.0.1:1/?q=1",
    ] {
        let error = Endpoint::resolve(url, None, Limits::default())
            .await
            .unwrap_err();
        assert!(matches!(error, ClientError::Url(_)), "{url}: {error}");
    }
    let error = Endpoint::resolve("http://127.0.0.1:1", Some("a\nb"), Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::Request(_)), "{error}");
}
