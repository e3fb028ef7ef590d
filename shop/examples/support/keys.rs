//! The keys the benchmarks seal and open the orders' personal data with
//! (`shop::domain()` declares an order's `customerName` and `email`
//! personal, so its event store refuses to append them without keys, and
//! its consumer cannot open them without): the real key items
//! ([`DynamoKeys`], in the event store's table on DynamoDB Local), each data
//! key wrapped under LocalStack's KMS when a benchmark has it, or under a
//! master key of the benchmark's own ([`DynamoKeys::local`]: the same
//! DynamoDB requests and units, its KMS requests counted as KMS's would be).

use std::sync::Arc;

use sequence_guard::Domain;
use sequence_guard::personal::{DataKey, DynamoKeys, Keyring};

/// What wraps the data keys.
#[derive(Debug, Clone)]
pub enum Wrapping {
    /// A master key of the benchmark's own.
    Local,
    /// A KMS key (LocalStack's): its client and id.
    Kms {
        client: aws_sdk_kms::Client,
        key_id: String,
    },
}

/// The benchmark's master key for [`Wrapping::Local`] (fixed: the key
/// items of one run are read by every store and consumer of the run).
pub fn master() -> DataKey {
    match DataKey::new(&[0x5e; sequence_guard::personal::KEY_LEN]) {
        Ok(key) => key,
        Err(err) => {
            eprintln!("the benchmark's master key: {err}");
            std::process::exit(1);
        }
    }
}

/// The key items in `table` (the event store's), read and written through
/// `dynamodb` (a metered client counts them), wrapped as `wrapping` says.
pub fn source(dynamodb: &aws_sdk_dynamodb::Client, table: &str, wrapping: &Wrapping) -> DynamoKeys {
    match wrapping {
        Wrapping::Local => DynamoKeys::local(dynamodb.clone(), table, master()),
        Wrapping::Kms { client, key_id } => {
            DynamoKeys::new(dynamodb.clone(), table, client.clone(), key_id.clone())
        }
    }
}

/// A keyring of its own (a process's) over [`source`].
pub fn keyring(
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    wrapping: &Wrapping,
) -> Arc<Keyring> {
    Arc::new(Keyring::new(source(dynamodb, table, wrapping)))
}

/// `domain` with a keyring of its own when it declares personal data (the
/// shop's); as it is otherwise (the status consumer's, the process's).
pub fn keyed(
    domain: Domain,
    dynamodb: &aws_sdk_dynamodb::Client,
    table: &str,
    wrapping: &Wrapping,
) -> Domain {
    if !domain.declares_personal() {
        return domain;
    }
    domain.with_keys(keyring(dynamodb, table, wrapping))
}

/// A KMS client for LocalStack at `endpoint`.
pub fn kms_client(endpoint: &str) -> aws_sdk_kms::Client {
    let config = aws_sdk_kms::config::Builder::new()
        .behavior_version(aws_sdk_kms::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_kms::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_kms::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .build();
    aws_sdk_kms::Client::from_conf(config)
}

/// A new symmetric KMS key on LocalStack at `endpoint` (as the stack's
/// `PERSONAL_DATA_KEY`): the wrapping under it.
pub async fn kms_wrapping(endpoint: &str) -> Wrapping {
    let client = kms_client(endpoint);
    let created = client
        .create_key()
        .description("sequence-guard bench: personal data keys")
        .send()
        .await;
    match created
        .ok()
        .and_then(|created| created.key_metadata)
        .map(|metadata| metadata.key_id)
    {
        Some(key_id) => Wrapping::Kms { client, key_id },
        None => {
            eprintln!("cannot create a KMS key on {endpoint} (is LocalStack serving KMS?)");
            std::process::exit(1);
        }
    }
}
