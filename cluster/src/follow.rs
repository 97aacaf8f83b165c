//! Following a session from any host of the fleet ([`Fleet::subscribe`]): the events of a
//! session another host owns, as it commits them, gap-free across a change of owner.
//!
//! Every batch committed to PostgreSQL is announced when its transaction commits:
//! `append_batches` (`sql/functions.sql`) runs `pg_notify` on [`CHANNEL`] with the batch's
//! lineage root and number, nothing more. A follower keeps a connection of its own that
//! `LISTEN`s there; a notification for its session's root, a (re)connection of that listener, or
//! [`FLEET_POLL`] without one (the backstop for a notification lost with its connection, or a
//! schema whose functions predate the announcement) makes it catch the host's local copy up from
//! the fenced rows ([`Fleet::sync`]: the batches in number order, each checked against its
//! crc32). The events then come from the local store through an engine subscription, catch-up
//! then live, exactly as on the owner. A session held by this very host is served from its own
//! copy, which its commits reach first.
//!
//! Invariants: the listener listens before the first catch-up, so no batch committed after that
//! catch-up read PostgreSQL goes unannounced to it; after a notification is missed (the listener
//! dropped) the next catch-up reads from the local copy's end, whatever was announced; and the
//! local copy only ever takes PostgreSQL's batches in number order, whichever host committed
//! them, so a takeover (the next owner continues the same numbering, fenced by its epoch)
//! neither skips nor repeats an event. The engine subscription keeps its own guarantee (each
//! event once, in seq order, from the requested seq on).

use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;
use sessionlog_codec::json::Value;
use sessionlog_engine::Subscription;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::fleet::{Fleet, PATIENCE};
use crate::ownership;

/// The channel committed batches are announced on (payload: `ROOT BATCH`).
pub const CHANNEL: &str = "sessionlog_commits";

/// How long a follower waits for an announcement before it asks PostgreSQL anyway.
pub const FLEET_POLL: Duration = Duration::from_secs(1);

/// How long a follower waits before it tries its listener's connection again after it failed.
const RECONNECT_PAUSE: Duration = Duration::from_millis(250);

/// A session followed from any host (see the module docs). Like the engine's subscription, it
/// holds no borrow of the fleet: each call is given it.
pub struct FleetSubscription {
    id: String,
    /// The session's lineage root: the announcements it listens for.
    root: String,
    local: Subscription,
    listener: Listener,
    /// Whether PostgreSQL must be asked before the next wait.
    stale: bool,
    /// When the backstop asks PostgreSQL next.
    poll_at: Instant,
}

impl std::fmt::Debug for FleetSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetSubscription")
            .field("id", &self.id)
            .field("next", &self.local.next_seq())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// Follow session `id` from seq `from_seq` on, whichever host owns it: every event with
    /// seq ≥ `from_seq`, in order, each once, those PostgreSQL holds first, then each as its
    /// batch commits there ([`FleetSubscription::next_within`]). Refused for a session the
    /// fleet does not hold.
    pub fn subscribe(&self, id: &str, from_seq: u64) -> Result<FleetSubscription> {
        let mut listener = Listener::new(self.control().config().clone());
        // Listening before the catch-up: nothing committed after it goes unannounced.
        listener.connect()?;
        self.sync(id)?;
        let row = self
            .control()
            .retrying("reading a session", PATIENCE, |c| ownership::row(c, id))?
            .ok_or_else(|| Error::UnknownSession(id.to_owned()))?;
        Ok(FleetSubscription {
            id: id.to_owned(),
            root: row.root,
            local: self.store.subscribe(id, from_seq)?,
            listener,
            stale: false,
            poll_at: Instant::now() + FLEET_POLL,
        })
    }
}

impl FleetSubscription {
    /// The session followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The seq of the next event this subscription yields: where a restarted follower resumes.
    pub fn next_seq(&self) -> u64 {
        self.local.next_seq()
    }

    /// The session's committed end (the seq its next event will take) in `fleet`'s copy, as of
    /// the last catch-up.
    pub fn end(&self, fleet: &Fleet) -> Result<u64> {
        Ok(self.local.end(fleet.store())?)
    }

    /// The next event (seq, event), waiting at most `timeout` for it to commit anywhere in the
    /// fleet; `None` when none came by then. A session purged meanwhile ends the subscription
    /// with that error.
    pub fn next_within(
        &mut self,
        fleet: &Fleet,
        timeout: Duration,
    ) -> Result<Option<(u64, Value)>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.local.next_within(fleet.store(), Duration::ZERO)? {
                return Ok(Some(event));
            }
            let now = Instant::now();
            if self.stale || now >= self.poll_at {
                self.stale = false;
                self.poll_at = now + FLEET_POLL;
                fleet.sync(&self.id)?;
                continue;
            }
            let wait = deadline.min(self.poll_at).saturating_duration_since(now);
            if deadline <= now {
                return Ok(None);
            }
            self.stale = self.listener.announced(&self.root, wait);
        }
    }
}

/// A connection that listens on [`CHANNEL`], made again when it drops.
struct Listener {
    config: Config,
    client: Option<Client>,
}

impl Listener {
    fn new(config: Config) -> Listener {
        Listener {
            config,
            client: None,
        }
    }

    /// Connect and listen.
    fn connect(&mut self) -> Result<&mut Client> {
        let during = "listening for committed batches";
        let mut client = self.config.connect(during)?;
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .map_err(|e| Error::Postgres {
                url: self.config.to_string(),
                during: during.into(),
                detail: e.to_string(),
            })?;
        Ok(self.client.insert(client))
    }

    /// Wait at most `wait` for an announcement of a batch of lineage `root`; whether one came,
    /// or the connection was made again (a notification may have been missed meanwhile).
    fn announced(&mut self, root: &str, wait: Duration) -> bool {
        let Some(client) = self.client.as_mut() else {
            // Down since the last call: connected again, PostgreSQL is asked; failing, the
            // backstop's poll goes on without a listener.
            if self.connect().is_ok() {
                return true;
            }
            std::thread::sleep(wait.min(RECONNECT_PAUSE));
            return false;
        };
        let heard = heard_of(client, root, wait);
        if heard.is_none() {
            // Dropped: made again at the next call.
            self.client = None;
        }
        heard.unwrap_or(false)
    }
}

/// Whether `client` received an announcement of a batch of lineage `root` within `wait`
/// (reading, once one came, those already received too: one catch-up answers them all);
/// `None` when its connection failed.
fn heard_of(client: &mut Client, root: &str, wait: Duration) -> Option<bool> {
    let mut notifications = client.notifications();
    let mut heard = {
        let mut waiting = notifications.timeout_iter(wait);
        loop {
            match waiting.next() {
                Ok(Some(n)) if announces(n.payload(), root) => break true,
                Ok(Some(_)) => {}
                Err(_) => return None,
                Ok(None) => break false,
            }
        }
    };
    let mut received = notifications.iter();
    while let Ok(Some(n)) = received.next() {
        heard |= announces(n.payload(), root);
    }
    Some(heard)
}

/// Whether an announcement's payload (`ROOT BATCH`) is of a batch of lineage `root`.
fn announces(payload: &str, root: &str) -> bool {
    payload
        .rsplit_once(' ')
        .is_some_and(|(announced, _)| announced == root)
}

#[cfg(test)]
mod tests {
    use super::announces;

    #[test]
    fn an_announcement_names_its_root_before_the_batch_number() {
        assert!(announces("root-1 7", "root-1"));
        assert!(announces("a root with spaces 12", "a root with spaces"));
        assert!(!announces("root-10 7", "root-1"));
        assert!(!announces("root-1", "root-1"));
    }
}
