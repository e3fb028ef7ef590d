//! Bank accounts: a second domain on sequence-guard, to prove that the
//! engine takes any events. It uses only the crate's public API and touches
//! no file of it.
//!
//! | event            | handled as | handler |
//! | ---------------- | ---------- | ------- |
//! | `AccountOpened`  | sequenced, a creation (checks existence) | [`on_account_opened`] |
//! | `MoneyDeposited` | sequenced (the guard) | [`on_money_deposited`] |
//! | `MoneyWithdrawn` | sequenced (the guard) | [`on_money_withdrawn`] |
//! | `AccountSnapshot`| a complete snapshot: applied only if newer, never parked | [`from_snapshot`] |
//! | `FeeCharged`     | a deduplicated effect: `ADD chargedCents` on the account's `FEES` item | [`on_fee_charged`] |
//!
//! Items, in one partition per account: `ACCOUNT#<accountId>` / `STATE`
//! (`sequence`, `lastEventId`, `owner`, `balanceCents`) and
//! `ACCOUNT#<accountId>` / `FEES` (`chargedCents`).

use sequence_guard::limits::{integer, non_negative, text};
use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Serialize};

/// The account projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub sequence: u64,
    pub last_event_id: String,
    pub owner: String,
    pub balance_cents: i64,
}

impl Entity for Account {
    const KIND: &'static str = "ACCOUNT";

    fn sequence(&self) -> u64 {
        self.sequence
    }

    fn last_event_id(&self) -> &str {
        &self.last_event_id
    }
}

/// The fees charged to an account, summed once per `FeeCharged`: an item
/// of its own in the account's partition.
pub const FEES: Counter = Counter {
    kind: "ACCOUNT",
    sort_key: "FEES",
    attribute: "chargedCents",
};

/// The name `FeeCharged` events are deduplicated under.
pub const FEES_HANDLER: &str = "FeesCharged";

/// `AccountOpened` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Opening {
    #[serde(deserialize_with = "text::<_, 1, 256>")]
    pub owner: String,
}

/// `MoneyDeposited` and `MoneyWithdrawn` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Amount {
    #[serde(deserialize_with = "non_negative")]
    pub amount_cents: u64,
}

/// `AccountSnapshot` data: the whole state at the event's sequence.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    #[serde(deserialize_with = "text::<_, 1, 256>")]
    pub owner: String,
    #[serde(deserialize_with = "integer")]
    pub balance_cents: i64,
}

/// `FeeCharged` data: not sequenced; the account is its stream.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fee {
    #[serde(deserialize_with = "text::<_, 1, 256>")]
    pub account_id: String,
    #[serde(deserialize_with = "non_negative")]
    pub fee_cents: u64,
}

/// The events, by the envelope's `type`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum BankEvent {
    AccountOpened(Opening),
    MoneyDeposited(Amount),
    MoneyWithdrawn(Amount),
    AccountSnapshot(Snapshot),
    FeeCharged(Fee),
}

/// The registration: how each event type is handled.
impl Events for BankEvent {
    fn handling(self) -> Handling {
        match self {
            BankEvent::AccountOpened(data) => Handling::sequenced(data, on_account_opened),
            BankEvent::MoneyDeposited(data) => Handling::sequenced(data, on_money_deposited),
            BankEvent::MoneyWithdrawn(data) => Handling::sequenced(data, on_money_withdrawn),
            BankEvent::AccountSnapshot(data) => Handling::snapshot(data, from_snapshot),
            BankEvent::FeeCharged(fee) => on_fee_charged(fee),
        }
    }
}

/// The bank, registered.
pub fn domain() -> Domain {
    Domain::new::<BankEvent>()
        .entity::<Account>()
        .counter(&FEES)
}

/// `AccountOpened`: a creation checks existence instead of the sequence.
pub fn on_account_opened(account: &mut Option<Account>, event: &Sequenced<Opening>) -> Decision {
    if account.is_some() {
        return Decision::Duplicate;
    }
    *account = Some(Account {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        owner: event.data.owner.clone(),
        balance_cents: 0,
    });
    Decision::Applied
}

/// `MoneyDeposited`: the guard, then the balance moves up.
pub fn on_money_deposited(account: &mut Option<Account>, event: &Sequenced<Amount>) -> Decision {
    apply(account, event, cents(event.data.amount_cents))
}

/// `MoneyWithdrawn`: the guard, then the balance moves down (the projection
/// records what happened; refusing an overdraft is the producer's business).
pub fn on_money_withdrawn(account: &mut Option<Account>, event: &Sequenced<Amount>) -> Decision {
    apply(account, event, -cents(event.data.amount_cents))
}

/// An amount as a signed number (amounts are read as at most 2^63-1).
fn cents(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

fn apply(account: &mut Option<Account>, event: &Sequenced<Amount>, cents: i64) -> Decision {
    let Some(account) = account else {
        return Decision::NotCreated;
    };
    if account.sequence != event.sequence - 1 {
        return if account.sequence >= event.sequence {
            Decision::Duplicate
        } else {
            Decision::Gap
        };
    }
    account.balance_cents = account.balance_cents.saturating_add(cents);
    account.last_event_id.clone_from(&event.event_id);
    account.sequence = event.sequence;
    Decision::Applied
}

/// `AccountSnapshot`: the account as the snapshot says, at its sequence.
pub fn from_snapshot(event: &Sequenced<Snapshot>) -> Account {
    Account {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        owner: event.data.owner.clone(),
        balance_cents: event.data.balance_cents,
    }
}

/// `FeeCharged`: added to the account's fees once per event.
pub fn on_fee_charged(fee: Fee) -> Handling {
    Handling::add(FEES_HANDLER, &FEES, fee.account_id, cents(fee.fee_cents))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sequence_guard::testkit::given;

    fn at(sequence: u64, balance_cents: i64) -> Account {
        Account {
            sequence,
            last_event_id: format!("e{sequence}"),
            owner: "Ada".into(),
            balance_cents,
        }
    }

    fn deposit(amount_cents: u64) -> BankEvent {
        BankEvent::MoneyDeposited(Amount { amount_cents })
    }

    #[test]
    fn a_deposit_next_in_line_moves_the_balance_and_the_sequence() {
        given(Some(at(2, 100)))
            .when("e3", "acct-1", 3, deposit(50))
            .then(Decision::Applied, Some(at(3, 150)));
    }

    #[test]
    fn the_guard_answers_gap_duplicate_and_not_created() {
        given(Some(at(2, 100)))
            .when("e4", "acct-1", 4, deposit(50))
            .then(Decision::Gap, Some(at(2, 100)));
        given(Some(at(2, 100)))
            .when("e2", "acct-1", 2, deposit(50))
            .then(Decision::Duplicate, Some(at(2, 100)));
        given(None::<Account>)
            .when("e2", "acct-1", 2, deposit(50))
            .then(Decision::NotCreated, None);
        let withdraw = BankEvent::MoneyWithdrawn(Amount { amount_cents: 30 });
        given(Some(at(2, 100)))
            .when("e3", "acct-1", 3, withdraw)
            .then(Decision::Applied, Some(at(3, 70)));
    }

    #[test]
    fn a_snapshot_applies_only_if_newer() {
        let snapshot = |balance_cents| {
            BankEvent::AccountSnapshot(Snapshot {
                owner: "Ada".into(),
                balance_cents,
            })
        };
        given(Some(at(2, 100)))
            .when("e5", "acct-1", 5, snapshot(900))
            .then(Decision::Applied, Some(at(5, 900)));
        given(Some(at(5, 900)))
            .when("e3", "acct-1", 3, snapshot(300))
            .then(Decision::Duplicate, Some(at(5, 900)));
        given(None::<Account>)
            .when("e4", "acct-1", 4, snapshot(400))
            .then(Decision::Applied, Some(at(4, 400)));
    }

    #[test]
    fn opening_an_existing_account_is_a_duplicate() {
        let open = BankEvent::AccountOpened(Opening {
            owner: "Bob".into(),
        });
        given(Some(at(3, 100)))
            .when("e1", "acct-1", 1, open.clone())
            .then(Decision::Duplicate, Some(at(3, 100)));
        let opened = Account {
            sequence: 1,
            last_event_id: "e1".into(),
            owner: "Bob".into(),
            balance_cents: 0,
        };
        given(None::<Account>)
            .when("e1", "acct-1", 1, open)
            .then(Decision::Applied, Some(opened));
    }
}
