//! Reading the stream: its shards, each read in order from its start, a
//! child only once its parent is done.

use super::*;

impl StreamSource {
    /// Whether a shard may be read: its parent, if known, is done.
    pub(super) fn readable(&self, index: usize) -> bool {
        let shard = &self.shards[index];
        if shard.done() {
            return false;
        }
        match &shard.parent {
            None => true,
            Some(parent) => self
                .shards
                .iter()
                .find(|other| &other.id == parent)
                .is_none_or(Shard::done),
        }
    }

    /// Learns the stream's shards (DescribeStream, every page).
    pub(super) async fn discover(&mut self) {
        let known: HashSet<String> = self.shards.iter().map(|shard| shard.id.clone()).collect();
        let mut start: Option<String> = None;
        loop {
            let described = self
                .client
                .describe_stream()
                .stream_arn(&self.stream_arn)
                .set_exclusive_start_shard_id(start.clone())
                .send()
                .await
                .expect("DescribeStream")
                .stream_description
                .expect("a stream description");
            for shard in described.shards.unwrap_or_default() {
                let Some(id) = shard.shard_id else { continue };
                if known.contains(&id) {
                    continue;
                }
                self.shards.push(Shard {
                    id,
                    parent: shard.parent_shard_id,
                    iterator: None,
                    opened: false,
                    ended: false,
                    last_read: None,
                    buffer: VecDeque::new(),
                    plan: VecDeque::new(),
                });
            }
            start = described.last_evaluated_shard_id;
            if start.is_none() {
                return;
            }
        }
    }

    /// Reads up to `max` more records of a shard into its buffer (one
    /// GetRecords, after a GetShardIterator the first time).
    pub(super) async fn read_shard(&mut self, index: usize, max: usize) {
        let shard = &mut self.shards[index];
        if shard.ended {
            return;
        }
        if !shard.opened {
            shard.iterator = Some(
                open(
                    &self.client,
                    &self.stream_arn,
                    &shard.id,
                    shard.last_read.as_deref(),
                )
                .await,
            );
            shard.opened = true;
        }
        let Some(iterator) = shard.iterator.clone() else {
            shard.ended = true;
            return;
        };
        let result = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(max.min(GET_RECORDS_LIMIT) as i32)
            .send()
            .await;
        let output = match result {
            Ok(output) => output,
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|err| err.is_expired_iterator_exception()) =>
            {
                // An iterator lives 15 minutes: open the shard again after
                // the last record read, and read on the next poll.
                shard.opened = false;
                return;
            }
            Err(err) => panic!("GetRecords on {}: {err:?}", shard.id),
        };
        let records = output.records.unwrap_or_default();
        if let Some(last) = records.last() {
            shard.last_read = Some(sequence(last));
        }
        shard.buffer.extend(records);
        shard.iterator = output.next_shard_iterator;
        if shard.iterator.is_none() {
            shard.ended = true;
        }
    }
}

/// Opens a shard: after `after` if given, else at its start.
async fn open(client: &Client, stream_arn: &str, shard_id: &str, after: Option<&str>) -> String {
    let request = client
        .get_shard_iterator()
        .stream_arn(stream_arn)
        .shard_id(shard_id);
    let request = match after {
        Some(sequence) => request
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .sequence_number(sequence),
        None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
    };
    request
        .send()
        .await
        .expect("GetShardIterator")
        .shard_iterator
        .expect("a shard iterator")
}
