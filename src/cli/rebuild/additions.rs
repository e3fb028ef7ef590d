//! Whether `rebuild` may apply a stream's deduplicated effects (additions to
//! a counter, [`crate::Handling::add`]) to a table.
//!
//! An addition is applied once per event because its dedup record is there
//! to say it was; the record expires `DEDUP_TTL_SECONDS` after it was
//! written, and then the same event would be added again. A record is never
//! older than its table, so a table younger than the window (less a day's
//! margin, for the rebuild's own time and the clocks) still holds every
//! record it ever had: its additions are applied, and those it has are
//! absorbed. In an older table an addition is applied only to a counter the
//! table holds no item of (never added to); a stream that would add to one
//! it holds is refused, named, and left to the operator's mend (the
//! difference `verify` shows, added to the counter's item).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::Domain;
use crate::lambda::epoch_seconds;
use crate::producer::StoredEvent;
use crate::store::StoreError;
use crate::table::request_error;

/// The margin kept below the dedup window: a day.
const MARGIN_SECONDS: u64 = 86_400;

/// What a rebuild may do with additions.
#[derive(Debug)]
pub(in crate::cli) enum Additions {
    /// Every dedup record the table ever had is still there (a young table,
    /// an embedded one): apply them; the records absorb what it has.
    Apply,
    /// The table may hold additions whose records expired: add only to a
    /// counter the table holds no item of.
    NewCountersOnly(OldTable),
}

/// A table older than the dedup window.
#[derive(Debug)]
pub(in crate::cli) struct OldTable {
    client: Client,
    table: String,
    /// Its age, seconds (`None`: DynamoDB did not say when it was created,
    /// or the table was restored from a backup: its items may be older).
    age: Option<u64>,
    /// Restored from a backup or a point in time: its creation says nothing
    /// of its items' age.
    restored: bool,
    /// `DEDUP_TTL_SECONDS`.
    window: u64,
}

/// Why a stream's addition is not applied: the line `rebuild` prints.
#[derive(Debug)]
pub(in crate::cli) struct Refusal {
    /// The event's sequence in its stream.
    pub(in crate::cli) sequence: u64,
    /// The counter's item, `<pk>/<sk>`.
    pub(in crate::cli) counter: String,
}

impl Additions {
    /// For `table`, from its creation time (one `DescribeTable`) and the
    /// dedup window, `window` seconds.
    pub(in crate::cli) async fn for_table(
        client: &Client,
        table: &str,
        window: u64,
    ) -> Result<Additions, StoreError> {
        let output = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|err| request_error("DescribeTable", &err))?;
        let description = output.table();
        // A restored table is new, its items and counters are not.
        let restored = description.is_some_and(|table| table.restore_summary().is_some());
        let created = description
            .and_then(|description| description.creation_date_time())
            .map(|time| u64::try_from(time.secs()).unwrap_or(0));
        let age = created
            .map(|created| epoch_seconds().saturating_sub(created))
            .filter(|_| !restored);
        Ok(match age {
            Some(age) if age < window.saturating_sub(MARGIN_SECONDS) => Additions::Apply,
            _ => Additions::NewCountersOnly(OldTable {
                client: client.clone(),
                table: table.to_owned(),
                age,
                restored,
                window,
            }),
        })
    }

    /// Why this rebuild adds only to new counters, for stderr; `None` when
    /// it applies every addition.
    pub(in crate::cli) fn caution(&self) -> Option<String> {
        let Additions::NewCountersOnly(old) = self else {
            return None;
        };
        let age = match old.age {
            Some(age) => format!("{} days old", age / 86_400),
            None if old.restored => {
                "restored from a backup (its items may be older than it)".to_owned()
            }
            None => "of unknown age".to_owned(),
        };
        Some(format!(
            "table {} is {age}, not younger than the dedup window less a day (DEDUP_TTL_SECONDS={}, {} days): dedup records it had may have expired, so a counter's events are applied only where the table holds no item of that counter",
            old.table,
            old.window,
            old.window / 86_400
        ))
    }

    /// The first event of `page` (a page of `stream`'s events, in order)
    /// whose addition may not be applied, with why; `None` when all may.
    /// `counters` remembers, for the stream, whether the table held each
    /// counter before the rebuild added to it.
    pub(in crate::cli) async fn first_refused(
        &self,
        domain: &Domain,
        page: &[StoredEvent],
        counters: &mut BTreeMap<(String, String), bool>,
    ) -> Result<Option<(usize, Refusal)>, StoreError> {
        let Additions::NewCountersOnly(old) = self else {
            return Ok(None);
        };
        for (index, stored) in page.iter().enumerate() {
            let Ok(event) = domain.parse(&stored.body) else {
                continue;
            };
            let Some(effect) = event.deduplicated() else {
                continue;
            };
            let key = (
                effect.counter.pk(&effect.id),
                effect.counter.sort_key.to_owned(),
            );
            let held = match counters.get(&key) {
                Some(held) => *held,
                None => {
                    let held = old.holds(&key).await?;
                    counters.insert(key.clone(), held);
                    held
                }
            };
            if held {
                let refusal = Refusal {
                    sequence: stored.sequence,
                    counter: format!("{}/{}", key.0, key.1),
                };
                return Ok(Some((index, refusal)));
            }
        }
        Ok(None)
    }
}

impl OldTable {
    /// Whether the table holds this item (strongly consistent).
    async fn holds(&self, (pk, sk): &(String, String)) -> Result<bool, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(pk.clone()))
            .key("sk", AttributeValue::S(sk.clone()))
            .projection_expression("pk")
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| request_error("GetItem", &err))?;
        Ok(output.item.is_some())
    }
}
