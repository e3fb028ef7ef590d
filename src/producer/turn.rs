//! One append at a time per stream within one event store (and its clones):
//! the others wait their turn, first come first served, instead of racing
//! for the same sequence. A race lost is a request, and units, for nothing;
//! writers in other processes still race, and back off (see `append.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as Queue, OwnedMutexGuard};

/// The streams being appended to, each with its queue.
#[derive(Debug, Clone, Default)]
pub(super) struct Turns(Arc<Mutex<HashMap<String, Arc<Queue<()>>>>>);

/// A stream's turn, held for one append; the stream's entry goes when no
/// one else waits.
pub(super) struct Turn {
    turns: Turns,
    stream_id: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Turns {
    /// Waits for `stream_id`'s turn.
    pub(super) async fn take(&self, stream_id: &str) -> Turn {
        let queue = {
            let mut streams = self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            streams
                .entry(stream_id.to_owned())
                .or_insert_with(|| Arc::new(Queue::new(())))
                .clone()
        };
        Turn {
            turns: self.clone(),
            stream_id: stream_id.to_owned(),
            guard: Some(queue.lock_owned().await),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut streams = self
            .turns
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Only the map holds it: no one waits (a waiter clones it under
        // this same lock).
        if streams
            .get(&self.stream_id)
            .is_some_and(|queue| Arc::strong_count(queue) == 1)
        {
            streams.remove(&self.stream_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_come_one_at_a_time_and_leave_nothing_behind() {
        let turns = Turns::default();
        let first = turns.take("s").await;
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move {
                let _turn = turns.take("s").await;
            }
        });
        let other = turns.take("t").await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "waits for the first");
        drop(first);
        waiting.await.expect("its turn");
        drop(other);
        assert_eq!(turns.len(), 0);
    }
}
