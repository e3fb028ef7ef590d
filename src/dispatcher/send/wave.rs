//! The next wave of requests: a stream batch's entries packed into up to
//! ten requests sent at once, each stream in one of them, the streams with
//! the most entries first.

use std::collections::{HashMap, HashSet, VecDeque};

use super::{MAX_ENTRIES, MAX_IN_FLIGHT, MAX_REQUEST_BYTES, Request, Round, in_stream_order};
use crate::dispatcher::record::Message;

/// A request being filled, and the bytes of its bodies.
struct Filling {
    request: Request,
    bytes: usize,
}

impl Filling {
    /// Whether `size` more bytes go in: an empty request takes any entry.
    fn takes(&self, size: usize) -> bool {
        self.request.1.len() < MAX_ENTRIES
            && (self.request.1.is_empty() || self.bytes + size <= MAX_REQUEST_BYTES)
    }

    /// Whether entries of these sizes all go in.
    fn takes_all(&self, sizes: &[usize]) -> bool {
        self.request.1.len() + sizes.len() <= MAX_ENTRIES
            && ((self.request.1.is_empty() && sizes.len() == 1)
                || self.bytes + sizes.iter().sum::<usize>() <= MAX_REQUEST_BYTES)
    }
}

/// The next requests to send at once, taken from `rest`: up to
/// [`MAX_IN_FLIGHT`] requests of up to [`MAX_ENTRIES`] entries and
/// [`MAX_REQUEST_BYTES`], each stream in one request only, with its
/// earliest entries in their order (a troubled stream's first alone). The
/// streams with the most entries go first, so that a hot stream's chain of
/// requests starts in the first wave and a batch takes as few waves as its
/// longest stream needs. The entries of a held stream go to the next round;
/// what is not sent stays in `rest`, in record order.
pub(super) fn next_wave(
    rest: &mut VecDeque<(usize, Message)>,
    round: &mut Round,
    troubled: &HashSet<String>,
) -> Vec<Request> {
    let mut streams: Vec<VecDeque<(usize, Message)>> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    for (index, outgoing) in rest.drain(..) {
        if round.held.contains(&outgoing.stream) {
            round.again.push((index, outgoing));
            continue;
        }
        let at = *position.entry(outgoing.stream.clone()).or_insert_with(|| {
            streams.push(VecDeque::new());
            streams.len() - 1
        });
        streams[at].push_back((index, outgoing));
    }
    // Stable: streams of as many entries keep their record order.
    streams.sort_by_key(|entries| std::cmp::Reverse(entries.len()));
    let mut wave: Vec<Filling> = Vec::new();
    for entries in &mut streams {
        let Some((_, first)) = entries.front() else {
            continue;
        };
        let limit = if troubled.contains(&first.stream) {
            1
        } else {
            MAX_ENTRIES
        };
        let sizes: Vec<usize> = entries
            .iter()
            .take(limit)
            .map(|(_, outgoing)| outgoing.body.len())
            .collect();
        let Some(at) = place(&mut wave, &sizes) else {
            continue;
        };
        let filling = &mut wave[at];
        for _ in 0..limit {
            let Some((_, next)) = entries.front() else {
                break;
            };
            let size = next.body.len();
            if !filling.takes(size) {
                break;
            }
            let Some((index, outgoing)) = entries.pop_front() else {
                break;
            };
            filling.bytes += size;
            filling.request.0.push(index);
            filling.request.1.push(outgoing);
        }
    }
    let mut left: Vec<(usize, Message)> = streams.into_iter().flatten().collect();
    left.sort_by_key(|(index, _)| *index);
    rest.extend(in_stream_order(left));
    wave.into_iter()
        .map(|filling| in_order(filling.request))
        .collect()
}

/// The request a stream's entries go to: the first that takes all of them,
/// else a new one while the wave has room, else the one with the most room
/// that takes the first of them; `None` when none does (the stream waits
/// for the next wave).
fn place(wave: &mut Vec<Filling>, sizes: &[usize]) -> Option<usize> {
    if let Some(at) = wave.iter().position(|filling| filling.takes_all(sizes)) {
        return Some(at);
    }
    if wave.len() < MAX_IN_FLIGHT {
        wave.push(Filling {
            request: (Vec::new(), Vec::new()),
            bytes: 0,
        });
        return Some(wave.len() - 1);
    }
    let first = sizes.first().copied().unwrap_or(0);
    wave.iter()
        .enumerate()
        .filter(|(_, filling)| filling.takes(first))
        .max_by_key(|(_, filling)| MAX_ENTRIES - filling.request.1.len())
        .map(|(at, _)| at)
}

/// A request's entries in record order, each stream's in sequence order
/// (the service takes a request's entries in order; only a stream's own
/// order matters, and it holds).
fn in_order((indexes, entries): Request) -> Request {
    let mut pairs: Vec<(usize, Message)> = indexes.into_iter().zip(entries).collect();
    pairs.sort_by_key(|(index, _)| *index);
    in_stream_order(pairs).into_iter().unzip()
}
