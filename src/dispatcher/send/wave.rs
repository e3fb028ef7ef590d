//! The next wave of requests: a stream batch's entries taken in record
//! order into up to ten requests sent at once, each stream in one of them.

use std::collections::{HashMap, HashSet, VecDeque};

use super::{MAX_ENTRIES, MAX_IN_FLIGHT, MAX_REQUEST_BYTES, Request, Round};
use crate::dispatcher::record::Outgoing;

/// The next requests to send at once, taken from `rest` in record order: up
/// to [`MAX_IN_FLIGHT`] requests of up to [`MAX_ENTRIES`] entries and
/// [`MAX_REQUEST_BYTES`], each stream in one request only. A stream's later
/// entry joins its request while that request is the one being filled (and
/// the stream is not troubled); otherwise it, and every later entry of its
/// stream, waits for the next wave. The entries of a held stream go to the
/// next round.
pub(super) fn next_wave(
    rest: &mut VecDeque<(usize, Outgoing)>,
    round: &mut Round,
    troubled: &HashSet<String>,
) -> Vec<Request> {
    let mut wave: Vec<Request> = Vec::new();
    // The bytes of the request being filled (the last one).
    let mut bytes = 0;
    let mut placed: HashMap<String, usize> = HashMap::new();
    let mut blocked: HashSet<String> = HashSet::new();
    let mut position = 0;
    while position < rest.len() {
        let next = &rest[position].1;
        if round.held.contains(&next.stream) {
            round.again.extend(rest.remove(position));
            continue;
        }
        if blocked.contains(&next.stream) {
            position += 1;
            continue;
        }
        let size = next.body.len();
        let open = wave.len().checked_sub(1);
        let fits = |request: &Request, bytes: usize| {
            request.1.len() < MAX_ENTRIES
                && (request.1.is_empty() || bytes + size <= MAX_REQUEST_BYTES)
        };
        let at = match (placed.get(&next.stream), open) {
            (Some(&at), Some(open))
                if at == open && !troubled.contains(&next.stream) && fits(&wave[at], bytes) =>
            {
                at
            }
            (Some(_), _) => {
                blocked.insert(next.stream.clone());
                position += 1;
                continue;
            }
            (None, Some(open)) if fits(&wave[open], bytes) => open,
            (None, _) if wave.len() < MAX_IN_FLIGHT => {
                wave.push((Vec::new(), Vec::new()));
                bytes = 0;
                wave.len() - 1
            }
            (None, _) => break,
        };
        if let Some((index, outgoing)) = rest.remove(position) {
            bytes += size;
            placed.insert(outgoing.stream.clone(), at);
            wave[at].0.push(index);
            wave[at].1.push(outgoing);
        }
    }
    wave
}
