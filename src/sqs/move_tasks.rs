//! The message move tasks (StartMessageMoveTask, ListMessageMoveTasks,
//! CancelMessageMoveTask) on hotq's re-drive ([`crate::service::Hotq::redrive`]):
//! a task moves a dead-letter queue's messages back to the queues they
//! came from, in re-drive batches, so each message keeps its
//! `MessageGroupId` and its place in its group (behind what the group
//! holds there already), and is not deduplicated on the way back (its
//! `MessageDeduplicationId` goes with it).
//!
//! - The source must be a dead-letter queue by role (some queue's
//!   `RedrivePolicy` names it, or its name ends in `.dead`), as SQS asks.
//! - `DestinationArn` is refused: a re-drive returns each message to the
//!   queue it was dead-lettered from (SQS's default without one).
//! - A task moves at most the messages the queue held when it started
//!   (`ApproximateNumberOfMessagesToMove`), so a queue fed meanwhile does
//!   not keep it running; messages in flight in the dead-letter queue are
//!   not moved. `MaxNumberOfMessagesPerSecond` (1-500) paces it, one
//!   batch a second.
//! - Tasks live in the daemon that runs them (not in the store): one
//!   active task per source queue there, the last
//!   [`TASKS_KEPT_MAX`](super::move_registry::TASKS_KEPT_MAX)
//!   finished ones listed, all cancelled when the daemon stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::error::SqsError;
use super::move_registry::{AlreadyRunning, Status, Task};
use super::queues::name_of_arn;
use super::{Call, int_member, required_string};
use crate::envelope::now_ms;
use crate::keys::{QueueKeys, QueueName};
use crate::server::state::AppState;
use crate::service::{REDRIVE_BATCH_MAX, Store};

/// Fastest pace a task may ask for, messages a second (SQS's limit).
pub const RATE_MAX: i64 = 500;
/// Most tasks ListMessageMoveTasks answers (SQS's limit).
pub const LIST_RESULTS_MAX: i64 = 10;

fn not_found(what: &str) -> SqsError {
    SqsError::not_found(format!(
        "The resource that you specified for the {what} parameter doesn't exist."
    ))
}

/// The queue an ARN of this account names, which must exist.
async fn queue_of_arn<S: Store>(
    call: &Call<'_, S>,
    arn: &str,
    what: &str,
) -> Result<QueueName, SqsError> {
    let name = name_of_arn(call.config(), arn).ok_or_else(|| not_found(what))?;
    match super::queues::load(&call.state.hotq, &name).await {
        Ok(_) => Ok(name),
        Err(error) if error.shape == "QueueDoesNotExist" => Err(not_found(what)),
        Err(error) => Err(error),
    }
}

/// StartMessageMoveTask.
pub async fn start<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let source_arn = required_string(&call.input, "SourceArn")?;
    let source = queue_of_arn(call, source_arn, "SourceArn").await?;
    if super::string_member(&call.input, "DestinationArn")?.is_some() {
        return Err(SqsError::invalid(
            "Value for parameter DestinationArn is invalid. Reason: hotq moves dead letters back to the queues they came from only; leave DestinationArn out.",
        ));
    }
    let rate = int_member(&call.input, "MaxNumberOfMessagesPerSecond", 1..=RATE_MAX)?;
    let keys = QueueKeys::new(&source);
    if !call.state.hotq.is_dead_letter_queue(&keys).await? {
        return Err(SqsError::invalid(
            "Source queue must be configured as a Dead Letter Queue.",
        ));
    }
    let to_move = call.state.hotq.redrivable(&keys).await?;
    let task = Arc::new(Task {
        id: super::message::new_id(),
        source_arn: source_arn.to_string(),
        rate: rate.map(|r| r as u32),
        started_ms: now_ms(),
        to_move,
        moved: AtomicU64::new(0),
        status: Mutex::new(Status::Running),
        cancel: AtomicBool::new(false),
        wake: Notify::new(),
    });
    call.state.sqs_move_tasks.add(task.clone()).map_err(|AlreadyRunning| {
        SqsError::invalid(
            "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
        )
    })?;
    tokio::spawn(run(call.state.clone(), source, task.clone()));
    Ok(json!({"TaskHandle": task.handle()}))
}

/// Moves the task's messages in re-drive batches until it has moved what
/// the queue held at its start, the queue has nothing left to move, or it
/// is cancelled.
async fn run<S: Store>(state: Arc<AppState<S>>, source: QueueName, task: Arc<Task>) {
    let batch_max = task.rate.map_or(REDRIVE_BATCH_MAX, |rate| rate as usize);
    loop {
        if task.cancel.load(Ordering::Relaxed) {
            task.set(Status::Cancelled);
            return;
        }
        let left = task
            .to_move
            .saturating_sub(task.moved.load(Ordering::Relaxed));
        if left == 0 {
            task.set(Status::Completed);
            return;
        }
        let want = batch_max.min(left as usize).min(REDRIVE_BATCH_MAX);
        match state.hotq.redrive(&source, want).await {
            Ok(0) => {
                task.set(Status::Completed);
                return;
            }
            Ok(moved) => {
                task.moved.fetch_add(moved as u64, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(queue = %source, %error, "a message move task failed");
                task.set(Status::Failed(error.to_string()));
                return;
            }
        }
        if task.rate.is_some() {
            // The pace asked for: one batch a second, or the cancel.
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = task.wake.notified() => {}
            }
        }
    }
}

/// ListMessageMoveTasks: the source's tasks, newest first (`MaxResults`
/// 1-10, default 1).
pub async fn list<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let source_arn = required_string(&call.input, "SourceArn")?;
    queue_of_arn(call, source_arn, "SourceArn").await?;
    let max = int_member(&call.input, "MaxResults", 1..=LIST_RESULTS_MAX)?.unwrap_or(1);
    let results: Vec<Value> = call
        .state
        .sqs_move_tasks
        .of_source(source_arn, max as usize)
        .iter()
        .map(|t| t.entry())
        .collect();
    Ok(json!({"Results": results}))
}

/// CancelMessageMoveTask: stops a running task at its next batch (what it
/// moved stays moved).
pub async fn cancel<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let handle = required_string(&call.input, "TaskHandle")?;
    let invalid = || SqsError::invalid("Value for parameter TaskHandle is invalid.");
    let doc: Value = BASE64
        .decode(handle)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(invalid)?;
    let (Some(id), Some(source_arn)) = (doc["taskId"].as_str(), doc["sourceArn"].as_str()) else {
        return Err(invalid());
    };
    queue_of_arn(call, source_arn, "SourceArn").await?;
    let task = call
        .state
        .sqs_move_tasks
        .find(id)
        .filter(|t| t.source_arn == source_arn)
        .ok_or_else(|| SqsError::not_found("Task does not exist."))?;
    {
        // Only a running task is cancelled: its runner's last write (a
        // final status) comes after, whichever of the two is first.
        let mut status = task.status.lock();
        if *status == Status::Running {
            *status = Status::Cancelling;
            task.cancel.store(true, Ordering::Relaxed);
            task.wake.notify_one();
        }
    }
    Ok(json!({"ApproximateNumberOfMessagesMoved": task.moved.load(Ordering::Relaxed)}))
}
