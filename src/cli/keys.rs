//! The keyring a binary gives its domain when the domain declares personal
//! data: the subjects' data keys, wrapped under the KMS key
//! `PERSONAL_DATA_KEY`, in the event store's table. A domain that declares
//! none gets none, and never reads a key.

use std::sync::Arc;

use crate::domain::Domain;
use crate::personal::{DynamoKeys, Keyring};

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
    let keys = DynamoKeys::new(dynamodb.clone(), table, kms_client().await, key.trim());
    Ok(domain.with_keys(Arc::new(Keyring::new(keys))))
}

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
