//! A run's working directory for the stress harnesses: the one given with `--dir`, else a new
//! one in the system's temp directory, removed after a successful run; a failed run keeps
//! either for inspection.

use std::path::PathBuf;

use anyhow::Context;

/// A run's working directory (see the module docs).
pub struct WorkDir {
    pub path: PathBuf,
    /// What runs in it, for messages (`stress`, `power-loss`, …).
    what: &'static str,
    remove_after: bool,
}

impl WorkDir {
    /// `dir`, else `<temp>/sessionlog-<what>-<pid>`, created; refused when it holds any of
    /// `earlier` (an earlier run's files).
    pub fn create(
        dir: Option<PathBuf>,
        what: &'static str,
        earlier: &[&str],
    ) -> anyhow::Result<WorkDir> {
        let (path, remove_after) = match dir {
            Some(d) => (d, false),
            None => (
                std::env::temp_dir().join(format!("sessionlog-{what}-{}", std::process::id())),
                true,
            ),
        };
        if earlier.iter().any(|f| path.join(f).exists()) {
            anyhow::bail!(
                "{} holds an earlier run: remove it or pick another --dir",
                path.display()
            );
        }
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(WorkDir {
            path,
            what,
            remove_after,
        })
    }

    /// What a failed run's error says of the directory.
    pub fn kept(&self) -> String {
        format!(
            "{} run in {} (kept for inspection)",
            self.what,
            self.path.display()
        )
    }

    /// After a successful run: remove the directory when it is a temp one.
    pub fn finish(&self) -> anyhow::Result<()> {
        if self.remove_after {
            std::fs::remove_dir_all(&self.path)
                .with_context(|| format!("removing {}", self.path.display()))?;
        }
        Ok(())
    }
}
