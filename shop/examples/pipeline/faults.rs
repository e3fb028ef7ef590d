//! The faults workload's injections, the same for every consumer of a run:
//! a share of its DynamoDB and KMS requests fail (half never sent, half
//! sent and their answer lost, as a timeout after the write leaves it), and
//! a share of its batches are killed after their writes (the process dies
//! before it answers: nothing is deleted, the messages come back after the
//! visibility timeout, and the next batch starts a new process with nothing
//! warm and no key kept). And what one consumer saw of the hot stream.
//!
//! An injected failure is an interceptor's error, which the SDK does not
//! retry: it stands for a request that the SDK's own retries gave up on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use sequence_guard::runner::Outcome;

/// What a run injects.
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// The share of DynamoDB and KMS requests that fail.
    pub requests: f64,
    /// The share of batches killed after their writes.
    pub kills: f64,
}

/// A share of draws, from a seed: the same run draws the same faults.
#[derive(Debug)]
pub struct Dice {
    state: AtomicU64,
}

impl Dice {
    pub fn new(seed: u64) -> Self {
        Dice {
            state: AtomicU64::new(seed | 1),
        }
    }

    /// True with probability `share`.
    pub fn roll(&self, share: f64) -> bool {
        let mut next = 0;
        let _ = self
            .state
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |mut x| {
                // xorshift64
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                next = x;
                Some(x)
            });
        ((next >> 11) as f64 / (1u64 << 53) as f64) < share
    }
}

/// The interceptor that fails a share of a client's requests.
#[derive(Debug, Clone)]
pub struct Failing {
    share: f64,
    dice: Arc<Dice>,
}

impl Failing {
    pub fn new(share: f64, seed: u64) -> Self {
        Failing {
            share,
            dice: Arc::new(Dice::new(seed)),
        }
    }

    fn fail(&self, what: &'static str) -> Result<(), BoxError> {
        if self.dice.roll(self.share / 2.0) {
            return Err(what.into());
        }
        Ok(())
    }

    /// `client` with these failures on it.
    pub fn dynamodb(&self, client: &aws_sdk_dynamodb::Client) -> aws_sdk_dynamodb::Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(self.clone())
            .build();
        aws_sdk_dynamodb::Client::from_conf(config)
    }

    /// `client` with these failures on it.
    pub fn kms(&self, client: &aws_sdk_kms::Client) -> aws_sdk_kms::Client {
        let config = client
            .config()
            .to_builder()
            .interceptor(self.clone())
            .build();
        aws_sdk_kms::Client::from_conf(config)
    }
}

impl Intercept for Failing {
    fn name(&self) -> &'static str {
        "Failing"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.fail("injected: the request was never sent")
    }

    fn read_after_transmit(
        &self,
        _context: &BeforeDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.fail("injected: the request was sent and its answer lost")
    }
}

/// What one consumer saw of the hot stream: each of its messages received
/// (redeliveries included), what became of each, and the batches killed
/// with some of them in.
#[derive(Debug, Default, Clone)]
pub struct HotProfile {
    pub received: u64,
    pub outcomes: HashMap<Outcome, u64>,
    /// Batches with a message of the hot stream that failed (its group
    /// waits a visibility timeout), and those killed.
    pub failed_batches: u64,
    pub killed_batches: u64,
    /// Each hot event's latency, from its append to its projection.
    pub latencies: Vec<Duration>,
}

impl HotProfile {
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.outcomes.get(&outcome).copied().unwrap_or(0)
    }
}
