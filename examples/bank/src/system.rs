//! The crate's whole system, as `template.yaml` deploys it: the event store
//! of [`crate::domain`]'s events, and every consumer by its name in the
//! template: `projector` (the first), and each that
//! `[package.metadata.sequence-guard] consumers` in `Cargo.toml` declares,
//! on its module's `domain()`. `bank-local` runs it on one machine from
//! a script (`cargo run --bin bank-local -- local/<script>.txt`).
//!
//! Made by `sequence-guard sync` from `Cargo.toml`, and rewritten by it:
//! a consumer declared there is here after the next `sync`, with no edit.

use sequence_guard::domain::System;

/// The event store and every consumer, named as the template names them.
pub fn system() -> System {
    System::new(crate::domain()).consumer("projector", crate::domain())
}

#[cfg(test)]
mod tests {
    /// What only the domains together can show, before any message: every
    /// consumer declares every type of the store, a process appends to this
    /// store, no two processes share a name, each domain is well declared.
    #[test]
    fn the_system_is_whole() {
        if let Err(err) = super::system().check() {
            panic!("{err}");
        }
    }
}
