//! The `sessionlog` command-line tool.
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod output;

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cmd::run(args) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sessionlog: {e:#}");
            ExitCode::FAILURE
        }
    }
}
