//! A stream's stock adjustments: one transaction with their deduplication
//! records, duplicates left out, a step that would leave the 64-bit range
//! refused at the adjustment that crosses it.

use super::verdict::{Verdict, skipped_one};
use super::{Invocation, Outcome, Runner};
use crate::domain::{Event, StockAdjustment, inventory};
use crate::store::{Adjusted, DedupKey, MAX_ADJUSTMENTS, Store};

impl<S: Store> Runner<S> {
    /// Writes a stream's stock adjustments, with their deduplication records,
    /// in one transaction (in chunks of [`MAX_ADJUSTMENTS`]); adjustments
    /// another invocation recorded meanwhile are duplicates, and the rest is
    /// written again, a bounded number of times.
    pub(super) async fn settle_stock(
        &self,
        adjustments: Vec<(usize, StockAdjustment)>,
        invocation: &Invocation,
    ) -> Vec<(usize, Verdict)> {
        let mut verdicts = Vec::with_capacity(adjustments.len());
        let mut chunks = adjustments.chunks(MAX_ADJUSTMENTS);
        while let Some(chunk) = chunks.next() {
            let mut pending: Vec<&(usize, StockAdjustment)> = chunk.iter().collect();
            // Adjustments behind a refused one: not attempted.
            let mut cut: Option<Vec<&(usize, StockAdjustment)>> = None;
            // Where in `verdicts` the refused one is.
            let mut rejected: Option<usize> = None;
            let mut attempt = 0;
            let failure = loop {
                let batch: Vec<StockAdjustment> = pending
                    .iter()
                    .map(|(_, adjustment)| adjustment.clone())
                    .collect();
                match self
                    .timed(
                        "TransactWriteItems",
                        invocation,
                        self.store.adjust_stock(&batch),
                    )
                    .await
                {
                    Ok(Adjusted::Applied) => {
                        verdicts.extend(pending.iter().map(|(position, _)| {
                            (*position, Verdict::new(Outcome::Applied, None))
                        }));
                        break None;
                    }
                    Ok(Adjusted::Duplicates(existing)) => {
                        let mut index = 0;
                        pending.retain(|(position, _)| {
                            let duplicate = existing.contains(&index);
                            index += 1;
                            if duplicate {
                                verdicts.push((*position, Verdict::new(Outcome::Duplicate, None)));
                            }
                            !duplicate
                        });
                        attempt += 1;
                        if pending.is_empty() {
                            break None;
                        }
                        if attempt > self.config.condition_retries {
                            break Some(lost_race(attempt));
                        }
                    }
                    Ok(Adjusted::OutOfRange { sku, on_hand }) => {
                        // In stream order, the first adjustment that takes the
                        // sku out of range is refused; the ones before it are
                        // written again without it, the ones after it wait.
                        let mut running = Some(on_hand.unwrap_or(0));
                        let refused = pending.iter().position(|(_, adjustment)| {
                            if adjustment.sku == sku {
                                running = running.and_then(|at| at.checked_add(adjustment.delta));
                            }
                            running.is_none()
                        });
                        attempt += 1;
                        match refused {
                            Some(at) => {
                                let (position, adjustment) = pending[at];
                                // An earlier refusal behind this one: not
                                // attempted after all.
                                if let Some(earlier) = rejected.take()
                                    && let Some((_, verdict)) = verdicts.get_mut(earlier)
                                {
                                    *verdict = skipped_one();
                                }
                                rejected = Some(verdicts.len());
                                verdicts.push((
                                    *position,
                                    Verdict::new(
                                        Outcome::Rejected,
                                        Some(format!(
                                            "onHand of {sku} is {}: adding {} would take it outside the 64-bit range; retrying will not help",
                                            on_hand.unwrap_or(0),
                                            adjustment.delta
                                        )),
                                    ),
                                ));
                                let after = pending.split_off(at);
                                // Behind it: the rest, and what an earlier
                                // refusal in this chunk cut already.
                                let earlier = cut.take().into_iter().flatten();
                                cut = Some(after.into_iter().skip(1).chain(earlier).collect());
                                if pending.is_empty() {
                                    break None;
                                }
                            }
                            // onHand moved meanwhile: decide again.
                            None if attempt > self.config.condition_retries => {
                                break Some(lost_race(attempt));
                            }
                            None => {}
                        }
                    }
                    Err(err) => break Some(err.outcome()),
                }
            };
            if let Some((outcome, reason)) = failure {
                // Nothing of this chunk was written, nor of the chunks after it.
                let rest = pending
                    .into_iter()
                    .chain(cut.take().into_iter().flatten())
                    .chain(chunks.by_ref().flatten());
                verdicts.extend(
                    rest.map(|(position, _)| {
                        (*position, Verdict::new(outcome, Some(reason.clone())))
                    }),
                );
                break;
            }
            if let Some(cut) = cut {
                // After a refused adjustment, the stream stops.
                let rest = cut.into_iter().chain(chunks.by_ref().flatten());
                verdicts.extend(rest.map(|(position, _)| (*position, skipped_one())));
                break;
            }
        }
        verdicts
    }
}

/// The failure of a stock transaction that kept losing to other invocations.
fn lost_race(attempts: u32) -> (Outcome, String) {
    (
        Outcome::StorageError,
        format!(
            "the stock transaction lost the race {attempts} times: another invocation keeps recording these events"
        ),
    )
}

/// The deduplication record an event is guarded by, if any.
pub(super) fn dedup_key(event: &Event) -> Option<DedupKey> {
    match event {
        Event::InventoryAdjusted(adjusted) => Some(DedupKey {
            event_id: adjusted.event_id.clone(),
            handler: inventory::STOCK_HANDLER,
        }),
        _ => None,
    }
}
