//! The client side of the command line: requests to a running daemon, its
//! answers printed for scripts, its errors printed for people
//! (`hotq: queue name "a b" is invalid: ... (400 invalid_queue_name)`).

use std::io::{BufRead, Write};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use serde::de::DeserializeOwned;

use super::{ClientArgs, EXIT_EMPTY, EXIT_OK};
use crate::server::error::ErrorBody;
use crate::server::items::PoppedItem;

/// How popped items are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemFormat {
    /// Each item's bytes and a newline. An item holding a newline reads
    /// as two lines: use another format.
    Lines,
    /// Each item's bytes and a NUL byte (`xargs -0`, `read -d ''`).
    Nul,
    /// Each item in base64 and a newline: safe for any bytes.
    Base64,
    /// The daemon's JSON array of items, as it answered.
    Json,
}

/// Percent-encodes one path segment (a queue name, a receipt): anything
/// but `A-Z a-z 0-9 - . _ ~` is escaped, so a name cannot change the route.
pub fn segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Items from the arguments, or one per non-empty line of stdin.
pub fn items_or_stdin(items: Vec<String>) -> Result<Vec<String>, String> {
    if !items.is_empty() {
        return Ok(items);
    }
    let stdin = std::io::stdin();
    let mut lines = Vec::new();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        if !line.is_empty() {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return Err("no items: give them as arguments or one per line on stdin".into());
    }
    Ok(lines)
}

/// A client whose timeout outlasts a long poll of `wait_ms`.
pub fn http_client(wait_ms: u64) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(wait_ms + 30_000))
        .build()
        .map_err(|e| e.to_string())
}

/// Sends one request; a failure to reach the daemon names its cause.
pub async fn send(
    http: &reqwest::Client,
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
    accept_json: bool,
) -> Result<reqwest::Response, String> {
    send_with(http, client, (method, path), body, accept_json, &[]).await
}

/// [`send`] with these `headers` too.
async fn send_with(
    http: &reqwest::Client,
    client: &ClientArgs,
    (method, path): (reqwest::Method, &str),
    body: Option<Vec<u8>>,
    accept_json: bool,
    headers: &[(&str, &str)],
) -> Result<reqwest::Response, String> {
    let base = client.url.trim_end_matches('/');
    let url = format!("{base}{path}");
    let mut request = http.request(method, &url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(token) = &client.token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if accept_json {
        request = request.header("accept", "application/json");
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    request
        .send()
        .await
        .map_err(|error| format!("cannot reach the daemon at {base}: {}", cause(&error)))
}

/// The innermost cause of a request error ("Connection refused (os error
/// 111)"), which reqwest's own message ("error sending request") hides.
fn cause(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".into();
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The answer if it succeeded; otherwise the daemon's error, readable:
/// `message (status code)`.
pub async fn expect_success(response: reqwest::Response) -> Result<reqwest::Response, String> {
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status();
    let body = response.bytes().await.unwrap_or_default();
    Err(match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(error) => format!(
            "{} ({} {})",
            error.error.message,
            status.as_u16(),
            error.error.code
        ),
        Err(_) => format!("{status}: {}", String::from_utf8_lossy(&body)),
    })
}

/// What every item of a `hotq push` carries besides its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ItemTerms<'a> {
    /// The dedup id of the one item pushed.
    pub dedup_id: Option<&'a str>,
    /// The items' fairness key.
    pub fair_key: Option<&'a str>,
}

/// Pushes `items` to the FIFO queue at `path` (an `items:batch` path) in
/// batches of up to 1,000 (each batch one commit); with a dedup id,
/// exactly one item. Prints each batch's answer.
pub async fn push(
    client: &ClientArgs,
    path: &str,
    items: Vec<String>,
    terms: ItemTerms<'_>,
) -> Result<u8, String> {
    let ItemTerms { dedup_id, fair_key } = terms;
    let items = items_or_stdin(items)?;
    if dedup_id.is_some() && items.len() != 1 {
        return Err(format!(
            "--dedup-id names one item, got {} items",
            items.len()
        ));
    }
    for chunk in items.chunks(crate::service::PUSH_BATCH_MAX) {
        let encoded: Vec<serde_json::Value> = chunk
            .iter()
            .map(|item| match (dedup_id, fair_key) {
                (None, None) => serde_json::Value::from(BASE64.encode(item)),
                (id, key) => {
                    serde_json::json!({"item": BASE64.encode(item), "dedup_id": id, "fair_key": key})
                }
            })
            .collect();
        let body = serde_json::to_vec(&encoded).map_err(|e| e.to_string())?;
        let method = reqwest::Method::POST;
        emit(client, method, path, Some(body), |answer| {
            super::print::pushed(answer, dedup_id)
        })
        .await?;
    }
    Ok(EXIT_OK)
}

/// Pops or peeks (`method` `path`, asked as JSON) and prints the items in
/// `format`; leased items are prefixed `receipt \t delivery count \t`.
pub async fn fetch_items(
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
    wait_ms: u64,
    format: ItemFormat,
) -> Result<u8, String> {
    let http = http_client(wait_ms)?;
    let response = expect_success(send(&http, client, method, path, None, true).await?).await?;
    if response.status() == reqwest::StatusCode::NO_CONTENT {
        return Ok(EXIT_EMPTY);
    }
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    if format == ItemFormat::Json {
        out.write_all(&body)
            .and_then(|()| out.write_all(b"\n"))
            .map_err(|e| e.to_string())?;
    } else {
        let items: Vec<PoppedItem> = serde_json::from_slice(&body)
            .map_err(|e| format!("the daemon's answer is not a list of items: {e}"))?;
        write_items(&mut out, &items, format)?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(EXIT_OK)
}

fn write_items(
    out: &mut impl Write,
    items: &[PoppedItem],
    format: ItemFormat,
) -> Result<(), String> {
    // Every item ends its line, one alone included (`$(hotq pop q)` drops
    // the newline).
    for item in items {
        let bytes = BASE64
            .decode(&item.item)
            .map_err(|e| format!("the daemon sent an item that is not base64: {e}"))?;
        let mut line = Vec::with_capacity(bytes.len() + 48);
        if let (Some(receipt), Some(count)) = (&item.receipt, item.delivery_count) {
            line.extend_from_slice(format!("{receipt}\t{count}\t").as_bytes());
        }
        match format {
            ItemFormat::Base64 => line.extend_from_slice(item.item.as_bytes()),
            _ => line.extend_from_slice(&bytes),
        }
        match format {
            ItemFormat::Nul => line.push(0),
            _ => line.push(b'\n'),
        }
        out.write_all(&line).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Sends a request (`body`: JSON bytes, if any), and prints the answer:
/// with `--json` the daemon's JSON on one line, else `human` of it.
pub async fn emit<T: DeserializeOwned>(
    client: &ClientArgs,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
    human: impl FnOnce(&T) -> String,
) -> Result<T, String> {
    emit_with(client, (method, path), body, &[], human).await
}

/// [`emit`] with these request `headers` too.
pub async fn emit_with<T: DeserializeOwned>(
    client: &ClientArgs,
    (method, path): (reqwest::Method, &str),
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
    human: impl FnOnce(&T) -> String,
) -> Result<T, String> {
    let http = http_client(0)?;
    let sent = send_with(&http, client, (method, path), body, true, headers).await?;
    let response = expect_success(sent).await?;
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    let answer: T = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the daemon's answer is not what was expected: {e}"))?;
    if client.json {
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
        println!("{value}");
    } else {
        print!("{}", human(&answer));
    }
    Ok(answer)
}

/// The path of queue `queue` of `kind`: `/v1/queues/{queue}` or
/// `/v1/pqueues/{queue}`.
pub fn queue_path(kind: crate::keys::QueueKind, queue: &str) -> String {
    match kind {
        crate::keys::QueueKind::Fifo => format!("/v1/queues/{}", segment(queue)),
        crate::keys::QueueKind::Priority => format!("/v1/pqueues/{}", segment(queue)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_escape_everything_that_could_change_the_route() {
        assert_eq!(segment("jobs.dead"), "jobs.dead");
        assert_eq!(segment("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn items_print_binary_safe_in_each_format() {
        let item = |bytes: &[u8], receipt: Option<&str>| PoppedItem {
            item: BASE64.encode(bytes),
            enqueued_at_ms: 1,
            receipt: receipt.map(str::to_string),
            delivery_count: receipt.map(|_| 2),
            lease_expires_at_ms: None,
            dead_letter_from: None,
            dead_letter_deliveries: None,
            group: None,
        };
        let items = [item(b"a\nb", None), item(b"c", None)];
        let print = |items: &[PoppedItem], format| {
            let mut out = Vec::new();
            write_items(&mut out, items, format).unwrap();
            out
        };
        assert_eq!(print(&items, ItemFormat::Nul), b"a\nb\0c\0");
        assert_eq!(print(&items, ItemFormat::Base64), b"YQpi\nYw==\n");
        assert_eq!(print(&items[1..], ItemFormat::Lines), b"c\n");
        let leased = [item(b"x", Some("r1"))];
        assert_eq!(print(&leased, ItemFormat::Lines), b"r1\t2\tx\n");
    }
}
