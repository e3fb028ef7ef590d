//! Markers found: every item of a table, every attribute, recursively
//! (strings, numbers, bytes, sets, lists and maps), as text.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use sequence_guard::store::dynamodb::connect;

use crate::support::dynamodb_local;

pub type Item = HashMap<String, AttributeValue>;

/// Where a text was found: the item's keys and the attribute's path
/// (`data.customerName`, `streams[0]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub pk: String,
    pub sk: String,
    pub path: String,
}

/// Every item of `table`, read consistently, page by page.
pub async fn all_items(table: &str) -> Vec<Item> {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let output = client
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap_or_else(|err| panic!("scan {table}: {err:?}"));
        items.extend(output.items.unwrap_or_default());
        start = output.last_evaluated_key;
        if start.is_none() {
            return items;
        }
    }
}

/// An item's attribute as text (`S`), or "".
pub fn text<'a>(item: &'a Item, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(text)) => text,
        _ => "",
    }
}

/// Every place in `table` where `needle` is found, in any attribute.
pub async fn hits(table: &str, needle: &str) -> Vec<Hit> {
    let mut hits = Vec::new();
    for item in all_items(table).await {
        let (pk, sk) = (text(&item, "pk").to_owned(), text(&item, "sk").to_owned());
        let mut texts = Vec::new();
        for (name, value) in &item {
            flatten(name.clone(), value, &mut texts);
        }
        hits.extend(
            texts
                .into_iter()
                .filter(|(_, text)| text.contains(needle))
                .map(|(path, _)| Hit {
                    pk: pk.clone(),
                    sk: sk.clone(),
                    path,
                }),
        );
    }
    hits.sort();
    hits
}

/// The number of attribute values of `table` that hold `needle`.
pub async fn count(table: &str, needle: &str) -> usize {
    hits(table, needle).await.len()
}

fn flatten(path: String, value: &AttributeValue, out: &mut Vec<(String, String)>) {
    match value {
        AttributeValue::S(text) | AttributeValue::N(text) => out.push((path, text.clone())),
        AttributeValue::B(bytes) => {
            out.push((path, String::from_utf8_lossy(bytes.as_ref()).into_owned()));
        }
        AttributeValue::Ss(texts) | AttributeValue::Ns(texts) => {
            for (index, text) in texts.iter().enumerate() {
                out.push((format!("{path}[{index}]"), text.clone()));
            }
        }
        AttributeValue::Bs(all) => {
            for (index, bytes) in all.iter().enumerate() {
                out.push((
                    format!("{path}[{index}]"),
                    String::from_utf8_lossy(bytes.as_ref()).into_owned(),
                ));
            }
        }
        AttributeValue::L(values) => {
            for (index, value) in values.iter().enumerate() {
                flatten(format!("{path}[{index}]"), value, out);
            }
        }
        AttributeValue::M(values) => {
            for (name, value) in values {
                flatten(format!("{path}.{name}"), value, out);
            }
        }
        AttributeValue::Bool(_) | AttributeValue::Null(_) => {}
        other => out.push((path, format!("{other:?}"))),
    }
}

/// The item `pk` / `sk` of `table`, as stored now.
pub async fn item(table: &str, pk: &str, sk: &str) -> Option<Item> {
    let client = connect(Some(&dynamodb_local().endpoint)).await;
    client
        .get_item()
        .table_name(table)
        .key("pk", AttributeValue::S(pk.to_owned()))
        .key("sk", AttributeValue::S(sk.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .unwrap_or_else(|err| panic!("get {pk} {sk} from {table}: {err:?}"))
        .item
}

/// An item's attributes but `except`, for comparing what must not change.
pub fn without(item: &Item, except: &[&str]) -> Item {
    item.iter()
        .filter(|(name, _)| !except.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// An item's number attribute.
pub fn number(item: &Item, name: &str) -> u64 {
    match item.get(name) {
        Some(AttributeValue::N(number)) => number.parse().unwrap_or_else(|_| panic!("{number}")),
        other => panic!("{name}: {other:?}"),
    }
}
