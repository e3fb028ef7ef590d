//! A proxy in front of DynamoDB Local that faults one operation only (by
//! its `X-Amz-Target`), the next so many times it is sent: a 500 without
//! forwarding (nothing written), or its answer lost after DynamoDB Local
//! took it (written, and the caller does not know); or held a while before
//! it is forwarded, so that two callers that read at once also write at
//! once. The shared fault proxy
//! faults requests whatever their operation; a step's transaction comes
//! after its reads, which must go through.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 500 InternalServerError, without forwarding.
    ServerError,
    /// Forwarded and done upstream; the answer never comes back.
    LostAnswer,
}

pub struct OperationFaults {
    pub endpoint: String,
    state: Arc<State>,
}

struct State {
    target: String,
    /// How many of the operation's next requests to fault.
    armed: AtomicU64,
    /// 0: `ServerError`, 1: `LostAnswer`.
    fault: AtomicU64,
    /// The operation's requests seen, and those faulted.
    seen: AtomicU64,
    faulted: AtomicU64,
    /// How long each of the operation's requests is held, milliseconds.
    delay: AtomicU64,
}

impl OperationFaults {
    /// A proxy to `upstream` (host:port) faulting `operation`
    /// (`TransactWriteItems`) once armed.
    pub async fn start(upstream: String, operation: &str) -> OperationFaults {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(State {
            target: format!("dynamodb_20120810.{}", operation.to_ascii_lowercase()),
            armed: AtomicU64::new(0),
            fault: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            delay: AtomicU64::new(0),
        });
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (state, upstream) = (shared.clone(), upstream.clone());
                tokio::spawn(async move { serve(client, upstream, state).await });
            }
        });
        OperationFaults { endpoint, state }
    }

    /// Faults the operation's next `times` requests with `fault`.
    pub fn arm(&self, fault: Fault, times: u64) {
        let code = u64::from(fault == Fault::LostAnswer);
        self.state.fault.store(code, Ordering::SeqCst);
        self.state.armed.store(times, Ordering::SeqCst);
    }

    /// Holds each of the operation's requests `delay` before forwarding it.
    pub fn delay(&self, delay: std::time::Duration) {
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.delay.store(millis, Ordering::SeqCst);
    }

    /// Faults nothing more.
    pub fn disarm(&self) {
        self.state.armed.store(0, Ordering::SeqCst);
    }

    /// The operation's requests seen so far.
    pub fn seen(&self) -> u64 {
        self.state.seen.load(Ordering::SeqCst)
    }

    /// The operation's requests faulted so far.
    pub fn faulted(&self) -> u64 {
        self.state.faulted.load(Ordering::SeqCst)
    }
}

/// One HTTP/1.1 message: head (start line and headers) and body.
async fn read_message(stream: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
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
    let header = |wanted: &str| {
        head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_owned())
        })
    };
    let length = header("content-length")
        .and_then(|value| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

fn target_of(head: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("x-amz-target")
                .then(|| value.trim().to_ascii_lowercase())
        })
        .unwrap_or_default()
}

const SERVER_ERROR: &str = "{\"__type\":\"com.amazonaws.dynamodb.v20120810#InternalServerError\",\"message\":\"injected\"}";

async fn serve(client: TcpStream, upstream: String, state: Arc<State>) {
    let mut client = BufReader::new(client);
    while let Some((head, body)) = read_message(&mut client).await {
        let mut fault = None;
        if target_of(&head) == state.target {
            state.seen.fetch_add(1, Ordering::SeqCst);
            let delay = state.delay.load(Ordering::SeqCst);
            if delay > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            }
            let taken = state
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |armed| {
                    armed.checked_sub(1)
                });
            if taken.is_ok() {
                state.faulted.fetch_add(1, Ordering::SeqCst);
                fault = Some(if state.fault.load(Ordering::SeqCst) == 1 {
                    Fault::LostAnswer
                } else {
                    Fault::ServerError
                });
            }
        }
        if fault == Some(Fault::ServerError) {
            let reply = format!(
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/x-amz-json-1.0\r\n\
                 x-amzn-RequestId: fault\r\nContent-Length: {}\r\n\r\n{SERVER_ERROR}",
                SERVER_ERROR.len()
            );
            if client.get_mut().write_all(reply.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        let Ok(upstream_stream) = TcpStream::connect(&upstream).await else {
            return;
        };
        let mut upstream_stream = BufReader::new(upstream_stream);
        let mut request = head.into_bytes();
        request.extend_from_slice(&body);
        if upstream_stream.get_mut().write_all(&request).await.is_err() {
            return;
        }
        let Some((reply_head, reply_body)) = read_message(&mut upstream_stream).await else {
            return;
        };
        if fault == Some(Fault::LostAnswer) {
            return; // done upstream; the client never hears
        }
        let mut reply = reply_head.into_bytes();
        reply.extend_from_slice(&reply_body);
        if client.get_mut().write_all(&reply).await.is_err() {
            return;
        }
    }
}
