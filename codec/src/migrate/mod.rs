//! DSH 0.2's migration chain (later-format-spec §3.8): a V0–V3 log read in the current model
//! (V4) by streaming its events through one stage per adjacent edge, V0→V1→V2→V3→V4.
//!
//! - A stage sees the previous stage's events in order, with dense seqs, and emits 0..n events
//!   per input; it numbers what it emits densely in emission order ([`Renumber`]) and remaps the
//!   declared same-session references through its old→new map. Everything else keeps its value.
//! - Any stage may refuse; a refusal is final for the whole log ([`Refusal`]). Nothing here does
//!   I/O: publishing the V4 successor is the engine's job.
//! - The header goes through every edge first ([`Stage::header`]), then the body.
//!
//! The edges: [`V0ToV1`] (legacy normalizations; payloads held to the frozen V0 inventory and
//! its value rules, `inventory` and `payload`), [`V1ToV2`] (the attempt fold, `stream`),
//! [`V2ToV3`] (system heads, canonical envelopes; the source audit in `v2_audit`) and
//! [`V3ToV4`] (tool-role results in `tool_role`, producer sources in `producers`, the catalog
//! backfill). [`MigrationCheck`] and [`Admission`] give DSH 0.2's verdict on an older log: the
//! chain, then its V4 reader.

mod check;
mod inventory;
mod messages;
mod payload;
mod producers;
mod references;
mod stream;
mod tool_role;
mod v0_to_v1;
mod v1_to_v2;
mod v2_audit;
mod v2_to_v3;
mod v3_to_v4;

pub use check::{transformed_refusal, Admission, MigrationCheck, Successor};
pub use producers::producer_kind;
pub use references::{BadReference, Renumber};
pub use stream::StreamAccumulator;
pub use v0_to_v1::V0ToV1;
pub use v1_to_v2::V1ToV2;
pub use v2_to_v3::V2ToV3;
pub use v3_to_v4::V3ToV4;

use crate::json::{Object, Value};

/// The content block kinds V2 and V3 define (DSH's audited set): the V2→V3 edge refuses any
/// other, the V3→V4 edge namespaces any other as `plugin:<kind>`.
const CONTENT_KINDS: [&str; 6] = [
    "text",
    "reasoning",
    "image",
    "file",
    "tool-call",
    "tool-result",
];

/// The newest format: what the chain produces.
pub const TARGET_VERSION: u32 = 4;

/// Why DSH refuses to migrate a log.
///
/// - A stage's own semantic refusal (DSH's `SessionFormatUnsupportedMigrationError`) reaches
///   the caller as it is.
/// - A format rule broken inside a stage (DSH's `SessionFormatError`) is named after the stage
///   that threw, as DSH's chain wraps it:
///   `@deepseek-ai/dsh-session-format-v2-to-v3 refuses this format v2 Session: …`.
/// - A physical header the released decoder cannot take is the decoder's error, unwrapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The source version of the edge that refused.
    pub from: u32,
    /// Whether the message is named after the stage (a format rule broken inside it).
    pub wrapped: bool,
    /// DSH's message, naming the seq where the rule applies to one event.
    pub message: String,
}

impl Refusal {
    /// A semantic refusal of the edge from `from`.
    pub fn unsupported(from: u32, message: impl Into<String>) -> Self {
        Refusal {
            from,
            wrapped: false,
            message: message.into(),
        }
    }

    /// A format rule the edge from `from` found broken.
    pub fn format(from: u32, message: impl Into<String>) -> Self {
        Refusal {
            from,
            wrapped: true,
            message: message.into(),
        }
    }

    /// The released decoder of format `from` refusing its physical header.
    pub fn decoder(from: u32, message: impl Into<String>) -> Self {
        Refusal::unsupported(from, message)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wrapped {
            write!(
                f,
                "@deepseek-ai/dsh-session-format-v{}-to-v{} refuses this format v{} Session: {}",
                self.from,
                self.from + 1,
                self.from,
                self.message
            )
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Refusal {}

/// One adjacent edge of the chain.
pub trait Stage: Send {
    /// The edge's source version.
    fn source_version(&self) -> u32;
    /// Rewrite the header in place (the stage's own state, such as the inherited cut, is taken
    /// from the source header here).
    fn header(&mut self, header: &mut Object) -> Result<(), Refusal>;
    /// Transform one source event; emitted events go to `out` in order.
    fn event(&mut self, event: Object, out: &mut Vec<Object>) -> Result<(), Refusal>;
    /// The end of the source: emit what the stage held back, or refuse what stayed open.
    fn finish(&mut self, out: &mut Vec<Object>) -> Result<(), Refusal>;
}

/// What migrating a log produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Migrated {
    /// The V4 header.
    pub header: Object,
    /// The V4 events, seqs dense from 0.
    pub events: Vec<Object>,
}

/// Facts about a direct child session found in the same store, for the V3→V4 catalog backfill.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildFacts {
    /// The child's id.
    pub child_id: String,
    /// The child's `createdAt`.
    pub child_created_at: f64,
    /// The child's `subagent/descriptor` payloads after its inherited cut.
    pub descriptors: Vec<Value>,
}

/// A chain of stages from some version to V4.
pub struct Chain {
    stages: Vec<Box<dyn Stage>>,
}

impl Chain {
    /// The stages that carry a log of format `version` to V4 (none for V4). `children` are the
    /// session's direct children in the same store (used only by V3→V4).
    pub fn from_version(version: u32, children: Vec<ChildFacts>) -> Self {
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        if version == 0 {
            stages.push(Box::new(V0ToV1::default()));
        }
        match version {
            0 => stages.push(Box::new(V1ToV2::default())),
            1 => stages.push(Box::new(V1ToV2::decoded())),
            _ => {}
        }
        if version <= 2 {
            stages.push(Box::new(V2ToV3::default()));
        }
        if version <= 3 {
            stages.push(Box::new(V3ToV4::new(children)));
        }
        Chain { stages }
    }

    /// Migrate a whole log: `header` then `events` in order.
    pub fn run(
        mut self,
        mut header: Object,
        events: impl IntoIterator<Item = Value>,
    ) -> Result<Migrated, Refusal> {
        self.header(&mut header)?;
        let mut out = Vec::new();
        for event in events {
            self.push(event, &mut out)?;
        }
        self.finish(&mut out)?;
        Ok(Migrated {
            header,
            events: out,
        })
    }

    /// Streaming use, first: carry the header through every edge.
    pub fn header(&mut self, header: &mut Object) -> Result<(), Refusal> {
        for stage in &mut self.stages {
            stage.header(header)?;
        }
        Ok(())
    }

    /// Streaming use: the next source event; what the last edge emits goes to `out`.
    pub fn push(&mut self, event: Value, out: &mut Vec<Object>) -> Result<(), Refusal> {
        let Value::Object(event) = event else {
            return Err(Refusal::format(
                self.stages
                    .first()
                    .map_or(TARGET_VERSION, |s| s.source_version()),
                "session events must be JSON objects",
            ));
        };
        push(&mut self.stages, event, out)
    }

    /// Streaming use, last: the end of the source, each edge finishing in order.
    pub fn finish(&mut self, out: &mut Vec<Object>) -> Result<(), Refusal> {
        for at in 0..self.stages.len() {
            let (done, rest) = self.stages.split_at_mut(at + 1);
            let mut held = Vec::new();
            done[at].finish(&mut held)?;
            for event in held {
                push(rest, event, out)?;
            }
        }
        Ok(())
    }
}

/// Feed `event` to the first stage and everything it emits through the rest.
fn push(
    stages: &mut [Box<dyn Stage>],
    event: Object,
    sink: &mut Vec<Object>,
) -> Result<(), Refusal> {
    let Some((first, rest)) = stages.split_first_mut() else {
        sink.push(event);
        return Ok(());
    };
    let mut emitted = Vec::new();
    first.event(event, &mut emitted)?;
    for e in emitted {
        push(rest, e, sink)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
