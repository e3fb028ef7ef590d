//! The generator's own checks: names, substitutions, dependency lines,
//! relative paths.

use std::path::{Path, PathBuf};

use super::declaration::DeclaredDefault;
use super::dependency::relative;
use super::samconfig::samconfig;
use super::stack::render_with;
use super::template::{builds_only, made_by_sync, once, substitute, template};
use super::{
    ConsumerDeclaration, DeclaredVariable, Dependency, Error, Kept, MAX_NAME, Names,
    declares_system, deployment, new_crate,
};

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
    let template = template(&names, &[]).expect("the template");
    assert!(template.contains("        Binary: parcels-projector\n"));
    assert!(template.contains("        Binary: parcels-dispatcher\n"));
    assert!(!template.contains("Status"), "without the second consumer");
    let samconfig = samconfig(&names.package, &template).expect("samconfig.toml");
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
    let err = builds_only(&names, &[], template).expect_err("unknown");
    assert!(
        matches!(err, Error::UnknownBinary(ref b) if b == "status-projector"),
        "{err}"
    );
    assert!(builds_only(&names, &[], "        Binary: parcels-dispatcher\n").is_ok());
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
fn without_a_flag_the_crate_is_on_the_checkout_the_command_was_built_from() {
    // GIVEN the checkout this command was built from
    let checkout = super::built_from();
    assert!(
        checkout.join("scaffold/Cargo.toml").is_file(),
        "{checkout:?}"
    );
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // THEN a crate depends on it, by a path from the crate, and no note
    let (dependency, note) = Dependency::from_source(&checkout, &crate_root, "0.2.0");
    assert_eq!(dependency, Dependency::Path(PathBuf::from("../..")));
    assert_eq!(note, None);
}

#[test]
fn once_the_checkout_is_gone_the_crate_is_on_crates_io_and_says_why() {
    let crate_root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // GIVEN a source that is gone, or that is not sequence-guard
    let gone = crate_root.join("no-such-checkout");
    let other = crate_root.join("src");
    for (source, why) in [
        (&gone, format!("({}: ", gone.display())),
        (&other, "is not a checkout of sequence-guard".to_owned()),
    ] {
        // THEN crates.io, and a note naming the source and the way out
        let (dependency, note) = Dependency::from_source(source, crate_root, "0.2.0");
        assert_eq!(dependency, Dependency::Version("0.2.0".into()));
        let note = note.expect("a note");
        for said in [
            why.as_str(),
            "sequence-guard 0.2.0 from crates.io",
            "--sequence-guard-path",
            "--sequence-guard-git",
        ] {
            assert!(note.contains(said), "{said}: {note}");
        }
    }
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

/// The worked example's further consumer, as our template.yaml has it.
fn status() -> ConsumerDeclaration {
    ConsumerDeclaration::new(
        "status",
        "Projects each order's status (no personal data) from its FIFO queue, subscribed to the events topic, into the status table.",
        false,
    )
    .expect("a good declaration")
}

/// The worked example's process, as our template.yaml has it.
fn payments() -> ConsumerDeclaration {
    ConsumerDeclaration::new(
        "payments",
        "Each order's payment: cancels an order not paid in time, requests refunds.",
        false,
    )
    .and_then(|declared| {
        declared.with(
            true,
            vec![DeclaredVariable {
                name: "PAYMENT_WINDOW_SECONDS".into(),
                description: "Seconds an order may wait for its payment before the process cancels it".into(),
                default: DeclaredDefault::Text("900".into()),
                min: Some(1),
                max: Some(604_800),
            }],
        )
    })
    .expect("a good declaration")
}

#[test]
fn our_template_is_the_stack_rendered_for_the_shop() {
    // GIVEN the stack rendered for the shop: the first consumer, `status`
    // and the process `payments`
    let rendered =
        render_with(&|tool| tool.to_owned(), &[status(), payments()]).expect("the stack");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");
    // (SEQUENCE_GUARD_BLESS=1 writes it, after a change of templates/stack/)
    if std::env::var_os("SEQUENCE_GUARD_BLESS").is_some() {
        std::fs::write(path, &rendered).expect("template.yaml written");
    }
    // THEN template.yaml is exactly that: nobody edits it by hand
    let ours = std::fs::read_to_string(path).expect("template.yaml");
    assert!(
        ours == rendered,
        "template.yaml is not templates/stack/ rendered: run `SEQUENCE_GUARD_BLESS=1 cargo test -p sequence-guard-scaffold our_template`"
    );
}

#[test]
fn every_consumer_has_what_the_first_has() {
    // GIVEN a crate with three further consumers, one of them a process
    let names = Names::new("parcels").expect("a good name");
    let further = [
        ConsumerDeclaration::new("audit", "Each parcel's audit trail.", true).expect("audit"),
        ConsumerDeclaration::new("late-mail", "Parcels that are late.", false).expect("late"),
        ConsumerDeclaration::new("returns", "Returns a parcel not collected.", false)
            .and_then(|declared| declared.with(true, Vec::new()))
            .expect("returns"),
    ];
    let text = template(&names, &further).expect("the template");
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let resources = yaml["Resources"].as_mapping().expect("resources");
    let ids: Vec<&str> = resources.keys().filter_map(|k| k.as_str()).collect();
    // THEN each has the first consumer's resources, under its own prefix
    let first: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| resources[*id]["Condition"].is_null() || *id == "EventsQueuePolicy")
        .filter(|id| {
            ![
                "AlarmTopicKey",
                "AlarmTopicKeyAlias",
                "AlarmTopic",
                "AlarmTopicPolicy",
                "Dashboard",
            ]
            .contains(id)
        })
        .collect();
    for prefix in ["Audit", "LateMail", "Returns"] {
        for id in &first {
            let theirs = match *id {
                "ProjectionTable" => format!("{prefix}Table"),
                id if id.starts_with("Events") => id.replacen("Events", prefix, 1),
                id => format!("{prefix}{id}"),
            };
            assert!(
                ids.contains(&theirs.as_str()),
                "{prefix}: no {theirs} (the first has {id})"
            );
            assert_eq!(
                resources[theirs.as_str()]["Condition"].as_str(),
                Some(format!("With{prefix}Consumer").as_str()),
                "{theirs}"
            );
        }
        // its own sweep, its own binaries, its own row on the dashboard
        let function = &resources[format!("{prefix}ProjectorFunction").as_str()];
        assert!(!function["Properties"]["Events"]["ParkedSweep"].is_null());
        assert!(text.contains(&format!("${{{prefix}ProjectorWidgets}}")));
    }
    assert!(text.contains("        Binary: parcels-late-mail-projector\n"));
    assert!(text.contains("        Binary: parcels-returns-process\n"));
    let files = deployment(&names, &further).expect("the files");
    for tool in ["projector", "replay", "rebuild", "verify", "inspect"] {
        let bin = files
            .iter()
            .find(|file| file.path == Path::new(&format!("src/bin/parcels-late-mail-{tool}.rs")))
            .unwrap_or_else(|| panic!("no late-mail {tool}"));
        assert!(bin.contents.contains(&format!(
            "sequence_guard::cli::{tool}(parcels::late_mail::domain())"
        )));
    }
}

#[test]
fn a_consumer_name_must_do_for_its_resources() {
    for bad in ["", "Status", "9s", "a_b", "a-", "a--b", "thirteen-char"] {
        assert!(
            matches!(
                ConsumerDeclaration::new(bad, "d", true),
                Err(Error::BadConsumer(_))
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        ConsumerDeclaration::new("events", "d", true),
        Err(Error::ReservedConsumer(_))
    ));
    // A name that makes one the stack has: refused when rendered.
    let projection = ConsumerDeclaration::new("projection", "d", true).expect("well formed");
    let names = Names::new("parcels").expect("a good name");
    assert!(matches!(
        template(&names, &[projection]),
        Err(Error::NameTaken(name)) if name == "ProjectionTable"
    ));
    assert!(matches!(
        ConsumerDeclaration::new("audit", "a \"quoted\" text", true),
        Err(Error::BadConsumerDescription(_))
    ));
}

#[test]
fn sync_knows_the_template_it_made() {
    let names = Names::new("parcels").expect("a good name");
    let made = template(&names, &[]).expect("the template");
    assert!(made_by_sync(&made));
    let edited = made.replace(
        "Resources:\n",
        "Resources:\n  TheirQueue:\n    Type: AWS::SQS::Queue\n",
    );
    assert!(!made_by_sync(&edited), "an edit by hand is seen");
    let without_header: String = made.lines().skip(4).map(|l| format!("{l}\n")).collect();
    assert!(
        !made_by_sync(&without_header),
        "an earlier release's template"
    );
}

#[test]
fn a_new_crate_declares_the_process_it_shows() {
    // GIVEN a new crate's files
    let names = Names::new("parcels").expect("a good name");
    let dependency = Dependency::Version("0.2.0".into());
    let files = new_crate(&names, &dependency).expect("the files");
    let contents = |path: &str| {
        files
            .iter()
            .find(|file| file.path == Path::new(path))
            .map(|file| file.contents.as_str())
            .unwrap_or_else(|| panic!("{path} missing"))
    };
    // THEN its Cargo.toml declares the process as `new` rendered it (what
    // `sync` reads back), and its template and binaries have it
    let archiver = super::archiver().expect("the declaration");
    let entry = format!(
        "{{ name = \"{}\", description = \"{}\", deployed = {}, process = {} }}",
        archiver.name, archiver.description, archiver.deployed, archiver.process
    );
    assert!(contents("Cargo.toml").contains(&entry), "{entry}");
    assert!(archiver.process && archiver.environment.is_empty());
    assert!(contents("src/lib.rs").contains("\npub mod archiver;\n"));
    assert!(contents("src/archiver.rs").contains("Process::new(\"archiver\", crate::domain())"));
    assert!(contents("template.yaml").contains("        Binary: parcels-archiver-process\n"));
    assert!(
        contents("src/bin/parcels-archiver-process.rs")
            .contains("sequence_guard::cli::projector(parcels::archiver::domain())")
    );
}

#[test]
fn only_the_first_consumer_opens_personal_data() {
    // GIVEN a crate with a further consumer and a further process
    let names = Names::new("parcels").expect("a good name");
    let further = [
        ConsumerDeclaration::new("audit", "Each parcel's audit trail.", true).expect("audit"),
        ConsumerDeclaration::new("returns", "Returns a parcel not collected.", false)
            .and_then(|declared| declared.with(true, Vec::new()))
            .expect("returns"),
    ];
    let text = template(&names, &further).expect("the template");
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("YAML");
    let resources = &yaml["Resources"];
    let says = |value: &serde_yaml::Value, what: &str| {
        serde_yaml::to_string(value).expect("YAML").contains(what)
    };
    // THEN the stack has the key and the tools' policies, with the producer
    for name in [
        "PersonalDataKey",
        "PersonalDataKeyAlias",
        "EraseToolPolicy",
        "AppendPersonalDataPolicy",
    ] {
        assert_eq!(resources[name]["Condition"], "WithProducer", "{name}");
    }
    for output in [
        "PersonalDataKeyArn",
        "EraseToolPolicyArn",
        "AppendPersonalDataPolicyArn",
    ] {
        assert_eq!(yaml["Outputs"][output]["Condition"], "WithProducer");
    }
    // AND the first consumer may open personal data: the key, its items
    let first = &resources["ProjectorRole"];
    assert!(says(first, "kms:Decrypt") && says(first, "SUBJECT#*"));
    assert!(says(
        &resources["ProjectorFunction"]["Properties"]["Environment"],
        "PERSONAL_DATA_KEY"
    ));
    // AND no further consumer may: no KMS right, no key, no key item
    for id in ["Audit", "Returns"] {
        let role = &resources[format!("{id}ProjectorRole").as_str()];
        let function = &resources[format!("{id}ProjectorFunction").as_str()];
        for what in ["kms:", "PersonalDataKey", "SUBJECT#", "PERSONAL_DATA_KEY"] {
            assert!(!says(role, what), "{id}'s role: {what}");
            assert!(!says(function, what), "{id}'s function: {what}");
        }
    }
}

#[test]
fn the_system_holds_every_declared_consumer_and_sync_keeps_it() {
    // GIVEN a crate with two further consumers, one a process
    let names = Names::new("parcel-service").expect("a good name");
    let further = [
        ConsumerDeclaration::new("audit", "Each parcel's audit trail.", true).expect("audit"),
        ConsumerDeclaration::new("late-mail", "Returns a parcel not collected.", false)
            .and_then(|declared| declared.with(true, Vec::new()))
            .expect("late-mail"),
    ];
    let files = deployment(&names, &further).expect("the files");
    let file = |path: &str| {
        files
            .iter()
            .find(|file| file.path == Path::new(path))
            .unwrap_or_else(|| panic!("{path} missing"))
    };
    // THEN its system is the store and every consumer, by the template's
    // names, each on its module's domain (as its binaries run it), and
    // sync rewrites it: a consumer declared is in it after the next sync
    let system = file("src/system.rs");
    assert_eq!(system.kept, Kept::Ours);
    assert!(
        system.contents.contains(
            "    System::new(crate::domain())\n        .consumer(\"projector\", crate::domain())\n        .consumer(\"audit\", crate::audit::domain())\n        .consumer(\"late-mail\", crate::late_mail::domain())\n}\n"
        ),
        "{}",
        system.contents
    );
    assert!(system.contents.contains("fn the_system_is_whole()"));
    // AND its local binary runs it; it is the team's once written
    let local = file("src/bin/parcel-service-local.rs");
    assert_eq!(local.kept, Kept::Theirs);
    assert!(
        local
            .contents
            .contains("sequence_guard::cli::local(parcel_service::system::system())"),
        "{}",
        local.contents
    );
    // AND without further consumers: the store and the projector
    let alone = deployment(&names, &[]).expect("the files");
    let alone = alone
        .iter()
        .find(|file| file.path == Path::new("src/system.rs"))
        .expect("src/system.rs");
    assert!(
        alone.contents.contains(
            "    System::new(crate::domain()).consumer(\"projector\", crate::domain())\n}\n"
        ),
        "{}",
        alone.contents
    );
}

#[test]
fn a_new_crate_runs_its_system_locally_and_tests_it() {
    let names = Names::new("parcels").expect("a good name");
    let files = new_crate(&names, &Dependency::Version("0.2.0".into())).expect("the files");
    let contents = |path: &str| {
        files
            .iter()
            .find(|file| file.path == Path::new(path))
            .map(|file| file.contents.as_str())
            .unwrap_or_else(|| panic!("{path} missing"))
    };
    // Its library declares the module sync writes; its system has the archiver
    assert!(declares_system(contents("src/lib.rs")));
    assert!(
        contents("src/system.rs").contains(".consumer(\"archiver\", crate::archiver::domain())")
    );
    // Its script runs the archiver end to end; its test runs the script
    let script = contents("local/archiver.txt");
    assert!(script.contains("cargo run --bin parcels-local -- local/archiver.txt"));
    for command in [
        "clock 1800000000",
        "append item-1 ItemCreated",
        "sweep",
        "show",
    ] {
        assert!(script.contains(command), "{command}");
    }
    let test = contents("tests/local.rs");
    assert!(test.contains("env!(\"CARGO_BIN_EXE_parcels-local\")"));
    assert!(test.contains(".arg(\"local/archiver.txt\")"));
    // Its README shows the one command
    assert!(contents("README.md").contains("cargo run --bin parcels-local -- local/archiver.txt"));
}

#[test]
fn sync_sees_whether_the_library_declares_the_system() {
    for declared in [
        "pub mod system;",
        "mod system;",
        "pub(crate) mod system;",
        "  pub mod system {",
    ] {
        assert!(
            declares_system(&format!("//! a crate\n{declared}\n")),
            "{declared}"
        );
    }
    for not in [
        "pub mod systems;",
        "// pub mod system is missing",
        "pub mod archiver;",
    ] {
        assert!(!declares_system(not), "{not}");
    }
}
