//! The workloads: SQS batches of the shop's events, as a queue delivers them
//! ((a) one aggregate, (b) ten aggregates, (c) ten duplicates, (d) the
//! realistic mix).

use std::collections::HashMap;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use serde_json::json;

use crate::rng::Rng;

pub fn message(id: String, group: &str, body: String) -> SqsMessage {
    let mut message = SqsMessage::default();
    message.message_id = Some(id);
    message.body = Some(body);
    message
        .attributes
        .insert("MessageGroupId".into(), group.into());
    message
        .attributes
        .insert("ApproximateReceiveCount".into(), "1".into());
    message
}

pub fn batch(messages: Vec<SqsMessage>) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = messages;
    event
}

fn product_event(product: &str, sequence: u64) -> String {
    let (event_type, data) = if sequence == 1 {
        (
            "ProductCreated",
            json!({ "name": "Desk lamp", "priceCents": 1000 }),
        )
    } else {
        (
            "ProductPriceChanged",
            json!({ "priceCents": 1000 + sequence }),
        )
    };
    json!({ "eventId": format!("{product}-{sequence}"), "type": event_type, "aggregateId": product,
            "sequence": sequence, "data": data })
    .to_string()
}

pub fn order_event(order: &str, sequence: u64) -> String {
    let event_type = if sequence == 1 {
        "OrderCreated"
    } else {
        "OrderUpdated"
    };
    json!({ "eventId": format!("{order}-{sequence}"), "type": event_type, "aggregateId": order, "sequence": sequence,
            "data": { "customerName": "Ada Lovelace", "email": "ada@example.com", "totalCents": 100 * sequence } })
    .to_string()
}

pub struct Workload {
    pub name: &'static str,
    /// Batches run first and not measured (to create what the workload updates).
    pub setup: Vec<SqsEvent>,
    pub batches: Vec<SqsEvent>,
}

pub fn one_aggregate() -> Workload {
    let messages = (1..=10)
        .map(|s| message(format!("a-{s}"), "product-a", product_event("product-a", s)))
        .collect();
    Workload {
        name: "(a) one aggregate, 10 events",
        setup: vec![],
        batches: vec![batch(messages)],
    }
}

/// A hot stream in a warm process: its next 10 events, after the 10 the
/// same process wrote.
pub fn one_aggregate_next() -> Workload {
    let events = |range: std::ops::RangeInclusive<u64>| {
        batch(
            range
                .map(|s| message(format!("a-{s}"), "product-a", product_event("product-a", s)))
                .collect(),
        )
    };
    Workload {
        name: "(a) one aggregate, its next 10 events",
        setup: vec![events(1..=10)],
        batches: vec![events(11..=20)],
    }
}

fn ten_updates() -> SqsEvent {
    batch(
        (0..10)
            .map(|n| {
                let id = format!("product-b{n}");
                message(format!("{id}-2"), &id, product_event(&id, 2))
            })
            .collect(),
    )
}

fn ten_creations() -> SqsEvent {
    batch(
        (0..10)
            .map(|n| {
                let id = format!("product-b{n}");
                message(format!("{id}-1"), &id, product_event(&id, 1))
            })
            .collect(),
    )
}

pub fn ten_aggregates() -> Workload {
    Workload {
        name: "(b) 10 aggregates, one update each",
        setup: vec![ten_creations()],
        batches: vec![ten_updates()],
    }
}

pub fn ten_duplicates() -> Workload {
    Workload {
        name: "(c) 10 duplicates",
        setup: vec![ten_creations(), ten_updates()],
        batches: vec![ten_updates()],
    }
}

/// 1,000 aggregates (700 products, 200 orders, 100 skus), activity skewed
/// (Zipf-like), 1 % producer resends, in send order, batches of 10.
pub fn realistic_mix(messages: usize, seed: u64) -> Workload {
    let mut rng = Rng(seed);
    let aggregates = 1000usize;
    let weights: Vec<f64> = (1..=aggregates)
        .map(|rank| 1.0 / (rank as f64).powf(1.1))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut cumulative = Vec::with_capacity(aggregates);
    let mut sum = 0.0;
    for weight in &weights {
        sum += weight / total;
        cumulative.push(sum);
    }
    // Shuffle which aggregate gets which rank.
    let mut ids: Vec<usize> = (0..aggregates).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    let mut next_sequence: HashMap<usize, u64> = HashMap::new();
    let mut sent: Vec<(String, String)> = Vec::new(); // (group, body)
    let mut out = Vec::with_capacity(messages);
    while out.len() < messages {
        if !sent.is_empty() && rng.unit() < 0.01 {
            let (group, body) = sent[(rng.next() % sent.len() as u64) as usize].clone();
            out.push(message(format!("m{}", out.len()), &group, body));
            continue;
        }
        let roll = rng.unit();
        let rank = cumulative
            .partition_point(|c| *c < roll)
            .min(aggregates - 1);
        let aggregate = ids[rank];
        let (group, body) = if aggregate < 700 {
            let id = format!("product-{aggregate}");
            let sequence = next_sequence.entry(aggregate).or_insert(0);
            *sequence += 1;
            let body = product_event(&id, *sequence);
            (id, body)
        } else if aggregate < 900 {
            let id = format!("order-{aggregate}");
            let sequence = next_sequence.entry(aggregate).or_insert(0);
            *sequence += 1;
            let body = order_event(&id, *sequence);
            (id, body)
        } else {
            let sku = format!("SKU-{aggregate}");
            let body =
                json!({ "eventId": format!("adjust-{}", out.len()), "type": "InventoryAdjusted",
                               "data": { "sku": sku, "delta": (rng.next() % 7) as i64 - 3 } })
                .to_string();
            (sku, body)
        };
        sent.push((group.clone(), body.clone()));
        out.push(message(format!("m{}", out.len()), &group, body));
    }
    let batches = out.chunks(10).map(|chunk| batch(chunk.to_vec())).collect();
    Workload {
        name: "(d) 1,000 aggregates, skewed, 1% resends",
        setup: vec![],
        batches,
    }
}
