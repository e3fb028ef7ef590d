//! The release projector's peak memory after the mix, with glibc's defaults
//! and with the template's (or given) `GLIBC_TUNABLES`.

use std::path::Path;

use aws_lambda_events::event::sqs::SqsEvent;

use crate::functions::{Reach, projector_figures};

/// The release projector's peak memory after the mix's batches, once for
/// each of `tunables` (`None`: glibc's defaults).
pub async fn print_memory(
    endpoint: &str,
    projector: &Path,
    batches: &[SqsEvent],
    tunables: &[Option<&str>],
) {
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
            Some(start) => println!(
                "peak memory (VmHWM) after {} batches of the mix{with}: {:.1} MB",
                batches.len(),
                start.peak_kb as f64 / 1024.0
            ),
            None => println!("peak memory{with}: not measured"),
        }
    }
}
