//! `search` and `reindex`: the engine's [`Store::search`] and [`Store::reindex`], printed.

use std::io::Write;
use std::process::ExitCode;

use sessionlog_engine::{parse_time, SearchQuery, Store};
use sessionlog_tools_common::output::report_line;

use crate::cli::SearchArgs;

/// The query the flags ask.
pub fn query(f: &SearchArgs) -> anyhow::Result<SearchQuery> {
    Ok(SearchQuery {
        text: f.text.clone(),
        tool: f.tool.clone(),
        tool_error: f.tool_error,
        model: f.model.clone(),
        since_ms: f.since.as_deref().map(parse_time).transpose()?,
        until_ms: f.until.as_deref().map(parse_time).transpose()?,
        min_tokens: f.min_tokens,
        open: f.open,
        verdict: f.verdict.clone(),
        parent: f.parent.clone(),
        limit: f.limit,
        after: f.after.clone(),
        ..SearchQuery::default()
    })
}

/// One page: with `json`, a line per session and a last `{"next", "watermark"}`; else a line
/// per session with its matched snippets under it.
pub fn run(store: &Store, query: &SearchQuery, json: bool) -> anyhow::Result<ExitCode> {
    let page = store.search(query)?;
    let mut out = std::io::stdout().lock();
    for hit in &page.sessions {
        match json {
            true => report_line(&mut out, hit)?,
            false => {
                writeln!(
                    out,
                    "{}  {}  events {}  tokens {}",
                    hit.row.id,
                    hit.row.title.as_deref().unwrap_or("(untitled)"),
                    hit.row.events,
                    hit.row.tokens.total
                )?;
                for m in &hit.matches {
                    writeln!(out, "  seq {}: {}", m.seq, m.snippet.replace('\n', " "))?;
                }
            }
        }
    }
    match json {
        true => report_line(&mut out, &page.end())?,
        false => writeln!(
            out,
            "{} sessions; next: {}; index at {} ({} changes behind)",
            page.sessions.len(),
            page.next.as_deref().unwrap_or("(last page)"),
            page.watermark.cursor,
            page.watermark.behind
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Rebuild the index and say what it holds.
pub fn reindex(store: &Store, json: bool) -> anyhow::Result<ExitCode> {
    let report = store.reindex()?;
    let mut out = std::io::stdout().lock();
    match json {
        true => report_line(&mut out, &report)?,
        false => writeln!(
            out,
            "indexed {} sessions, {} messages ({} bytes) at {}",
            report.sessions, report.messages, report.bytes, report.watermark.cursor
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
