//! The `bloomflow` command: parses the command line, runs one subcommand, maps the outcome to an
//! exit code. Errors print once to stderr; a closed stdout (e.g. `| head`) is not an error.

mod cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bloomflow: error: {err}");
            let mut source = err.source();
            while let Some(cause) = source {
                let text = cause.to_string();
                if !err.to_string().contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || matches!(cause.downcast_ref::<bloomflow::Error>(),
                Some(bloomflow::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
