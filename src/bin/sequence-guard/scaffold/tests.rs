//! The generator's own checks: names, substitutions, dependency lines,
//! relative paths.

use std::path::{Path, PathBuf};

use super::dependency::relative;
use super::template::{builds_only, once, samconfig, substitute, template};
use super::{Dependency, Error, MAX_NAME, Names, new_crate};

#[test]
fn a_name_must_do_for_a_crate_and_a_stack() {
    for good in ["parcels", "parcel-service", "p2", "a"] {
        assert!(Names::new(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "Parcels",
        "2parcels",
        "parcel_service",
        "parcels-",
        "-p",
        "a b",
        "ä",
    ] {
        assert!(matches!(Names::new(bad), Err(Error::BadName(_))), "{bad}");
    }
    assert!(Names::new(&"a".repeat(MAX_NAME)).is_ok());
    assert!(Names::new(&"a".repeat(MAX_NAME + 1)).is_err());
    for reserved in ["test", "self", "sequence-guard", "std"] {
        assert!(
            matches!(Names::new(reserved), Err(Error::ReservedName(_))),
            "{reserved}"
        );
    }
}

#[test]
fn the_names_derive_from_the_crate() {
    let names = Names::new("parcel-service").expect("a good name");
    assert_eq!(names.library, "parcel_service");
    assert_eq!(names.binary("projector"), "parcel-service-projector");
}

#[test]
fn our_files_fit_every_substitution() {
    let names = Names::new("parcels").expect("a good name");
    let template = template(&names).expect("the template");
    assert!(template.contains("        Binary: parcels-projector\n"));
    assert!(template.contains("        Binary: parcels-dispatcher\n"));
    assert!(!template.contains("Status"), "without the second consumer");
    let samconfig = samconfig(&names).expect("samconfig.toml");
    assert!(samconfig.contains("stack_name = \"parcels\"\n"));
}

#[test]
fn a_substitution_that_no_longer_fits_is_an_error() {
    let err = substitute(
        "template.yaml",
        "Binary: x",
        &[once("Binary: projector", "y".into())],
    )
    .expect_err("drifted");
    assert_eq!(
        err.to_string(),
        "sequence-guard's template.yaml no longer fits the generator: `Binary: projector` found 0 times, expected 1"
    );
}

#[test]
fn a_binary_the_crate_lacks_is_an_error() {
    let names = Names::new("parcels").expect("a good name");
    let template = "        Binary: parcels-projector\n        Binary: status-projector\n";
    let err = builds_only(&names, template).expect_err("unknown");
    assert!(
        matches!(err, Error::UnknownBinary(ref b) if b == "status-projector"),
        "{err}"
    );
    assert!(builds_only(&names, "        Binary: parcels-dispatcher\n").is_ok());
}

#[test]
fn every_placeholder_is_filled() {
    let names = Names::new("parcels").expect("a good name");
    let dependency = Dependency::Version("0.2.0".into());
    for file in new_crate(&names, &dependency).expect("the files") {
        assert!(
            !file.contents.contains("{{"),
            "{}: a placeholder left",
            file.path.display()
        );
    }
}

#[test]
fn the_dependency_lines() {
    let version = Dependency::Version("0.2.0".into());
    assert_eq!(version.line(&[]), r#"sequence-guard = "0.2.0""#);
    assert_eq!(
        version.line(&["test-support"]),
        r#"sequence-guard = { version = "0.2.0", features = ["test-support"] }"#
    );
    let path = Dependency::Path("../sequence-guard".into());
    assert_eq!(
        path.line(&[]),
        r#"sequence-guard = { path = "../sequence-guard" }"#
    );
    let git = Dependency::Git("https://example.com/a\"b".into());
    assert_eq!(
        git.line(&["test-support"]),
        r#"sequence-guard = { git = "https://example.com/a\"b", features = ["test-support"] }"#
    );
}

#[test]
fn relative_paths() {
    let rel = |a: &str, b: &str| relative(Path::new(a), Path::new(b));
    assert_eq!(rel("/w/parcels", "/w/main"), Some(PathBuf::from("../main")));
    assert_eq!(
        rel("/w/main/target/tmp/x", "/w/main"),
        Some(PathBuf::from("../../.."))
    );
    assert_eq!(
        rel("/w/main", "/w/main/vendor/sg"),
        Some(PathBuf::from("vendor/sg"))
    );
    assert_eq!(rel("/w", "/w"), Some(PathBuf::from(".")));
    assert_eq!(rel("/tmp/x", "/w/main"), None);
}
