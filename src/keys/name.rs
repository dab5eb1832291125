//! Queue names: what a valid one is, and a queue's dead-letter queue.

use std::fmt;

/// Longest queue name, in bytes (a dead-letter queue's name may add
/// [`DEAD_LETTER_SUFFIX`] to it).
pub const QUEUE_NAME_LEN_MAX: usize = 128;
/// The dead-letter queue of `q` is the queue `q.dead`.
pub const DEAD_LETTER_SUFFIX: &str = ".dead";
/// A validated queue name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`,
/// not starting with `.`, plus `.dead` for the dead-letter queue of a
/// 128-character name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

/// Why a queue name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidQueueName(pub String);

impl fmt::Display for InvalidQueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidQueueName {}

impl QueueName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<QueueName, InvalidQueueName> {
        let len_max = if name.ends_with(DEAD_LETTER_SUFFIX) {
            QUEUE_NAME_LEN_MAX + DEAD_LETTER_SUFFIX.len()
        } else {
            QUEUE_NAME_LEN_MAX
        };
        if name.is_empty() || name.len() > len_max {
            return Err(InvalidQueueName(format!(
                "queue name {name:?} is invalid: it must be 1 to {QUEUE_NAME_LEN_MAX} bytes \
                 long (plus {DEAD_LETTER_SUFFIX} for a dead-letter queue), not {}",
                name.len()
            )));
        }
        if name.starts_with('.') {
            return Err(InvalidQueueName(format!(
                "queue name {name:?} is invalid: it must not start with '.'"
            )));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidQueueName(format!(
                "queue name {name:?} is invalid: it may hold only A-Z a-z 0-9 . _ -, not {bad:?}"
            )));
        }
        Ok(QueueName(name.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for a dead-letter queue (a name ending in `.dead`).
    pub fn is_dead_letter(&self) -> bool {
        self.0.ends_with(DEAD_LETTER_SUFFIX)
    }

    /// The queue's dead-letter queue, `{name}.dead`; `None` for a
    /// dead-letter queue, which does not dead-letter again.
    pub fn dead_letter(&self) -> Option<QueueName> {
        if self.is_dead_letter() {
            return None;
        }
        let name = QueueName(format!("{}{DEAD_LETTER_SUFFIX}", self.0));
        debug_assert!(QueueName::new(name.as_str()).is_ok());
        Some(name)
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
