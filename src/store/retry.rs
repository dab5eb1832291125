//! The bounded retry loop around a transaction body.

use std::future::Future;
use std::time::Duration;

use rand::Rng;

use super::{Store, StoreError, Transaction};

/// How [`transact`] retries.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Most attempts, the first included. At least 1.
    pub attempts_max: u32,
    /// Upper bound of the first backoff; doubles per attempt.
    pub backoff_initial_ms: u64,
    /// Upper bound of any one backoff.
    pub backoff_max_ms: u64,
    /// Retry a commit whose outcome is unknown. Only for idempotent bodies.
    pub retry_maybe_committed: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_max: 100,
            backoff_initial_ms: 1,
            backoff_max_ms: 100,
            retry_maybe_committed: false,
        }
    }
}

/// Runs `body` in a fresh transaction and commits it, retrying retryable
/// errors with jittered exponential backoff, at most
/// `policy.attempts_max` times. The last error is returned when the attempts
/// run out.
pub async fn transact<S, R, F, Fut>(
    store: &S,
    policy: RetryPolicy,
    body: F,
) -> Result<R, StoreError>
where
    S: Store,
    F: Fn(S::Txn) -> Fut,
    Fut: Future<Output = Result<R, StoreError>>,
{
    let attempts_max = policy.attempts_max.max(1);
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let txn = store.begin()?;
        let outcome = match body(txn.clone()).await {
            Ok(value) => txn.commit().await.map(|()| value),
            Err(error) => Err(error),
        };
        let error = match outcome {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let retryable =
            error.is_retryable() && (policy.retry_maybe_committed || !error.is_maybe_committed());
        if !retryable || attempt >= attempts_max {
            return Err(error);
        }
        let ceiling_ms = policy
            .backoff_initial_ms
            .saturating_mul(1u64 << attempt.min(16))
            .min(policy.backoff_max_ms)
            .max(1);
        let pause_us = rand::rng().random_range(0..ceiling_ms * 1000);
        tokio::time::sleep(Duration::from_micros(pause_us)).await;
    }
}
