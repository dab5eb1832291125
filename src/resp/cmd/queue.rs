//! hotq's FIFO queues: `PUSH`, `POP`, `PEEK`, `STATS`, through the
//! functions the `/v1/queues` handlers call (`server::push`,
//! `server::pop_acks`, `server::fifo_routes`), counted in the same
//! `hotq_operations_total` series.

use bytes::Bytes;

use super::spec::Spec;
use super::{Answer, Args, CmdError, Ctx, queue_name};
use crate::keys::{QueueKeys, QueueKind};
use crate::resp::frame::Reply;
use crate::server::error::ApiError;
use crate::server::fifo_routes::queue_stats;
use crate::service::{
    self, End, Hotq, Item, PUSH_BATCH_MAX, PushItem, ReceiptOutcome, Riding, Store,
};

/// Runs `PUSH`, `POP`, `PEEK` or `STATS`.
pub async fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, mut args: Args) -> Answer {
    let queue = args.text()?;
    match spec.name {
        "push" => push(ctx, &queue, args).await,
        "pop" => pop(ctx, QueueKind::Fifo, End::Front, &queue, args).await,
        "peek" => {
            let answer = async {
                let name = queue_name(&queue)?;
                let keys = QueueKeys::new(&name);
                let item = ctx.state.hotq.peek(&keys, End::Front).await;
                Ok(item_or_nil(item.map_err(ApiError::from)?))
            }
            .await;
            counted(&queue, "peek", answer)
        }
        _ => stats(ctx, QueueKind::Fifo, &queue).await,
    }
}

/// Counts `answer` as operation `op` on `queue` (`ok` or `error`), as
/// the HTTP handlers count theirs.
pub fn counted(queue: &str, op: &'static str, answer: Answer) -> Answer {
    let outcome = if answer.is_ok() { "ok" } else { "error" };
    crate::metrics::operation(queue, op, outcome);
    answer
}

/// An item's bytes, or nil.
pub fn item_or_nil(item: Option<Item>) -> Reply {
    item.map_or(Reply::Nil, |item| Reply::Bulk(Bytes::from(item.payload)))
}

/// `STATS queue`, `PQ STATS queue`: the HTTP API's stats object as a map.
pub async fn stats<S: Store>(ctx: &Ctx<'_, S>, kind: QueueKind, queue: &str) -> Answer {
    let answer = async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let stats = queue_stats(ctx.state, &keys).await?;
        Ok(Reply::from_json(stats))
    }
    .await;
    let op = if kind == QueueKind::Fifo {
        "stats"
    } else {
        "pq_stats"
    };
    counted(queue, op, answer)
}

/// `PUSH queue [DELAY ms] [GROUP group] [DEDUP id] [RETENTION ms] [FAIR key] [ITEMS] item [item ...]`:
/// the number stored (duplicates left out), all in one commit.
async fn push<S: Store>(ctx: &mut Ctx<'_, S>, queue: &str, mut args: Args) -> Answer {
    let mut op = "push";
    let answer = async {
        let name = queue_name(queue)?;
        let (mut delay_ms, mut group, mut dedup_id) = (None, None, None);
        let (mut retention_ms, mut fair_key) = (None, None);
        loop {
            match args.peek_keyword().as_deref() {
                Some("DELAY") if args.left() > 1 => {
                    args.next_arg();
                    delay_ms = Some(ctx.state.hotq.check_delay_ms(args.number("DELAY")?)?);
                }
                Some("GROUP") if args.left() > 1 => {
                    args.next_arg();
                    group = Some(crate::server::push::group_key(args.text()?)?);
                }
                Some("DEDUP") if args.left() > 1 => {
                    args.next_arg();
                    dedup_id = Some(crate::server::push::dedup_id(&args.required()?)?);
                }
                Some("RETENTION") if args.left() > 1 => {
                    args.next_arg();
                    retention_ms = Some(retention(&mut args)?);
                }
                Some("FAIR") if args.left() > 1 => {
                    args.next_arg();
                    fair_key = Some(fair(&mut args)?);
                }
                Some("ITEMS") => {
                    args.next_arg();
                    break;
                }
                _ => break,
            }
        }
        let payloads = args.rest();
        if payloads.len() > 1 {
            op = "push_batch";
        }
        let terms = ItemTerms {
            dedup_id,
            group,
            fair_key,
        };
        let items = push_items(&ctx.state.hotq, payloads, terms)?;
        let answer =
            crate::server::push::push_checked(ctx.state, name, &items, delay_ms, retention_ms)
                .await?;
        Ok(Reply::Int(answer.pushed as i64))
    }
    .await;
    counted(queue, op, answer)
}

/// `RETENTION ms`'s value, checked as the HTTP header is: 1 ms to a year.
pub fn retention(args: &mut Args) -> Result<u64, CmdError> {
    let asked = args.number("RETENTION")?;
    service::check_retention_ms(Some(asked)).ok_or_else(|| {
        ApiError::bad_parameter(format!(
            "RETENTION is a whole number of ms from 1 to {}, got {asked}",
            service::RETENTION_MS_MAX
        ))
        .into()
    })
}

/// `FAIR key`'s value, checked as the HTTP header is (1-128 of
/// A-Z a-z 0-9 . _ - : @ /).
pub fn fair(args: &mut Args) -> Result<String, CmdError> {
    // Lossy: a byte out of UTF-8 becomes U+FFFD, which the check refuses.
    Ok(service::check_fair_key(args.text()?)?)
}

/// What every item of a push carries besides its bytes.
#[derive(Debug, Default)]
pub struct ItemTerms {
    /// Its dedup id (a push naming one holds one item).
    pub dedup_id: Option<Vec<u8>>,
    /// Its message group, checked.
    pub group: Option<String>,
    /// Its fairness key, checked.
    pub fair_key: Option<String>,
}

/// The items of a push, checked as the HTTP API checks a batch: 1 to
/// [`PUSH_BATCH_MAX`], each of 1 byte to the item limit; a dedup id names
/// one item.
pub fn push_items<S: Store>(
    hotq: &Hotq<S>,
    payloads: Vec<Bytes>,
    terms: ItemTerms,
) -> Result<Vec<PushItem>, CmdError> {
    let ItemTerms {
        dedup_id,
        group,
        fair_key,
    } = terms;
    if payloads.is_empty() || payloads.len() > PUSH_BATCH_MAX {
        return Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "bad_batch",
            format!(
                "a push holds 1 to {PUSH_BATCH_MAX} items, got {}",
                payloads.len()
            ),
        )
        .into());
    }
    if dedup_id.is_some() && payloads.len() > 1 {
        return Err(ApiError::bad_parameter("DEDUP names one item: push it alone").into());
    }
    payloads
        .into_iter()
        .map(|payload| {
            hotq.check_item(&payload)?;
            Ok(PushItem {
                payload: payload.to_vec(),
                dedup_id: dedup_id.clone(),
                group: group.clone(),
                fair_key: fair_key.clone(),
            })
        })
        .collect()
}

/// A pop's options: `WAIT ms`, `LEASE ms`, `MAX n` in any order, then
/// `ACK receipt …`, which takes every remaining argument.
#[derive(Debug, Default)]
pub struct PopOptions {
    wait_ms: u64,
    lease_ms: Option<u64>,
    max: Option<usize>,
    acks: Option<Vec<Bytes>>,
}

impl PopOptions {
    /// Parses the options of `args`.
    pub fn parse(args: &mut Args) -> Result<PopOptions, CmdError> {
        let mut options = PopOptions::default();
        while let Some(keyword) = args.peek_keyword() {
            args.next_arg();
            match keyword.as_str() {
                "WAIT" => options.wait_ms = args.number("WAIT")?,
                "LEASE" => options.lease_ms = Some(args.number("LEASE")?),
                "MAX" => options.max = Some(args.number("MAX")? as usize),
                "ACK" => {
                    options.acks = Some(args.rest());
                    break;
                }
                _ => return Err(CmdError::syntax()),
            }
        }
        Ok(options)
    }
}

/// `POP queue [options]` and `PQ POP queue MIN|MAX [options]`: pops from
/// `end` of `queue` as the HTTP API's pop does (the queue's default lease
/// when no `LEASE`, acks riding), and answers:
///
/// - with `LEASE`, `ACK`, or a queue that leases by default:
///   `[entries, outcomes]`, each entry `[receipt, delivery_count, item]`;
/// - else with `MAX`: an array of items (empty when none);
/// - else the item, or nil.
pub async fn pop<S: Store>(
    ctx: &mut Ctx<'_, S>,
    kind: QueueKind,
    end: End,
    queue: &str,
    mut args: Args,
) -> Answer {
    let op = if kind == QueueKind::Fifo {
        "pop"
    } else {
        "pq_pop"
    };
    let popped = async {
        let name = queue_name(queue)?;
        let options = PopOptions::parse(&mut args)?;
        let state = ctx.state;
        let (wait, max) = state.hotq.check_pop(options.wait_ms, options.max)?;
        let lease_ms = options
            .lease_ms
            .map(|lease_ms| state.hotq.check_lease_ms(lease_ms))
            .transpose()?;
        let riding = match &options.acks {
            Some(acks) => Some(Riding::of(acks.iter().map(receipt_text))?),
            None => None,
        };
        state.note_queue(kind, &name);
        let keys = QueueKeys::of_kind(kind, &name);
        // Resolved here: a queue that leases by default answers leased.
        let lease_ms = match lease_ms {
            Some(lease_ms) => Some(lease_ms),
            None => state.hotq.pop_default_lease_ms(&keys).await?,
        };
        let ask = service::PopOptions {
            end,
            max,
            wait,
            lease: lease_ms.map_or(service::PopLease::Never, service::PopLease::Ms),
        };
        let popped = state.hotq.pop(&keys, ask, riding).await?;
        let (items, acked) = (popped.items, popped.acked);
        let long = lease_ms.is_some() || acked.is_some();
        Ok::<_, CmdError>((items, acked, long, options.max.is_some()))
    }
    .await;
    let outcome = match &popped {
        Ok((items, ..)) if items.is_empty() => "empty",
        Ok(_) => "ok",
        Err(_) => "error",
    };
    crate::metrics::operation(queue, op, outcome);
    let (items, acked, long, many) = popped?;
    Ok(popped_reply(items, acked, long, many))
}

/// A receipt argument as text: one that is not UTF-8 is no receipt, and
/// answers `invalid` as a malformed one does.
fn receipt_text(raw: &Bytes) -> &str {
    std::str::from_utf8(raw).unwrap_or("")
}

/// The answer to a pop (see [`pop`]).
fn popped_reply(
    items: Vec<Item>,
    acked: Option<Vec<ReceiptOutcome>>,
    long: bool,
    many: bool,
) -> Reply {
    if long {
        let entries = items.into_iter().map(entry).collect();
        let outcomes = acked
            .unwrap_or_default()
            .into_iter()
            .map(|outcome| Reply::Simple(outcome.word()))
            .collect();
        return Reply::Array(vec![Reply::Array(entries), Reply::Array(outcomes)]);
    }
    if many {
        return Reply::Array(
            items
                .into_iter()
                .map(|item| Reply::Bulk(Bytes::from(item.payload)))
                .collect(),
        );
    }
    item_or_nil(items.into_iter().next())
}

/// A leased item: `[receipt, delivery_count, item]` (receipt and count
/// nil for an item popped without a lease).
fn entry(item: Item) -> Reply {
    let (receipt, count) = match item.lease {
        Some(lease) => (
            Reply::text(lease.receipt.to_string()),
            Reply::Int(i64::from(lease.delivery_count)),
        ),
        None => (Reply::Nil, Reply::Nil),
    };
    Reply::Array(vec![receipt, count, Reply::Bulk(Bytes::from(item.payload))])
}
