//! The `sessionlog` command-line tool.
#![forbid(unsafe_code)]

mod cli;
mod cmd;

use std::process::ExitCode;

use clap::Parser;
use sessionlog_tools_common::output;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    output::exit_code("sessionlog", cmd::run(cli::Cli::parse()))
}
