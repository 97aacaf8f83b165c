//! The V2→V3 refusal an import of a V2 log records as its verdict: DSH 0.2 reads V0–V3 logs only
//! through the migration chain, so a V2 log with a surface node before its first step is one DSH
//! 0.2 will not open (`SessionFormatUnsupportedMigrationError`).

use crate::json::Value;
use crate::surface::is_surface_eligible_type;

/// Watches a V2 log's events for the V2→V3 refusals.
#[derive(Debug, Default)]
pub struct SurfaceBeforeStep {
    seen_step: bool,
    refusal: Option<String>,
}

impl SurfaceBeforeStep {
    /// Observe the next event.
    pub fn observe(&mut self, event: &Value) {
        if self.refusal.is_some() {
            return;
        }
        let Some(o) = event.as_object() else {
            return;
        };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
        if ty == "step/start" {
            self.seen_step = true;
        } else if !self.seen_step && is_surface_eligible_type(ty) && o.contains_key("surfaceOp") {
            // The system head goes right after the first step/start; a surface node before it
            // would have to move, changing the log's chronology.
            self.refusal = Some(
                "format v2 surface before first step cannot acquire a system head without changing chronology"
                    .into(),
            );
        }
    }

    /// DSH's refusal, if the log has one.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn a_surface_before_the_first_step_is_refused() {
        let events = |texts: &[&str]| {
            let mut check = SurfaceBeforeStep::default();
            for t in texts {
                check.observe(&parse(t).expect("JSON"));
            }
            check.refusal().is_some()
        };
        let user = r#"{"type":"user/message","surfaceOp":"append"}"#;
        let step = r#"{"type":"step/start"}"#;
        assert!(events(&[r#"{"type":"turn/start"}"#, user, step]));
        assert!(!events(&[r#"{"type":"turn/start"}"#, step, user]));
    }
}
