//! The fuzz targets' harness on the committed seeds, in every `cargo test`,
//! so that the targets keep compiling and their properties keep holding.
//! Fuzzing itself: see docs/testing.md (`cargo +nightly fuzz run ...`).

#[path = "../fuzz/harness.rs"]
mod harness;

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .filter_map(|entry| entry.ok())
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).expect("seed"),
            )
        })
        .collect();
    seeds.sort();
    seeds
}

#[test]
fn the_body_target_holds_on_its_seeds() {
    let seeds = seeds("parse_body");
    assert!(seeds.len() >= 10, "the seed corpus is committed");
    for (_, data) in seeds {
        harness::body(&data);
    }
}

#[test]
fn the_runner_target_holds_on_its_seeds() {
    let seeds = seeds("runner");
    assert!(seeds.len() >= 10, "the seed corpus is committed");
    for (_, data) in seeds {
        harness::batch(&data);
    }
}
