//! The clock every layer reads: now, in epoch seconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in epoch seconds (0 before 1970, which no clock here is).
pub fn epoch_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
