//! [`LocalKeys`]: a [`KeySource`] in memory, for the embedded store and
//! tests. Its data keys are wrapped under a local master key (random for
//! each `LocalKeys`), and its "KMS requests" are counted as KMS's would be.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;

use super::cipher::DataKey;
use super::keys::{KeyError, KeyItem, KeySource};

/// Key items in memory, wrapped under a local master key.
pub struct LocalKeys {
    master: DataKey,
    items: Mutex<HashMap<String, KeyItem>>,
    kms: AtomicU64,
}

impl std::fmt::Debug for LocalKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalKeys").finish_non_exhaustive()
    }
}

impl LocalKeys {
    /// Key items in memory, under a random master key.
    pub fn new() -> Result<Self, KeyError> {
        let bytes = DataKey::random_bytes().map_err(|err| KeyError::Kms(err.to_string()))?;
        let master = DataKey::new(&bytes).map_err(|err| KeyError::Kms(err.to_string()))?;
        Ok(LocalKeys::with_master(master))
    }

    /// Key items in memory, under this master key (a local run's own).
    pub fn with_master(master: DataKey) -> Self {
        LocalKeys {
            master,
            items: Mutex::new(HashMap::new()),
            kms: AtomicU64::new(0),
        }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, HashMap<String, KeyItem>> {
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The subject's item as stored, for tests.
    pub fn item(&self, subject: &str) -> Option<KeyItem> {
        self.items().get(subject).cloned()
    }
}

impl KeySource for LocalKeys {
    fn read<'a>(
        &'a self,
        subjects: &'a [String],
    ) -> BoxFuture<'a, Result<HashMap<String, KeyItem>, KeyError>> {
        let items = self.items();
        let found = subjects
            .iter()
            .filter_map(|subject| Some((subject.clone(), items.get(subject)?.clone())))
            .collect();
        Box::pin(async move { Ok(found) })
    }

    fn unwrap_key<'a>(
        &'a self,
        subject: &'a str,
        wrapped: &'a [u8],
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        self.kms.fetch_add(1, Ordering::Relaxed);
        let key = std::str::from_utf8(wrapped)
            .ok()
            .and_then(|sealed| self.master.open(sealed, subject.as_bytes()).ok())
            .and_then(|bytes| DataKey::new(&bytes).ok())
            .ok_or_else(|| {
                KeyError::Kms(format!("the wrapped key of `{subject}` does not unwrap"))
            });
        Box::pin(async move { key })
    }

    fn create<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<Result<(Vec<u8>, DataKey), KeyItem>, KeyError>> {
        self.kms.fetch_add(1, Ordering::Relaxed);
        let made = (|| {
            let bytes = DataKey::random_bytes().map_err(|err| KeyError::Kms(err.to_string()))?;
            let key = DataKey::new(&bytes).map_err(|err| KeyError::Kms(err.to_string()))?;
            let wrapped = self
                .master
                .seal(&bytes, subject.as_bytes())
                .map_err(|err| KeyError::Kms(err.to_string()))?;
            Ok::<_, KeyError>((wrapped.into_bytes(), key))
        })();
        let answer = made.map(|(wrapped, key)| {
            let mut items = self.items();
            if let Some(stored) = items.get(subject) {
                return Err(stored.clone());
            }
            items.insert(
                subject.to_owned(),
                KeyItem {
                    wrapped: Some(wrapped.clone()),
                    streams: vec![stream.to_owned()],
                    told: false,
                },
            );
            Ok((wrapped, key))
        });
        Box::pin(async move { answer })
    }

    fn add_stream<'a>(
        &'a self,
        subject: &'a str,
        stream: &'a str,
    ) -> BoxFuture<'a, Result<bool, KeyError>> {
        let mut items = self.items();
        let added = match items.get_mut(subject) {
            Some(stored) if stored.wrapped.is_some() => {
                if !stored.streams.iter().any(|known| known == stream) {
                    stored.streams.push(stream.to_owned());
                }
                true
            }
            _ => false,
        };
        Box::pin(async move { Ok(added) })
    }

    fn erase<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<Option<KeyItem>, KeyError>> {
        let mut items = self.items();
        let before = items.get(subject).cloned();
        let streams = before
            .as_ref()
            .map(|stored| stored.streams.clone())
            .unwrap_or_default();
        let told = before
            .as_ref()
            .is_none_or(|stored| stored.wrapped.is_none() && stored.told)
            || streams.is_empty();
        items.insert(
            subject.to_owned(),
            KeyItem {
                wrapped: None,
                streams,
                told,
            },
        );
        Box::pin(async move { Ok(before) })
    }

    fn told<'a>(&'a self, subject: &'a str) -> BoxFuture<'a, Result<(), KeyError>> {
        if let Some(stored) = self.items().get_mut(subject) {
            stored.told = true;
        }
        Box::pin(async { Ok(()) })
    }

    fn kms_requests(&self) -> u64 {
        self.kms.load(Ordering::Relaxed)
    }
}
