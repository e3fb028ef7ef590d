//! `sequence-guard`: the crate of a new domain, ready to test and deploy,
//! and the files that deploy a domain kept those of this version.
//!
//! ```text
//! sequence-guard new parcels [--path DIR] [--sequence-guard-path CHECKOUT | --sequence-guard-git URL]
//! sequence-guard sync [--path DIR] [--check]
//! ```
//!
//! `new` writes a crate: a small domain (an entity with a creation and an
//! update holding the guard, a deduplicated counter, their tests, and a
//! process that archives an item by a deadline), its
//! binaries (`parcels-projector`, `parcels-dispatcher`, `parcels-replay`,
//! ...), its whole system (`src/system.rs`) and `parcels-local`, which runs
//! it on one machine from a script (`local/archiver.txt`, and its test),
//! samples in `events/`, `template.yaml` and `samconfig.toml` for
//! the stack `parcels`, `scripts/build-lambda`, and a `Cargo.lock` with
//! the versions sequence-guard was tested with. Its dependency on
//! sequence-guard is the checkout this command was built from (a path: the
//! crate builds as it is made), unless `--sequence-guard-path` or
//! `--sequence-guard-git` names another; crates.io, with a warning, once
//! that checkout is gone. It makes the crate a git
//! repository (as `cargo new` does: not inside another's work tree, and
//! not without git on the PATH, which it says). `sync` writes the
//! deployment files of an existing crate: sequence-guard's (the template,
//! the scripts, `src/system.rs`) again, the team's (`samconfig.toml`, the
//! binaries) where missing; with `--check`, it writes nothing and exits 1
//! when any differs. Either exits 1 while the library does not declare
//! `pub mod system;` (a crate made before `src/system.rs`: the one line
//! sync leaves to the team, which it names).
//!
//! `template.yaml` is sequence-guard's, made for the crate's consumers:
//! the first, and each that `[package.metadata.sequence-guard]` declares
//! in its `Cargo.toml` (`consumers = [{ name = "status", description =
//! "..." }]`; `process = true` for a process, `environment = [{ name,
//! description, default, min, max }]` for variables its function is given
//! from parameters of the stack). A template changed by hand since `sync`
//! made it (its header holds the hash of what it made), or without that
//! header, is not overwritten: `sync` shows the difference and exits 1,
//! unless `--force`.

mod scaffold;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use scaffold::{ConsumerDeclaration, Dependency, File, Kept, Names, made_by_sync};

const EXAMPLES: &str = "\
Examples:
  sequence-guard new parcels
      ./parcels, on the checkout of sequence-guard this command was built from
  sequence-guard new parcels --path ../parcels --sequence-guard-path .
      ../parcels, on the checkout in the current directory
  sequence-guard sync --path examples/bank --check
      whether the bank's deployment files are this version's (exit 1 if not)";

/// Makes the crate of a new domain on sequence-guard, and keeps the files
/// that deploy a domain those of this version.
#[derive(Debug, Parser)]
#[command(name = "sequence-guard", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A new crate: a small domain to start from, its binaries and
    /// samples, its SAM template, samconfig.toml, build script and
    /// Cargo.lock; a git repository.
    New {
        /// The crate's name; it also names its binaries (NAME-projector,
        /// ...) and its stack.
        name: String,
        /// Where to write it (default: ./NAME); must not exist, or be empty.
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// Depend on this checkout of sequence-guard (a path dependency,
        /// relative to the crate). Without this or --sequence-guard-git: the
        /// checkout this command was built from (crates.io once it is gone).
        #[arg(long, value_name = "CHECKOUT", conflicts_with = "sequence_guard_git")]
        sequence_guard_path: Option<PathBuf>,
        /// Depend on sequence-guard from this git repository.
        #[arg(long, value_name = "URL")]
        sequence_guard_git: Option<String>,
    },
    /// The deployment files of an existing crate: template.yaml, the
    /// scripts and src/system.rs rewritten; samconfig.toml and the binaries
    /// written where missing.
    Sync {
        /// The crate's directory.
        #[arg(long, value_name = "DIR", default_value = ".")]
        path: PathBuf,
        /// Write nothing; exit 1 when a file differs or is missing.
        #[arg(long)]
        check: bool,
        /// Rewrite a template.yaml changed by hand (after moving what you
        /// added to a stack of your own, or to a declared consumer).
        #[arg(long, conflicts_with = "check")]
        force: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::New {
            name,
            path,
            sequence_guard_path,
            sequence_guard_git,
        } => new(&name, path, sequence_guard_path, sequence_guard_git),
        Command::Sync { path, check, force } => sync(&path, check, force),
    }
}

fn new(
    name: &str,
    path: Option<PathBuf>,
    checkout: Option<PathBuf>,
    git: Option<String>,
) -> ExitCode {
    let names = match Names::new(name) {
        Ok(names) => names,
        Err(err) => return refuse(&err),
    };
    let root = path.unwrap_or_else(|| PathBuf::from(name));
    if let Ok(mut entries) = std::fs::read_dir(&root)
        && entries.next().is_some()
    {
        eprintln!(
            "sequence-guard: {} exists and is not empty: choose another --path",
            root.display()
        );
        return ExitCode::from(2);
    }
    if let Err(err) = std::fs::create_dir_all(&root) {
        eprintln!("sequence-guard: {}: {err}", root.display());
        return ExitCode::FAILURE;
    }
    let dependency = match (checkout, git) {
        (Some(checkout), _) => match Dependency::checkout(&checkout, &root) {
            Ok(dependency) => dependency,
            Err(err) => return refuse(&err),
        },
        (None, Some(url)) => Dependency::Git(url),
        (None, None) => {
            let built_from = scaffold::built_from();
            let (dependency, note) =
                Dependency::from_source(&built_from, &root, env!("CARGO_PKG_VERSION"));
            if let Some(note) = note {
                eprintln!("sequence-guard: {note}");
            }
            dependency
        }
    };
    let files = match scaffold::new_crate(&names, &dependency) {
        Ok(files) => files,
        Err(err) => return fail(&err),
    };
    for file in &files {
        if let Err(err) = write(&root, file) {
            return fail(&err);
        }
    }
    let repository = if git_init(&root) {
        ", a git repository"
    } else {
        ""
    };
    let shown = root.display();
    println!(
        "created {shown}: the crate `{name}`, {} files{repository}",
        files.len()
    );
    println!("on {}", dependency.describe());
    println!("  cd {shown}");
    println!("  cargo test");
    println!(
        "  cargo run --bin {} -- events/*.json",
        names.binary("replay")
    );
    println!(
        "  cargo run --bin {} -- local/archiver.txt",
        names.binary("local")
    );
    println!("  scripts/build-lambda");
    println!("  PATH=\"$(scripts/python-tools.sh):$PATH\" sam deploy");
    ExitCode::SUCCESS
}

/// Makes `root` a git repository, as `cargo new` does: unless it is in the
/// work tree of another (and not ignored there), or git is not on the PATH.
/// Whether it did; why not, on stderr. The crate is written either way.
fn git_init(root: &Path) -> bool {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
    };
    let inside = match git(&["rev-parse", "--show-toplevel"]) {
        Ok(output) => output.status.success().then_some(output.stdout),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "sequence-guard: git is not on the PATH: {} is not a git repository (`git init` there makes it one)",
                root.display()
            );
            return false;
        }
        Err(err) => {
            eprintln!(
                "sequence-guard: git: {err}: {} is not a git repository",
                root.display()
            );
            return false;
        }
    };
    let ignored = || git(&["check-ignore", "--quiet", "."]).is_ok_and(|o| o.status.success());
    if let Some(top) = inside
        && !ignored()
    {
        eprintln!(
            "sequence-guard: {} is in the git repository {}: not a repository of its own",
            root.display(),
            String::from_utf8_lossy(&top).trim()
        );
        return false;
    }
    match git(&["init", "--quiet"]) {
        Ok(output) if output.status.success() => true,
        Ok(output) => {
            eprintln!(
                "sequence-guard: git init in {}: {}",
                root.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
            false
        }
        Err(err) => {
            eprintln!("sequence-guard: git init in {}: {err}", root.display());
            false
        }
    }
}

fn sync(root: &Path, check: bool, force: bool) -> ExitCode {
    let (names, further, lib) = match crate_names(root) {
        Ok(found) => found,
        Err(message) => {
            eprintln!("sequence-guard: {message}");
            return ExitCode::from(2);
        }
    };
    let files = match scaffold::deployment(&names, &further) {
        Ok(files) => files,
        Err(err) => return fail(&err),
    };
    // What differs, before anything is written: a template changed by
    // hand stops the whole sync (unless forced), not half of it.
    let mut differing = Vec::new();
    for file in &files {
        let path = root.join(&file.path);
        let state = match std::fs::read_to_string(&path) {
            Ok(found) if found == file.contents => continue,
            Ok(_) if file.kept == Kept::Theirs => continue,
            Ok(found) if file.path == Path::new("template.yaml") && !made_by_sync(&found) => {
                show_difference(&found, &file.contents);
                if !check && !force {
                    eprintln!(
                        "sequence-guard: {} was changed by hand since sync made it (or an earlier release made it): sync would lose the lines marked `-` above, and a deploy would delete what they declare. Declare a consumer in [package.metadata.sequence-guard] of Cargo.toml, move other resources to a stack of your own, then run sync with --force. Nothing was written.",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
                "differs (changed by hand)"
            }
            Ok(_) => "differs",
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => "missing",
            Err(err) => {
                eprintln!("sequence-guard: {}: {err}", path.display());
                return ExitCode::FAILURE;
            }
        };
        differing.push((file, state));
    }
    let mut out = std::io::stdout().lock();
    for (file, state) in &differing {
        let done = if check {
            state
        } else {
            if let Err(err) = write(root, file) {
                return fail(&err);
            }
            if *state == "missing" {
                "written"
            } else {
                "rewritten"
            }
        };
        // A closed pipe only loses the listing.
        let _ = writeln!(out, "{}: {done}", file.path.display());
    }
    // The one line sync leaves to the team, in a file of theirs: a crate
    // made before `src/system.rs` was written does not compile it yet.
    let module_missing = match std::fs::read_to_string(&lib) {
        Ok(text) => !scaffold::declares_system(&text),
        Err(err) => {
            eprintln!("sequence-guard: {}: {err}", lib.display());
            return ExitCode::FAILURE;
        }
    };
    if module_missing {
        eprintln!(
            "sequence-guard: {} does not declare the module of {} (the crate's whole system, which {} runs): add the line `pub mod system;` there",
            lib.display(),
            scaffold::SYSTEM_PATH,
            names.binary("local")
        );
    }
    if check && !differing.is_empty() {
        eprintln!(
            "sequence-guard: {} of {}'s deployment files are missing or not this version's: run `sequence-guard sync --path {}`",
            differing.len(),
            names.package,
            root.display()
        );
        return ExitCode::FAILURE;
    }
    if module_missing {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// What a team changed in a file that sync makes: the lines only it has
/// (`-`: sync would lose them) and the lines only sync's has (`+`), as
/// many as each holds of them, the first [`SHOWN`] of each.
fn show_difference(found: &str, made: &str) {
    const SHOWN: usize = 40;
    let mut count: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    for line in made.lines() {
        *count.entry(line).or_default() += 1;
    }
    let mut lost = Vec::new();
    for line in found.lines() {
        let left = count.entry(line).or_default();
        if *left > 0 {
            *left -= 1;
        } else {
            lost.push(line);
        }
    }
    let mut added = Vec::new();
    for line in made.lines() {
        if let Some(left) = count.get_mut(line)
            && *left > 0
        {
            *left -= 1;
            added.push(line);
        }
    }
    let mut err = std::io::stderr().lock();
    for (sign, lines) in [("-", &lost), ("+", &added)] {
        for line in lines.iter().take(SHOWN) {
            let _ = writeln!(err, "{sign} {line}");
        }
        if lines.len() > SHOWN {
            let _ = writeln!(err, "{sign} ... and {} more", lines.len() - SHOWN);
        }
    }
}

/// A further consumer as `[package.metadata.sequence-guard]` declares it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Declared {
    name: String,
    description: String,
    #[serde(default = "deployed_by_default")]
    deployed: bool,
    /// A process: `<crate>-<name>-process`, its deadlines and appends.
    #[serde(default)]
    process: bool,
    /// Variables of its function, each set from a parameter of the stack.
    #[serde(default)]
    environment: Vec<scaffold::DeclaredVariable>,
}

fn deployed_by_default() -> bool {
    true
}

/// The further consumers `package` declares.
fn declared_consumers(package: &serde_json::Value) -> Result<Vec<ConsumerDeclaration>, String> {
    let declared = &package["metadata"]["sequence-guard"]["consumers"];
    if declared.is_null() {
        return Ok(Vec::new());
    }
    let declared: Vec<Declared> = serde_json::from_value(declared.clone()).map_err(|err| {
        format!("[package.metadata.sequence-guard] consumers in Cargo.toml: {err}")
    })?;
    let mut consumers: Vec<ConsumerDeclaration> = Vec::with_capacity(declared.len());
    for consumer in declared {
        let consumer =
            ConsumerDeclaration::new(&consumer.name, &consumer.description, consumer.deployed)
                .and_then(|declared| declared.with(consumer.process, consumer.environment))
                .map_err(|err| err.to_string())?;
        if consumers.iter().any(|seen| seen.name == consumer.name) {
            return Err(scaffold::Error::RepeatedConsumer(consumer.name).to_string());
        }
        consumers.push(consumer);
    }
    Ok(consumers)
}

/// The package and library of the crate at `root`, as cargo reads them,
/// the further consumers it declares, and the library's source file.
fn crate_names(root: &Path) -> Result<(Names, Vec<ConsumerDeclaration>, PathBuf), String> {
    let manifest = root.join("Cargo.toml");
    let manifest = manifest
        .canonicalize()
        .map_err(|err| format!("{}: {err}", manifest.display()))?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .map_err(|err| format!("cargo metadata: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata of {}: {}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|err| format!("cargo metadata: {err}"))?;
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let package = packages
        .iter()
        .find(|package| package["manifest_path"].as_str().map(Path::new) == Some(&manifest))
        .ok_or_else(|| format!("{}: no package", manifest.display()))?;
    let name = package["name"].as_str().unwrap_or_default();
    let library = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|target| {
            target["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "lib"))
        })
        .and_then(|target| Some((target["name"].as_str()?, target["src_path"].as_str()?)))
        .ok_or_else(|| format!("{name}: no library (the binaries call its `domain()`)"))?;
    let names = Names::of_crate(name, library.0).map_err(|err| err.to_string())?;
    Ok((
        names,
        declared_consumers(package)?,
        PathBuf::from(library.1),
    ))
}

fn write(root: &Path, file: &File) -> Result<(), scaffold::Error> {
    let path = root.join(&file.path);
    let io = |source| scaffold::Error::Io {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(&path, &file.contents).map_err(io)?;
    #[cfg(unix)]
    if file.executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
    }
    Ok(())
}

/// Exit code 2: the input cannot work.
fn refuse(err: &scaffold::Error) -> ExitCode {
    eprintln!("sequence-guard: {err}");
    ExitCode::from(2)
}

/// Exit code 1: the input was fine, the work failed.
fn fail(err: &scaffold::Error) -> ExitCode {
    eprintln!("sequence-guard: {err}");
    ExitCode::FAILURE
}
