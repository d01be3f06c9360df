//! The states things are in, and why a run starts, as types. Each enum's
//! [`as_str`](Wake::as_str) and `FromStr` are the one mapping to and from the text the
//! store keeps (and tools show): nothing else spells a state as a string, and a text
//! no variant has is an error when read, not a silent default.

/// A text no variant of the named enum has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind}: {text:?}")]
pub struct UnknownState {
    pub kind: &'static str,
    pub text: String,
}

/// An enum whose every variant is one fixed text: `as_str`, `FromStr`, `Display`
/// and serde all use the same table, and `ALL` lists the variants (for the tests
/// that hold SQL literals to the table).
macro_rules! text_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident ($kind:literal) {
            $( $(#[$vm:meta])* $var:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vm])* $var ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &[$name] = &[$($name::$var),+];

            /// The text the store keeps and tools show.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $text),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::states::UnknownState;
            fn from_str(s: &str) -> Result<Self, $crate::states::UnknownState> {
                match s {
                    $($text => Ok($name::$var),)+
                    _ => Err($crate::states::UnknownState { kind: $kind, text: s.to_owned() }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        /// Described as the plain string it is shown as, so a view's schema is
        /// the same as when the field was a `String`.
        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> std::borrow::Cow<'static, str> {
                String::schema_name()
            }
            fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                String::json_schema(g)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use text_enum;

text_enum! {
    /// Why a run starts. Kept in a run's row (`runs.trigger`), given to its worker,
    /// and remembered while the agent runs (one more run when this one ends).
    pub enum Wake("wake") {
        /// Something in the inbox.
        Message = "message",
        /// Again after a failed run (its deliveries stayed pending).
        Retry = "retry",
        /// The end of an automatic pause, or an approval that came.
        Resume = "resume",
        /// A `cron` schedule, or one with a prompt of its own, fired: it runs every time.
        Schedule = "schedule",
        /// An `every` schedule without a prompt of its own fired: a poll, which
        /// runs only if something waits for the agent (an open delivery, or channel
        /// messages by others its last run did not see).
        Poll = "poll",
        /// agent_ask: the lead's question, straight to the process manager.
        Ask = "ask",
    }
}

text_enum! {
    /// An agent's state (`agents.state`). While a run is in progress tools show
    /// the agent as running, whatever its row says.
    pub enum AgentState("agent state") {
        Idle = "idle",
        Running = "running",
        /// By the lead, a guard, or an auth or billing error (which resumes by itself).
        Paused = "paused",
        /// Too many failed runs in a row; a new message tries again.
        Failed = "failed",
    }
}

text_enum! {
    /// How a run ended, or that it has not (`runs.status`).
    pub enum RunStatus("run status") {
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        Stopped = "stopped",
        /// Its kernel died or lost it.
        Lost = "lost",
    }
}

text_enum! {
    /// A workflow instance's state (`workflows.state`).
    pub enum WorkflowState("workflow state") {
        /// An instance that is not a workflow run: the global one, and any made by
        /// agent_create. Nothing settles it.
        Active = "active",
        Running = "running",
        Completed = "completed",
        /// Nothing to do now, but schedules will run it again.
        Scheduled = "scheduled",
        /// Paused agents have messages waiting.
        Blocked = "blocked",
        Stopped = "stopped",
        Failed = "failed",
    }
}

impl WorkflowState {
    /// A workflow run the scheduler watches and settles (not stopped, failed, or
    /// an instance that is no run).
    pub fn is_live_run(self) -> bool {
        matches!(
            self,
            Self::Running | Self::Completed | Self::Scheduled | Self::Blocked
        )
    }

    /// Whether its agents are woken no more (until it is run again).
    pub fn is_ended(self) -> bool {
        matches!(self, Self::Stopped | Self::Failed)
    }
}

/// Whether an agent in this state, in a workflow instance in this state, may be
/// woken at all (the scheduler's gate and a node taking an agent back ask the
/// same): not while it is paused, nor once its workflow was stopped or failed.
/// Budgets and an empty inbox are the gate's further questions.
pub fn may_wake(agent: AgentState, workflow: WorkflowState) -> bool {
    agent != AgentState::Paused && !workflow.is_ended()
}

text_enum! {
    /// One recipient's copy of a message (`deliveries.state`).
    pub enum DeliveryState("delivery state") {
        Pending = "pending",
        Seen = "seen",
        Acked = "acked",
        Deferred = "deferred",
    }
}

text_enum! {
    /// An approval (`approvals.state`).
    pub enum ApprovalState("approval state") {
        Pending = "pending",
        Approved = "approved",
        Denied = "denied",
        TimedOut = "timed_out",
        /// Its run ended before a decision.
        Lost = "lost",
    }
}

text_enum! {
    /// A proposal (`proposals.status`).
    pub enum ProposalStatus("proposal status") {
        Open = "open",
        Resolved = "resolved",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

text_enum! {
    /// A step of a step workflow (`steps.state`).
    pub enum StepState("step state") {
        /// Its events have not all happened yet.
        Waiting = "waiting",
        /// Its prompt was posted to its agent; the run that reads it has not ended well yet.
        Running = "running",
        /// The run that read its prompt succeeded.
        Done = "done",
        /// Its agent failed for good on it.
        Failed = "failed",
        /// It can no longer run: a step it waits for failed, or did not.
        Skipped = "skipped",
    }
}

impl StepState {
    /// Done, failed or skipped: nothing more happens to it.
    pub fn is_over(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Skipped)
    }
}

text_enum! {
    /// A task of a board (`tasks.state`). Blocked is not a state: an open task
    /// whose dependencies are not all done is shown with what blocks it.
    pub enum TaskState("task state") {
        /// Anyone it is assigned to may claim it (once its dependencies are done).
        Open = "open",
        /// Held by its owner (the run that claimed it, or the agent's next run).
        Claimed = "claimed",
        Done = "done",
        Failed = "failed",
        /// By the lead.
        Cancelled = "cancelled",
    }
}

impl TaskState {
    /// Done, failed or cancelled: nothing moves it again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Cancelled)
    }
}

/// Every text any state enum above has: what a state literal in SQL may say.
pub fn all_state_texts() -> impl Iterator<Item = &'static str> {
    let agent = AgentState::ALL.iter().map(|s| s.as_str());
    let run = RunStatus::ALL.iter().map(|s| s.as_str());
    let workflow = WorkflowState::ALL.iter().map(|s| s.as_str());
    let delivery = DeliveryState::ALL.iter().map(|s| s.as_str());
    let approval = ApprovalState::ALL.iter().map(|s| s.as_str());
    let proposal = ProposalStatus::ALL.iter().map(|s| s.as_str());
    let step = StepState::ALL.iter().map(|s| s.as_str());
    let task = TaskState::ALL.iter().map(|s| s.as_str());
    agent
        .chain(run)
        .chain(workflow)
        .chain(delivery)
        .chain(approval)
        .chain(proposal)
        .chain(step)
        .chain(task)
}

impl Wake {
    /// Whether an empty inbox means there is nothing to run for. A schedule runs
    /// with its own prompt, inbox or not; a poll also looks at the channel (the
    /// gate's own rule).
    pub fn needs_inbox(self) -> bool {
        !matches!(self, Wake::Schedule | Wake::Poll)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_a_paused_agent_or_an_ended_workflow_stops_wakes() {
        for a in AgentState::ALL {
            for w in WorkflowState::ALL {
                let want = *a != AgentState::Paused
                    && !matches!(w, WorkflowState::Stopped | WorkflowState::Failed);
                assert_eq!(super::may_wake(*a, *w), want, "{a} in a {w} workflow");
            }
        }
    }
    use super::*;
    use std::fmt;

    /// Every variant reads back as itself from the text the store keeps.
    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + std::str::FromStr,
        T::Err: fmt::Debug,
    {
        let mut texts = std::collections::HashSet::new();
        for v in all {
            let text = v.to_string();
            assert!(texts.insert(text.clone()), "{text} is used twice");
            assert_eq!(text.parse::<T>().unwrap(), *v);
        }
    }

    #[test]
    fn wakes_round_trip_through_their_text() {
        round_trips(Wake::ALL);
        assert_eq!(Wake::ALL.len(), 6);
        // The ones that used to come back as a message read back as themselves.
        assert_eq!("retry".parse::<Wake>(), Ok(Wake::Retry));
        assert_eq!("resume".parse::<Wake>(), Ok(Wake::Resume));
        let e = "wake".parse::<Wake>().unwrap_err();
        assert_eq!(e.to_string(), "unknown wake: \"wake\"");
    }

    #[test]
    fn states_round_trip_through_their_text() {
        round_trips(AgentState::ALL);
        round_trips(RunStatus::ALL);
        round_trips(WorkflowState::ALL);
        round_trips(DeliveryState::ALL);
        round_trips(ApprovalState::ALL);
        round_trips(ProposalStatus::ALL);
        assert_eq!("timed_out".parse(), Ok(ApprovalState::TimedOut));
        assert!("Paused".parse::<AgentState>().is_err());
    }

    #[test]
    fn serde_uses_the_same_text() {
        for w in Wake::ALL {
            let json = serde_json::to_string(w).unwrap();
            assert_eq!(json, format!("\"{}\"", w.as_str()));
            assert_eq!(serde_json::from_str::<Wake>(&json).unwrap(), *w);
        }
        assert!(serde_json::from_str::<Wake>("\"Message\"").is_err());
    }
}
