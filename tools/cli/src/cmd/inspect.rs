//! Read-only commands (`events`, `ls`, `verify`) and retention (`delete`, `purge`, `compact`).

use std::io::{BufWriter, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use sessionlog_cluster::Host;
use sessionlog_codec::json;
use sessionlog_engine::{ListOrder, Store, VerifyProblem};
use sessionlog_tools_common::output::report_line;

use crate::cli::OrderArg;

pub fn events(store: &Store, id: &str, from: u64, to: Option<u64>) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let mut line = String::new();
    store.events(id, from, to, &mut |_, event| {
        line.clear();
        json::write_value(&mut line, event);
        line.push('\n');
        out.write_all(line.as_bytes())
            .map_err(|source| sessionlog_engine::Error::Io {
                path: "standard output".into(),
                source,
            })
    })?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn surface(
    store: &Store,
    id: &str,
    at: Option<u64>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let view = store.surface_at(id, at)?;
    if as_json {
        println!("{}", view.to_json());
    } else {
        let nodes: Vec<String> = view.nodes.iter().map(u64::to_string).collect();
        println!("nodes: {}", nodes.join(" "));
        println!("replaceGeneration: {}", view.replace_generation);
        for r in &view.replacements {
            println!(
                "replacement at seq {}: {}..={} shadowed {:?}",
                r.seq, r.start, r.end, r.shadowed_seqs
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A report as one line of its serde rendering (what the Node binding returns).
pub fn report(report: &impl Serialize) -> anyhow::Result<ExitCode> {
    report_line(&mut std::io::stdout().lock(), report)?;
    Ok(ExitCode::SUCCESS)
}

/// Print values as JSONL, one `JSON.stringify` per line.
pub fn values(values: &[json::Value]) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    for v in values {
        line.clear();
        json::write_value(&mut line, v);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The recorded request `check-request` reads from standard input.
pub fn read_request() -> anyhow::Result<json::Value> {
    let mut input = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)?;
    Ok(json::parse(input.trim())?)
}

pub fn check_request(
    store: &Store,
    id: &str,
    turn: i64,
    step: i64,
    recorded: &json::Value,
) -> anyhow::Result<ExitCode> {
    store.check_request(id, turn, step, recorded)?;
    println!("request of turn {turn} step {step} matches the log");
    Ok(ExitCode::SUCCESS)
}

/// The last line of a limited `ls --json` page when more remain: the cursor to continue after.
#[derive(Serialize)]
struct NextPage<'a> {
    next: &'a str,
}

pub fn ls(
    store: &Store,
    order: OrderArg,
    limit: Option<usize>,
    after: Option<&str>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let order = match order {
        OrderArg::Activity => ListOrder::Activity,
        OrderArg::Created => ListOrder::Created,
    };
    let cursor = after.map(decode_hex).transpose()?;
    let page = store.list_page(order, limit.unwrap_or(usize::MAX), cursor.as_deref())?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for s in &page.sessions {
        if as_json {
            report_line(&mut out, s)?;
        } else {
            writeln!(
                out,
                "{}\t{}\t{} events\t{} bytes",
                s.id, s.verdict, s.events, s.bytes
            )?;
        }
    }
    if let (Some(next), Some(_)) = (&page.next, limit) {
        let hex: String = next.iter().map(|b| format!("{b:02x}")).collect();
        if as_json {
            report_line(&mut out, &NextPage { next: &hex })?;
        } else {
            writeln!(out, "more: --after {hex}")?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn decode_hex(s: &str) -> anyhow::Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        anyhow::bail!("--after: a cursor is an even number of hex digits");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| anyhow::anyhow!("--after: \"{s}\" is not a cursor"))
        })
        .collect()
}

pub fn tree(host: &Host, id: &str) -> anyhow::Result<ExitCode> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for e in host.lineage(id)? {
        report_line(&mut out, &e)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

pub fn retain(host: &Host, id: &str, delete: bool) -> anyhow::Result<ExitCode> {
    host.set_deleted(id, delete)?;
    if delete {
        println!("deleted {id} (hidden; `sessionlog undelete {id}` restores it, `sessionlog purge` removes it)");
    } else {
        println!("restored {id}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn purge(host: &Host, older_than: Duration, dry_run: bool) -> anyhow::Result<ExitCode> {
    let r = host.purge(older_than, dry_run)?;
    let verb = if dry_run { "would remove" } else { "removed" };
    // A fleet's purge has no byte figures: they are one store's.
    let whence = match host.name() {
        Some(_) => " from the fleet".to_owned(),
        None => format!(" ({} bytes of logs)", r.session_bytes),
    };
    println!("{verb} {} sessions{whence}", r.sessions.len());
    for id in &r.sessions {
        println!("  {id}");
    }
    for (id, why) in &r.kept {
        println!("kept {id}: {why}");
    }
    if !dry_run && !r.sessions.is_empty() && host.name().is_none() {
        println!(
            "live SST and blob bytes {} -> {} (reclaimed {}; the purged blocks held in blob \
             files come back with `sessionlog compact`)",
            r.stored_bytes_before,
            r.stored_bytes_after,
            r.stored_bytes_before.saturating_sub(r.stored_bytes_after)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `sessionlog compact`: the store fully compacted, blob garbage collected.
pub fn compact(store: &Store) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    store.compact()?;
    println!("compacted in {:.1} s", started.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// `30d`, `12h`, `15m`, `10s` → milliseconds.
pub fn parse_duration_ms(s: &str) -> anyhow::Result<i64> {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = n
        .parse()
        .map_err(|_| anyhow::anyhow!("--older-than: \"{s}\" is not a duration like 30d or 12h"))?;
    let per = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => anyhow::bail!("--older-than: unit of \"{s}\" must be s, m, h or d"),
    };
    Ok(n.saturating_mul(per))
}

/// `verify`: the store's report, with `objects`' problems (`--objects`) added.
pub fn verify(
    store: &Store,
    ids: &[String],
    objects: Vec<VerifyProblem>,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let mut report = store.verify(ids)?;
    report.problems.extend(objects);
    let mut out = std::io::stdout().lock();
    if as_json {
        report_line(&mut out, &report)?;
    } else {
        for p in &report.problems {
            writeln!(out, "session \"{}\": {}", p.session, p.detail)?;
        }
        writeln!(
            out,
            "verified {} sessions, {} lines, {} events: {} problems",
            report.sessions,
            report.lines,
            report.events,
            report.problems.len()
        )?;
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
