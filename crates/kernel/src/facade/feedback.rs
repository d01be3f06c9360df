//! The façade of [`FeedbackRoom`](crate::feedback::FeedbackRoom): what members
//! report about their tools and skills, and what the lead reads of it.

use crate::feedback::{Feedback, Summary};
use crate::{Caller, Kernel, Scope};
use domain::error::Result;

impl Kernel {
    /// my_feedback: the caller's report (`kind`, `about`, `text`) in its instance.
    pub async fn feedback_report(
        &self,
        scope: &Scope,
        (kind, about, text): (&str, &str, &str),
    ) -> Result<Feedback> {
        self.feedback.report(scope, (kind, about, text)).await
    }

    /// An instance's feedback as `who` may read it (the lead any instance, an
    /// agent its own): the count of each kind and the `newest` reports.
    pub async fn feedback_summary(
        &self,
        who: &Caller,
        workflow: &str,
        newest: usize,
    ) -> Result<Summary> {
        let scope = self.registry.scope(who, Some(workflow)).await?;
        self.feedback.summary(scope.workflow_id, newest).await
    }
}
