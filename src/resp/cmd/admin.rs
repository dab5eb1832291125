//! Administration: `QUEUES`, `LEASES`, `PURGE`, `DELETE`, `SETTINGS`,
//! `PAUSE`, `RESUME` (and the priority queues' `PQ …` of each), through
//! the functions the `/v1` admin handlers call. Each answers the HTTP
//! API's JSON object as a map (RESP3) or a flat array of keys and values
//! (RESP2).

use std::collections::BTreeMap;

use serde::Serialize;

use super::queue::counted;
use super::spec::Spec;
use super::{Answer, Args, CmdError, Ctx, queue_name};
use crate::keys::{QueueKeys, QueueKind};
use crate::resp::frame::Reply;
use crate::server::admin_routes::{
    delete_checked, leases_page, limit, list_page, op_name, purge_checked,
};
use crate::server::error::ApiError;
use crate::server::settings_routes::{get_checked, put_checked};
use crate::service::LIST_LIMIT_MAX;
use crate::service::Store;

/// Runs a FIFO queue's admin command.
pub async fn run<S: Store>(ctx: &mut Ctx<'_, S>, spec: &'static Spec, mut args: Args) -> Answer {
    if spec.name == "queues" {
        return queues(ctx, args).await;
    }
    let queue = args.text()?;
    queue_admin(ctx, QueueKind::Fifo, spec.name, &queue, args).await
}

/// The HTTP API's answer `value` as a map.
fn json(value: impl Serialize) -> Reply {
    Reply::from_json(serde_json::to_value(value).expect("an answer serializes"))
}

/// `verb` (`leases`, `purge`, `delete`, `settings`, `pause`, `resume`) on
/// `queue` of `kind`, counted as the HTTP API counts it.
pub async fn queue_admin<S: Store>(
    ctx: &Ctx<'_, S>,
    kind: QueueKind,
    verb: &str,
    queue: &str,
    mut args: Args,
) -> Answer {
    let state = ctx.state;
    let (op, answer) = match verb {
        "leases" => (
            op_name(kind, "leases"),
            leases(ctx, kind, queue, args).await,
        ),
        "purge" => {
            let answer = async {
                let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
                Ok(json(purge_checked(state, &keys).await?))
            };
            (op_name(kind, "purge"), answer.await)
        }
        "delete" => (op_name(kind, "delete"), delete(ctx, kind, queue).await),
        "settings" => match args.next_arg() {
            None => {
                let answer = async {
                    let name = queue_name(queue)?;
                    Ok(json(get_checked(state, kind, &name).await?))
                };
                (op_name(kind, "settings_get"), answer.await)
            }
            Some(change) => {
                let answer = async {
                    let name = queue_name(queue)?;
                    let change: BTreeMap<String, serde_json::Value> =
                        serde_json::from_slice(&change).map_err(|e| {
                            ApiError::new(
                                axum::http::StatusCode::BAD_REQUEST,
                                "bad_json",
                                format!("the settings must be a JSON object: {e}"),
                            )
                        })?;
                    Ok(json(put_checked(state, kind, &name, &change).await?))
                };
                (op_name(kind, "settings_put"), answer.await)
            }
        },
        paused => {
            let pause = paused == "pause";
            let op = match (kind, pause) {
                (QueueKind::Fifo, true) => "pause",
                (QueueKind::Fifo, false) => "resume",
                (QueueKind::Priority, true) => "pq_pause",
                (QueueKind::Priority, false) => "pq_resume",
            };
            let answer = async {
                let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
                let answer = crate::console::api::set_paused_checked(state, &keys, pause).await?;
                Ok(json(answer))
            };
            (op, answer.await)
        }
    };
    counted(queue, op, answer)
}

/// `DELETE queue`: the counts dropped; `-ERR queue_busy …` with them
/// when pushes kept it from finishing (call again).
async fn delete<S: Store>(ctx: &Ctx<'_, S>, kind: QueueKind, queue: &str) -> Answer {
    let name = queue_name(queue)?;
    let answer = delete_checked(ctx.state, kind, &name).await?;
    if !answer.done {
        return Err(CmdError::Line(format!(
            "ERR queue_busy items kept arriving while the queue was deleted (call again); dropped so far: items {}, delayed {}, leased {}, results {}",
            answer.items, answer.delayed, answer.leased, answer.results
        )));
    }
    Ok(json(answer))
}

/// A listing's options: `[LIMIT n] [AFTER text]` and, for `QUEUES`,
/// `[KIND fifo|priority]`, in any order.
#[derive(Debug, Default)]
struct Page {
    limit: Option<usize>,
    after: Option<String>,
    kind: Option<String>,
}

fn page_options(args: &mut Args, kinds: bool) -> Result<Page, CmdError> {
    let mut page = Page::default();
    while let Some(keyword) = args.peek_keyword() {
        args.next_arg();
        match keyword.as_str() {
            "LIMIT" if args.left() > 0 => page.limit = Some(args.number("LIMIT")? as usize),
            "AFTER" if args.left() > 0 => page.after = Some(args.text()?),
            "KIND" if kinds && args.left() > 0 => page.kind = Some(args.text()?),
            _ => return Err(CmdError::syntax()),
        }
    }
    Ok(page)
}

/// `LEASES queue [LIMIT n] [AFTER cursor]`: `{leases: [...], next}`.
async fn leases<S: Store>(
    ctx: &Ctx<'_, S>,
    kind: QueueKind,
    queue: &str,
    mut args: Args,
) -> Answer {
    let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
    let page = page_options(&mut args, false)?;
    let leases = leases_page(ctx.state, &keys, page.after.as_deref(), page.limit).await?;
    Ok(json(leases))
}

/// `QUEUES [KIND fifo|priority] [LIMIT n] [AFTER queue]`: `{queues:
/// [...], next}`, in name order.
async fn queues<S: Store>(ctx: &Ctx<'_, S>, mut args: Args) -> Answer {
    let page = page_options(&mut args, true)?;
    let kind = match page.kind.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("fifo") => QueueKind::Fifo,
        Some("priority") => QueueKind::Priority,
        Some(other) => {
            return Err(ApiError::bad_parameter(format!(
                "kind must be fifo or priority, got {other:?}"
            ))
            .into());
        }
    };
    let limit = limit(page.limit, 20, LIST_LIMIT_MAX)?;
    let after = page.after.as_deref().map(queue_name).transpose()?;
    let list = list_page(ctx.state, kind, after.as_ref(), limit).await?;
    Ok(json(list))
}
