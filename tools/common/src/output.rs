//! Output helpers: reports as their one serde rendering (the text the Node binding returns
//! too), other JSON objects via the codec's JS-exact stringify, and how a binary ends (its exit
//! code, with a broken pipe taken for success).

use std::process::ExitCode;

use sessionlog_codec::json::{self, Object, Value};

/// Print a report as its one rendering (serde's JSON, what the Node binding returns), on a line.
pub fn report_line(
    out: &mut impl std::io::Write,
    report: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(report)?;
    line.push(b'\n');
    out.write_all(&line)
}

/// Print one JSON object per line.
pub fn json_line(out: &mut impl std::io::Write, o: Object) -> std::io::Result<()> {
    let mut s = json::stringify(&Value::Object(o));
    s.push('\n');
    out.write_all(s.as_bytes())
}

/// `Some(x)` as its value, `None` as `null`.
pub fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

/// How `binary` ends after running a command: the command's exit code; success if it failed on a
/// broken pipe (a closed `| head` is not a failure); otherwise the error on stderr, `{:#}` (the
/// whole chain), and failure.
pub fn exit_code(binary: &str, result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{binary}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether an error chain ends in a broken pipe.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<sessionlog_engine::Error>().is_some_and(|e| {
                matches!(e, sessionlog_engine::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
            })
    })
}
