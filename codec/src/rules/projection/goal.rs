//! The `goal` unit (DSH's goal plugin, `stateVersion` 4): last-wins over `goal/change` events
//! that decode exactly as DSH's `decodeGoalChange` accepts them; a malformed change leaves the
//! state unchanged; a `clear` makes it `null`. The view is
//! `{goal: {id, revision, objective, phase, maxGoalRounds, blockedReason?}, roundsStarted,
//! createdAt, updatedAt}` or `null`.

use crate::json::{Object, Value};

/// DSH's `GOAL_CHANGE_VERSION`.
const GOAL_CHANGE_VERSION: f64 = 1.0;

/// Fold one event.
pub(super) fn apply(state: &mut Value, _: u64, event: &Value) {
    let Some(o) = event.as_object() else { return };
    if o.get("type").and_then(Value::as_str) != Some("goal/change") {
        return;
    }
    match o.get("data").and_then(decode) {
        Some(Change::Clear) => *state = Value::Null,
        Some(Change::Snapshot(v)) => *state = v,
        None => {}
    }
}

enum Change {
    Clear,
    Snapshot(Value),
}

/// The keys of `o`, sorted and joined, as DSH compares them.
fn key_set(o: &Object) -> String {
    let mut keys: Vec<String> = o.iter().map(|(k, _)| k.to_string()).collect();
    keys.sort();
    keys.join(",")
}

fn int_at_least(v: Option<&Value>, min: i64) -> Option<i64> {
    v.and_then(Value::as_safe_integer).filter(|n| *n >= min)
}

/// `decodeGoalChange`; `None` for anything it would reject (or not recognize).
fn decode(data: &Value) -> Option<Change> {
    let d = data.as_object()?;
    if d.get("kind").and_then(Value::as_str) != Some("goal/change")
        || d.get("version").and_then(Value::as_f64) != Some(GOAL_CHANGE_VERSION)
    {
        return None;
    }
    if d.get("operation").and_then(Value::as_str) == Some("clear") {
        let cleared = d.get("cleared")?.as_object()?;
        let ok = key_set(d) == "cleared,clearedAt,kind,operation,version"
            && key_set(cleared) == "id,revision"
            && cleared
                .get("id")
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
            && int_at_least(cleared.get("revision"), 1).is_some()
            && int_at_least(d.get("clearedAt"), 0).is_some();
        return ok.then_some(Change::Clear);
    }
    let op = d.get("operation").and_then(Value::as_str)?;
    if !["create", "edit", "pause", "resume", "complete", "block"].contains(&op)
        || key_set(d) != "createdAt,goal,kind,operation,roundsStarted,updatedAt,version"
    {
        return None;
    }
    let created = int_at_least(d.get("createdAt"), 0)?;
    let updated = int_at_least(d.get("updatedAt"), 0).filter(|u| *u >= created)?;
    let goal = snapshot(d.get("goal")?)?;
    let rounds = int_at_least(d.get("roundsStarted"), 0)?;
    Some(Change::Snapshot(Value::Object(
        Object::new()
            .with("goal", goal)
            .with("roundsStarted", rounds)
            .with("createdAt", created)
            .with("updatedAt", updated),
    )))
}

/// `decodeSnapshot`, rebuilt in DSH's key order.
fn snapshot(v: &Value) -> Option<Value> {
    let g = v.as_object()?;
    let id = g
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())?;
    let objective = g
        .get("objective")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty() && s.trim() == *s)?;
    let phase = g
        .get("phase")
        .and_then(Value::as_str)
        .filter(|p| ["active", "paused", "blocked", "complete"].contains(p))?;
    let blocked = phase == "blocked";
    let expected = if blocked {
        "blockedReason,id,maxGoalRounds,objective,phase,revision"
    } else {
        "id,maxGoalRounds,objective,phase,revision"
    };
    if key_set(g) != expected {
        return None;
    }
    let revision = int_at_least(g.get("revision"), 1)?;
    let max_rounds = int_at_least(g.get("maxGoalRounds"), 1)?;
    let mut out = Object::new()
        .with("id", id)
        .with("revision", revision)
        .with("objective", objective)
        .with("phase", phase)
        .with("maxGoalRounds", max_rounds);
    if blocked {
        let r = g.get("blockedReason")?.as_object()?;
        let code = r
            .get("code")
            .and_then(Value::as_str)
            .filter(|c| is_lower_kebab(c))?;
        let message = r
            .get("message")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty() && m.trim() == *m)?;
        if key_set(r) != "code,message" {
            return None;
        }
        out = out.with(
            "blockedReason",
            Value::Object(Object::new().with("code", code).with("message", message)),
        );
    }
    Some(Value::Object(out))
}

/// `^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`
fn is_lower_kebab(s: &str) -> bool {
    let mut parts = s.split('-');
    let first_ok = parts.next().is_some_and(|p| {
        p.starts_with(|c: char| c.is_ascii_lowercase())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    });
    first_ok
        && parts.all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::{parse, stringify};

    fn fold(events: &[&str]) -> String {
        let mut state = Value::Null;
        for (i, e) in events.iter().enumerate() {
            apply(&mut state, i as u64, &parse(e).expect("json"));
        }
        stringify(&state)
    }

    const CREATE: &str = r#"{"type":"goal/change","seq":0,"time":1,"data":{"kind":"goal/change","version":1,"operation":"create","goal":{"phase":"active","id":"g1","revision":1,"objective":"Ship it","maxGoalRounds":5},"roundsStarted":0,"createdAt":10,"updatedAt":10}}"#;

    #[test]
    fn create_block_clear_and_malformed_changes() {
        assert_eq!(
            fold(&[CREATE]),
            r#"{"goal":{"id":"g1","revision":1,"objective":"Ship it","phase":"active","maxGoalRounds":5},"roundsStarted":0,"createdAt":10,"updatedAt":10}"#
        );
        let block = r#"{"type":"goal/change","seq":1,"time":2,"data":{"kind":"goal/change","version":1,"operation":"block","goal":{"id":"g1","revision":2,"objective":"Ship it","phase":"blocked","maxGoalRounds":5,"blockedReason":{"code":"needs-input","message":"Which branch?"}},"roundsStarted":1,"createdAt":10,"updatedAt":12}}"#;
        assert!(fold(&[CREATE, block])
            .contains(r#""blockedReason":{"code":"needs-input","message":"Which branch?"}"#));
        let malformed = CREATE
            .replace("\"maxGoalRounds\":5", "\"maxGoalRounds\":0")
            .replace("\"seq\":0", "\"seq\":1");
        assert_eq!(
            fold(&[CREATE, &malformed]),
            fold(&[CREATE]),
            "a malformed change leaves the state"
        );
        let clear = r#"{"type":"goal/change","seq":1,"time":2,"data":{"kind":"goal/change","version":1,"operation":"clear","cleared":{"id":"g1","revision":1},"clearedAt":11}}"#;
        assert_eq!(fold(&[CREATE, clear]), "null");
        assert!(
            is_lower_kebab("needs-input2")
                && !is_lower_kebab("Needs")
                && !is_lower_kebab("a--b")
                && !is_lower_kebab("-a")
        );
    }
}
