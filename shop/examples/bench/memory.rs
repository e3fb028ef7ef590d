//! The release projector's peak memory after the mix, with glibc's defaults
//! and with the template's (or given) `GLIBC_TUNABLES`.

use std::path::Path;

use aws_lambda_events::event::sqs::SqsEvent;

use crate::figure_files::{Figure, Tables};
use crate::functions::{Reach, projector_figures, template_tunables};

/// The release projector's peak memory after the mix's batches, once for
/// each of `tunables` (`None`: glibc's defaults).
pub async fn print_memory(
    endpoint: &str,
    projector: &Path,
    batches: &[SqsEvent],
    tunables: &[Option<&str>],
    tables: &mut Tables,
) {
    tables.start(
        "memory",
        "The release projector's peak memory (VmHWM) after the mix's batches",
        "scripts/bench",
        "figure",
        &[],
    );
    let mut defaults = None;
    for (index, &tunables) in tunables.iter().enumerate() {
        let table = format!("projector-mix-{index}");
        let plain = Reach {
            setup: endpoint,
            function: endpoint,
            ca: None,
            table: &table,
            tunables,
        };
        let with = tunables.map_or(String::new(), |value| format!(", GLIBC_TUNABLES={value}"));
        match projector_figures(projector, &plain, batches, false).await {
            Some(start) => {
                let megabytes = start.peak_kb as f64 / 1024.0;
                println!(
                    "peak memory (VmHWM) after {} batches of the mix{with}: {megabytes:.1} MB",
                    batches.len(),
                );
                let figure = match tunables {
                    None => {
                        defaults = Some(megabytes);
                        Figure::new("peak memory, glibc's defaults", megabytes, 1, "MB")
                    }
                    Some(value) => {
                        let what = format!("peak memory, GLIBC_TUNABLES={value}");
                        let figure = Figure::new(&what, megabytes, 1, "MB");
                        match defaults {
                            Some(defaults) => figure.baseline("glibc's defaults", defaults),
                            None => figure,
                        }
                    }
                };
                let figure = if tunables.is_some() && tunables == template_tunables() {
                    figure.headline("peak memory of the projector after 300 batches")
                } else {
                    figure
                };
                tables.record("memory", figure);
            }
            None => println!("peak memory{with}: not measured"),
        }
    }
}
