//! What SQS takes: a message body's size and characters, the group and
//! deduplication ids, the trace header. The producer checks what it stores
//! against these, and the dispatcher what it sends; both depend on this
//! module, not on each other.

/// The largest message body, in bytes: what an SQS message holds (256
/// KiB). An append takes no larger body, so that the dispatcher can send
/// every event it stores.
pub const MAX_BODY: usize = 256 * 1024;

/// The most characters SQS takes in a `MessageGroupId` or a
/// `MessageDeduplicationId`.
pub const MAX_SQS_ID: usize = 128;

/// A character SQS takes in a message body: `#x9 | #xA | #xD | #x20 to
/// #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF`.
pub fn sqs_body_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// What SQS takes as a group or deduplication id: 1 to 128 of `a-z A-Z 0-9`
/// and ASCII punctuation.
pub fn valid_sqs_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_SQS_ID && id.bytes().all(|b| b.is_ascii_graphic())
}

/// An X-Ray trace header as SQS takes it for `AWSTraceHeader`:
/// `Root=1-<8 hex>-<24 hex>`, then `;key=value` parts (`Parent`,
/// `Sampled`, ...), printable ASCII, at most 1,024 characters.
pub fn valid_trace_header(header: &str) -> bool {
    let well_formed = |part: &str| {
        part.split_once('=').is_some_and(|(key, value)| {
            !key.is_empty() && !value.is_empty() && part.bytes().all(|b| b.is_ascii_graphic())
        })
    };
    let root_ok = |root: &str| {
        let pieces: Vec<&str> = root.split('-').collect();
        matches!(pieces.as_slice(), ["1", time, id]
            if time.len() == 8 && id.len() == 24
                && time.chars().chain(id.chars()).all(|c| c.is_ascii_hexdigit()))
    };
    header.len() <= 1024
        && header.split(';').all(well_formed)
        && header
            .split(';')
            .find_map(|part| part.strip_prefix("Root="))
            .is_some_and(root_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_headers_as_x_ray_writes_them() {
        assert!(valid_trace_header(
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
        ));
        assert!(valid_trace_header(
            "Root=1-5759e988-bd862e3fe1be46a994272793"
        ));
        for bad in [
            "",
            "Sampled=1",
            "Root=1-5759e988-bd862e3fe1be46a99427279",
            "Root=2-5759e988-bd862e3fe1be46a994272793",
            "Root=1-5759e988-bd862e3fe1be46a994272793;Parent",
            "Root=1-5759e988-bd862e3fe1be46a994272793; Sampled=1",
            "Root=1-zzzzzzzz-bd862e3fe1be46a994272793",
        ] {
            assert!(!valid_trace_header(bad), "{bad}");
        }
    }

    #[test]
    fn body_characters_as_sqs_lists_them() {
        assert!("{\"a\":\"\t\n\r é 😀\"}".chars().all(sqs_body_char));
        assert!(!sqs_body_char('\u{0}'));
        assert!(!sqs_body_char('\u{1F}'));
        assert!(!sqs_body_char('\u{FFFE}'));
        assert!(!sqs_body_char('\u{FFFF}'));
    }
}
