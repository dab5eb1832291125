//! Priority queues: `PQ <subcommand> <queue> …`, as `hotq pq` names them,
//! through the functions the `/v1/pqueues` handlers call. A pop or peek
//! names its end: `MIN` (lowest priority first) or `MAX`.

use super::queue::{counted, item_or_nil, pop, stats};
use super::spec::{PQ_SUBCOMMANDS, Spec};
use super::{Answer, Args, CmdError, Ctx, queue_name};
use crate::keys::QueueKind;
use crate::resp::frame::Reply;
use crate::server::error::ApiError;
use crate::service::{End, Store};

/// Runs `PQ <subcommand>`.
pub async fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, mut args: Args) -> Answer {
    let verb = spec.name.trim_start_matches("pq|");
    if verb == "help" {
        let lines = PQ_SUBCOMMANDS
            .iter()
            .map(|sub| Reply::text(sub.summary))
            .collect();
        return Ok(Reply::Array(lines));
    }
    let queue = args.text()?;
    let kind = QueueKind::Priority;
    match verb {
        "push" => push(ctx, &queue, args).await,
        "pop" => {
            let end = match end(&mut args) {
                Ok(end) => end,
                Err(error) => return counted(&queue, "pq_pop", Err(error)),
            };
            pop(ctx, kind, end, &queue, args).await
        }
        "peek" => {
            let answer = async {
                let name = queue_name(&queue)?;
                let end = end(&mut args)?;
                let keys = crate::keys::QueueKeys::of_kind(kind, &name);
                let item = ctx.state.hotq.peek(&keys, end).await;
                Ok(item_or_nil(item.map_err(ApiError::from)?))
            }
            .await;
            counted(&queue, "pq_peek", answer)
        }
        "stats" => stats(ctx, kind, &queue).await,
        "ack" => super::leases::ack(ctx, kind, &queue, args).await,
        "nack" => super::leases::nack(ctx, kind, &queue, args).await,
        "extend" => super::leases::extend(ctx, kind, &queue, args).await,
        admin => super::admin::queue_admin(ctx, kind, admin, &queue, args).await,
    }
}

/// `MIN` (the front: lowest priority first) or `MAX`.
fn end(args: &mut Args) -> Result<End, CmdError> {
    match args.text()?.to_ascii_uppercase().as_str() {
        "MIN" => Ok(End::Front),
        "MAX" => Ok(End::Back),
        other => Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "bad_end",
            format!("the end must be MIN or MAX, got {other:?}"),
        )
        .into()),
    }
}

/// `PQ PUSH queue priority [DELAY ms] [DEDUP id] [RETENTION ms] [FAIR key] [ITEMS] item`: 1 pushed,
/// 0 for a duplicate.
async fn push<S: Store>(ctx: &mut Ctx<'_, S>, queue: &str, mut args: Args) -> Answer {
    let answer = async {
        let name = queue_name(queue)?;
        let priority_text = args.text()?;
        let priority = priority_text.parse::<i64>().map_err(|_| {
            ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "bad_priority",
                format!("priority must be a signed 64-bit integer, got {priority_text:?}"),
            )
        })?;
        let mut terms = crate::server::pqueue::PqPushTerms::default();
        loop {
            match args.peek_keyword().as_deref() {
                Some("DELAY") if args.left() > 1 => {
                    args.next_arg();
                    terms.delay_ms = Some(ctx.state.hotq.check_delay_ms(args.number("DELAY")?)?);
                }
                Some("DEDUP") if args.left() > 1 => {
                    args.next_arg();
                    terms.dedup_id = Some(crate::server::push::dedup_id(&args.required()?)?);
                }
                Some("RETENTION") if args.left() > 1 => {
                    args.next_arg();
                    terms.retention_ms = Some(super::queue::retention(&mut args)?);
                }
                Some("FAIR") if args.left() > 1 => {
                    args.next_arg();
                    terms.fair_key = Some(super::queue::fair(&mut args)?);
                }
                Some("ITEMS") => {
                    args.next_arg();
                    break;
                }
                _ => break,
            }
        }
        let item = args.required()?;
        if args.left() > 0 {
            return Err(ApiError::bad_parameter("PQ PUSH takes one item").into());
        }
        let answer =
            crate::server::pqueue::push_checked(ctx.state, name, &item, priority, terms).await?;
        Ok(Reply::Int(answer.pushed as i64))
    }
    .await;
    counted(queue, "pq_push", answer)
}
