//! Starting the release `projector` and `dispatcher` against a local Runtime
//! API, as Lambda would: one start, its time to the first batch answered,
//! its CPU time, connections and peak memory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use sequence_guard::store::dynamodb::{connect, create_table};

use crate::{runtime_api, sqs_stand_in};

/// How the projector reaches DynamoDB for a start measurement.
pub struct Reach<'a> {
    /// Where the benchmark itself creates the table (plain HTTP).
    pub setup: &'a str,
    /// The endpoint the projector is given.
    pub function: &'a str,
    /// A CA file the projector trusts (`SSL_CERT_FILE`), for a TLS endpoint.
    pub ca: Option<&'a str>,
    /// The table, new.
    pub table: &'a str,
    /// `GLIBC_TUNABLES` for the function, as the template sets it.
    pub tunables: Option<&'a str>,
}

/// The `GLIBC_TUNABLES` the template gives the consumers' functions (glibc's
/// per-thread cache of freed blocks), read from `template.yaml`.
pub fn template_tunables() -> Option<&'static str> {
    include_str!("../../../template.yaml")
        .lines()
        .find_map(|line| line.trim().strip_prefix("GLIBC_TUNABLES:"))
        .map(|value| value.trim().trim_matches('"'))
}

/// What one start of a function measured.
pub struct Start {
    /// Process start to the first batch answered.
    pub first_batch: Duration,
    /// Peak memory (VmHWM) after the batches.
    pub peak_kb: u64,
    /// Connections the function opened to its service during the first batch.
    pub connections: usize,
    /// CPU time the function's threads had spent by the first batch answered
    /// (what Lambda bills, and at a fraction of a vCPU what its user waits).
    pub cpu: Duration,
    /// The same batch on other, new entities, answered by the same process
    /// right after the first (as many streams, reads and writes, on open
    /// connections): what the service takes, without the cold start.
    pub again: Option<Duration>,
}

/// The CPU time all threads of process `pid` have spent so far (Linux: the
/// first field of each `/proc/PID/task/TID/schedstat`, in nanoseconds).
pub fn cpu_time(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The release binary `name` beside the benchmark's directory
/// (`target/release/<name>`).
pub fn release_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join(name))
}

/// The port of an `http(s)://host:port` endpoint.
fn port_of(endpoint: &str) -> Option<u16> {
    endpoint
        .rsplit(':')
        .next()?
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// The TCP connections process `pid` holds to 127.0.0.1:`port` (Linux:
/// its socket inodes in /proc/PID/fd matched against /proc/PID/net/tcp).
fn connections_to(pid: u32, port: u16) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let inodes: std::collections::HashSet<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let remote = format!("0100007F:{port:04X}");
    std::fs::read_to_string(format!("/proc/{pid}/net/tcp"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&remote.as_str())
                && fields.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

/// The environment every function started here gets (a Lambda without AWS).
pub fn function_command(binary: &Path, api: &runtime_api::RuntimeApi) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "bench")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_LAMBDA_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Writes and reads an item no batch uses, so that the table is in use, as a
/// deployed function's is: DynamoDB Local's first requests on a new table
/// are slower than its later ones, and would be counted as the cold start.
pub async fn warm(client: &aws_sdk_dynamodb::Client, table: &str) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let key = [
        ("pk", AttributeValue::S("bench-warm".to_owned())),
        ("sk", AttributeValue::S("warm".to_owned())),
    ];
    let mut put = client.put_item().table_name(table);
    let mut get = client.get_item().table_name(table);
    for (name, value) in key {
        put = put.item(name, value.clone());
        get = get.key(name, value);
    }
    if let Err(err) = put.send().await {
        eprintln!("warming {table}: {err}");
    }
    let _ = get.send().await;
}

/// `batch` on other entities: every aggregate, sku and event id (and message
/// id and group) prefixed with `prefix`, so that it makes as many streams,
/// reads and writes as `batch` did, on nothing stored yet.
pub fn prefixed(batch: &SqsEvent, prefix: &str) -> SqsEvent {
    let mut again = batch.clone();
    for record in &mut again.records {
        let with = |id: &str| format!("{prefix}{id}");
        record.message_id = record.message_id.as_deref().map(with);
        record.body = record.body.as_deref().map(|body| {
            body.replace(r#""aggregateId":""#, &format!(r#""aggregateId":"{prefix}"#))
                .replace(r#""eventId":""#, &format!(r#""eventId":"{prefix}"#))
                .replace(r#""sku":""#, &format!(r#""sku":"{prefix}"#))
        });
        if let Some(group) = record.attributes.get_mut("MessageGroupId") {
            *group = with(group);
        }
    }
    again
}

/// The peak memory (VmHWM) of process `pid` so far, in kB.
pub fn peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Starts the release projector against a local Runtime API; returns the
/// time to the first batch answered, and (after running `batches`) its peak
/// memory.
pub async fn projector_figures(
    projector: &Path,
    reach: &Reach<'_>,
    batches: &[SqsEvent],
    again: bool,
) -> Option<Start> {
    if !projector.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release --bin projector`",
            projector.display()
        );
        return None;
    }
    let client = connect(Some(reach.setup)).await;
    create_table(&client, reach.table).await.ok()?;
    warm(&client, reach.table).await;
    let api = runtime_api::RuntimeApi::start().await;
    let mut command = function_command(projector, &api);
    if let Some(ca) = reach.ca {
        command.env("SSL_CERT_FILE", ca);
    }
    if let Some(tunables) = reach.tunables {
        command.env("GLIBC_TUNABLES", tunables);
    }
    command
        .env("TABLE_NAME", reach.table)
        .env("AWS_ENDPOINT_URL_DYNAMODB", reach.function);
    let started = Instant::now();
    let mut child = command.spawn().ok()?;
    let pid = child.id()?;
    let mut first_batch = None;
    let mut connections = 0;
    let mut cpu = Duration::ZERO;
    let mut again_took = None;
    for event in batches {
        let body = serde_json::to_string(event).ok()?;
        api.invoke(&body).await;
        // The cold start a user sees: process start to the first batch
        // answered (credentials, the first connection, the first requests).
        if first_batch.is_none() {
            first_batch = Some(started.elapsed());
            connections = port_of(reach.function).map_or(0, |port| connections_to(pid, port));
            cpu = cpu_time(pid);
            if again {
                let body = serde_json::to_string(&prefixed(event, "again-")).ok()?;
                let began = Instant::now();
                api.invoke(&body).await;
                again_took = Some(began.elapsed());
            }
        }
    }
    let peak_kb = peak_kb(pid)?;
    let _ = child.kill().await;
    Some(Start {
        first_batch: first_batch?,
        peak_kb,
        connections,
        cpu,
        again: again_took,
    })
}

/// The dispatcher's first stream batch (the worked example's, three records:
/// one `SendMessageBatch`).
const STREAM_BATCH: &str = include_str!("../../../events/dispatcher/stream-batch.json");

/// Starts the release dispatcher against a local Runtime API, sending to the
/// SQS stand-in at `endpoint` (plain, or through the TLS proxy with `ca`
/// trusted); returns the time to the first batch answered and the
/// connections it opened, or `None` if it failed.
pub async fn dispatcher_start(
    dispatcher: &Path,
    endpoint: &str,
    ca: Option<&str>,
    stand_in: &sqs_stand_in::SqsStandIn,
) -> Option<Start> {
    if !dispatcher.exists() {
        eprintln!(
            "{} not found: build it with `cargo build --release --bin dispatcher`",
            dispatcher.display()
        );
        return None;
    }
    let api = runtime_api::RuntimeApi::start().await;
    let mut command = function_command(dispatcher, &api);
    if let Some(ca) = ca {
        command.env("SSL_CERT_FILE", ca);
    }
    command
        .env(
            "QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench.fifo",
        )
        .env(
            "FAILURE_QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench-failures",
        )
        .env("AWS_ENDPOINT_URL_SQS", endpoint);
    let before = stand_in.connections();
    let started = Instant::now();
    let mut child = command.spawn().ok()?;
    let answer = api.invoke(STREAM_BATCH).await;
    let first_batch = started.elapsed();
    let cpu = child.id().map_or(Duration::ZERO, cpu_time);
    let connections = stand_in.connections().saturating_sub(before) as usize;
    let _ = child.kill().await;
    // Every record taken: an answer with no batch item failure.
    match answer {
        runtime_api::Answer::Response(body) if body.contains(r#""batchItemFailures":[]"#) => {
            Some(Start {
                first_batch,
                peak_kb: 0,
                connections,
                cpu,
                again: None,
            })
        }
        other => {
            eprintln!("the dispatcher did not send the batch: {other:?}");
            None
        }
    }
}
