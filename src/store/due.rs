//! The index of due deadlines as the stores answer it: an entry per state
//! with a deadline, and where a sweep that ran out of time stopped.

/// The partitions of the index of due deadlines (`DUE#0` to `DUE#f`).
pub const DUE_SHARDS: u8 = 16;

/// The partition of the index of due deadlines an item's deadline is in
/// (0 to [`DUE_SHARDS`] - 1), from its `pk`.
pub fn due_shard(pk: &str) -> u8 {
    let digest = crate::digest::digest(pk);
    u8::from_str_radix(&digest[..1], 16).unwrap_or(0) % DUE_SHARDS
}

/// One entry of the index of due deadlines: the item that holds the
/// deadline, and when it is due. Entries of a partition come earliest
/// first; those due at the same second in the store's own order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DueEntry {
    /// When it is due, epoch seconds.
    pub at: u64,
    /// The item's partition key (a process's state: `<KIND>#<id>`).
    pub pk: String,
    /// The item's sort key (a process's state: `STATE`).
    pub sk: String,
}

/// Where a sweep's firing of deadlines stopped, its time run out: the
/// partition of the index and the last entry of it tried (`None`: none of
/// that partition yet). The next sweep goes on after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueCursor {
    /// The partition (0 to [`DUE_SHARDS`] - 1).
    pub shard: u8,
    /// The last entry tried.
    pub after: Option<DueEntry>,
}
