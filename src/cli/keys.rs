//! The keyring a binary gives its domain when the domain declares personal
//! data: the subjects' data keys, wrapped under the KMS key
//! `PERSONAL_DATA_KEY`, in the event store's table. A domain that declares
//! none gets none, and never reads a key.

use std::sync::Arc;

use crate::domain::Domain;
use crate::personal::{DataKey, DynamoKeys, Keyring};

/// `domain` with its keyring, when it declares personal data and `key`
/// (`PERSONAL_DATA_KEY`) is given; `Err` says what is missing. Without
/// the key, nothing is opened or sealed: a sealed body is refused as it is
/// read (retried, then the dead-letter queue), an append of personal data
/// is refused, and plain values are read as they are.
pub(crate) async fn keyed(
    domain: Domain,
    dynamodb: &aws_sdk_dynamodb::Client,
    events_table: Option<&str>,
    key: Option<String>,
) -> Result<Domain, String> {
    if !domain.declares_personal() {
        return Ok(domain);
    }
    let Some(key) = key.filter(|key| !key.trim().is_empty()) else {
        return Ok(domain);
    };
    let Some(table) = events_table.filter(|table| !table.is_empty()) else {
        return Err(
            "the domain declares personal data: set EVENT_STORE_TABLE, the event store's table that holds the subjects' keys"
                .to_owned(),
        );
    };
    let keys = source(dynamodb, table, key.trim()).await?;
    Ok(domain.with_keys(Arc::new(Keyring::new(keys))))
}

/// The key source `PERSONAL_DATA_KEY` names: a KMS key, or
/// `local:<32 bytes in base64url>`, a master key of the process's own for
/// local runs and tests (the key items are in the table all the same).
pub(crate) async fn source(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    key: &str,
) -> Result<DynamoKeys, String> {
    match key.strip_prefix(LOCAL) {
        Some(_) => Ok(DynamoKeys::local(
            dynamodb.clone(),
            table,
            local_master(key)?,
        )),
        None => Ok(DynamoKeys::new(
            dynamodb.clone(),
            table,
            kms_client().await,
            key,
        )),
    }
}

/// The master key `PERSONAL_DATA_KEY=local:<32 bytes in base64url>` names.
pub(crate) fn local_master(key: &str) -> Result<DataKey, String> {
    use base64::Engine as _;
    key.trim()
        .strip_prefix(LOCAL)
        .and_then(|encoded| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded.trim_end_matches('='))
                .ok()
        })
        .and_then(|bytes| DataKey::new(&bytes).ok())
        .ok_or_else(|| "PERSONAL_DATA_KEY=local:... must hold 32 bytes in base64url".to_owned())
}

/// How `PERSONAL_DATA_KEY` names a local master key.
const LOCAL: &str = "local:";

/// A KMS client from the environment (`AWS_ENDPOINT_URL_KMS` for a local
/// one), in `us-east-1` when the environment names no region.
pub(crate) async fn kms_client() -> aws_sdk_kms::Client {
    let mut loader = crate::sdk::from_env();
    let local = std::env::var("AWS_ENDPOINT_URL_KMS").is_ok_and(|url| {
        ["://localhost", "://127.", "://[::1]"]
            .iter()
            .any(|host| url.contains(host))
    });
    if local && std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        loader = loader.credentials_provider(aws_sdk_kms::config::Credentials::new(
            "test", "test", None, None, "local",
        ));
    }
    let sdk = loader.load().await;
    let mut config = aws_sdk_kms::config::Builder::from(&sdk);
    if sdk.region().is_none() {
        config = config.region(aws_sdk_kms::config::Region::new("us-east-1"));
    }
    aws_sdk_kms::Client::from_conf(config.build())
}
