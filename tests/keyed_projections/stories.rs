//! The stories, each run on both stores (see `main.rs`).

use aws_lambda_events::event::sqs::SqsMessage;
use sequence_guard::handling::{Effect, Effects, MAX_EFFECT_ITEMS};
use sequence_guard::runner::Outcome;
use sequence_guard::store::{Commit, Committed, Expected, Store, StoreError};
use sequence_guard::{AnyEntity, EntityKey};

use super::library::{Book, LOANS, ON_LOAN, RECALLS, UNREGISTERED};
use super::{added, at, book, counter, lent, message, message_with, returned, run, runner};
use serde_json::json;

use Outcome::{Applied, Duplicate, HandlerError};

/// GIVEN a book, WHEN it is lent, THEN the book and its member's numbers
/// move, in one write.
pub async fn a_lent_book_moves_its_member_in_the_same_write<S: Store>(store: S) {
    let runner = runner(store);
    let outcomes = run(&runner, vec![added("b1"), lent("b1", 2, "ada")]).await;

    assert_eq!(outcomes, [Applied, Applied]);
    let store = runner.store();
    assert_eq!(store.writes(), 1, "the book and the member: one write");
    let book = book(store, "b1").await.expect("the book");
    assert_eq!((book.sequence, book.lent_to.as_deref()), (2, Some("ada")));
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(1));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(1));
    assert_eq!(
        counter(store, &ON_LOAN, "b1").await,
        None,
        "keyed by the member"
    );
}

/// An event delivered again (a redelivery after a lost answer, a
/// duplicate) finds the book at or past it: nothing is added again.
pub async fn a_redelivered_event_adds_nothing_again<S: Store>(store: S) {
    let runner = runner(store);
    run(&runner, vec![added("b1"), lent("b1", 2, "ada")]).await;

    assert_eq!(run(&runner, vec![lent("b1", 2, "ada")]).await, [Duplicate]);
    let outcomes = run(
        &runner,
        vec![returned("b1", 3, "ada"), lent("b1", 2, "ada")],
    )
    .await;
    assert_eq!(outcomes, [Applied, Duplicate]);
    assert_eq!(
        run(&runner, vec![returned("b1", 3, "ada")]).await,
        [Duplicate]
    );

    let store = runner.store();
    assert_eq!(at(store, "b1").await, 3);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(0));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(1));
}

/// Two streams touch one member's item in one batch (two transactions at
/// once): both count. A transaction DynamoDB cancels for the other's on
/// the same item fails its messages, and SQS delivers them again (done
/// here): the guard applies each once.
pub async fn two_books_lent_to_one_member_in_one_batch_both_count<S: Store>(store: S) {
    let runner = runner(store);
    let batch = vec![
        added("b1"),
        added("b2"),
        added("b3"),
        lent("b1", 2, "ada"),
        lent("b2", 2, "ada"),
        lent("b3", 2, "bob"),
    ];
    let mut outcomes = run(&runner, batch.clone()).await;
    for _ in 0..5 {
        if outcomes.iter().all(|outcome| !outcome.is_failure()) {
            break;
        }
        outcomes = run(&runner, batch.clone()).await;
    }
    assert!(
        outcomes.iter().all(|outcome| !outcome.is_failure()),
        "{outcomes:?}"
    );

    let store = runner.store();
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(2));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(2));
    assert_eq!(counter(store, &ON_LOAN, "bob").await, Some(1));
    for id in ["b1", "b2", "b3"] {
        assert_eq!(at(store, id).await, 2, "{id}");
    }
}

/// The book's next state, after `event` at `sequence`.
fn book_at(sequence: u64, lent_to: Option<&str>) -> AnyEntity {
    AnyEntity::new(Book {
        sequence,
        last_event_id: format!("b1-{sequence}"),
        lent_to: lent_to.map(str::to_owned),
    })
}

/// A write of the book from `expected` to `to`.
fn write(expected: Option<u64>, to: AnyEntity) -> Commit {
    Commit {
        key: EntityKey::of::<Book>("b1"),
        expected: Expected {
            sequence: expected,
            parked: Default::default(),
            entity: None,
            due_at: None,
        },
        entity: Some(to),
        park: Vec::new(),
        drain: Vec::new(),
        conflicts: Vec::new(),
        now: 1,
        deadline: None,
        outbox: None,
    }
}

fn lend(member: &str, delta: i64) -> Vec<Effect> {
    let mut effects = Effects::default();
    effects.add(&ON_LOAN, member, delta);
    effects.add(&LOANS, member, 1);
    effects.effects().to_vec()
}

/// The book's write fails its condition (another writer moved it: the
/// guard): the member's numbers are not written either.
pub async fn a_write_that_fails_the_guard_writes_no_effect<S: Store>(store: S) {
    let runner = runner(store);
    run(&runner, vec![added("b1")]).await;
    let store = runner.store();

    // Decided on no book, and the book exists: a lost race.
    let raced = write(None, book_at(2, Some("ada")));
    let answer = store.commit_with_effects(&raced, &lend("ada", 1)).await;
    assert!(
        matches!(answer, Ok(Committed::LostRace { .. })),
        "{answer:?}"
    );
    assert_eq!(at(store, "b1").await, 1);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, None);

    // The same write where the book is: both.
    let right = write(Some(1), book_at(2, Some("ada")));
    let answer = store.commit_with_effects(&right, &lend("ada", 1)).await;
    assert_eq!(answer, Ok(Committed::Written));
    assert_eq!(at(store, "b1").await, 2);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(1));

    // Effects without the book's write have no guard: refused.
    let mut alone = write(Some(2), book_at(2, None));
    alone.entity = None;
    let answer = store.commit_with_effects(&alone, &lend("ada", 1)).await;
    assert!(
        matches!(answer, Err(StoreError::Rejected { .. })),
        "{answer:?}"
    );
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(1));
}

/// A sum that would leave the 64-bit range refuses the write whole: the
/// book stays where it was.
pub async fn a_counter_leaving_the_range_refuses_the_whole_write<S: Store>(store: S) {
    let runner = runner(store);
    run(&runner, vec![added("b1")]).await;
    let store = runner.store();
    let first = write(Some(1), book_at(2, Some("ada")));
    let answer = store
        .commit_with_effects(&first, &lend("ada", i64::MAX))
        .await;
    assert_eq!(answer, Ok(Committed::Written));

    let past = write(Some(2), book_at(3, Some("ada")));
    let answer = store.commit_with_effects(&past, &lend("ada", 1)).await;
    match answer {
        Err(StoreError::Rejected { message, .. }) => {
            assert!(message.contains("64-bit range"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(at(store, "b1").await, 2);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(i64::MAX));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(1));
}

/// One book lent, returned and lent again in one batch: one write, in which
/// the member's item is one update (a transaction touches an item once).
pub async fn a_members_effects_in_one_write_are_merged<S: Store>(store: S) {
    let runner = runner(store);
    let batch = vec![
        added("b1"),
        lent("b1", 2, "ada"),
        returned("b1", 3, "ada"),
        lent("b1", 4, "ada"),
        returned("b1", 5, "ada"),
        lent("b1", 6, "bob"),
    ];
    let outcomes = run(&runner, batch).await;

    assert_eq!(outcomes, [Applied; 6]);
    let store = runner.store();
    assert_eq!(store.writes(), 1);
    assert_eq!(at(store, "b1").await, 6);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(0));
    assert_eq!(counter(store, &LOANS, "ada").await, Some(2));
    assert_eq!(counter(store, &ON_LOAN, "bob").await, Some(1));
}

/// A handler that adds on a duplicate broke the rule: a handler error,
/// nothing added.
pub async fn only_an_applied_answer_has_effects<S: Store>(store: S) {
    let runner = runner(store);
    run(&runner, vec![added("b1"), lent("b1", 2, "ada")]).await;

    let misfiled = message("BookMisfiled", "b1", 2, "ada");
    assert_eq!(run(&runner, vec![misfiled]).await, [HandlerError]);
    let store = runner.store();
    assert_eq!(at(store, "b1").await, 2);
    assert_eq!(counter(store, &ON_LOAN, "ada").await, Some(1));
}

/// An effect on a counter the domain does not register is a handler
/// error: the event is not applied, the events before it are.
pub async fn an_unregistered_counter_is_a_handler_error<S: Store>(store: S) {
    let runner = runner(store);
    let shelved = message("BookShelved", "b1", 2, "ada");
    let outcomes = run(&runner, vec![added("b1"), shelved]).await;

    assert_eq!(outcomes, [Applied, HandlerError]);
    let store = runner.store();
    assert_eq!(at(store, "b1").await, 1);
    assert_eq!(counter(store, &UNREGISTERED, "ada").await, None);
}

/// A recall's message, to `count` members from `first` on.
fn recall(sequence: u64, first: usize, count: usize) -> SqsMessage {
    let members: Vec<String> = (first..first + count).map(member).collect();
    message_with(
        "BookRecalled",
        "b1",
        sequence,
        json!({ "members": members }),
    )
}

fn member(index: usize) -> String {
    format!("m{index}")
}

/// Events whose effects do not fit one transaction together are written in
/// steps (here two); an event's alone over the bound is a handler error.
pub async fn effects_that_do_not_fit_one_write_are_written_in_steps<S: Store>(store: S) {
    let runner = runner(store);
    let batch = vec![
        added("b1"),
        recall(2, 0, 40),
        recall(3, 40, 40),
        recall(4, 80, 40),
    ];
    let outcomes = run(&runner, batch).await;

    assert_eq!(outcomes, [Applied; 4]);
    let store = runner.store();
    assert_eq!(store.writes(), 2, "82 items, then 40 more");
    assert_eq!(at(store, "b1").await, 4);
    for index in [0, 39, 40, 79, 80, 119] {
        let id = member(index);
        assert_eq!(counter(store, &RECALLS, &id).await, Some(1), "{id}");
    }

    let outcomes = run(&runner, vec![recall(5, 0, MAX_EFFECT_ITEMS + 1)]).await;
    assert_eq!(outcomes, [HandlerError]);
    assert_eq!(at(store, "b1").await, 4);
    assert_eq!(counter(store, &RECALLS, &member(0)).await, Some(1));
}
