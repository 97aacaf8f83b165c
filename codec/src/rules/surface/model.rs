//! The surface rules of each served format generation. DSH 0.1 (V0) and DSH 0.2 (V4) fold the
//! same way (ordered nodes, replaces collapsing a span by surface position), but differ in which
//! types join the surface, how a replace is spelled, and what protects the system prompt
//! (later-format-spec §2.1–2.3).

use serde::{Deserialize, Serialize};

use super::{ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE};

/// `system/message` (V3+): the system prompt, surface node 0 once the first step starts.
pub const SYSTEM_MESSAGE: &str = "system/message";
/// `developer/message` (V4): developer instructions and tool additions/removals.
pub const DEVELOPER_MESSAGE: &str = "developer/message";

/// Which generation's surface rules a fold applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SurfaceModel {
    /// DSH 0.1 (format V0): user, assistant and tool messages; replace `{op,start,end}`.
    #[default]
    V0,
    /// DSH 0.2 (format V4): five surface types with `system/message` as protected node 0;
    /// replace `{op,startSeq,endSeq}`; `assistant/message` embeds its stream and carries no
    /// `sourceEventSeqs`; a `tool/result` rewrite may change only `message.content`.
    V4,
}

impl SurfaceModel {
    /// The model serving format `version`, if one is implemented (V1–V3 are read through DSH
    /// 0.2's migrations, which are not).
    pub fn for_version(version: u32) -> Option<SurfaceModel> {
        match version {
            0 => Some(SurfaceModel::V0),
            4 => Some(SurfaceModel::V4),
            _ => None,
        }
    }

    /// Whether `ty` may join the surface (DSH's `isSurfaceEligibleType`).
    pub fn is_eligible(self, ty: &str) -> bool {
        match self {
            SurfaceModel::V0 => matches!(ty, USER_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT),
            SurfaceModel::V4 => matches!(
                ty,
                SYSTEM_MESSAGE | DEVELOPER_MESSAGE | USER_MESSAGE | ASSISTANT_MESSAGE | TOOL_RESULT
            ),
        }
    }

    /// The keys of a replace's endpoints.
    pub fn replace_keys(self) -> (&'static str, &'static str) {
        match self {
            SurfaceModel::V0 => ("start", "end"),
            SurfaceModel::V4 => ("startSeq", "endSeq"),
        }
    }

    /// Types whose message is dropped when its `content` is empty (the node keeps its place).
    pub(crate) fn drops_empty_content(self, ty: &str) -> bool {
        match self {
            SurfaceModel::V0 => ty == ASSISTANT_MESSAGE,
            SurfaceModel::V4 => {
                matches!(ty, ASSISTANT_MESSAGE | SYSTEM_MESSAGE | DEVELOPER_MESSAGE)
            }
        }
    }
}
