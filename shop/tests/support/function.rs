//! The `projector` binary, started as Lambda starts it, against a local
//! Runtime API and DynamoDB Local.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::dynamodb_local;
use super::runtime_api::{Answer, RuntimeApi};

pub struct Function {
    pub child: Child,
    output: Arc<Mutex<String>>,
    pub started: Instant,
}

impl Function {
    /// Everything the function wrote to stdout and stderr so far.
    pub fn output(&self) -> String {
        self.output.lock().expect("output").clone()
    }
}

/// Starts the projector binary with the environment Lambda gives it.
pub fn start(api: &RuntimeApi, table: Option<&str>) -> Function {
    start_with(api, table, &[])
}

/// Starts the projector binary with the environment Lambda gives it, and
/// these function variables besides.
pub fn start_with(api: &RuntimeApi, table: Option<&str>, variables: &[(&str, &str)]) -> Function {
    let mut all: Vec<(&str, &str)> = table
        .map(|table| ("TABLE_NAME", table))
        .into_iter()
        .collect();
    all.extend_from_slice(variables);
    start_binary(env!("CARGO_BIN_EXE_projector"), api, &all)
}

/// Starts the dispatcher binary as Lambda starts it, sending to SQS at
/// `sqs_endpoint` (LocalStack, or a proxy in front of it).
#[allow(dead_code)] // not every test binary uses it
pub fn start_dispatcher(
    api: &RuntimeApi,
    sqs_endpoint: &str,
    queue_url: &str,
    failure_queue_url: &str,
) -> Function {
    start_binary(
        env!("CARGO_BIN_EXE_dispatcher"),
        api,
        &[
            ("AWS_ENDPOINT_URL_SQS", sqs_endpoint),
            ("QUEUE_URL", queue_url),
            ("FAILURE_QUEUE_URL", failure_queue_url),
            ("AWS_LAMBDA_FUNCTION_NAME", "sequence-guard-dispatcher"),
            ("METRICS_SERVICE", "dispatcher-test"),
        ],
    )
}

/// Starts a Lambda binary of the worked example with the environment
/// Lambda gives it, and these variables besides (they win).
pub fn start_binary(exe: &str, api: &RuntimeApi, variables: &[(&str, &str)]) -> Function {
    let mut command = Command::new(exe);
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "sequence-guard")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/30/[$LATEST]0123")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/sequence-guard")
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .env("METRICS_NAMESPACE", "SequenceGuardTest")
        .env("METRICS_SERVICE", "projector-test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "local")
        .env("AWS_SECRET_ACCESS_KEY", "local")
        .env("AWS_ENDPOINT_URL_DYNAMODB", &dynamodb_local().endpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in variables {
        command.env(name, value);
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|err| panic!("spawn {exe}: {err}"));
    let output = Arc::new(Mutex::new(String::new()));
    for mut pipe in [
        Box::new(child.stdout.take().expect("stdout"))
            as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let output = output.clone();
        tokio::spawn(async move {
            let mut buffer = [0u8; 4096];
            while let Ok(read) = pipe.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                output
                    .lock()
                    .expect("output")
                    .push_str(&String::from_utf8_lossy(&buffer[..read]));
            }
        });
    }
    Function {
        child,
        output,
        started,
    }
}

/// The message ids an answer lists as failed.
pub fn failures(answer: &Answer) -> Vec<String> {
    let Answer::Response(body) = answer else {
        panic!("expected a response, got {answer:?}")
    };
    let response: serde_json::Value = serde_json::from_str(body).expect("JSON response");
    response["batchItemFailures"]
        .as_array()
        .expect("batchItemFailures is a list")
        .iter()
        .map(|failure| {
            failure["itemIdentifier"]
                .as_str()
                .expect("itemIdentifier")
                .to_owned()
        })
        .collect()
}
