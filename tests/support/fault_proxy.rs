//! A faulty HTTP proxy in front of DynamoDB Local: it throttles, answers 500,
//! holds requests without answering, and loses answers after the request took
//! effect, by a seeded schedule.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 400 ProvisionedThroughputExceededException, without forwarding.
    Throttle,
    /// 500 InternalServerError, without forwarding.
    ServerError,
    /// No answer at all for a while, without forwarding.
    Hang,
    /// Forwarded and done upstream; the answer never comes back.
    LostAnswer,
}

/// How many of each fault were injected, and requests forwarded.
#[derive(Debug, Default)]
pub struct Counts {
    pub forwarded: AtomicU64,
    pub throttled: AtomicU64,
    pub server_errors: AtomicU64,
    pub hung: AtomicU64,
    pub lost_answers: AtomicU64,
}

impl Counts {
    pub fn faults(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
            + self.server_errors.load(Ordering::Relaxed)
            + self.hung.load(Ordering::Relaxed)
            + self.lost_answers.load(Ordering::Relaxed)
    }

    pub fn summary(&self) -> String {
        format!(
            "{} forwarded, {} throttled, {} server errors, {} hung, {} lost answers",
            self.forwarded.load(Ordering::Relaxed),
            self.throttled.load(Ordering::Relaxed),
            self.server_errors.load(Ordering::Relaxed),
            self.hung.load(Ordering::Relaxed),
            self.lost_answers.load(Ordering::Relaxed)
        )
    }
}

struct Schedule {
    state: u64,
    percent: u64,
    faults: Vec<Fault>,
}

impl Schedule {
    fn next(&mut self) -> Option<Fault> {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let roll = (self.state >> 33) % 100;
        if roll >= self.percent || self.faults.is_empty() {
            return None;
        }
        let pick = (self.state >> 17) as usize % self.faults.len();
        Some(self.faults[pick])
    }
}

pub struct FaultProxy {
    pub endpoint: String,
    pub counts: Arc<Counts>,
    schedule: Arc<Mutex<Schedule>>,
}

impl FaultProxy {
    /// Proxies to `upstream` (host:port), faulting `percent` % of requests with
    /// one of `faults`, chosen by `seed`.
    pub async fn start(
        upstream: String,
        seed: u64,
        percent: u64,
        faults: Vec<Fault>,
    ) -> FaultProxy {
        Self::start_with_latency(upstream, seed, percent, faults, Duration::ZERO).await
    }

    /// As [`FaultProxy::start`], and every forwarded request waits `latency`
    /// first, as over a network between a function and DynamoDB.
    pub async fn start_with_latency(
        upstream: String,
        seed: u64,
        percent: u64,
        faults: Vec<Fault>,
        latency: Duration,
    ) -> FaultProxy {
        Self::start_paced(upstream, seed, percent, faults, latency, Duration::ZERO).await
    }

    /// A proxy that only counts, and makes a request wait `n` times `step`
    /// before it is forwarded, `n` its place among the requests in flight:
    /// requests a client sends at once come back one `step` apart, so that
    /// a test can act between them; one at a time, each waits one `step`.
    #[allow(dead_code)] // not every test binary that includes this file uses it
    pub async fn start_staggered(upstream: String, step: Duration) -> FaultProxy {
        Self::start_paced(upstream, 1, 0, vec![], Duration::ZERO, step).await
    }

    async fn start_paced(
        upstream: String,
        seed: u64,
        percent: u64,
        faults: Vec<Fault>,
        latency: Duration,
        step: Duration,
    ) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let counts = Arc::new(Counts::default());
        let schedule = Arc::new(Mutex::new(Schedule {
            state: seed,
            percent,
            faults,
        }));
        let (proxy_counts, proxy_schedule) = (counts.clone(), schedule.clone());
        let pace = Pace {
            latency,
            step,
            in_flight: Arc::new(AtomicU64::new(0)),
        };
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (counts, schedule, upstream, pace) = (
                    proxy_counts.clone(),
                    proxy_schedule.clone(),
                    upstream.clone(),
                    pace.clone(),
                );
                tokio::spawn(async move { serve(client, upstream, counts, schedule, pace).await });
            }
        });
        FaultProxy {
            endpoint,
            counts,
            schedule,
        }
    }

    /// From now on, fault `percent` % of requests.
    pub fn set_percent(&self, percent: u64) {
        self.schedule.lock().expect("schedule").percent = percent;
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
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

fn canned(status: &str, error_type: &str) -> Vec<u8> {
    let body = format!(
        "{{\"__type\":\"com.amazonaws.dynamodb.v20120810#{error_type}\",\"message\":\"injected\"}}"
    );
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: fault\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// How long each forwarded request waits: `latency`, and `step` times its
/// place among the requests in flight when it arrived (1 for the only one).
#[derive(Clone)]
struct Pace {
    latency: Duration,
    step: Duration,
    in_flight: Arc<AtomicU64>,
}

/// A request in flight, until it is answered or dropped.
struct InFlight(Arc<AtomicU64>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pace {
    fn enter(&self) -> (Duration, InFlight) {
        let place = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let staggered = self.step * u32::try_from(place).unwrap_or(u32::MAX);
        (self.latency + staggered, InFlight(self.in_flight.clone()))
    }
}

async fn serve(
    client: TcpStream,
    upstream: String,
    counts: Arc<Counts>,
    schedule: Arc<Mutex<Schedule>>,
    pace: Pace,
) {
    let mut client = BufReader::new(client);
    while let Some((head, body)) = read_message(&mut client).await {
        let fault = schedule.lock().expect("schedule").next();
        match fault {
            Some(Fault::Throttle) => {
                counts.throttled.fetch_add(1, Ordering::Relaxed);
                let reply = canned("400 Bad Request", "ProvisionedThroughputExceededException");
                if client.get_mut().write_all(&reply).await.is_err() {
                    return;
                }
                continue;
            }
            Some(Fault::ServerError) => {
                counts.server_errors.fetch_add(1, Ordering::Relaxed);
                let reply = canned("500 Internal Server Error", "InternalServerError");
                if client.get_mut().write_all(&reply).await.is_err() {
                    return;
                }
                continue;
            }
            Some(Fault::Hang) => {
                counts.hung.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(5)).await;
                return; // the connection closes without an answer
            }
            _ => {}
        }
        let (wait, _in_flight) = pace.enter();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let Ok(upstream_stream) = TcpStream::connect(&upstream).await else {
            return; // upstream down: the client sees the connection close
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
        counts.forwarded.fetch_add(1, Ordering::Relaxed);
        if fault == Some(Fault::LostAnswer) {
            counts.lost_answers.fetch_add(1, Ordering::Relaxed);
            return; // done upstream; the client never hears
        }
        let mut reply = reply_head.into_bytes();
        reply.extend_from_slice(&reply_body);
        if client.get_mut().write_all(&reply).await.is_err() {
            return;
        }
    }
}
