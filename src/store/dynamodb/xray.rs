//! X-Ray subsegments for the DynamoDB calls, so that the function's trace
//! (`Tracing: Active`) shows each batch's requests: one UDP datagram per
//! call to the X-Ray daemon that Lambda runs (`AWS_XRAY_DAEMON_ADDRESS`),
//! under the invocation's segment (its trace header: `crate::trace`, one
//! per invocation even when several run at once). Nothing is sent when there is
//! no daemon, no trace, or the trace is not sampled.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where subsegments go.
#[derive(Debug)]
pub(super) struct XRay {
    socket: UdpSocket,
    daemon: SocketAddr,
    next_id: AtomicU64,
}

impl XRay {
    /// The daemon of `AWS_XRAY_DAEMON_ADDRESS` (`host:port`, or Lambda's
    /// `udp:host:port tcp:host:port` form); `None` without one.
    pub(super) fn from_env() -> Option<XRay> {
        let address = std::env::var("AWS_XRAY_DAEMON_ADDRESS").ok()?;
        let daemon = address
            .split_whitespace()
            .find_map(|part| part.strip_prefix("udp:"))
            .unwrap_or(address.trim())
            // Resolved once, not at every send.
            .to_socket_addrs()
            .ok()?
            .next()?;
        // Any local address: Lambda's daemon is on a link-local address
        // (169.254.79.129:2000), which a socket bound to loopback cannot reach.
        let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
        socket.set_nonblocking(true).ok()?;
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |since| since.as_nanos() as u64)
            | 1;
        Some(XRay {
            socket,
            daemon,
            next_id: AtomicU64::new(seed),
        })
    }

    /// Sends the subsegment of one DynamoDB call, timed from `start` to
    /// `end` (epoch seconds); `failed` marks an error (a failed condition
    /// included: X-Ray shows it, the runner decides again).
    pub(super) fn record(&self, operation: &str, table: &str, start: f64, end: f64, failed: bool) {
        let Some((root, parent)) = current_trace() else {
            return;
        };
        // A new id: xorshift over a per-process sequence, 16 hex digits.
        let mut id = self
            .next_id
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        id ^= id << 13;
        id ^= id >> 7;
        id ^= id << 17;
        let document = serde_json::json!({
            "name": "DynamoDB",
            "id": format!("{id:016x}"),
            "trace_id": root,
            "parent_id": parent,
            "type": "subsegment",
            "namespace": "aws",
            "start_time": start,
            "end_time": end,
            "error": failed,
            "aws": { "operation": operation, "table_name": table },
        });
        let datagram = format!("{{\"format\": \"json\", \"version\": 1}}\n{document}");
        // Best effort, as the X-Ray SDKs do: a lost subsegment costs nothing else.
        let _ = self.socket.send_to(datagram.as_bytes(), self.daemon);
    }
}

/// The invocation's trace root and segment id, when it is sampled.
fn current_trace() -> Option<(String, String)> {
    sampled(&crate::trace::current()?)
}

/// The root and parent of a trace header, when it is sampled.
fn sampled(header: &str) -> Option<(String, String)> {
    let field = |name: &str| {
        header
            .split(';')
            .find_map(|part| part.trim().strip_prefix(name))
            .map(str::to_owned)
    };
    if field("Sampled=").as_deref() != Some("1") {
        return None;
    }
    Some((field("Root=")?, field("Parent=")?))
}

/// Now, in epoch seconds, as X-Ray wants it.
pub(super) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sampled_trace_with_a_root_and_a_parent_is_recorded() {
        assert_eq!(
            sampled("Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1"),
            Some((
                "1-5bef4de7-ad49b0e87f6ef6c87fc2e700".to_owned(),
                "9a9197af755a6419".to_owned()
            ))
        );
        assert_eq!(
            sampled("Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=0"),
            None
        );
        assert_eq!(
            sampled("Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Sampled=1"),
            None
        );
        assert_eq!(sampled(""), None);
    }
}
