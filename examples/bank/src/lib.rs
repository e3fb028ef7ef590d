//! Bank accounts: a second domain on sequence-guard, to prove that the
//! engine takes any events. It uses only the crate's public API and touches
//! no file of it. The walk-through (docs/guide.md) follows this file, in
//! its order.
//!
//! | event            | handled as | handler |
//! | ---------------- | ---------- | ------- |
//! | `AccountOpened`  | sequenced, a creation (checks existence) | [`on_account_opened`] |
//! | `MoneyDeposited` | sequenced (the guard) | [`on_money_deposited`] |
//! | `MoneyWithdrawn` | sequenced (the guard) | [`on_money_withdrawn`] |
//! | `AccountSnapshot`| a complete snapshot: applied only if newer, never parked | [`from_snapshot`] |
//! | `FeeCharged`     | a deduplicated effect: `ADD chargedCents` on the account's fees, a stream of their own ([`fee_stream`]) | [`on_fee_charged`] |
//!
//! Items: `ACCOUNT#<accountId>` / `STATE` (`sequence`, `lastEventId`,
//! `owner`, `currency`, `balanceCents`) and `ACCOUNT#<accountId>/fees` /
//! `FEES` (`chargedCents`).
//!
//! `AccountOpened` and `AccountSnapshot` are at version 2: their `data`
//! gained `currency`. A version-1 body (written before, and still in the
//! event store) is upcast by [`in_euros`]: its accounts were all in euros.
//!
//! The bank's rules (no overdraft) are the producer's: [`withdrawal`]
//! decides before anything is appended; the handlers record what happened.

use sequence_guard::limits::{Text, integer, non_negative};
use sequence_guard::producer::{Append, ExpectedSequence, NewEvent};
use sequence_guard::versions::Versions;
use sequence_guard::{Counter, Decision, Domain, Entity, Events, Handling, Sequenced};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub mod system;

/// `AccountOpened` data, version 2 (version 1 had no `currency`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Opening {
    pub owner: Text<1, 256>,
    #[serde(deserialize_with = "currency")]
    pub currency: String,
}

/// A currency: 3 upper-case ASCII letters (ISO 4217's code).
pub fn currency<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let code = String::deserialize(deserializer)?;
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(code)
    } else {
        Err(serde::de::Error::custom(
            "must be 3 upper-case letters (an ISO 4217 code: EUR)",
        ))
    }
}

/// `MoneyDeposited` and `MoneyWithdrawn` data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Amount {
    #[serde(deserialize_with = "non_negative")]
    pub amount_cents: u64,
}

/// `AccountSnapshot` data: the whole state at the event's sequence,
/// version 2 (version 1 had no `currency`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub owner: Text<1, 256>,
    #[serde(deserialize_with = "currency")]
    pub currency: String,
    #[serde(deserialize_with = "integer")]
    pub balance_cents: i64,
}

/// `FeeCharged` data: not sequenced; its stream is the account's fees
/// ([`fee_stream`]), not the account's own.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fee {
    pub account_id: Text<1, 256>,
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

/// The account projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Entity)]
#[serde(rename_all = "camelCase")]
#[entity(kind = "ACCOUNT", summary = "line")]
pub struct Account {
    pub sequence: u64,
    pub last_event_id: String,
    pub owner: String,
    /// ISO 4217: `EUR`, `GBP`.
    pub currency: String,
    pub balance_cents: i64,
}

impl Account {
    /// What `replay` and `inspect` print of it: `Ada: 150 EUR cents`.
    pub fn line(&self) -> String {
        let (owner, cents, currency) = (&self.owner, self.balance_cents, &self.currency);
        format!("{owner}: {cents} {currency} cents")
    }
}

/// `AccountOpened`: a creation checks existence instead of the sequence.
pub fn on_account_opened(account: &mut Option<Account>, event: &Sequenced<Opening>) -> Decision {
    if account.is_some() {
        return Decision::Duplicate;
    }
    *account = Some(Account {
        sequence: event.sequence,
        last_event_id: event.event_id.clone(),
        owner: event.data.owner.to_string(),
        currency: event.data.currency.clone(),
        balance_cents: 0,
    });
    Decision::Applied
}

/// `MoneyDeposited`: the guard, then the balance moves up.
pub fn on_money_deposited(account: &mut Option<Account>, event: &Sequenced<Amount>) -> Decision {
    apply(account, event, cents(event.data.amount_cents))
}

/// `MoneyWithdrawn`: the guard, then the balance moves down. It records
/// what happened: refusing an overdraft is the producer's ([`withdrawal`]).
pub fn on_money_withdrawn(account: &mut Option<Account>, event: &Sequenced<Amount>) -> Decision {
    apply(account, event, -cents(event.data.amount_cents))
}

/// An amount as a signed number (amounts are read as at most 2^63-1).
pub fn cents(amount: u64) -> i64 {
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
        owner: event.data.owner.to_string(),
        currency: event.data.currency.clone(),
        balance_cents: event.data.balance_cents,
    }
}

/// The fees charged to an account, summed once per `FeeCharged`: the item
/// `ACCOUNT#<accountId>/fees` / `FEES`, its `chargedCents`.
pub const FEES: Counter = Counter {
    kind: "ACCOUNT",
    sort_key: "FEES",
    attribute: "chargedCents",
};

/// The name `FeeCharged` events are deduplicated under.
pub const FEES_HANDLER: &str = "FeesCharged";

/// The stream of an account's fees, and their counter's id: `acct-1/fees`.
/// Not the account's own stream: a stream holds one kind's events, and
/// `append` refuses a fee on the account's.
pub fn fee_stream(account_id: &str) -> String {
    format!("{account_id}/fees")
}

/// `FeeCharged`: added to the account's fees once per event.
pub fn on_fee_charged(fee: Fee) -> Handling {
    let stream = fee_stream(fee.account_id.as_str());
    Handling::add(FEES_HANDLER, &FEES, stream, cents(fee.fee_cents))
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

    /// Version 2 of the account's events carries its currency.
    fn versions() -> Versions {
        Versions::none()
            .current("AccountOpened", 2)
            .upcast("AccountOpened", 1, in_euros)
            .current("AccountSnapshot", 2)
            .upcast("AccountSnapshot", 1, in_euros)
    }
}

/// The bank, registered: `Account` and `FEES` by the handlings that name
/// them.
pub fn domain() -> Domain {
    Domain::new::<BankEvent>()
}

/// The upcast of `AccountOpened` and `AccountSnapshot` from version 1 to 2:
/// the accounts of version 1 are in euros. A `currency` a version-1 body
/// carries is a field version 1 ignores, and is replaced.
pub fn in_euros(mut data: Value) -> Result<Value, String> {
    let Value::Object(fields) = &mut data else {
        return Err("is not an object".to_owned());
    };
    fields.insert("currency".to_owned(), Value::from("EUR"));
    Ok(data)
}

/// A withdrawal, as the bank's producer decides it before anything is
/// appended: refused when it would leave the balance below zero. `account`
/// is the account as the producer read it; the append expects the stream
/// where that account stands, so a withdrawal decided on a balance that
/// moved meanwhile writes nothing (`AppendError::ExpectedSequence`: read
/// again, decide again).
pub fn withdrawal(account: &Account, id: &str, amount_cents: u64) -> Result<Append, &'static str> {
    if cents(amount_cents) > account.balance_cents {
        return Err("the balance does not cover the withdrawal");
    }
    let data = serde_json::json!({ "amountCents": amount_cents });
    let event = NewEvent::new("MoneyWithdrawn", data);
    Ok(Append {
        expected: ExpectedSequence::Exact(account.sequence),
        ..Append::one(id, event)
    })
}

// The walk-through (docs/guide.md) and its reference
// (docs/domain-reference.md) are this crate's doctests: each Rust block
// compiles against the bank (tests/readme.rs checks that each of the
// walk-through's is an excerpt of the bank's code).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide.md")]
pub struct Guide;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/domain-reference.md")]
pub struct DomainReference;

#[cfg(test)]
mod tests {
    use super::*;
    use sequence_guard::testkit::{given, when_effect};

    fn at(sequence: u64, balance_cents: i64) -> Account {
        Account {
            sequence,
            last_event_id: format!("e{sequence}"),
            owner: "Ada".into(),
            currency: "EUR".into(),
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
                owner: Text::new("Ada").expect("a valid owner"),
                currency: "EUR".into(),
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
    fn a_fee_adds_to_the_accounts_fees_on_a_stream_of_their_own() {
        let fee = Fee {
            account_id: Text::new("acct-1").expect("a valid id"),
            fee_cents: 500,
        };
        when_effect(BankEvent::FeeCharged(fee)).adds(&FEES, "acct-1/fees", 500);
    }

    #[test]
    fn a_withdrawal_the_balance_does_not_cover_is_refused_before_any_append() {
        assert_eq!(
            withdrawal(&at(2, 100), "acct-1", 101).err(),
            Some("the balance does not cover the withdrawal")
        );
        let append = withdrawal(&at(2, 100), "acct-1", 100).expect("covered");
        assert_eq!(append.stream_id, "acct-1");
        assert_eq!(append.expected, ExpectedSequence::Exact(2));
        assert_eq!(
            append.events,
            [NewEvent::new(
                "MoneyWithdrawn",
                serde_json::json!({"amountCents": 100})
            )]
        );
        assert_eq!(at(2, -5).line(), "Ada: -5 EUR cents");
    }

    #[test]
    fn opening_an_existing_account_is_a_duplicate() {
        let open = BankEvent::AccountOpened(Opening {
            owner: Text::new("Bob").expect("a valid owner"),
            currency: "EUR".into(),
        });
        given(Some(at(3, 100)))
            .when("e1", "acct-1", 1, open.clone())
            .then(Decision::Duplicate, Some(at(3, 100)));
        let opened = Account {
            sequence: 1,
            last_event_id: "e1".into(),
            owner: "Bob".into(),
            currency: "EUR".into(),
            balance_cents: 0,
        };
        given(None::<Account>)
            .when("e1", "acct-1", 1, open)
            .then(Decision::Applied, Some(opened));
    }

    fn opened(currency: &str) -> Account {
        Account {
            sequence: 1,
            last_event_id: "e1".into(),
            owner: "Ada".into(),
            currency: currency.into(),
            balance_cents: 0,
        }
    }

    /// An `AccountOpened` body at `version` (none: the field absent).
    fn opening(version: Option<u16>, data: &str) -> String {
        let version = version.map_or(String::new(), |v| format!(r#""version":{v},"#));
        format!(
            r#"{{"eventId":"e1","type":"AccountOpened","aggregateId":"acct-1","sequence":1,{version}"data":{data}}}"#
        )
    }

    #[test]
    fn both_versions_of_account_opened_are_read() {
        let domain = domain();
        assert_eq!(domain.check(), Ok(()));
        assert_eq!(
            (
                domain.version("AccountOpened"),
                domain.version("AccountSnapshot"),
                domain.version("MoneyDeposited")
            ),
            (2, 2, 1)
        );
        for body in [
            opening(None, r#"{"owner":"Ada"}"#),
            opening(Some(1), r#"{"owner":"Ada"}"#),
            // A field version 1 does not have is ignored, as it always was.
            opening(None, r#"{"owner":"Ada","currency":"usd"}"#),
        ] {
            given(None::<Account>)
                .when_body(&domain, &body)
                .expect("version 1, upcast")
                .then(Decision::Applied, Some(opened("EUR")));
        }
        given(None::<Account>)
            .when_body(
                &domain,
                &opening(Some(2), r#"{"owner":"Ada","currency":"GBP"}"#),
            )
            .expect("version 2")
            .then(Decision::Applied, Some(opened("GBP")));
    }

    #[test]
    fn a_version_2_body_is_held_to_its_currency_and_version_3_is_not_known() {
        let domain = domain();
        let refused = |body: String| {
            given(None::<Account>)
                .when_body(&domain, &body)
                .err()
                .map(|err| err.to_string())
        };
        for currency in ["\"eur\"", "\"EURO\"", "\"E1R\"", "978"] {
            let data = format!(r#"{{"owner":"Ada","currency":{currency}}}"#);
            let expected = if currency == "978" {
                "field `data.currency` must be a string, got a number"
            } else {
                "field `data.currency` must be 3 upper-case letters (an ISO 4217 code: EUR)"
            };
            assert_eq!(refused(opening(Some(2), &data)).as_deref(), Some(expected));
        }
        assert_eq!(
            refused(opening(Some(2), r#"{"owner":"Ada"}"#)).as_deref(),
            Some("missing field `data.currency`")
        );
        assert_eq!(
            refused(opening(Some(3), r#"{"owner":"Ada","currency":"EUR"}"#)).as_deref(),
            Some(
                "field `version` names AccountOpened version 3, newer than this consumer knows (2)"
            )
        );
        // A type still at version 1 knows no version 2.
        let deposit = r#"{"eventId":"e2","type":"MoneyDeposited","aggregateId":"acct-1","sequence":2,"version":2,"data":{"amountCents":5}}"#;
        assert_eq!(
            refused(deposit.to_owned()).as_deref(),
            Some(
                "field `version` names MoneyDeposited version 2, newer than this consumer knows (1)"
            )
        );
    }

    /// A consumer of `AccountOpened` whose struct is version 2's, and
    /// which declares no versions (every type at 1).
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", content = "data")]
    enum Undeclared {
        AccountOpened(Opening),
    }

    impl Events for Undeclared {
        fn handling(self) -> Handling {
            match self {
                Undeclared::AccountOpened(data) => Handling::sequenced(data, on_account_opened),
            }
        }
    }

    #[test]
    fn a_consumer_that_does_not_declare_the_versions_refuses_both() {
        // No made-up data passes `currency`: AccountOpened alone names no
        // entity as the domain is built, and `Account` is registered here.
        assert!(Domain::new::<Undeclared>().kinds().is_empty());
        let domain = Domain::new::<Undeclared>().entity::<Account>();
        assert_eq!(domain.check(), Ok(()));
        for (body, reason) in [
            (
                opening(None, r#"{"owner":"Ada"}"#),
                "missing field `data.currency`",
            ),
            (
                opening(Some(2), r#"{"owner":"Ada","currency":"GBP"}"#),
                "field `version` names AccountOpened version 2, newer than this consumer knows (1)",
            ),
        ] {
            let refused = given(None::<Account>)
                .when_body(&domain, &body)
                .err()
                .map(|err| err.to_string());
            assert_eq!(refused.as_deref(), Some(reason));
        }
    }

    #[test]
    fn a_version_1_snapshot_is_in_euros() {
        let domain = domain();
        let snapshot = |version: &str, data: &str| {
            format!(
                r#"{{"eventId":"e5","type":"AccountSnapshot","aggregateId":"acct-1","sequence":5,{version}"data":{data}}}"#
            )
        };
        let at_5 = |currency: &str| Account {
            sequence: 5,
            last_event_id: "e5".into(),
            currency: currency.into(),
            ..at(5, 900)
        };
        given(Some(at(2, 100)))
            .when_body(
                &domain,
                &snapshot("", r#"{"owner":"Ada","balanceCents":900}"#),
            )
            .expect("version 1")
            .then(Decision::Applied, Some(at_5("EUR")));
        given(Some(at(2, 100)))
            .when_body(
                &domain,
                &snapshot(
                    r#""version":2,"#,
                    r#"{"owner":"Ada","currency":"CHF","balanceCents":900}"#,
                ),
            )
            .expect("version 2")
            .then(Decision::Applied, Some(at_5("CHF")));
    }

    #[test]
    fn the_upcast_sets_euros_and_nothing_else() {
        assert_eq!(
            in_euros(serde_json::json!({"owner": "Ada", "balanceCents": 5})),
            Ok(serde_json::json!({"owner": "Ada", "currency": "EUR", "balanceCents": 5}))
        );
    }

    #[test]
    fn an_erasure_leaves_no_personal_value_in_clear() {
        // The bank declares no personal data yet (`Events::personal`); once
        // it does, this folds its samples with every personal value marked,
        // erases each subject, and names any entity attribute that still
        // holds one (declare it: `#[entity(personal(..))]`).
        let samples = [
            include_str!("../events/01-accounts-opened-and-moved.json"),
            include_str!("../events/02-gap-parked.json"),
            include_str!("../events/03-gap-closed.json"),
            include_str!("../events/04-snapshot-out-of-order.json"),
            include_str!("../events/05-version-2.json"),
        ];
        if let Err(leak) = sequence_guard::testkit::check_erasures(&domain(), &samples) {
            panic!("{leak}");
        }
    }
}
