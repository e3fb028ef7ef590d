//! `scripts/build-lambda`, the crate's and ours: after `sam build --beta-features`
//! shares each function's build with its Managed Instances twin (in
//! `<Function>-Shared/`), each finds every bootstrap where SAM wrote it; and
//! `scripts/check-bootstraps`, which both use, reads the other layout SAM
//! writes (`<Function>/`) and names what is wrong.
//!
//! The pinned `sam build` runs for real, on a stand-in for cargo that writes
//! an AArch64 ELF header where `cargo lambda build` writes a bootstrap: a few
//! seconds, not the ten minutes of a release build for arm64.

use std::ffi::OsString;

use super::*;

/// A stand-in for cargo: `cargo metadata` names the target directory,
/// `cargo lambda build ... --bin NAME` writes `<target>/lambda/NAME/bootstrap`,
/// an ELF header of a 64-bit little-endian AArch64 executable.
const CARGO: &str = r#"#!/usr/bin/env bash
set -euo pipefail
target="${CARGO_TARGET_DIR:-$PWD/target}"
case "${1:-}" in
  metadata)
    printf '{"packages":[],"target_directory":"%s"}\n' "$target" ;;
  lambda)
    bin=""
    while [ $# -gt 0 ]; do [ "$1" = --bin ] && bin=$2; shift; done
    mkdir -p "$target/lambda/$bin"
    printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\002\000\267\000\001\000\000\000' > "$target/lambda/$bin/bootstrap"
    head -c 40 /dev/zero >> "$target/lambda/$bin/bootstrap"
    chmod +x "$target/lambda/$bin/bootstrap" ;;
  *) echo "the stand-in for cargo knows no: $*" >&2; exit 2 ;;
esac
"#;

/// A PATH whose `cargo` is the stand-in (in `dir`), without rustup (the
/// scripts add the arm64 target only with it), `first` before the rest.
fn path_with_stand_in(dir: &Path, first: Option<&Path>) -> OsString {
    let bin = dir.join("stand-in");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, CARGO).expect("write the stand-in");
    make_executable(&cargo);
    let system = std::env::var_os("PATH").unwrap_or_default();
    let kept = std::env::split_paths(&system)
        .filter(|dir| !dir.join("cargo").exists() && !dir.join("rustup").exists());
    let dirs = first
        .map(Path::to_owned)
        .into_iter()
        .chain([bin])
        .chain(kept);
    std::env::join_paths(dirs).expect("a PATH")
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `scripts/build-lambda` of `dir`, with the stand-in for cargo.
fn build_lambda(dir: &Path) -> Output {
    tools();
    run(Command::new(dir.join("scripts/build-lambda"))
        .current_dir(dir)
        .env("PATH", path_with_stand_in(dir, None))
        .env_remove("CARGO_TARGET_DIR"))
}

/// Each bootstrap `stdout` names, with the functions it serves, is an
/// AArch64 executable in its shared folder.
fn assert_found(stdout: &str, shared: &[&str]) {
    for function in shared {
        let line = format!(
            ".aws-sam/build/{function}-Shared/bootstrap ({function}, Managed{function}): 64 bytes, AArch64\n"
        );
        assert!(stdout.contains(&line), "{line} missing:\n{stdout}");
    }
}

#[test]
fn the_crates_build_script_finds_each_bootstrap_sam_build_wrote() {
    // GIVEN a new crate, its projector, dispatcher and archiver each on
    // Lambda's compute and on Managed Instances
    let dir = scratch("build-lambda-crate").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    // WHEN its build script runs `sam build --beta-features`
    let built = build_lambda(&dir);
    // THEN it finds each function's bootstrap in the folder its twin shares
    assert!(built.status.success(), "{}", seen(&built));
    let stdout = text(&built.stdout);
    assert_found(
        &stdout,
        &[
            "ProjectorFunction",
            "DispatcherFunction",
            "ArchiverProjectorFunction",
        ],
    );
    assert_eq!(stdout.matches(", AArch64\n").count(), 3, "{stdout}");
}

#[test]
fn our_build_script_finds_each_bootstrap_cargo_lambda_and_sam_build_wrote() {
    // GIVEN our build script, with what it reads, in a directory of its own
    let dir = scratch("build-lambda-ours");
    for file in [
        "scripts/build-lambda",
        "scripts/check-bootstraps",
        "scripts/python-tools.sh",
        "scripts/requirements-tools.txt",
        "template.yaml",
        "samconfig.toml",
        "Cargo.toml",
    ] {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().expect("a folder")).expect("mkdir");
        std::fs::copy(root().join(file), &to).expect(file);
    }
    // WHEN it runs `cargo lambda build` and `sam build --beta-features`
    let built = build_lambda(&dir);
    // THEN it finds each bootstrap, the shop's consumer's and process's too
    assert!(built.status.success(), "{}", seen(&built));
    let stdout = text(&built.stdout);
    for binary in ["projector", "dispatcher"] {
        let line = format!("/target/lambda/{binary}/bootstrap: 64 bytes, AArch64\n");
        assert!(stdout.contains(&line), "{line} missing:\n{stdout}");
    }
    assert_found(
        &stdout,
        &[
            "ProjectorFunction",
            "StatusProjectorFunction",
            "PaymentsProjectorFunction",
            "DispatcherFunction",
        ],
    );
}

#[test]
fn check_bootstraps_reads_a_build_without_shared_folders_and_names_what_is_wrong() {
    // GIVEN a crate built by `sam build` without its beta features: a
    // folder for each function, the twins' too
    let dir = scratch("check-bootstraps").join("parcels");
    let made = new_crate("parcels", &dir);
    assert!(made.status.success(), "{}", seen(&made));
    let path = path_with_stand_in(&dir, Some(tools()));
    let built = run(Command::new(tools().join("sam"))
        .args(["build", "--no-beta-features"])
        .current_dir(&dir)
        .env("PATH", &path)
        .env("SAM_CLI_TELEMETRY", "0")
        .env_remove("CARGO_TARGET_DIR"));
    assert!(built.status.success(), "sam build: {}", seen(&built));
    let check = || {
        run(Command::new(dir.join("scripts/check-bootstraps"))
            .current_dir(&dir)
            .env("PATH", &path))
    };
    // WHEN checked, THEN each function's own bootstrap is found
    let checked = check();
    assert!(checked.status.success(), "{}", seen(&checked));
    let stdout = text(&checked.stdout);
    for function in ["Projector", "Dispatcher", "ArchiverProjector"] {
        for twin in ["", "Managed"] {
            let function = format!("{twin}{function}Function");
            let line =
                format!(".aws-sam/build/{function}/bootstrap ({function}): 64 bytes, AArch64\n");
            assert!(stdout.contains(&line), "{line} missing:\n{stdout}");
        }
    }
    // WHEN one is built for x86-64 and another is missing
    let x86 = dir.join(".aws-sam/build/DispatcherFunction/bootstrap");
    let mut header = std::fs::read(&x86).expect("a bootstrap");
    header[18] = 62;
    std::fs::write(&x86, header).expect("write");
    std::fs::remove_file(dir.join(".aws-sam/build/ManagedDispatcherFunction/bootstrap"))
        .expect("rm");
    // THEN the check fails, naming each and its function
    let checked = check();
    assert_eq!(checked.status.code(), Some(1), "{}", seen(&checked));
    let stderr = text(&checked.stderr);
    for line in [
        ".aws-sam/build/DispatcherFunction/bootstrap (DispatcherFunction): x86-64, expected AArch64\n",
        ".aws-sam/build/ManagedDispatcherFunction/bootstrap (ManagedDispatcherFunction): missing (No such file or directory)\n",
    ] {
        assert!(stderr.contains(line), "{line} missing:\n{stderr}");
    }
    assert_eq!(text(&checked.stdout).matches(", AArch64\n").count(), 4);
}
