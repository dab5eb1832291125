//! Leases and dead letters: `ACK`, `NACK`, `EXTEND`, `REDRIVE` (and the
//! priority queues' `PQ ACK|NACK|EXTEND`), through the functions the
//! `/v1/queues/{queue}/ack|nack|extend|redrive` handlers call.

use super::queue::counted;
use super::spec::Spec;
use super::{Answer, Args, CmdError, Ctx, queue_name};
use crate::keys::{QueueKeys, QueueKind};
use crate::resp::frame::Reply;
use crate::server::leases::{NackAnswer, redrive_checked};
use crate::service::Store;

/// Runs `ACK`, `NACK`, `EXTEND` or `REDRIVE`.
pub async fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, mut args: Args) -> Answer {
    let queue = args.text()?;
    match spec.name {
        "ack" => ack(ctx, QueueKind::Fifo, &queue, args).await,
        "nack" => nack(ctx, QueueKind::Fifo, &queue, args).await,
        "extend" => extend(ctx, QueueKind::Fifo, &queue, args).await,
        _ => {
            let answer = async {
                let name = queue_name(&queue)?;
                let max = match args.peek_keyword().as_deref() {
                    Some("MAX") if args.left() == 2 => {
                        args.next_arg();
                        Some(args.number("MAX")? as usize)
                    }
                    None => None,
                    _ => return Err(CmdError::syntax()),
                };
                let answer = redrive_checked(ctx.state, &name, max).await?;
                Ok(Reply::Int(answer.redriven as i64))
            }
            .await;
            counted(&queue, "redrive", answer)
        }
    }
}

/// `ACK queue receipt [receipt ...]`: one outcome word per receipt, in
/// order (`acked`, `unknown_receipt`, `lease_expired`,
/// `receipt_queue_mismatch`, `invalid`), in the batch ack's shared commits.
pub async fn ack<S: Store>(
    ctx: &Ctx<'_, S>,
    kind: QueueKind,
    queue: &str,
    mut args: Args,
) -> Answer {
    let receipts = args.rest();
    let op = match (kind, receipts.len()) {
        (QueueKind::Priority, _) => "pq_ack",
        (QueueKind::Fifo, 1) => "ack",
        (QueueKind::Fifo, _) => "ack_batch",
    };
    let answer = async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let raw: Vec<&str> = receipts
            .iter()
            .map(|receipt| std::str::from_utf8(receipt).unwrap_or(""))
            .collect();
        let outcomes = ctx.state.hotq.ack_many(&keys, &raw).await?;
        let words = outcomes.into_iter().map(|o| Reply::Simple(o.word()));
        Ok(Reply::Array(words.collect()))
    }
    .await;
    counted(queue, op, answer)
}

/// `NACK queue receipt [DELAY ms]`: where the item went, as a map
/// (`outcome`: `requeued`, `delayed` or `dead_lettered`; `visible_at_ms`;
/// `dead_letter_queue`).
pub async fn nack<S: Store>(
    ctx: &Ctx<'_, S>,
    kind: QueueKind,
    queue: &str,
    mut args: Args,
) -> Answer {
    let op = if kind == QueueKind::Fifo {
        "nack"
    } else {
        "pq_nack"
    };
    let answer = async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let receipt = args.text()?;
        let delay_ms = match args.peek_keyword().as_deref() {
            Some("DELAY") if args.left() == 2 => {
                args.next_arg();
                args.number("DELAY")?
            }
            None => 0,
            _ => return Err(CmdError::syntax()),
        };
        let returned = ctx.state.hotq.nack(&keys, &receipt, delay_ms).await?;
        let answer = NackAnswer::from(returned);
        let json = serde_json::to_value(answer).expect("a nack's answer serializes");
        Ok(Reply::from_json(json))
    }
    .await;
    counted(queue, op, answer)
}

/// `EXTEND queue receipt lease_ms`: the lease's new expiry, ms since the
/// epoch.
pub async fn extend<S: Store>(
    ctx: &Ctx<'_, S>,
    kind: QueueKind,
    queue: &str,
    mut args: Args,
) -> Answer {
    let op = if kind == QueueKind::Fifo {
        "extend"
    } else {
        "pq_extend"
    };
    let answer = async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let receipt = args.text()?;
        let lease_ms = args.number("lease_ms")?;
        let expires_at_ms = ctx.state.hotq.extend(&keys, &receipt, lease_ms).await?;
        Ok(Reply::Int(expires_at_ms as i64))
    }
    .await;
    counted(queue, op, answer)
}
