//! A stand-in for SQS, for the dispatcher's cold start: it answers
//! `SendMessageBatch` (every entry taken) and `SendMessage` in the AWS JSON
//! 1.0 protocol the SDK speaks, over plain HTTP/1.1 with keep-alive, at once.
//! `scripts/tls-proxy.py` in front of it makes the TLS endpoint.
//!
//! Why not LocalStack: the figure is the function's own cost (its TLS start,
//! its handshakes, its requests); LocalStack's Python answers in milliseconds
//! that vary from run to run and that SQS does not add.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use md5::{Digest, Md5};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::runtime_api::read_request;

/// The stand-in, serving until the process ends.
pub struct SqsStandIn {
    /// Connections accepted so far.
    connections: Arc<AtomicU64>,
}

impl SqsStandIn {
    /// Listens on 127.0.0.1:`port` (plain HTTP); `None` if it cannot.
    pub async fn start(port: u16) -> Option<SqsStandIn> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.ok()?;
        let connections = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&connections);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream));
            }
        });
        Some(SqsStandIn { connections })
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

fn md5_hex(body: &str) -> String {
    Md5::digest(body.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The answer to one request body: a batch (`Entries`) all taken, or one
/// message sent.
fn answer(request: &Value) -> Value {
    let text = |value: &Value, field: &str| {
        value
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match request.get("Entries").and_then(Value::as_array) {
        Some(entries) => {
            let successful: Vec<Value> = entries
                .iter()
                .enumerate()
                .map(|(index, entry)| {
                    json!({
                        "Id": text(entry, "Id"),
                        "MessageId": format!("stand-in-{index}"),
                        "MD5OfMessageBody": md5_hex(&text(entry, "MessageBody")),
                        "SequenceNumber": format!("{:020}", index + 1),
                    })
                })
                .collect();
            json!({ "Successful": successful, "Failed": [] })
        }
        None => json!({
            "MessageId": "stand-in-report",
            "MD5OfMessageBody": md5_hex(&text(request, "MessageBody")),
        }),
    }
}

async fn serve(stream: tokio::net::TcpStream) {
    let mut stream = BufReader::new(stream);
    while let Some((_method, _path, body)) = read_request(&mut stream).await {
        let reply = serde_json::from_str::<Value>(&body)
            .map(|request| answer(&request).to_string())
            .unwrap_or_else(|_| r#"{"__type":"InvalidParameterValue"}"#.to_owned());
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n\
             x-amzn-RequestId: stand-in\r\nContent-Length: {}\r\n\r\n",
            reply.len()
        );
        let stream = stream.get_mut();
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(reply.as_bytes()).await.is_err()
        {
            return;
        }
    }
}
