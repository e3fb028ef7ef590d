//! [`DynamoKeys`]: the subjects' data keys in the event store's table,
//! wrapped under a KMS key (`PERSONAL_DATA_KEY`), or for local runs under a
//! master key of the process's own ([`DynamoKeys::local`]). The items'
//! layout is `key_item.rs`'s.
//!
//! A key item is no event item: the dispatcher sends nothing for it, and
//! `rebuild`, `verify` and the store's scans never list it as a stream.
//! Every request is one of: `BatchGetItem` (strongly consistent, 100 keys a
//! request, unprocessed keys asked again), a conditional `PutItem` (a new
//! key: the first writer wins, a later one is answered the winner's item),
//! `UpdateItem` (a stream added while the key exists; the key removed;
//! erasure told), KMS `GenerateDataKey` and `Decrypt`. No key's bytes, wrapped or
//! not, are in any error or log line.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValue, ReturnValuesOnConditionCheckFailure,
};
use aws_sdk_kms::types::DataKeySpec;
use futures::future::BoxFuture;

use super::cipher::DataKey;
use super::key_item::{key, stored, subject_item};
use super::keys::{KeyError, KeyItem, KeySource};
use crate::clock::epoch_seconds;
use crate::table::request_error;

/// The most keys one `BatchGetItem` asks for (DynamoDB's limit).
const BATCH: usize = 100;

/// How many times unprocessed keys are asked again before the read fails.
const UNPROCESSED_TRIES: u32 = 8;

/// The encryption context's name for the subject.
const CONTEXT: &str = "subject";

/// Key items in a DynamoDB table (the event store's), their data keys
/// wrapped under a KMS key; see the module's documentation.
pub struct DynamoKeys {
    dynamodb: aws_sdk_dynamodb::Client,
    table: String,
    wrapper: Wrapper,
    kms_requests: AtomicU64,
    requests: AtomicU64,
}

impl std::fmt::Debug for DynamoKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key_id = match &self.wrapper {
            Wrapper::Kms { key_id, .. } => key_id.as_str(),
            Wrapper::Local(_) => "(local)",
        };
        f.debug_struct("DynamoKeys")
            .field("table", &self.table)
            .field("key_id", &key_id)
            .finish_non_exhaustive()
    }
}

/// What wraps the data keys.
enum Wrapper {
    /// A KMS key: `GenerateDataKey` and `Decrypt`.
    Kms {
        client: aws_sdk_kms::Client,
        key_id: String,
    },
    /// A master key of the process's own (local runs and tests): each data
    /// key sealed with it, the subject as associated data.
    Local(DataKey),
}

impl DynamoKeys {
    /// Key items in `table` (the event store's), wrapped under the KMS key
    /// `key_id` (an id, an ARN or `alias/<name>`).
    pub fn new(
        dynamodb: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
        kms: aws_sdk_kms::Client,
        key_id: impl Into<String>,
    ) -> DynamoKeys {
        DynamoKeys {
            dynamodb,
            table: table.into(),
            wrapper: Wrapper::Kms {
                client: kms,
                key_id: key_id.into(),
            },
            kms_requests: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    /// Key items in `table`, wrapped under `master`, a key of the
    /// process's own instead of KMS (local runs and tests; its "KMS
    /// requests" are counted as KMS's would be).
    pub fn local(
        dynamodb: aws_sdk_dynamodb::Client,
        table: impl Into<String>,
        master: DataKey,
    ) -> DynamoKeys {
        DynamoKeys {
            dynamodb,
            table: table.into(),
            wrapper: Wrapper::Local(master),
            kms_requests: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    /// The table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The DynamoDB requests made so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn sent(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn kms_sent(&self) {
        self.kms_requests.fetch_add(1, Ordering::Relaxed);
    }

    async fn read_items(&self, subjects: &[String]) -> Result<HashMap<String, KeyItem>, KeyError> {
        let mut wanted: Vec<&String> = subjects.iter().collect();
        wanted.sort();
        wanted.dedup();
        let mut found = HashMap::new();
        for chunk in wanted.chunks(BATCH) {
            let keys = chunk.iter().map(|subject| key(subject)).collect();
            let mut asked = KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|err| KeyError::Store(format!("BatchGetItem: {err}")))?;
            let mut tries = 0;
            loop {
                self.sent();
                let output = self
                    .dynamodb
                    .batch_get_item()
                    .request_items(&self.table, asked)
                    .send()
                    .await
                    .map_err(|err| store_error("BatchGetItem", &err))?;
                for item in output
                    .responses
                    .and_then(|mut tables| tables.remove(&self.table))
                    .unwrap_or_default()
                {
                    let (subject, stored) = subject_item(&item)?;
                    found.insert(subject, stored);
                }
                let Some(left) = output
                    .unprocessed_keys
                    .and_then(|mut tables| tables.remove(&self.table))
                    .filter(|left| !left.keys.is_empty())
                else {
                    break;
                };
                tries += 1;
                if tries >= UNPROCESSED_TRIES {
                    return Err(KeyError::Store(format!(
                        "BatchGetItem left {} key items of {} unread after {tries} tries",
                        left.keys.len(),
                        self.table
                    )));
                }
                tokio::time::sleep(Duration::from_millis(25 << tries.min(5))).await;
                asked = left;
            }
        }
        Ok(found)
    }

    /// The subject's item as stored (one strongly consistent `GetItem`).
    async fn get(&self, subject: &str) -> Result<Option<KeyItem>, KeyError> {
        self.sent();
        let output = self
            .dynamodb
            .get_item()
            .table_name(&self.table)
            .set_key(Some(key(subject)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| store_error("GetItem", &err))?;
        output
            .item
            .filter(|item| !item.is_empty())
            .map(|item| stored(subject, &item))
            .transpose()
    }

    async fn generate(&self, subject: &str) -> Result<(Vec<u8>, DataKey), KeyError> {
        self.kms_sent();
        let (kms, key_id) = match &self.wrapper {
            Wrapper::Kms { client, key_id } => (client, key_id),
            Wrapper::Local(master) => return local_generate(master, subject),
        };
        let output = kms
            .generate_data_key()
            .key_id(key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(CONTEXT, subject)
            .send()
            .await
            .map_err(|err| kms_error("GenerateDataKey", subject, &err))?;
        let (Some(wrapped), Some(plain)) = (output.ciphertext_blob, output.plaintext) else {
            return Err(KeyError::Kms(format!(
                "GenerateDataKey for `{subject}` answered no key"
            )));
        };
        let key = DataKey::new(plain.as_ref()).map_err(|err| {
            KeyError::Kms(format!("GenerateDataKey for `{subject}` answered {err}"))
        })?;
        Ok((wrapped.into_inner(), key))
    }

    async fn put_new(
        &self,
        subject: &str,
        stream: &str,
        wrapped: &[u8],
    ) -> Result<Option<KeyItem>, KeyError> {
        let mut item = key(subject);
        item.insert(
            "wrappedKey".to_owned(),
            AttributeValue::B(Blob::new(wrapped)),
        );
        item.insert(
            "streams".to_owned(),
            AttributeValue::Ss(vec![stream.to_owned()]),
        );
        item.insert(
            "createdAt".to_owned(),
            AttributeValue::N(epoch_seconds().to_string()),
        );
        self.sent();
        let result = self
            .dynamodb
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match result {
            Ok(_) => return Ok(None),
            Err(err) => err,
        };
        match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                match failed.item.as_ref().filter(|item| !item.is_empty()) {
                    Some(found) => stored(subject, found).map(Some),
                    // An answer without the item: read it.
                    None => match self.get(subject).await? {
                        Some(found) => Ok(Some(found)),
                        None => Err(KeyError::Store(format!(
                            "PutItem of the key item of `{subject}` found an item, and a read found none"
                        ))),
                    },
                }
            }
            _ => Err(store_error("PutItem", &err)),
        }
    }
}

impl KeySource for DynamoKeys {
    fn key_check(&self, subject: &str) -> Option<aws_sdk_dynamodb::types::TransactWriteItem> {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(subject)))
            .condition_expression("attribute_exists(wrappedKey)")
            .build()
            .ok()?;
        Some(
            aws_sdk_dynamodb::types::TransactWriteItem::builder()
                .condition_check(check)
                .build(),
        )
    }

    fn read<'a>(
        &'a self,
        subjects: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, KeyItem>, KeyError>> {
        Box::pin(self.read_items(subjects))
    }

    fn unwrap_key<'a>(
        &'a self,
        subject: &'a str,
        wrapped: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        Box::pin(async move {
            self.kms_sent();
            let (kms, key_id) = match &self.wrapper {
                Wrapper::Kms { client, key_id } => (client, key_id),
                Wrapper::Local(master) => return local_unwrap(master, subject, wrapped),
            };
            let output = kms
                .decrypt()
                .key_id(key_id)
                .ciphertext_blob(Blob::new(wrapped))
                .encryption_context(CONTEXT, subject)
                .send()
                .await
                .map_err(|err| kms_error("Decrypt", subject, &err))?;
            let plain = output.plaintext.ok_or_else(|| {
                KeyError::Kms(format!("Decrypt of the key of `{subject}` answered no key"))
            })?;
            DataKey::new(plain.as_ref()).map_err(|err| {
                KeyError::Kms(format!("Decrypt of the key of `{subject}` answered {err}"))
            })
        })
    }

    fn create<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<Result<(Vec<u8>, DataKey), KeyItem>, KeyError>> {
        Box::pin(async move {
            let (wrapped, key) = self.generate(subject).await?;
            Ok(match self.put_new(subject, stream, &wrapped).await? {
                None => Ok((wrapped, key)),
                Some(found) => Err(found),
            })
        })
    }

    fn add_stream<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<bool, KeyError>> {
        Box::pin(async move {
            self.sent();
            let result = self
                .dynamodb
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(subject)))
                .update_expression("ADD streams :stream")
                .condition_expression("attribute_exists(wrappedKey)")
                .expression_attribute_values(":stream", AttributeValue::Ss(vec![stream.to_owned()]))
                .send()
                .await;
            match result {
                Ok(_) => Ok(true),
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(false),
                    _ => Err(store_error("UpdateItem", &err)),
                },
            }
        })
    }

    /// One `UpdateItem`, so that the streams are kept whatever is added
    /// meanwhile (an `add_stream` after it fails its condition): the key
    /// removed, `erasedAt` and `told` set unless they were (an item made
    /// when there was none has neither key nor streams).
    fn erase<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<Option<KeyItem>, KeyError>> {
        Box::pin(async move {
            self.sent();
            let output = self
                .dynamodb
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(subject)))
                .update_expression(
                    "REMOVE wrappedKey SET erasedAt = if_not_exists(erasedAt, :now), told = if_not_exists(told, :told)",
                )
                .expression_attribute_values(":now", AttributeValue::N(epoch_seconds().to_string()))
                .expression_attribute_values(":told", AttributeValue::Bool(false))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map_err(|err| store_error("UpdateItem", &err))?;
            output
                .attributes
                .filter(|item| !item.is_empty())
                .map(|item| stored(subject, &item))
                .transpose()
        })
    }

    fn told<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<(), KeyError>> {
        Box::pin(async move {
            self.sent();
            let result = self
                .dynamodb
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(subject)))
                .update_expression("SET told = :told")
                .condition_expression("attribute_exists(pk) AND attribute_not_exists(wrappedKey)")
                .expression_attribute_values(":told", AttributeValue::Bool(true))
                .send()
                .await;
            match result {
                Ok(_) => Ok(()),
                // No erased item: nothing to mark.
                Err(err) => match err.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(_)) => Ok(()),
                    _ => Err(store_error("UpdateItem", &err)),
                },
            }
        })
    }

    fn kms_requests(&self) -> u64 {
        self.kms_requests.load(Ordering::Relaxed)
    }
}

/// A new data key, sealed with a local master key.
fn local_generate(master: &DataKey, subject: &str) -> Result<(Vec<u8>, DataKey), KeyError> {
    let failed = |err: super::CipherError| KeyError::Kms(format!("the key of `{subject}`: {err}"));
    let bytes = DataKey::random_bytes().map_err(failed)?;
    let key = DataKey::new(&bytes).map_err(failed)?;
    let wrapped = master.seal(&bytes, subject.as_bytes()).map_err(failed)?;
    Ok((wrapped.into_bytes(), key))
}

/// A data key sealed with a local master key, opened.
fn local_unwrap(master: &DataKey, subject: &str, wrapped: &[u8]) -> Result<DataKey, KeyError> {
    std::str::from_utf8(wrapped)
        .ok()
        .and_then(|sealed| master.open(sealed, subject.as_bytes()).ok())
        .and_then(|bytes| DataKey::new(&bytes).ok())
        .ok_or_else(|| {
            KeyError::Kms(format!(
                "the wrapped key of `{subject}` does not unwrap with the local master key"
            ))
        })
}

fn store_error<E, R>(
    operation: &'static str,
    err: &aws_sdk_dynamodb::error::SdkError<E, R>,
) -> KeyError
where
    E: std::error::Error + aws_sdk_dynamodb::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    KeyError::Store(request_error(operation, err).to_string())
}

/// A KMS error, naming the operation and the subject (what KMS says, never
/// the request's blob).
fn kms_error<E, R>(
    operation: &'static str,
    subject: &str,
    err: &aws_sdk_kms::error::SdkError<E, R>,
) -> KeyError
where
    E: std::error::Error + aws_sdk_kms::error::ProvideErrorMetadata + 'static,
    R: std::fmt::Debug,
{
    KeyError::Kms(format!(
        "{} (the key of `{subject}`)",
        request_error(operation, err)
    ))
}
