//! `tail`: a session's events from a seq on, printed exactly as `events` prints them, and with
//! `--follow` each new one as it commits; `tail --all`: every change to every session, in
//! commit order, with the cursor to resume after each. The store is opened beside whatever
//! process holds it (a read-only RocksDB secondary instance), so writers come and go while a
//! tail follows.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sessionlog_cluster::Fleet;
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_engine::{FeedChange, FeedItem, Options, Store};
use sessionlog_tools_common::output::json_line;

/// How long one wait for a commit lasts before the follower looks again (it is woken sooner by
/// any commit it can see).
const WAIT: Duration = Duration::from_secs(1);

/// Run `tail` (see the module docs).
pub fn run(
    db: &Path,
    options: &Options,
    id: Option<&str>,
    from: Option<&str>,
    follow: bool,
    all: bool,
) -> anyhow::Result<ExitCode> {
    let store = Store::open_beside(db, options.clone())
        .with_context(|| format!("opening the store at {} for reading", db.display()))?;
    match (id, all) {
        (Some(id), false) => session(&store, id, from, follow),
        (None, true) => everything(&store, from, follow),
        _ => anyhow::bail!("tail takes a session id, or --all"),
    }
}

/// `tail ID [--from SEQ] [--follow]`.
fn session(store: &Store, id: &str, from: Option<&str>, follow: bool) -> anyhow::Result<ExitCode> {
    let from = start_seq(from)?;
    let mut sub = store.subscribe(id, from)?;
    let end = sub.end(store)?;
    if from > end {
        if !follow {
            anyhow::bail!(
                "session \"{id}\" ends at seq {end} (its next event takes that seq): --from {from} is past its end; with --follow, tail waits for it"
            );
        }
        eprintln!("sessionlog: session \"{id}\" holds seqs below {end}; waiting for seq {from}");
    }
    follow_with(
        follow,
        |wait| Ok(sub.next_within(store, wait)?),
        print_event(),
    )
}

/// `--cluster URL tail ID [--from SEQ] [--follow]`: the session's events as `tail` prints
/// them, whichever host of the fleet appends them ([`Fleet::subscribe`]).
pub fn fleet(
    fleet: &Fleet,
    id: &str,
    from: Option<&str>,
    follow: bool,
) -> anyhow::Result<ExitCode> {
    let mut sub = fleet.subscribe(id, start_seq(from)?)?;
    follow_with(
        follow,
        |wait| Ok(sub.next_within(fleet, wait)?),
        print_event(),
    )
}

/// The seq `--from` names (0 without it).
fn start_seq(from: Option<&str>) -> anyhow::Result<u64> {
    match from {
        None => Ok(0),
        Some(text) => text.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "--from {text:?}: a session's tail starts at a seq (a whole number); cursors are for `tail --all`"
            )
        }),
    }
}

/// Print one event as `events` prints it: its JSON on a line.
fn print_event() -> impl FnMut(&mut Out, (u64, Value)) -> std::io::Result<()> {
    let mut line = String::new();
    move |out, (_, event)| {
        line.clear();
        json::write_value(&mut line, &event);
        line.push('\n');
        out.write_all(line.as_bytes())
    }
}

/// `tail --all [--from CURSOR] [--follow]`.
fn everything(store: &Store, from: Option<&str>, follow: bool) -> anyhow::Result<ExitCode> {
    let mut feed = store.subscribe_all(from)?;
    follow_with(
        follow,
        |wait| Ok(feed.next_within(store, wait)?),
        |out, item| json_line(out, item_json(item)),
    )
}

/// Where `tail` prints.
type Out = BufWriter<std::io::StdoutLock<'static>>;

/// Print what `next` yields (called with how long it may wait) with `print`, flushing whenever
/// it has nothing more stored; with `follow`, then wait for more, until interrupted.
fn follow_with<T>(
    follow: bool,
    mut next: impl FnMut(Duration) -> anyhow::Result<Option<T>>,
    mut print: impl FnMut(&mut Out, T) -> std::io::Result<()>,
) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    loop {
        let got = match next(Duration::ZERO)? {
            Some(got) => Some(got),
            None => {
                out.flush()?;
                if !follow {
                    return Ok(ExitCode::SUCCESS);
                }
                next(WAIT)?
            }
        };
        if let Some(got) = got {
            print(&mut out, got)?;
        }
    }
}

/// One feed item as `tail --all` prints it: `{"next", "session", "change", "first", "count"}`
/// (and `"other"`: a fork's parent, an archive's location) for a change, `{"next", "session",
/// "seq", "event"}` for each event it brought.
fn item_json(item: FeedItem) -> Object {
    let o = Object::new()
        .with("next", Value::String(item.next.to_string().as_str().into()))
        .with("session", Value::String(item.session.as_str().into()));
    match item.change {
        FeedChange::Session {
            kind,
            first,
            count,
            other,
        } => {
            let o = o
                .with("change", kind.name())
                .with("first", first as f64)
                .with("count", count as f64);
            match other.is_empty() {
                true => o,
                false => o.with("other", other.as_str()),
            }
        }
        FeedChange::Event { seq, event } => o.with("seq", seq as f64).with("event", event),
        _ => o,
    }
}
