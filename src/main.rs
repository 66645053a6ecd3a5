//! The `bloomflow` command: parses the command line, runs one subcommand, maps the outcome to an
//! exit code. Errors print once to stderr; a closed stdout (e.g. `| head`) is not an error.

mod cmd;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    bloomflow::cleanup::remove_on_interrupt();
    let outcome = cmd::run(cli);
    bloomflow::cleanup::unless_exiting(|| report(outcome))
}

/// The exit code of the command's outcome, its error printed.
fn report(outcome: anyhow::Result<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // One write, so that messages of several processes on one terminal do not interleave.
            let mut text = format!("bloomflow: error: {err}\n");
            let mut source = err.source();
            while let Some(cause) = source {
                let cause_text = cause.to_string();
                if !text.contains(&cause_text) {
                    text.push_str(&format!("  caused by: {cause_text}\n"));
                }
                source = cause.source();
            }
            let _ = std::io::stderr().write_all(text.as_bytes());
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
