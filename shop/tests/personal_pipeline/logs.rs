//! The test process's own log lines: the producer's `append`, `erase` and
//! `seal_data` run here (the `append` and `erase` binaries install no
//! subscriber). Every line of this crate and of the engine, at `TRACE`,
//! kept for the markers.

use std::sync::{Mutex, Once};

use lambda_runtime::tracing::subscriber::filter::EnvFilter;
use lambda_runtime::tracing::subscriber::fmt::MakeWriter;
use lambda_runtime::tracing::subscriber::{self, prelude::*};

static CAPTURED: Mutex<Vec<u8>> = Mutex::new(Vec::new());

#[derive(Clone, Copy)]
struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl MakeWriter<'_> for Capture {
    type Writer = Capture;

    fn make_writer(&self) -> Capture {
        Capture
    }
}

/// Installs the process's subscriber (once): the engine's and the shop's
/// lines at `TRACE`, into a buffer.
pub fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let layer = subscriber::fmt::layer()
            .with_writer(Capture)
            .with_filter(EnvFilter::new("sequence_guard=trace,shop=trace"));
        let _ = subscriber::registry().with(layer).try_init();
    });
}

/// Every line kept so far.
pub fn captured() -> String {
    String::from_utf8_lossy(&CAPTURED.lock().expect("captured")).into_owned()
}
