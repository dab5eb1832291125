//! The registry of a daemon's SQS message move tasks (see
//! [`super::move_tasks`]): kept apart from the actions, which reach the
//! daemon's state, so the state can hold it without importing the SQS
//! front end back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Finished tasks kept for ListMessageMoveTasks, per daemon.
pub const TASKS_KEPT_MAX: usize = 100;

/// The source queue has an active task already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyRunning;

/// One task's state, shared with its runner.
#[derive(Debug)]
pub(super) struct Task {
    pub(super) id: String,
    pub(super) source_arn: String,
    pub(super) rate: Option<u32>,
    pub(super) started_ms: u64,
    pub(super) to_move: u64,
    pub(super) moved: AtomicU64,
    pub(super) status: Mutex<Status>,
    pub(super) cancel: AtomicBool,
    pub(super) wake: Notify,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Status {
    Running,
    Cancelling,
    Cancelled,
    Completed,
    Failed(String),
}

impl Status {
    pub(super) fn name(&self) -> &'static str {
        match self {
            Status::Running => "RUNNING",
            Status::Cancelling => "CANCELLING",
            Status::Cancelled => "CANCELLED",
            Status::Completed => "COMPLETED",
            Status::Failed(_) => "FAILED",
        }
    }

    pub(super) fn active(&self) -> bool {
        matches!(self, Status::Running | Status::Cancelling)
    }
}

impl Task {
    pub(super) fn status(&self) -> Status {
        self.status.lock().clone()
    }

    pub(super) fn set(&self, status: Status) {
        *self.status.lock() = status;
    }

    /// The handle SQS answers: base64 of `{"taskId", "sourceArn"}`.
    pub(super) fn handle(&self) -> String {
        BASE64.encode(json!({"taskId": self.id, "sourceArn": self.source_arn}).to_string())
    }

    pub(super) fn entry(&self) -> Value {
        let status = self.status();
        let mut entry = json!({
            "Status": status.name(),
            "SourceArn": self.source_arn,
            "ApproximateNumberOfMessagesMoved": self.moved.load(Ordering::Relaxed),
            "ApproximateNumberOfMessagesToMove": self.to_move,
            "StartedTimestamp": self.started_ms,
        });
        if status == Status::Running {
            entry["TaskHandle"] = json!(self.handle());
        }
        if let Some(rate) = self.rate {
            entry["MaxNumberOfMessagesPerSecond"] = json!(rate);
        }
        if let Status::Failed(reason) = status {
            entry["FailureReason"] = json!(reason);
        }
        entry
    }
}

/// A daemon's move tasks, newest last.
#[derive(Debug, Default)]
pub struct MoveTasks {
    tasks: Mutex<BTreeMap<(u64, String), Arc<Task>>>,
}

impl Drop for MoveTasks {
    /// The daemon stops: its tasks stop at their next batch.
    fn drop(&mut self) {
        for task in self.tasks.lock().values() {
            task.cancel.store(true, Ordering::Relaxed);
            task.wake.notify_one();
        }
    }
}

impl MoveTasks {
    /// Registers `task` unless its source has an active one; drops the
    /// oldest finished tasks past [`TASKS_KEPT_MAX`].
    pub(super) fn add(&self, task: Arc<Task>) -> Result<(), AlreadyRunning> {
        let mut tasks = self.tasks.lock();
        if tasks
            .values()
            .any(|t| t.source_arn == task.source_arn && t.status().active())
        {
            return Err(AlreadyRunning);
        }
        tasks.insert((task.started_ms, task.id.clone()), task);
        while tasks.values().filter(|t| !t.status().active()).count() > TASKS_KEPT_MAX {
            let oldest = tasks
                .iter()
                .find(|(_, t)| !t.status().active())
                .map(|(key, _)| key.clone());
            match oldest {
                Some(key) => tasks.remove(&key),
                None => break,
            };
        }
        Ok(())
    }

    pub(super) fn find(&self, id: &str) -> Option<Arc<Task>> {
        let tasks = self.tasks.lock();
        tasks.values().find(|t| t.id == id).cloned()
    }

    /// The tasks of `source_arn`, newest first, at most `max`.
    pub(super) fn of_source(&self, source_arn: &str, max: usize) -> Vec<Arc<Task>> {
        let tasks = self.tasks.lock();
        tasks
            .values()
            .rev()
            .filter(|t| t.source_arn == source_arn)
            .take(max)
            .cloned()
            .collect()
    }
}
