//! A local Lambda Runtime API (2018-06-01), enough to drive a real
//! `lambda_runtime` binary: `next`, `response`, `error` and `init/error`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// What the function answered for one invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Response(String),
    Error(String),
}

#[derive(Default)]
struct State {
    queue: VecDeque<(String, String)>,
    /// Invocations handed to the function, by id.
    handed: Vec<String>,
    answers: Vec<(String, Answer)>,
    first_next: Option<Instant>,
    invocations: u64,
    /// The deadline handed out, from now, in ms (30 s unless set).
    deadline_in_ms: Option<i64>,
}

#[derive(Clone)]
pub struct RuntimeApi {
    pub address: String,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

impl RuntimeApi {
    pub async fn start() -> RuntimeApi {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let api = RuntimeApi {
            address,
            state: Arc::default(),
            changed: Arc::default(),
        };
        let server = api.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let api = server.clone();
                tokio::spawn(async move { api.serve(stream).await });
            }
        });
        api
    }

    /// The deadline of the invocations handed out from now on, from the
    /// moment each is handed out (negative: already past).
    #[allow(dead_code)] // not every test binary uses it
    pub fn set_deadline_in_ms(&self, ms: i64) {
        self.state.lock().expect("state").deadline_in_ms = Some(ms);
    }

    /// When the function first asked for work.
    pub fn first_next(&self) -> Option<Instant> {
        self.state.lock().expect("state").first_next
    }

    /// Hands `event` to the function and waits for its answer.
    pub async fn invoke(&self, event: &str) -> Answer {
        let id = {
            let mut state = self.state.lock().expect("state");
            state.invocations += 1;
            let id = format!("request-{}", state.invocations);
            state.queue.push_back((id.clone(), event.to_owned()));
            id
        };
        self.changed.notify_waiters();
        let wait = async {
            loop {
                let notified = self.changed.notified();
                if let Some(answer) = self.answer(&id) {
                    return answer;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("the function answered within 60 s")
    }

    /// The function's process died: every invocation it was given and did
    /// not answer fails, as Lambda reports `Runtime.ExitError`.
    #[allow(dead_code)] // not every test binary uses it
    pub fn crashed(&self) {
        let mut state = self.state.lock().expect("state");
        let unanswered: Vec<String> = state
            .handed
            .iter()
            .filter(|id| !state.answers.iter().any(|(answered, _)| answered == *id))
            .cloned()
            .collect();
        for id in unanswered {
            let error = r#"{"errorType":"Runtime.ExitError","errorMessage":"the process exited"}"#;
            state.answers.push((id, Answer::Error(error.to_owned())));
        }
        drop(state);
        self.changed.notify_waiters();
    }

    fn answer(&self, id: &str) -> Option<Answer> {
        let state = self.state.lock().expect("state");
        state
            .answers
            .iter()
            .find(|(answered, _)| answered == id)
            .map(|(_, answer)| answer.clone())
    }

    async fn next_event(&self) -> (String, String) {
        loop {
            let notified = self.changed.notified();
            {
                let mut state = self.state.lock().expect("state");
                state.first_next.get_or_insert_with(Instant::now);
                if let Some(event) = state.queue.pop_front() {
                    state.handed.push(event.0.clone());
                    return event;
                }
            }
            notified.await;
        }
    }

    async fn serve(&self, stream: TcpStream) {
        let mut stream = BufReader::new(stream);
        loop {
            let Some((method, path, body)) = read_request(&mut stream).await else {
                return;
            };
            let (status, headers, reply) = if method == "GET"
                && path.ends_with("/runtime/invocation/next")
            {
                let (id, event) = self.next_event().await;
                let offset = self
                    .state
                    .lock()
                    .expect("state")
                    .deadline_in_ms
                    .unwrap_or(30_000);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .expect("clock")
                    .as_millis();
                let deadline = now.saturating_add_signed(i128::from(offset));
                let headers = format!(
                    "Lambda-Runtime-Aws-Request-Id: {id}\r\nLambda-Runtime-Deadline-Ms: {deadline}\r\n\
                     Lambda-Runtime-Invoked-Function-Arn: arn:aws:lambda:us-east-1:123456789012:function:sequence-guard\r\n\
                     Lambda-Runtime-Trace-Id: Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1\r\n\
                     Content-Type: application/json\r\n"
                );
                ("200 OK", headers, event)
            } else if method == "POST" && path.ends_with("/runtime/init/error") {
                let _ = body; // the function reported an init error: it exits next
                ("202 Accepted", String::new(), "{}".to_owned())
            } else if method == "POST" && (path.ends_with("/response") || path.ends_with("/error"))
            {
                let id = path.split('/').rev().nth(1).unwrap_or_default().to_owned();
                let answer = if path.ends_with("/response") {
                    Answer::Response(body)
                } else {
                    Answer::Error(body)
                };
                self.state.lock().expect("state").answers.push((id, answer));
                self.changed.notify_waiters();
                ("202 Accepted", String::new(), "{}".to_owned())
            } else {
                ("404 Not Found", String::new(), "{}".to_owned())
            };
            let head = format!(
                "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n",
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
}

/// Reads one HTTP/1.1 request: method, path and body (by length or chunked).
pub async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<(String, String, String)> {
    let mut line = String::new();
    if stream.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        stream.read_line(&mut header).await.ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            stream.read_line(&mut size).await.ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            stream.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        stream.read_exact(&mut body).await.ok()?;
    }
    Some((method, path, String::from_utf8_lossy(&body).into_owned()))
}
