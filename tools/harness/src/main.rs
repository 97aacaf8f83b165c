//! The `sessionlog-harness` tool: `gen`, `bench`, `stress` and `pg`.
#![forbid(unsafe_code)]

mod cli;
mod cmd;

use std::process::ExitCode;

use clap::Parser;
use sessionlog_tools_common::output;

/// The CLI's allocator, so that the benchmarks time what the CLI runs.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    output::exit_code("sessionlog-harness", cmd::run(cli::Cli::parse()))
}
