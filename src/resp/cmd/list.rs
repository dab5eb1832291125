//! Redis's list commands on hotq's FIFO queues, so that list workers run
//! unchanged: `LPUSH`/`RPUSH` enqueue, `LPOP`/`RPOP`/`BLPOP`/`BRPOP`
//! dequeue the oldest, `LLEN` is the depth. A hotq queue is FIFO whichever
//! end a command names: `LPUSH` + `BRPOP` (Redis's usual worker) and
//! `RPUSH` + `BLPOP` both deliver in push order, as in Redis; `LPUSH` +
//! `LPOP`, a stack in Redis, is FIFO here. A list pop takes the item (no
//! lease, whatever the queue's default lease: a Redis client cannot ack).

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::queue::{counted, push_items};
use super::spec::Spec;
use super::{Answer, Args, CmdError, Ctx, queue_name};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::resp::frame::Reply;
use crate::server::error::ApiError;
use crate::server::state::AppState;
use crate::service::{End, Item, PopLease, PopOptions, Store};

/// Runs a list command.
pub async fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, args: Args) -> Answer {
    match spec.name {
        "lpush" | "rpush" => push(ctx, args).await,
        "lpop" | "rpop" => pop(ctx, args).await,
        "blpop" | "brpop" => blocking_pop(ctx, args).await,
        _ => {
            let mut args = args;
            let key = args.text()?;
            let answer = async {
                let keys = QueueKeys::new(&queue_name(&key)?);
                Ok(Reply::Int(ctx.state.hotq.queue_depth(&keys).await?))
            }
            .await;
            counted(&key, "stats", answer)
        }
    }
}

/// Takes up to `max` of the oldest items of `name`, waiting up to `wait`:
/// the HTTP API's pop, never leased.
async fn take<S: Store>(
    state: &AppState<S>,
    name: &QueueName,
    max: usize,
    wait: Duration,
) -> Result<Vec<Item>, ApiError> {
    state.note_queue(QueueKind::Fifo, name);
    let keys = QueueKeys::new(name);
    let ask = PopOptions {
        end: End::Front,
        max,
        wait,
        lease: PopLease::Never,
    };
    Ok(state.hotq.pop(&keys, ask, None).await?.items)
}

fn bulk(item: Item) -> Reply {
    Reply::Bulk(Bytes::from(item.payload))
}

/// `LPUSH key element [element ...]`, `RPUSH`: pushed at the tail in one
/// commit; the queue's depth after.
async fn push<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let key = args.text()?;
    let elements = args.rest();
    let op = if elements.len() > 1 {
        "push_batch"
    } else {
        "push"
    };
    let answer = async {
        let name = queue_name(&key)?;
        let items = push_items(&ctx.state.hotq, elements, Default::default())?;
        let keys = QueueKeys::new(&name);
        crate::server::push::push_checked(ctx.state, name, &items, None, None).await?;
        Ok(Reply::Int(ctx.state.hotq.queue_depth(&keys).await?))
    }
    .await;
    counted(&key, op, answer)
}

/// `LPOP key [count]`, `RPOP`: the oldest item or nil; with a count, an
/// array of up to `count` (at most `pop_max_items`) or a nil array.
async fn pop<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let key = args.text()?;
    let count = match args.next_arg() {
        None => None,
        Some(raw) => Some(count(&raw)?),
    };
    if args.left() > 0 {
        return Err(CmdError::syntax());
    }
    if count == Some(0) {
        return Ok(Reply::Array(Vec::new()));
    }
    let max = count.map_or(1, |count| count.min(ctx.state.config.pop_max_items));
    let taken = async {
        let name = queue_name(&key)?;
        Ok::<_, CmdError>(take(ctx.state, &name, max, Duration::ZERO).await?)
    }
    .await;
    let outcome = match &taken {
        Ok(items) if items.is_empty() => "empty",
        Ok(_) => "ok",
        Err(_) => "error",
    };
    crate::metrics::operation(&key, "pop", outcome);
    let items = taken?;
    Ok(match count {
        None => items.into_iter().next().map_or(Reply::Nil, bulk),
        Some(_) if items.is_empty() => Reply::NilArray,
        Some(_) => Reply::Array(items.into_iter().map(bulk).collect()),
    })
}

/// A list pop's count, in Redis's words when it is not one.
fn count(raw: &[u8]) -> Result<usize, CmdError> {
    match std::str::from_utf8(raw).ok().map(str::parse::<i64>) {
        Some(Ok(count)) if count >= 0 => Ok(count as usize),
        Some(Ok(_)) => Err(CmdError::Line(
            "ERR value is out of range, must be positive".into(),
        )),
        _ => Err(CmdError::Line(
            "ERR value is not an integer or out of range".into(),
        )),
    }
}

/// A blocking pop's timeout, in seconds (`None`: 0, no end).
fn timeout(raw: &[u8]) -> Result<Option<Duration>, CmdError> {
    let seconds = std::str::from_utf8(raw)
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .filter(|seconds| seconds.is_finite())
        .ok_or_else(|| CmdError::Line("ERR timeout is not a float or out of range".into()))?;
    if seconds < 0.0 {
        return Err(CmdError::Line("ERR timeout is negative".into()));
    }
    if seconds == 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(seconds)
        .map(Some)
        .map_err(|_| CmdError::Line("ERR timeout is out of range".into()))
}

/// `BLPOP key [key ...] timeout`, `BRPOP`: `[key, item]` from the first
/// key that has an item, in the order named, else from whichever gets one
/// first within `timeout` seconds (0: no end, until shutdown); a nil array
/// when none came. No item is taken twice or lost: when one key answers,
/// the others' pops are dropped, and what they took goes back.
async fn blocking_pop<S: Store>(ctx: &mut Ctx<'_, S>, mut args: Args) -> Answer {
    let mut words = args.rest();
    let raw_timeout = words.pop().unwrap_or_default();
    let keys: Vec<String> = words
        .iter()
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    let first = keys.first().cloned().unwrap_or_default();
    let answer = async {
        let timeout = timeout(&raw_timeout)?;
        let names = keys
            .iter()
            .map(|key| queue_name(key))
            .collect::<Result<Vec<_>, _>>()?;
        Ok::<_, CmdError>(wait_for_any(ctx, &names, timeout).await?)
    }
    .await;
    let (queue, outcome) = match &answer {
        Ok(Some((index, _))) => (keys[*index].as_str(), "ok"),
        Ok(None) => (first.as_str(), "empty"),
        Err(_) => (first.as_str(), "error"),
    };
    crate::metrics::operation(queue, "pop", outcome);
    Ok(match answer? {
        Some((index, item)) => Reply::Array(vec![Reply::Bulk(words[index].clone()), bulk(item)]),
        None => Reply::NilArray,
    })
}

/// The first item from any of `names` (its index with it) within
/// `timeout` (`None`: until shutdown): each in order without waiting,
/// then all at once, in waits of at most `wait_max_ms` each.
async fn wait_for_any<S: Store>(
    ctx: &Ctx<'_, S>,
    names: &[QueueName],
    timeout: Option<Duration>,
) -> Result<Option<(usize, Item)>, ApiError> {
    let state = ctx.state;
    for (index, name) in names.iter().enumerate() {
        if let Some(item) = take(state, name, 1, Duration::ZERO).await?.pop() {
            return Ok(Some((index, item)));
        }
    }
    let deadline = timeout.map(|timeout| Instant::now() + timeout);
    let wait_max = Duration::from_millis(state.config.wait_max_ms);
    // Bounded by the deadline, or by shutdown (waiting pops then return
    // at once, and the signal is seen here); a daemon whose pops may not
    // wait (`wait_max_ms = 0`) answers at once.
    while !*ctx.stop.borrow() && !wait_max.is_zero() {
        let left = deadline.map_or(wait_max, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
        if left.is_zero() {
            break;
        }
        let wait = left.min(wait_max);
        let mut waits: FuturesUnordered<_> = names
            .iter()
            .enumerate()
            .map(|(index, name)| async move { (index, take(state, name, 1, wait).await) })
            .collect();
        // The first item ends the wait; dropping `waits` then drops the
        // other pops, which put back anything they were handed.
        while let Some((index, taken)) = waits.next().await {
            if let Some(item) = taken?.pop() {
                return Ok(Some((index, item)));
            }
        }
    }
    Ok(None)
}
