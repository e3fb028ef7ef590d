//! The [`Keyring`]: the data keys a process used, kept for a bounded time,
//! over a [`KeySource`] that stores them wrapped (DynamoDB and KMS in AWS,
//! [`super::LocalKeys`] in memory).
//!
//! A consumer reads a subject's key once and keeps it for [`DEFAULT_TTL`]
//! (or until it reads the subject's erasure); an append reads the key item,
//! because that read is what refuses an erased subject (unless its event
//! store vouches for the key, see `producer/known.rs`), and unwraps the key
//! only when it has not kept it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::cipher::DataKey;

/// How long a consumer keeps a key it read: 5 minutes.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);

/// The most subjects a keyring keeps at once.
pub const MAX_KEPT: usize = 10_000;

/// A subject's key item, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyItem {
    /// The data key wrapped under the KMS key; `None` once erased.
    pub wrapped: Option<Vec<u8>>,
    /// The streams the subject's values were appended to (what erasure
    /// tells).
    pub streams: Vec<String>,
    /// For an erased subject: whether every stream was told.
    pub told: bool,
}

/// Why a key could not be had. Every one but [`KeyError::Erased`] is
/// safe to retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The subject was erased: its personal data can be neither read nor
    /// appended.
    #[error("the subject `{0}` is erased: no personal data of theirs can be appended")]
    Erased(String),
    /// The table holding the keys did not answer (after retries).
    #[error("the key store: {0}")]
    Store(String),
    /// KMS did not answer, or refused.
    #[error("KMS: {0}")]
    Kms(String),
    /// A key item that cannot be read.
    #[error("the key item of `{subject}` {problem}")]
    Corrupt {
        /// Whose.
        subject: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// Where the wrapped keys live, and what unwraps them. Every call is one
/// or two requests; the [`Keyring`] decides when to make them.
pub trait KeySource: Send + Sync {
    /// The key items of `subjects`, read strongly consistent; a subject
    /// without one is absent from the answer.
    fn read<'a>(
        &'a self,
        subjects: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, KeyItem>, KeyError>>;

    /// The data key `wrapped` holds, unwrapped for `subject` (KMS
    /// `Decrypt`, the subject its encryption context).
    fn unwrap_key<'a>(
        &'a self,
        subject: &'a str,
        wrapped: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>>;

    /// A new data key for `subject`, whose first stream is `stream` (KMS
    /// `GenerateDataKey`), stored wrapped if the subject has no item yet:
    /// `Ok(Ok((wrapped, key)))`. When another writer stored one first, or
    /// the subject was erased, that item: `Ok(Err(stored))`.
    #[allow(clippy::type_complexity)]
    fn create<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<Result<(Vec<u8>, DataKey), KeyItem>, KeyError>>;

    /// `stream` added to the subject's streams while its key exists;
    /// `false` when it was erased meanwhile.
    fn add_stream<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<bool, KeyError>>;

    /// The subject's key deleted: its item replaced by an erased one that
    /// keeps its streams (one with none when it had no item). Answers the
    /// item as it was (`None`: there was none).
    fn erase<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<Option<KeyItem>, KeyError>>;

    /// The erased subject's streams all told.
    fn told<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<(), KeyError>>;

    /// The KMS requests made so far (`GenerateDataKey` and `Decrypt`).
    fn kms_requests(&self) -> u64;

    /// A check, for an append's transaction in the event store's account,
    /// that `subject`'s key item still holds its key: an append that
    /// carries it is written only while the subject is not erased. `None`
    /// (the default) for a source whose items no transaction can see (one
    /// in memory): the append reads the item again before each try instead.
    fn key_check(&self, subject: &str) -> Option<aws_sdk_dynamodb::types::TransactWriteItem> {
        let _ = subject;
        None
    }
}

/// What a keyring knows of a subject.
#[derive(Debug, Clone)]
pub(crate) enum Known {
    /// Its data key.
    Key(DataKey),
    /// Erased: its values read as the placeholder.
    Erased,
    /// It has no key item: nothing of it was sealed by this store.
    None,
}

struct Kept {
    known: Known,
    /// The wrapped form of [`Known::Key`]'s key: an append reuses the key
    /// while the item holds the same.
    wrapped: Vec<u8>,
    at: Instant,
}

/// The data keys a process used, over their [`KeySource`].
pub struct Keyring {
    source: Arc<dyn KeySource>,
    ttl: Duration,
    kept: Mutex<HashMap<String, Kept>>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyring").field("ttl", &self.ttl).finish()
    }
}

impl Keyring {
    /// A keyring over `source`, keeping keys for [`DEFAULT_TTL`].
    pub fn new(source: impl KeySource + 'static) -> Self {
        Keyring::shared(Arc::new(source))
    }

    /// A keyring over a shared source.
    pub fn shared(source: Arc<dyn KeySource>) -> Self {
        Keyring {
            source,
            ttl: DEFAULT_TTL,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps keys for `ttl` instead (zero: read every time).
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The source.
    pub fn source(&self) -> &dyn KeySource {
        &*self.source
    }

    /// The KMS requests made so far.
    pub fn kms_requests(&self) -> u64 {
        self.source.kms_requests()
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is kept of `subject`, while fresh.
    pub(crate) fn known(&self, subject: &str) -> Option<Known> {
        let kept = self.kept();
        let entry = kept.get(subject)?;
        (entry.at.elapsed() < self.ttl || matches!(entry.known, Known::Erased))
            .then(|| entry.known.clone())
    }

    fn keep(&self, subject: &str, known: Known, wrapped: Vec<u8>) {
        let mut kept = self.kept();
        if kept.len() >= MAX_KEPT && !kept.contains_key(subject) {
            let ttl = self.ttl;
            kept.retain(|_, entry| entry.at.elapsed() < ttl);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        kept.insert(
            subject.to_owned(),
            Kept {
                known,
                wrapped,
                at: Instant::now(),
            },
        );
    }

    /// The subject is erased (its erasure event was read): its values read
    /// as the placeholder from now on.
    pub(crate) fn forget(&self, subject: &str) {
        self.keep(subject, Known::Erased, Vec::new());
    }

    /// Reads the keys of the `subjects` not kept: one read of their items,
    /// then their unwraps at once. Afterwards each is known (a key, erased,
    /// or none), unless this fails: a failed read leaves them all unknown,
    /// a failed unwrap only its own subject (the first such error is
    /// answered), so one subject's trouble does not hold the others'
    /// records.
    pub async fn fetch(&self, subjects: &[String]) -> Result<(), KeyError> {
        let wanted: Vec<String> = subjects
            .iter()
            .filter(|subject| self.known(subject).is_none())
            .cloned()
            .collect();
        self.read_keys(wanted).await
    }

    /// Reads the key items of `subjects` again, kept or not (but those
    /// known erased, which stays so): a kept key is used again only while
    /// its item holds the same wrapped key (no KMS request), and a subject
    /// erased since is known so from now on. What a consumer does before it
    /// trusts the keys it keeps, so that no instance opens a subject's
    /// values once its key is deleted, whenever it read the key.
    pub async fn confirm(&self, subjects: &[String]) -> Result<(), KeyError> {
        let wanted: Vec<String> = subjects
            .iter()
            .filter(|subject| !matches!(self.known(subject), Some(Known::Erased)))
            .cloned()
            .collect();
        self.read_keys(wanted).await
    }

    /// Whether the subject is known erased.
    pub(crate) fn is_erased(&self, subject: &str) -> bool {
        matches!(self.known(subject), Some(Known::Erased))
    }

    /// Whether what is kept of the subject was read at or after `since`.
    pub(crate) fn read_since(&self, subject: &str, since: Instant) -> bool {
        self.kept()
            .get(subject)
            .is_some_and(|kept| kept.at >= since)
    }

    /// One read of the items of `wanted`, then their unwraps at once.
    async fn read_keys(&self, mut wanted: Vec<String>) -> Result<(), KeyError> {
        wanted.sort();
        wanted.dedup();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut items = self.source.read(&wanted).await?;
        let mut unwrapping = Vec::new();
        for subject in wanted {
            match items.remove(&subject) {
                None => self.keep(&subject, Known::None, Vec::new()),
                Some(KeyItem { wrapped: None, .. }) => self.forget(&subject),
                Some(KeyItem {
                    wrapped: Some(wrapped),
                    ..
                }) => unwrapping.push((subject, wrapped)),
            }
        }
        let keys = futures::future::join_all(
            unwrapping
                .iter()
                .map(|(subject, wrapped)| self.unwrapped(subject, wrapped)),
        )
        .await;
        let mut failed = None;
        for ((subject, wrapped), key) in unwrapping.into_iter().zip(keys) {
            match key {
                Ok(key) => self.keep(&subject, Known::Key(key), wrapped),
                Err(err) => {
                    failed.get_or_insert(err);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// The key `wrapped` holds: the kept one when it is the same.
    async fn unwrapped(&self, subject: &str, wrapped: &[u8]) -> Result<DataKey, KeyError> {
        if let Some(Kept {
            known: Known::Key(key),
            wrapped: kept,
            ..
        }) = self.kept().get(subject)
            && kept == wrapped
        {
            return Ok(key.clone());
        }
        self.source.unwrap_key(subject, wrapped).await
    }

    /// The key to seal `subject`'s values appended to `stream` with: its
    /// item read (an erased subject is refused), made on first use, and
    /// `stream` added to its streams.
    pub async fn for_append(&self, subject: &str, stream: &str) -> Result<DataKey, KeyError> {
        let subjects = [subject.to_owned()];
        let stored = match self.source.read(&subjects).await?.remove(subject) {
            Some(stored) => stored,
            None => match self.source.create(subject, stream).await? {
                Ok((wrapped, key)) => {
                    self.keep(subject, Known::Key(key.clone()), wrapped);
                    return Ok(key);
                }
                Err(stored) => stored,
            },
        };
        let Some(wrapped) = stored.wrapped else {
            self.forget(subject);
            return Err(KeyError::Erased(subject.to_owned()));
        };
        if !stored.streams.iter().any(|known| known == stream)
            && !self.source.add_stream(subject, stream).await?
        {
            self.forget(subject);
            return Err(KeyError::Erased(subject.to_owned()));
        }
        let key = self.unwrapped(subject, &wrapped).await?;
        self.keep(subject, Known::Key(key.clone()), wrapped);
        Ok(key)
    }
}
