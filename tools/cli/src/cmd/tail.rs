//! `tail`: a session's events from a seq on, printed exactly as `events` prints them, and with
//! `--follow` each new one as it commits (in a fleet, whichever host commits it); `tail --all`:
//! every change to every session, in commit order, with the cursor to resume after each. A store
//! of its own is opened beside whatever process holds it (a read-only RocksDB secondary
//! instance), so writers come and go while a tail follows.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sessionlog_cluster::Host;
use sessionlog_codec::json::{self, Object, Value};
use sessionlog_engine::{Error, FeedChange, FeedItem, Options, Store};
use sessionlog_tools_common::output::json_line;

/// How long one wait for a commit lasts before the follower looks again (it is woken sooner by
/// any commit it can see).
const WAIT: Duration = Duration::from_secs(1);

/// `tail ID [--from SEQ] [--follow]` on `host`: the store beside its holder, or a host of a
/// fleet following whichever host appends ([`Host::subscribe`]).
pub fn session(
    host: &Host,
    id: &str,
    from: Option<&str>,
    follow: bool,
) -> anyhow::Result<ExitCode> {
    let from = start_seq(from)?;
    let mut sub = host.subscribe(id, from)?;
    let end = sub.end(host)?;
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
        |wait| Ok(sub.next_within(host, wait)?),
        print_event(),
    )
}

/// `tail --all [--from CURSOR] [--follow]` on the store at `db`, opened beside its holder.
pub fn all(
    db: &Path,
    options: &Options,
    from: Option<&str>,
    follow: bool,
) -> anyhow::Result<ExitCode> {
    let mut store = Store::open_beside(db, options.clone())
        .with_context(|| format!("opening the store at {} for reading", db.display()))?;
    let mut feed = store.subscribe_all(from)?;
    follow_with(
        follow,
        // A holder that reopened the store is followed on a new reader, from the cursor after
        // the last item printed.
        |wait| loop {
            match feed.next_within(&store, wait) {
                Err(Error::HolderReopened { .. }) => {
                    store = store.reopen_beside()?;
                    feed = store.subscribe_all(Some(&feed.cursor_now().to_string()))?;
                }
                next => return Ok(next?),
            }
        },
        |out, item| json_line(out, item_json(item)),
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
