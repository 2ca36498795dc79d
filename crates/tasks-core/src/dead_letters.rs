//! Dead letters: jobs that failed their last attempt, kept `WORKER_KEEP_RESULT_SECONDS` with
//! their last error, attempts, arguments and queue, for an administrator to retry or drop.

use kernel::pagination::Page;

use crate::domain::TaskRecord;
use crate::error::TasksError;
use crate::service::TasksService;

impl TasksService {
    /// Failed jobs still kept, most recent failure first, and how many there are.
    pub async fn failed(&self, page: Page) -> Result<(Vec<TaskRecord>, u64), TasksError> {
        let offset = u64::try_from(page.offset()).unwrap_or(0);
        let limit = u64::try_from(page.limit()).unwrap_or(1);
        self.backend()
            .failed_page(offset, limit, self.config().keep_result)
            .await
    }

    /// Queues a failed job again under the same id, with its attempts starting over, and
    /// removes its dead letter. 404 when it is not a kept failed job.
    pub async fn retry_failed(&self, task_id: &str) -> Result<TaskRecord, TasksError> {
        let record = self
            .backend()
            .retry_failed(task_id)
            .await?
            .ok_or_else(|| TasksError::DeadLetterNotFound(task_id.to_owned()))?;
        tracing::info!(task_id, task = %record.task_name, "failed task queued again");
        Ok(record)
    }

    /// Removes a failed job for good. 404 when it is not a kept failed job.
    pub async fn drop_failed(&self, task_id: &str) -> Result<(), TasksError> {
        if self.backend().drop_failed(task_id).await? {
            tracing::info!(task_id, "failed task dropped");
            Ok(())
        } else {
            Err(TasksError::DeadLetterNotFound(task_id.to_owned()))
        }
    }
}
