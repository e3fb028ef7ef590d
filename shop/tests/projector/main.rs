//! The `projector` binary, as Lambda runs it: the real `lambda_runtime`
//! against a local Runtime API, on DynamoDB Local.

#[path = "../support/mod.rs"]
mod support;

mod invocations;
mod observability;

use std::time::Duration;

use sequence_guard::EntityKey;
use sequence_guard::store::Store;
use shop::{Order, OrderStatus};
use support::function::{failures, start, start_with};
use support::runtime_api::{Answer, RuntimeApi};
use support::*;
