//! What a million events cost on AWS, from what a benchmark run measured per
//! event and AWS's published on-demand prices in us-east-1 (each with its
//! source and the date it was read, printed with the table).
//!
//! Measured (per event, by the run): the producer's DynamoDB units (our
//! `append`), the dispatcher's send requests and invocations, the consumers'
//! SQS requests (receives that brought messages, and their deletes), their
//! DynamoDB units, and both functions' busy time. Computed: the naive
//! producer's units (an `ADD` on the head and a `PutItem` of the event, two
//! standard writes of items under 1 KB), the GB-seconds (the busy time at
//! [`MEMORY_GB`]), and every dollar. Not counted: storage, the idle polling
//! of an empty queue (per poller and hour, not per event), data transfer
//! (free within a Region), free tiers.

/// One price: what, how much, per what, from where, read when.
pub struct Price {
    pub what: &'static str,
    pub dollars: f64,
    pub per: &'static str,
    pub source: &'static str,
}

/// When the prices below were read.
pub const PRICES_READ: &str = "2026-12-01";

/// DynamoDB on-demand, a write request unit (1 KB; a transactional write is
/// 2 units per KB, as DynamoDB reports it).
pub const WRITE_UNIT: Price = Price {
    what: "DynamoDB on-demand write request unit",
    dollars: 0.625 / 1e6,
    per: "$0.625 per million",
    source: "aws.amazon.com/dynamodb/pricing/on-demand (us-east-1, since the 2024-11-01 cut; \
             figure as quoted by airbyte.com, 2025-07-21)",
};

/// DynamoDB on-demand, a read request unit (a strongly consistent read of
/// 4 KB; eventually consistent: half).
pub const READ_UNIT: Price = Price {
    what: "DynamoDB on-demand read request unit",
    dollars: 0.125 / 1e6,
    per: "$0.125 per million",
    source: "aws.amazon.com/dynamodb/pricing/on-demand (idem)",
};

/// SQS FIFO, one request (each 64 KB of payload is one request).
pub const SQS_FIFO_REQUEST: Price = Price {
    what: "SQS FIFO request",
    dollars: 0.50 / 1e6,
    per: "$0.50 per million",
    source: "aws.amazon.com/sqs/pricing (us-east-1; 64 KB chunks: aws.amazon.com/sqs/features; \
             as quoted by cloudburn.io, 2026-03-14)",
};

/// SNS FIFO, one publish request (PublishBatch of up to ten).
pub const SNS_FIFO_PUBLISH: Price = Price {
    what: "SNS FIFO publish request",
    dollars: 0.30 / 1e6,
    per: "$0.30 per million (payload and delivery charges not counted)",
    source: "aws.amazon.com/sns/pricing (as quoted by factualminds.com, 2026-06-13)",
};

/// Lambda, one invocation.
pub const LAMBDA_REQUEST: Price = Price {
    what: "Lambda request",
    dollars: 0.20 / 1e6,
    per: "$0.20 per million",
    source: "aws.amazon.com/lambda/pricing (us-east-1)",
};

/// Lambda on arm64, one GB-second (the first 7.5 billion a month).
pub const LAMBDA_ARM_GB_SECOND: Price = Price {
    what: "Lambda arm64 GB-second",
    dollars: 0.000_013_333_4,
    per: "$0.0000133334",
    source: "aws.amazon.com/lambda/pricing (us-east-1, arm64, first 7.5 billion GB-s a month; \
             as quoted by cloudchipr.com and artillery's prices.js)",
};

/// Both functions' memory: the template's `FunctionMemory` default and the
/// dispatcher's `MemorySize`, 256 MB.
pub const MEMORY_GB: f64 = 0.25;

/// What one pipeline costs per event, in its parts.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerEvent {
    /// The producer's DynamoDB (read units, write units).
    pub producer_units: (f64, f64),
    /// The dispatcher's send requests (SQS) or publish requests (SNS).
    pub dispatcher_requests: f64,
    /// Whether the dispatcher publishes to SNS.
    pub publishes: bool,
    /// The consumers' SQS requests (receives with messages, deletes).
    pub consumer_sqs_requests: f64,
    /// The consumers' DynamoDB (read units, write units).
    pub consumer_units: (f64, f64),
    /// Invocations of both functions.
    pub invocations: f64,
    /// Busy seconds of both functions.
    pub seconds: f64,
}

/// Dollars per million events: (producer, dispatcher, SQS, consumer
/// DynamoDB, Lambda, total).
pub fn per_million(cost: &PerEvent) -> [f64; 6] {
    let units = |(read, write): (f64, f64)| read * READ_UNIT.dollars + write * WRITE_UNIT.dollars;
    let producer = units(cost.producer_units);
    let dispatcher = cost.dispatcher_requests
        * if cost.publishes {
            SNS_FIFO_PUBLISH.dollars
        } else {
            SQS_FIFO_REQUEST.dollars
        };
    let sqs = cost.consumer_sqs_requests * SQS_FIFO_REQUEST.dollars;
    let consumer = units(cost.consumer_units);
    let lambda = cost.invocations * LAMBDA_REQUEST.dollars
        + cost.seconds * MEMORY_GB * LAMBDA_ARM_GB_SECOND.dollars;
    let parts = [producer, dispatcher, sqs, consumer, lambda];
    let total: f64 = parts.iter().sum();
    let million = 1e6;
    [
        producer * million,
        dispatcher * million,
        sqs * million,
        consumer * million,
        lambda * million,
        total * million,
    ]
}

/// Prints the prices, with their sources and the date they were read.
pub fn print_prices() {
    println!("   prices (us-east-1, on-demand, read {PRICES_READ}):");
    for price in [
        WRITE_UNIT,
        READ_UNIT,
        SQS_FIFO_REQUEST,
        SNS_FIFO_PUBLISH,
        LAMBDA_REQUEST,
        LAMBDA_ARM_GB_SECOND,
    ] {
        println!("     {:<40} {:<28} {}", price.what, price.per, price.source);
    }
    println!(
        "   Lambda GB-s: measured busy time per batch (dispatch, or the consumer's batch) x {} GB \
         (the template's 256 MB); GetRecords by a Lambda trigger are not billed",
        MEMORY_GB
    );
}

/// The table's header.
pub fn print_header() {
    println!(
        "{:<34} {:<13} {:>9} {:>10} {:>8} {:>9} {:>8} {:>8}   per event: WRU+RRU producer, \
         requests dispatcher, SQS consumer, WRU+RRU consumer, invocations, busy ms",
        "workload ($ per million events)",
        "pipeline",
        "producer",
        "dispatcher",
        "SQS",
        "consumer",
        "Lambda",
        "total",
    );
}

/// One row of the table.
pub fn print_row(workload: &str, pipeline: &str, cost: &PerEvent) {
    let dollars = per_million(cost);
    println!(
        "{:<34} {:<13} {:>9.3} {:>10.3} {:>8.3} {:>9.3} {:>8.3} {:>8.3}   \
         {:.2}+{:.2}, {:.3}, {:.3}, {:.2}+{:.2}, {:.3}, {:.2}",
        workload,
        pipeline,
        dollars[0],
        dollars[1],
        dollars[2],
        dollars[3],
        dollars[4],
        dollars[5],
        cost.producer_units.1,
        cost.producer_units.0,
        cost.dispatcher_requests,
        cost.consumer_sqs_requests,
        cost.consumer_units.1,
        cost.consumer_units.0,
        cost.invocations,
        cost.seconds * 1000.0,
    );
}
