//! The recent events of handshake-era sessions' streams, kept so that a client whose stream
//! dropped can resume it with `Last-Event-ID` and hear what it missed, the call's result
//! included, even when the call finished while it was away (rmcp forgets a request's stream
//! once its client is gone; with an event store it replays from the store instead).
//!
//! Bounded: each stream keeps its newest [`EVENTS_PER_STREAM`] events for [`KEPT_FOR`]
//! after its last one, and all streams together at most [`MAX_BYTES`] of messages (the
//! oldest streams go first). Events live in this process: a resume that reaches another
//! replica finds nothing there, as before.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream, ServerSseMessage, StreamId,
};

/// Events kept per stream (its newest).
pub const EVENTS_PER_STREAM: usize = 64;

/// How long a stream's events are kept after its last one.
pub const KEPT_FOR: Duration = Duration::from_secs(300);

/// The most bytes kept in all (messages, and a stream's and an event's own keeping).
pub const MAX_BYTES: usize = 32 << 20;

/// The most streams kept (the oldest go first).
pub const MAX_STREAMS: usize = 10_000;

/// What an event costs besides its message: its id (three times) and its entries.
const EVENT_OVERHEAD: usize = 256;

#[derive(Default)]
pub struct RecentEvents {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    streams: HashMap<StreamId, Stream>,
    /// Each event id's stream, for a resume that names only the event.
    owner: HashMap<EventId, StreamId>,
    /// The streams by their last event's number, oldest first: pruning takes them from the
    /// front, so storing an event costs the same however many streams are kept (a scan of
    /// every stream per event, once the bounds were reached, was a fifth of a loaded HTTP
    /// server's CPU).
    by_age: BTreeMap<u64, StreamId>,
    next: u64,
    bytes: usize,
}

struct Stream {
    events: VecDeque<(EventId, ServerSseMessage, usize)>,
    last: Instant,
    /// Its last event's number (its key in `by_age`).
    touched: u64,
    /// A random prefix of its events' ids. rmcp asks for a replay by event id alone (not by
    /// session), so an id must not be one another session's client could guess: only the
    /// client that was sent a stream's events knows their ids.
    secret: String,
}

/// 128 random bits, as hex.
fn secret() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the system gives random bytes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes an event holds, roughly: its message as JSON (counted, not kept).
fn size_of(event: &ServerSseMessage) -> usize {
    EVENT_OVERHEAD
        + event
            .message
            .as_ref()
            .and_then(|m| aether_policy::json_len(m.as_ref()))
            .unwrap_or(0)
}

impl Kept {
    fn forget_stream(&mut self, id: &str) {
        if let Some(stream) = self.streams.remove(id) {
            self.by_age.remove(&stream.touched);
            for (event, _, size) in stream.events {
                self.owner.remove(&event);
                self.bytes -= size;
            }
        }
    }

    /// Drops the oldest streams while they are quiet for longer than [`KEPT_FOR`], or the
    /// bytes or streams kept are over their bounds.
    fn prune(&mut self, now: Instant) {
        while let Some((_, oldest)) = self.by_age.first_key_value() {
            let stale = self
                .streams
                .get(oldest)
                .is_none_or(|s| now.duration_since(s.last) > KEPT_FOR);
            if !stale && self.bytes <= MAX_BYTES && self.streams.len() <= MAX_STREAMS {
                break;
            }
            let oldest = oldest.clone();
            self.forget_stream(&oldest);
        }
    }
}

#[async_trait::async_trait]
impl EventStore for RecentEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let size = size_of(event);
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Taken under the lock, so the streams' times follow their numbers.
        let now = Instant::now();
        kept.next += 1;
        let next = kept.next;
        let stream = kept
            .streams
            .entry(stream_id.to_string())
            .or_insert_with(|| Stream {
                events: VecDeque::new(),
                last: now,
                touched: next,
                secret: secret(),
            });
        let id = format!("{}-{next}", stream.secret);
        let mut stored = event.clone();
        stored.event_id = Some(id.clone());
        stream.last = now;
        let was = std::mem::replace(&mut stream.touched, next);
        stream.events.push_back((id.clone(), stored, size));
        let dropped = (stream.events.len() > EVENTS_PER_STREAM)
            .then(|| stream.events.pop_front())
            .flatten();
        if let Some((old, _, old_size)) = dropped {
            kept.owner.remove(&old);
            kept.bytes -= old_size;
        }
        kept.owner.insert(id.clone(), stream_id.to_string());
        kept.bytes += size;
        kept.by_age.remove(&was);
        kept.by_age.insert(next, stream_id.to_string());
        kept.prune(now);
        Ok(id)
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let stream = kept
            .owner
            .get(last_event_id)
            .and_then(|stream_id| kept.streams.get(stream_id));
        let Some(stream) = stream else {
            return Err(format!(
                "no event {:?} is kept here (it is too old, or another replica sent it)",
                aether_policy::truncate::bound_text(last_event_id, 100)
            )
            .into());
        };
        let events: Vec<ServerSseMessage> = stream
            .events
            .iter()
            .skip_while(|(id, _, _)| id != last_event_id)
            .skip(1)
            .map(|(_, event, _)| event.clone())
            .collect();
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use rmcp::model::{ServerJsonRpcMessage, ServerResult};

    fn message(n: i64) -> ServerSseMessage {
        let mut event = ServerSseMessage::new(
            "",
            ServerJsonRpcMessage::response(
                ServerResult::empty(()),
                rmcp::model::NumberOrString::Number(n),
            ),
        );
        event.event_id = None;
        event
    }

    #[tokio::test]
    async fn a_resume_replays_what_came_after_once_and_only_its_own_stream() {
        let store = RecentEvents::default();
        let a1 = store.store_event("a", &message(1)).await.unwrap();
        let _b1 = store.store_event("b", &message(2)).await.unwrap();
        let a2 = store.store_event("a", &message(3)).await.unwrap();
        let a3 = store.store_event("a", &message(4)).await.unwrap();
        let ids = |events: Vec<ServerSseMessage>| -> Vec<String> {
            events.into_iter().filter_map(|e| e.event_id).collect()
        };
        let after_a1 = ids(store
            .replay_events_after(&a1)
            .await
            .unwrap()
            .collect()
            .await);
        assert_eq!(after_a1, [a2.clone(), a3.clone()]);
        let after_a3 = ids(store
            .replay_events_after(&a3)
            .await
            .unwrap()
            .collect()
            .await);
        assert!(after_a3.is_empty());
        assert!(store.replay_events_after("nope").await.is_err());
        // An id cannot be guessed from another stream's: its stream's secret comes first.
        let (secret_a, n) = a2.rsplit_once('-').unwrap();
        assert_eq!(secret_a.len(), 32);
        let guessed = format!("{}-{n}", "0".repeat(32));
        assert!(store.replay_events_after(&guessed).await.is_err());
        assert!(!_b1.starts_with(secret_a));
    }

    #[tokio::test]
    async fn a_stream_keeps_its_newest_events() {
        let store = RecentEvents::default();
        let mut ids = Vec::new();
        for n in 0..(EVENTS_PER_STREAM as i64 + 5) {
            ids.push(store.store_event("a", &message(n)).await.unwrap());
        }
        // The oldest are gone: resuming from one is an error, not a wrong replay.
        assert!(store.replay_events_after(&ids[0]).await.is_err());
        let last_kept_before = &ids[ids.len() - 3];
        let replayed: Vec<ServerSseMessage> = store
            .replay_events_after(last_kept_before)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(replayed.len(), 2);
    }

    #[tokio::test]
    async fn the_oldest_streams_go_first_and_quiet_ones_go_in_time() {
        let store = RecentEvents::default();
        let mut first = Vec::new();
        for n in 0..(MAX_STREAMS + 10) {
            let (stream, event) = (format!("s{n}"), message(n as i64));
            first.push(store.store_event(&stream, &event).await.unwrap());
        }
        // A resume after a kept stream's last event replays nothing; a forgotten one's fails.
        for (n, id) in first.iter().enumerate() {
            let kept = store.replay_events_after(id).await.is_ok();
            assert_eq!(kept, n >= 10, "stream s{n}");
        }
        // A stream with a new event is the newest again and outlives older ones.
        store.store_event("s10", &message(0)).await.unwrap();
        store.store_event("new", &message(0)).await.unwrap();
        assert!(store.replay_events_after(&first[10]).await.is_ok());
        assert!(store.replay_events_after(&first[11]).await.is_err());
        {
            let kept = store.inner.lock().unwrap();
            assert_eq!(kept.streams.len(), MAX_STREAMS);
            assert_eq!(kept.by_age.len(), MAX_STREAMS);
        }
        // Quiet for longer than KEPT_FOR: every stream goes, and what it held.
        let mut kept = store.inner.lock().unwrap();
        kept.prune(Instant::now() + KEPT_FOR + Duration::from_secs(1));
        assert!(kept.streams.is_empty() && kept.by_age.is_empty() && kept.owner.is_empty());
        assert_eq!(kept.bytes, 0);
    }
}
