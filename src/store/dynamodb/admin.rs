//! The table itself: connecting, creating it, and checking that it can be
//! used, with errors that say in one line what happened and what to do.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType, TableStatus,
    TimeToLiveSpecification,
};

use super::{TTL_ATTRIBUTE, build_error, readable, request_error};
use crate::store::StoreError;

/// Why the table cannot be used: one line, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// The table does not exist (`ResourceNotFoundException`).
    #[error(
        "table `{table}` does not exist: create it (`--create-table`, or deploy template.yaml), or check the table name and AWS_REGION"
    )]
    Missing {
        /// The table's name.
        table: String,
    },
    /// No answer from DynamoDB (a connection refused, a timeout, a wrong
    /// endpoint).
    #[error(
        "cannot reach DynamoDB: {detail}. Start DynamoDB Local (scripts/dynamodb-local.sh run 8000), or check --endpoint-url and the network"
    )]
    Unreachable {
        /// The innermost cause, at most 120 characters.
        detail: String,
    },
    /// The SDK found no AWS credentials to sign with.
    #[error(
        "no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (DynamoDB Local takes any values)"
    )]
    NoCredentials,
    /// DynamoDB answered with an error other than a missing table (access
    /// denied, say).
    #[error("DynamoDB refused {operation} on table `{table}`: {code}: {message}")]
    Refused {
        /// The operation refused (`DescribeTable`, `CreateTable`,
        /// `UpdateTimeToLive`).
        operation: &'static str,
        /// The table's name.
        table: String,
        /// DynamoDB's error code (`AccessDeniedException`).
        code: String,
        /// DynamoDB's message.
        message: String,
    },
    /// The table exists but is not active, or did not become so within 60 s.
    #[error("table `{table}` is not ready: {status}")]
    NotReady {
        /// The table's name.
        table: String,
        /// Its status (`CREATING`, `DELETING`, ...), or how long it has
        /// been creating.
        status: String,
    },
}

/// What an SDK error means for someone at a terminal.
fn table_error<E, R>(operation: &'static str, table: &str, err: &SdkError<E, R>) -> TableError
where
    E: std::error::Error + ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    if let Some(service) = err.as_service_error() {
        let code = service.code().unwrap_or("unknown error");
        if code == "ResourceNotFoundException" {
            return TableError::Missing {
                table: table.to_owned(),
            };
        }
        return TableError::Refused {
            operation,
            table: table.to_owned(),
            code: code.to_owned(),
            message: service.message().unwrap_or_default().to_owned(),
        };
    }
    let full = DisplayErrorContext(err).to_string();
    let lower = readable(&full).to_ascii_lowercase();
    if lower.contains("credential") || lower.contains("imds") {
        return TableError::NoCredentials;
    }
    // The innermost cause of the readable part, without the SDK's debug dump.
    let detail = readable(&full)
        .rsplit(": ")
        .next()
        .map(str::trim)
        .filter(|cause| !cause.is_empty())
        .unwrap_or("no answer")
        .chars()
        .take(120)
        .collect();
    TableError::Unreachable { detail }
}

/// Checks that `table` exists and is active (one `DescribeTable`).
pub async fn check_table(client: &Client, table: &str) -> Result<(), TableError> {
    let output = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|err| table_error("DescribeTable", table, &err))?;
    match output.table().and_then(|found| found.table_status()) {
        Some(TableStatus::Active) | Some(TableStatus::Updating) | None => Ok(()),
        Some(status) => Err(TableError::NotReady {
            table: table.to_owned(),
            status: status.as_str().to_owned(),
        }),
    }
}

/// When `table` was created, epoch seconds (one `DescribeTable`; `None`
/// when DynamoDB does not say): a process's start (docs/processes.md).
pub async fn created_at(client: &Client, table: &str) -> Result<Option<u64>, TableError> {
    let output = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|err| table_error("DescribeTable", table, &err))?;
    let created = output
        .table()
        .and_then(|found| found.creation_date_time())
        .map(|created| created.secs());
    Ok(created.and_then(|secs| u64::try_from(secs).ok()))
}

/// Creates `table` (as [`create_table`]) unless it exists, and waits until
/// it is active. Safe to run again. `Ok(true)`: it was created now.
pub async fn ensure_table(client: &Client, table: &str) -> Result<bool, TableError> {
    ensure(client, table, false).await
}

/// The table a tool writes to, made ready: created if missing when
/// `create` (the tools' `--create-table`), else only checked.
pub async fn ready_table(client: &Client, table: &str, create: bool) -> Result<(), TableError> {
    if create {
        ensure_table(client, table).await.map(|_| ())
    } else {
        check_table(client, table).await
    }
}

/// Creates the event store's `table` unless it exists (as [`ensure_table`],
/// with a DynamoDB stream of new images for the dispatcher), and waits until
/// it is active. Safe to run again. `Ok(true)`: it was created now.
pub async fn ensure_events_table(client: &Client, table: &str) -> Result<bool, TableError> {
    ensure(client, table, true).await
}

async fn ensure(client: &Client, table: &str, stream: bool) -> Result<bool, TableError> {
    match check_table(client, table).await {
        Ok(()) => return Ok(false),
        Err(TableError::Missing { .. }) => {}
        // Being created by someone else: wait for it below.
        Err(TableError::NotReady { status, .. }) if status == "CREATING" => {}
        Err(err) => return Err(err),
    }
    if let Err(err) = send_create_table(client, table, stream).await {
        // Created meanwhile by someone else: as good.
        if err.code() != Some("ResourceInUseException") {
            return Err(table_error("CreateTable", table, &err));
        }
    }
    for _ in 0..120 {
        match check_table(client, table).await {
            Ok(()) => {
                enable_ttl(client, table)
                    .await
                    .map_err(|err| table_error("UpdateTimeToLive", table, &err))?;
                return Ok(true);
            }
            Err(TableError::NotReady { .. }) | Err(TableError::Missing { .. }) => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => return Err(err),
        }
    }
    Err(TableError::NotReady {
        table: table.to_owned(),
        status: "still creating after 60 s".to_owned(),
    })
}

/// Creates a table with the contract's key schema, on-demand, with TTL on
/// [`TTL_ATTRIBUTE`]; fails if it exists. For tests; `replay --create-table`
/// uses [`ensure_table`], and production tables come from `template.yaml`.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    send_create_table(client, table, false)
        .await
        .map_err(|err| request_error("CreateTable", &err))?;
    enable_ttl(client, table)
        .await
        .map_err(|err| request_error("UpdateTimeToLive", &err))?;
    Ok(())
}

type CreateTableError = SdkError<
    aws_sdk_dynamodb::operation::create_table::CreateTableError,
    aws_sdk_dynamodb::config::http::HttpResponse,
>;

async fn send_create_table(
    client: &Client,
    table: &str,
    stream: bool,
) -> Result<(), CreateTableError> {
    let attribute = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
    };
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
    };
    let (Ok(pk), Ok(sk), Ok(hash), Ok(range)) = (
        attribute("pk"),
        attribute("sk"),
        key("pk", KeyType::Hash),
        key("sk", KeyType::Range),
    ) else {
        // The builders fail only when a required field is left out, as
        // none is here.
        return Err(SdkError::construction_failure(build_error(
            "CreateTable",
            "key schema",
        )));
    };
    // A consumer's table: the sparse index of a process's due deadlines
    // (empty for any other consumer).
    let due = (!stream).then(due_index).flatten();
    let mut create = client
        .create_table()
        .table_name(table)
        .attribute_definitions(pk)
        .attribute_definitions(sk)
        .key_schema(hash)
        .key_schema(range);
    if let Some((index, shard, at)) = due {
        create = create
            .attribute_definitions(shard)
            .attribute_definitions(at)
            .global_secondary_indexes(index);
    }
    create
        .billing_mode(BillingMode::PayPerRequest)
        .set_stream_specification(
            stream
                .then(|| {
                    StreamSpecification::builder()
                        .stream_enabled(true)
                        .stream_view_type(StreamViewType::NewImage)
                        .build()
                })
                .transpose()
                .ok()
                .flatten(),
        )
        .send()
        .await?;
    Ok(())
}

/// The index of due deadlines: `dueShard` and `dueAt`, keys only.
fn due_index() -> Option<(
    GlobalSecondaryIndex,
    AttributeDefinition,
    AttributeDefinition,
)> {
    let shard = AttributeDefinition::builder()
        .attribute_name(super::items::DUE_SHARD)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .ok()?;
    let at = AttributeDefinition::builder()
        .attribute_name(super::items::DUE_AT)
        .attribute_type(ScalarAttributeType::N)
        .build()
        .ok()?;
    let key = |name: &str, key_type| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(key_type)
            .build()
            .ok()
    };
    let index = GlobalSecondaryIndex::builder()
        .index_name(super::items::DUE_INDEX)
        .key_schema(key(super::items::DUE_SHARD, KeyType::Hash)?)
        .key_schema(key(super::items::DUE_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .ok()?;
    Some((index, shard, at))
}

type TtlError = SdkError<
    aws_sdk_dynamodb::operation::update_time_to_live::UpdateTimeToLiveError,
    aws_sdk_dynamodb::config::http::HttpResponse,
>;

async fn enable_ttl(client: &Client, table: &str) -> Result<(), TtlError> {
    let Ok(specification) = TimeToLiveSpecification::builder()
        .attribute_name(TTL_ATTRIBUTE)
        .enabled(true)
        .build()
    else {
        return Err(SdkError::construction_failure(build_error(
            "UpdateTimeToLive",
            "specification",
        )));
    };
    let result = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(specification)
        .send()
        .await;
    match result {
        // Enabled already (a second run): as good.
        Err(err)
            if err
                .as_service_error()
                .and_then(ProvideErrorMetadata::message)
                .is_some_and(|message| message.contains("already enabled")) =>
        {
            Ok(())
        }
        other => other.map(|_| ()),
    }
}

/// A client for `endpoint_url` (DynamoDB Local, say), or for the endpoint the
/// environment names. Without a region in the environment, `us-east-1`; for a
/// loopback endpoint without credentials in the environment, fixed local ones
/// (DynamoDB Local accepts any).
pub async fn connect(endpoint_url: Option<&str>) -> Client {
    let mut loader = crate::sdk::from_env();
    if let Some(url) = endpoint_url {
        loader = loader.endpoint_url(url);
        let loopback = ["://localhost", "://127.", "://[::1]"]
            .iter()
            .any(|host| url.contains(host));
        if loopback && std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "local", "local", None, None, "local",
            ));
        }
    }
    let sdk = loader.load().await;
    let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
    if sdk.region().is_none() {
        config = config.region(aws_sdk_dynamodb::config::Region::new("us-east-1"));
    }
    Client::from_conf(config.build())
}
