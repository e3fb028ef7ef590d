//! An HTTP proxy in front of LocalStack's SQS or SNS that deduplicates as
//! AWS does: an entry of a `SendMessageBatch` or `PublishBatch` whose
//! `MessageDeduplicationId` the same queue or topic took within the last
//! five minutes is answered as taken and never delivered. LocalStack's FIFO
//! topics do not deduplicate a repeated publish, so without this a test of
//! a resend would pass for the wrong reason.
//!
//! It reads what the SDKs send: SQS's JSON protocol (`X-Amz-Target:
//! AmazonSQS.SendMessageBatch`) and SNS's query protocol
//! (`Action=PublishBatch`, form-encoded). Every other request goes through
//! as it is.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use md5::{Digest, Md5};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// How long SQS and SNS remember a deduplication id.
pub const WINDOW: Duration = Duration::from_secs(5 * 60);

/// What the proxy remembers: by (queue URL or topic ARN, deduplication id),
/// when it was first taken; and every id it dropped.
#[derive(Default)]
struct Seen {
    taken: HashMap<(String, String), Instant>,
    dropped: Vec<String>,
}

pub struct DedupProxy {
    pub endpoint: String,
    seen: Arc<Mutex<Seen>>,
}

impl DedupProxy {
    /// Proxies to `upstream` (host:port).
    pub async fn start(upstream: String) -> DedupProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (seen, upstream) = (shared.clone(), upstream.clone());
                tokio::spawn(async move { serve(client, upstream, seen).await });
            }
        });
        DedupProxy { endpoint, seen }
    }

    /// The deduplication ids dropped so far, in order.
    pub fn dropped(&self) -> Vec<String> {
        self.seen.lock().expect("seen").dropped.clone()
    }
}

/// One HTTP/1.1 message: head (start line and headers) and body.
async fn read_message<R: AsyncBufReadExt + Unpin>(stream: &mut R) -> Option<(String, Vec<u8>)> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let end = line == "\r\n";
        head.push_str(&line);
        if end {
            break;
        }
    }
    let length = header(&head, "content-length")
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The head with its `Content-Length` set to `length`.
fn with_length(head: &str, length: usize) -> String {
    head.split("\r\n")
        .map(|line| match line.split_once(':') {
            Some((key, _)) if key.eq_ignore_ascii_case("content-length") => {
                format!("{key}: {length}")
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\r\n")
}

/// A batch request, read: the target, and each entry's (`Id`,
/// `MessageDeduplicationId`).
struct Batch {
    target: String,
    entries: Vec<(String, String)>,
    protocol: Protocol,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Sqs,
    Sns,
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[index], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                index += 2;
            }
            (b'+', _) => out.push(b' '),
            (byte, _) => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The form's pairs, raw (still encoded).
fn pairs(form: &str) -> Vec<(String, String)> {
    form.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key.to_owned(), value.to_owned())
        })
        .collect()
}

/// `PublishBatchRequestEntries.member.<n>.<field>`: (n, field).
fn member(key: &str) -> Option<(usize, &str)> {
    let rest = key.strip_prefix("PublishBatchRequestEntries.member.")?;
    let (n, field) = rest.split_once('.')?;
    Some((n.parse().ok()?, field))
}

fn read_batch(head: &str, body: &[u8]) -> Option<Batch> {
    if header(head, "x-amz-target") == Some("AmazonSQS.SendMessageBatch") {
        let request: Value = serde_json::from_slice(body).ok()?;
        let entries = request["Entries"]
            .as_array()?
            .iter()
            .map(|entry| {
                let field = |name: &str| entry[name].as_str().unwrap_or_default().to_owned();
                (field("Id"), field("MessageDeduplicationId"))
            })
            .collect();
        return Some(Batch {
            target: request["QueueUrl"].as_str()?.to_owned(),
            entries,
            protocol: Protocol::Sqs,
        });
    }
    let form = std::str::from_utf8(body).ok()?;
    let pairs = pairs(form);
    let value = |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| percent_decode(value))
    };
    if value("Action").as_deref() != Some("PublishBatch") {
        return None;
    }
    let mut members: Vec<(usize, String, String)> = Vec::new();
    for (key, raw) in &pairs {
        let Some((n, field)) = member(key) else {
            continue;
        };
        let slot = match members.iter().position(|(m, ..)| *m == n) {
            Some(slot) => slot,
            None => {
                members.push((n, String::new(), String::new()));
                members.len() - 1
            }
        };
        match field {
            "Id" => members[slot].1 = percent_decode(raw),
            "MessageDeduplicationId" => members[slot].2 = percent_decode(raw),
            _ => {}
        }
    }
    members.sort_by_key(|(n, ..)| *n);
    Some(Batch {
        target: value("TopicArn")?,
        entries: members
            .into_iter()
            .map(|(_, id, dedup)| (id, dedup))
            .collect(),
        protocol: Protocol::Sns,
    })
}

/// The request without the entries `drop` names (by `Id`).
fn without(batch: &Batch, body: &[u8], drop: &[String]) -> Vec<u8> {
    match batch.protocol {
        Protocol::Sqs => {
            let mut request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            if let Some(entries) = request["Entries"].as_array_mut() {
                entries.retain(|entry| {
                    !drop
                        .iter()
                        .any(|id| entry["Id"].as_str() == Some(id.as_str()))
                });
            }
            request.to_string().into_bytes()
        }
        Protocol::Sns => {
            let form = String::from_utf8_lossy(body);
            let all = pairs(&form);
            // The members kept, numbered again from 1.
            let mut numbers: Vec<usize> = all
                .iter()
                .filter_map(|(key, _)| member(key).map(|(n, _)| n))
                .collect();
            numbers.sort_unstable();
            numbers.dedup();
            let dropped: Vec<usize> = numbers
                .iter()
                .copied()
                .filter(|n| {
                    all.iter().any(|(key, raw)| {
                        member(key) == Some((*n, "Id")) && drop.contains(&percent_decode(raw))
                    })
                })
                .collect();
            let kept: Vec<usize> = numbers
                .into_iter()
                .filter(|n| !dropped.contains(n))
                .collect();
            all.iter()
                .filter_map(|(key, raw)| match member(key) {
                    None => Some(format!("{key}={raw}")),
                    Some((n, field)) => {
                        let place = kept.iter().position(|k| *k == n)? + 1;
                        Some(format!(
                            "PublishBatchRequestEntries.member.{place}.{field}={raw}"
                        ))
                    }
                })
                .collect::<Vec<_>>()
                .join("&")
                .into_bytes()
        }
    }
}

/// A success answer for each dropped entry, as the service gives one.
fn md5_hex(text: &str) -> String {
    Md5::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn sqs_successes(body: &[u8], drop: &[String]) -> Vec<Value> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    request["Entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| {
            drop.iter()
                .any(|id| entry["Id"].as_str() == Some(id.as_str()))
        })
        .map(|entry| {
            json!({
                "Id": entry["Id"],
                "MessageId": format!("dropped-{}", entry["Id"].as_str().unwrap_or_default()),
                "MD5OfMessageBody": md5_hex(entry["MessageBody"].as_str().unwrap_or_default()),
                "SequenceNumber": "10000000000000000000",
            })
        })
        .collect()
}

fn sns_members(drop: &[String]) -> String {
    drop.iter()
        .map(|id| {
            format!(
                "<member><Id>{id}</Id><MessageId>dropped-{id}</MessageId>\
                 <SequenceNumber>10000000000000000000</SequenceNumber></member>"
            )
        })
        .collect()
}

/// The service's answer, with the dropped entries answered as taken.
fn with_successes(batch: &Batch, request: &[u8], reply: &[u8], drop: &[String]) -> Vec<u8> {
    match batch.protocol {
        Protocol::Sqs => {
            let mut answer: Value = serde_json::from_slice(reply).unwrap_or(json!({}));
            let mut successful = answer["Successful"].as_array().cloned().unwrap_or_default();
            successful.extend(sqs_successes(request, drop));
            answer["Successful"] = Value::Array(successful);
            answer.to_string().into_bytes()
        }
        Protocol::Sns => {
            let text = String::from_utf8_lossy(reply);
            let members = sns_members(drop);
            let text = if text.contains("<Successful>") {
                text.replacen("<Successful>", &format!("<Successful>{members}"), 1)
            } else {
                text.replacen(
                    "<Successful/>",
                    &format!("<Successful>{members}</Successful>"),
                    1,
                )
            };
            text.into_bytes()
        }
    }
}

/// The whole answer when every entry is dropped (nothing forwarded).
fn all_dropped(batch: &Batch, request: &[u8], drop: &[String]) -> Vec<u8> {
    let (content_type, body) = match batch.protocol {
        Protocol::Sqs => (
            "application/x-amz-json-1.0",
            json!({"Successful": sqs_successes(request, drop), "Failed": []}).to_string(),
        ),
        Protocol::Sns => (
            "text/xml",
            format!(
                "<PublishBatchResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\">\
                 <PublishBatchResult><Successful>{}</Successful><Failed/></PublishBatchResult>\
                 <ResponseMetadata><RequestId>dedup-proxy</RequestId></ResponseMetadata>\
                 </PublishBatchResponse>",
                sns_members(drop)
            ),
        ),
    };
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nx-amzn-RequestId: dedup-proxy\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Which entries (by `Id`) the service would drop; the others are
/// remembered as taken from now.
fn deduplicate(seen: &Mutex<Seen>, batch: &Batch) -> Vec<String> {
    let mut seen = seen.lock().expect("seen");
    let now = Instant::now();
    let mut drop = Vec::new();
    for (id, dedup) in &batch.entries {
        let key = (batch.target.clone(), dedup.clone());
        match seen.taken.get(&key) {
            Some(at) if now.duration_since(*at) < WINDOW => {
                drop.push(id.clone());
                seen.dropped.push(dedup.clone());
            }
            _ => {
                seen.taken.insert(key, now);
            }
        }
    }
    drop
}

async fn forward(upstream: &str, head: &str, body: &[u8]) -> Option<(String, Vec<u8>)> {
    let stream = TcpStream::connect(upstream).await.ok()?;
    let mut stream = BufReader::new(stream);
    let mut request = with_length(head, body.len()).into_bytes();
    request.extend_from_slice(body);
    stream.get_mut().write_all(&request).await.ok()?;
    read_message(&mut stream).await
}

async fn serve(client: TcpStream, upstream: String, seen: Arc<Mutex<Seen>>) {
    let mut client = BufReader::new(client);
    while let Some((head, body)) = read_message(&mut client).await {
        let batch = read_batch(&head, &body);
        let drop = batch
            .as_ref()
            .map(|batch| deduplicate(&seen, batch))
            .unwrap_or_default();
        let reply = match &batch {
            Some(batch) if !drop.is_empty() && drop.len() == batch.entries.len() => {
                all_dropped(batch, &body, &drop)
            }
            Some(batch) if !drop.is_empty() => {
                let sent = without(batch, &body, &drop);
                let Some((reply_head, reply_body)) = forward(&upstream, &head, &sent).await else {
                    return;
                };
                let reply_body = with_successes(batch, &body, &reply_body, &drop);
                let mut reply = with_length(&reply_head, reply_body.len()).into_bytes();
                reply.extend_from_slice(&reply_body);
                reply
            }
            _ => {
                let Some((reply_head, reply_body)) = forward(&upstream, &head, &body).await else {
                    return;
                };
                let mut reply = reply_head.into_bytes();
                reply.extend_from_slice(&reply_body);
                reply
            }
        };
        if client.get_mut().write_all(&reply).await.is_err() {
            return;
        }
    }
}
