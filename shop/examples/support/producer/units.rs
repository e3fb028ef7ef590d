//! Capacity units per append: today's layout beside the event store's, for
//! each kind of append (a new stream, an exact or any sequence, a request
//! id, several events, a caller's write, a duplicate, a stale sequence).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use sequence_guard::producer::{
    Append, Consumed, EventStore, ExactCheck, ExpectedSequence, NewEvent, Units,
};

use super::head_layout::HeadLayout;
use super::{keyed_store, updated};
use crate::figure_files::{Figure, Tables};
use crate::meter::{Meter, Usage};

/// The caller's own write: a customer's order count.
pub fn caller_write(table: &str, n: u64) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(table)
        .item("pk", AttributeValue::S(format!("CUSTOMER#ada-{n}")))
        .item("sk", AttributeValue::S("ORDERS".into()))
        .item("count", AttributeValue::N(n.to_string()));
    TransactWriteItem::builder()
        .put(put.build().expect("a put"))
        .build()
}

/// One kind of append, as both layouts send it.
pub struct Shape {
    /// `Some`: an exact expected sequence.
    pub expected: Option<u64>,
    pub events: u64,
    pub request: Option<String>,
    pub write: bool,
}

/// The kinds of append measured: a label, and the append for the `n`th
/// of 20 (on its stream, which stands at `n` unless the kind says otherwise).
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    First,
    Exact,
    ExactRequest,
    Any,
    AnyRequest,
    Three,
    Write,
    Duplicate,
    Stale,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::First,
        Kind::Exact,
        Kind::ExactRequest,
        Kind::Any,
        Kind::AnyRequest,
        Kind::Three,
        Kind::Write,
        Kind::Duplicate,
        Kind::Stale,
    ];

    fn label(self) -> &'static str {
        match self {
            Kind::First => "a new stream (expected 0), no request id",
            Kind::Exact => "expected sequence known, no request id",
            Kind::ExactRequest => "expected sequence known, request id",
            Kind::Any => "any sequence, no request id",
            Kind::AnyRequest => "any sequence, request id",
            Kind::Three => "any sequence, 3 events",
            Kind::Write => "any sequence, a caller's write",
            Kind::Duplicate => "a request id seen before (any sequence)",
            Kind::Stale => "expected sequence stale (refused)",
        }
    }

    /// The stream of the `n`th append, and its shape.
    fn shape(self, layout: &str, n: u64) -> (String, Shape) {
        let name = format!("units-{layout}-{}", self as u8);
        let stream = match self {
            Kind::First => format!("{name}-{n}"),
            _ => name.clone(),
        };
        let shape = Shape {
            expected: match self {
                Kind::First | Kind::Stale => Some(0),
                Kind::Exact | Kind::ExactRequest => Some(n),
                _ => None,
            },
            events: if self == Kind::Three { 3 } else { 1 },
            request: match self {
                Kind::ExactRequest | Kind::AnyRequest => Some(format!("{name}-{n}")),
                Kind::Duplicate => Some(format!("{name}-once")),
                _ => None,
            },
            write: self == Kind::Write,
        };
        (stream, shape)
    }

    /// Appended before the 20 measured (the shape of `n` = 0): what the
    /// kind needs in place.
    fn setup(self) -> bool {
        matches!(
            self,
            Kind::Exact | Kind::ExactRequest | Kind::Duplicate | Kind::Stale
        )
    }
}

pub fn store_append(shape: &Shape, stream: &str, n: u64, table: &str) -> Append {
    let mut events: Vec<NewEvent> = (0..shape.events).map(|k| updated(n * 10 + k)).collect();
    if events.is_empty() {
        events.push(updated(n));
    }
    Append {
        stream_id: stream.to_owned(),
        events,
        expected: shape
            .expected
            .map_or(ExpectedSequence::Any, ExpectedSequence::Exact),
        request_id: shape.request.clone(),
        writes: if shape.write {
            vec![caller_write(table, n)]
        } else {
            Vec::new()
        },
    }
}

/// Per append of one kind: requests, units by the rules, units reported,
/// items written.
pub struct PerAppend {
    pub requests: f64,
    pub consumed: Consumed,
    pub written: f64,
    /// The key item's requests and units (an order's personal data sealed),
    /// for the event store.
    pub keys: Option<Usage>,
}

pub async fn measure_store(
    store: &EventStore,
    keys: &Meter,
    kind: Kind,
    layout: &str,
) -> PerAppend {
    if kind.setup() {
        let (stream, shape) = kind.shape(layout, 0);
        let _ = store
            .append(store_append(&shape, &stream, 0, store.table()))
            .await;
    }
    let (requests, consumed, keys_before) = (store.requests(), store.consumed(), keys.usage());
    let mut written = 0;
    for n in 1..=20 {
        let (stream, shape) = kind.shape(layout, n);
        if let Ok(appended) = store
            .append(store_append(&shape, &stream, n, store.table()))
            .await
            && !appended.duplicate_request
        {
            written += shape.events + u64::from(shape.request.is_some()) + u64::from(shape.write);
        }
    }
    PerAppend {
        requests: (store.requests() - requests) as f64 / 20.0,
        consumed: scaled(store.consumed().since(&consumed), 20.0),
        written: written as f64 / 20.0,
        keys: Some(per_append(keys.usage(), keys_before)),
    }
}

/// The key item's usage since `before`, per append of 20.
fn per_append(now: Usage, before: Usage) -> Usage {
    Usage {
        requests: now.requests - before.requests,
        failed: now.failed - before.failed,
        read_units: (now.read_units - before.read_units) / 20.0,
        write_units: (now.write_units - before.write_units) / 20.0,
    }
}

pub async fn measure_heads(heads: &mut HeadLayout, kind: Kind) -> PerAppend {
    if kind.setup() {
        let (stream, shape) = kind.shape("heads", 0);
        let _ = heads.append(&shape, &stream, 0).await;
    }
    let (requests, consumed) = (heads.requests, heads.consumed);
    let mut written = 0;
    for n in 1..=20 {
        let (stream, shape) = kind.shape("heads", n);
        written += heads.append(&shape, &stream, n).await.unwrap_or(0);
    }
    PerAppend {
        requests: (heads.requests - requests) as f64 / 20.0,
        consumed: scaled(heads.consumed.since(&consumed), 20.0),
        written: written as f64 / 20.0,
        keys: None,
    }
}

pub fn scaled(consumed: Consumed, by: f64) -> Consumed {
    let units = |units: Units| Units {
        write: units.write / by,
        read: units.read / by,
    };
    Consumed {
        reported: units(consumed.reported),
        by_rules: units(consumed.by_rules),
    }
}

/// Write and read units per append of each kind, today's layout (the head)
/// beside the event store's (no head), and the store with
/// `ExactCheck::ReadFirst`.
pub async fn print_units(client: Client, tables: &mut Tables) {
    tables.start(
        "producer-units",
        "Each kind of append, 20 of each (events of about 350 bytes, an order's name and email \
         sealed): requests and units by AWS's rules (a transaction's item 2 units a KB, a \
         ConditionCheck a transactional write), beside 0.2's layout (a head item in the same \
         transaction); the subject's key item apart",
        "scripts/bench",
        "append",
        &[
            "requests",
            "write units",
            "read units",
            "0.2: requests",
            "0.2: write units",
            "0.2: read units",
            "key item: requests",
            "key item: read units",
        ],
    );
    println!(
        "\n-- capacity units per append (20 of each; events of about 350 bytes, name and email sealed): requests, \
         write + read units by AWS's rules, items written (each a stream record);"
    );
    println!(
        "   [DynamoDB Local's own ReturnConsumedCapacity=TOTAL, which counts any transaction as 2 \
         and a failed condition as nothing]"
    );
    let mut heads = HeadLayout {
        client: client.clone(),
        table: "bench-events".to_owned(),
        requests: 0,
        consumed: Consumed::default(),
    };
    println!(
        "   (an order's name and email are sealed: + the key item's requests and units, \
         for the event store; a new stream is a new subject, its key made)"
    );
    let keys = Meter::default();
    let keys_client = keys.wrap(&client);
    let store = keyed_store(client.clone(), "bench-events", &keys_client);
    let read_first =
        keyed_store(client, "bench-events", &keys_client).with_exact_check(ExactCheck::ReadFirst);
    let row = |figures: &PerAppend| {
        let keys = figures.keys.map_or(String::new(), |keys| {
            format!(
                " + key item {:.2} req, {:.1} W + {:.1} R",
                keys.requests as f64 / 20.0,
                keys.write_units,
                keys.read_units
            )
        });
        format!(
            "{:.2} req, {:>4.1} W + {:.1} R, {:.1} items [{:.1} W + {:.1} R]{keys}",
            figures.requests,
            figures.consumed.by_rules.write,
            figures.consumed.by_rules.read,
            figures.written,
            figures.consumed.reported.write,
            figures.consumed.reported.read
        )
    };
    for kind in Kind::ALL {
        let today = measure_heads(&mut heads, kind).await;
        let new = measure_store(&store, &keys, kind, "store").await;
        println!("{:<44} head (0.2): {}", kind.label(), row(&today));
        println!("{:<44} no head:    {}", "", row(&new));
        record(tables, kind.label(), &new, Some(&today));
        if matches!(kind, Kind::Exact | Kind::ExactRequest | Kind::Stale) {
            let read = measure_store(&read_first, &keys, kind, "read-first").await;
            println!("{:<44} read first: {}", "", row(&read));
            let label = format!("{}, ExactCheck::ReadFirst", kind.label());
            record(tables, &label, &read, None);
        }
    }
}

/// One row of the units table: the event store's append, and 0.2's beside it.
fn record(tables: &mut Tables, row: &str, new: &PerAppend, today: Option<&PerAppend>) {
    let table = "producer-units";
    let cell = |column: &str, value: f64| Figure::cell(row, column, value, 2, "");
    tables.record(table, cell("requests", new.requests));
    tables.record(table, cell("write units", new.consumed.by_rules.write));
    tables.record(table, cell("read units", new.consumed.by_rules.read));
    if let Some(today) = today {
        tables.record(table, cell("0.2: requests", today.requests));
        tables.record(
            table,
            cell("0.2: write units", today.consumed.by_rules.write),
        );
        tables.record(table, cell("0.2: read units", today.consumed.by_rules.read));
    }
    if let Some(keys) = new.keys {
        tables.record(
            table,
            cell("key item: requests", keys.requests as f64 / 20.0),
        );
        tables.record(table, cell("key item: read units", keys.read_units));
    }
}
