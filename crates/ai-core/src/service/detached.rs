//! The service as the module hands it out (to its handlers and its CLI): every call a unit of
//! work ([`Detached`]), so that a request dropped mid-call (the client went away) cannot leave a
//! reply the provider gave neither stored nor counted. Each method copies its borrowed arguments
//! and forwards to the wrapped service; a method added to [`AiService`] without a line here
//! does not compile.

use kernel::unit::Detached;

use super::{AiService, Health, Opened, Reply, Turn};
use crate::budget::{Caller, Quota};
use crate::config::AiConfig;
use crate::error::AiError;
use crate::providers::Completion;
use crate::store::{Conversation, ConversationHead};

#[async_trait::async_trait]
impl AiService for Detached<dyn AiService> {
    async fn prepare(
        &self,
        caller: &Caller,
        message: Option<String>,
        conversation_id: Option<String>,
    ) -> Result<Turn, AiError> {
        let caller = caller.clone();
        self.run(move |s| async move { s.prepare(&caller, message, conversation_id).await })
            .await
    }

    async fn chat(&self, turn: Turn) -> Result<Reply, AiError> {
        self.run(move |s| async move { s.chat(turn).await }).await
    }

    async fn open_stream(&self, turn: &Turn) -> Result<Opened, AiError> {
        let turn = turn.clone();
        self.run(move |s| async move { s.open_stream(&turn).await })
            .await
    }

    async fn finish(&self, turn: Turn, completion: &Completion) -> Result<(), AiError> {
        let completion = completion.clone();
        self.run(move |s| async move { s.finish(turn, &completion).await })
            .await
    }

    async fn abandon(&self, turn: Turn, streamed: &str) -> Result<(), AiError> {
        let streamed = streamed.to_owned();
        self.run(move |s| async move { s.abandon(turn, &streamed).await })
            .await
    }

    async fn usage(&self, caller: &Caller) -> Result<Quota, AiError> {
        let caller = caller.clone();
        self.run(move |s| async move { s.usage(&caller).await })
            .await
    }

    async fn conversations(
        &self,
        user_id: &str,
        limit: usize,
    ) -> Result<Vec<ConversationHead>, AiError> {
        let user_id = user_id.to_owned();
        self.run(move |s| async move { s.conversations(&user_id, limit).await })
            .await
    }

    async fn conversation(&self, user_id: &str, id: &str) -> Result<Conversation, AiError> {
        let (user_id, id) = (user_id.to_owned(), id.to_owned());
        self.run(move |s| async move { s.conversation(&user_id, &id).await })
            .await
    }

    async fn delete_conversation(&self, user_id: &str, id: &str) -> Result<(), AiError> {
        let (user_id, id) = (user_id.to_owned(), id.to_owned());
        self.run(move |s| async move { s.delete_conversation(&user_id, &id).await })
            .await
    }

    async fn health(&self) -> Result<Health, AiError> {
        self.run(move |s| async move { s.health().await }).await
    }

    /// A setting: no unit.
    fn config(&self) -> &AiConfig {
        self.inner().config()
    }
}
