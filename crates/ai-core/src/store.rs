//! Conversations, behind one trait: in memory (the spec's default) or in the database.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::NaiveDateTime;
use diesel::{ExpressionMethods, OptionalExtension, QueryDsl, QueryResult, SelectableHelper};
use kernel::{DbPool, with_conn, write_tx};

use crate::error::AiError;
use crate::providers::Role;
use crate::schema::{ai_conversations, ai_messages};

/// A stored message.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub id: String,
    pub role: Role,
    pub content: String,
    pub timestamp: NaiveDateTime,
    /// Who wrote a reply: the provider and model that answered (`None` for the user's messages,
    /// and for replies stored before this was kept).
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// A conversation without its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationHead {
    pub id: String,
    pub user_id: String,
    pub title: String,
    /// The provider and model that gave the latest reply.
    pub provider: String,
    pub model: String,
    pub message_count: i64,
    pub last_response_time_ms: Option<f64>,
    pub created_at: NaiveDateTime,
    pub updated_at: NaiveDateTime,
}

/// A conversation with its messages, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub head: ConversationHead,
    pub messages: Vec<StoredMessage>,
}

/// A completed exchange to add: the user's message and the reply.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The conversation as it is after the exchange (created when new).
    pub head: ConversationHead,
    pub question: StoredMessage,
    pub answer: StoredMessage,
    /// It continues a conversation that existed when the question was asked: when that one has
    /// been deleted (or forgotten) since, the exchange is not stored and nothing is recreated.
    pub continues: bool,
}

#[async_trait::async_trait]
pub trait ConversationStore: Send + Sync {
    /// The conversation's head and its last `context` messages (all of them with `None`).
    async fn get(&self, id: &str, context: Option<usize>) -> Result<Option<Conversation>, AiError>;
    /// Adds an exchange, creating the conversation when it is new; an exchange that continues a
    /// conversation gone meanwhile is dropped.
    async fn append(&self, exchange: Exchange) -> Result<(), AiError>;
    /// A user's conversations, most recently active first.
    async fn list(&self, user_id: &str, limit: usize) -> Result<Vec<ConversationHead>, AiError>;
    /// How many conversations are kept.
    async fn count(&self) -> Result<i64, AiError>;
    /// Deletes `user_id`'s conversation `id` with every message; false when there is none (or it
    /// is another user's).
    async fn delete(&self, id: &str, user_id: &str) -> Result<bool, AiError>;
}

/// Conversations in this process: forgotten after `ttl` without activity, at most `max` kept (the
/// least recently active goes first).
pub struct MemoryStore {
    ttl: Duration,
    max: usize,
    conversations: Mutex<HashMap<String, Conversation>>,
}

impl MemoryStore {
    pub fn new(ttl: Duration, max: usize) -> Self {
        MemoryStore {
            ttl,
            max: max.max(1),
            conversations: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Conversation>> {
        self.conversations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn expired(&self, head: &ConversationHead, now: NaiveDateTime) -> bool {
        let ttl = chrono::Duration::from_std(self.ttl).unwrap_or(chrono::Duration::MAX);
        head.updated_at + ttl < now
    }
}

#[async_trait::async_trait]
impl ConversationStore for MemoryStore {
    async fn get(&self, id: &str, context: Option<usize>) -> Result<Option<Conversation>, AiError> {
        let now = kernel::time::now();
        let mut all = self.lock();
        if all.get(id).is_some_and(|c| self.expired(&c.head, now)) {
            all.remove(id);
        }
        Ok(all.get(id).map(|c| {
            let skip = context.map_or(0, |n| c.messages.len().saturating_sub(n));
            Conversation {
                head: c.head.clone(),
                messages: c.messages[skip..].to_vec(),
            }
        }))
    }

    async fn append(&self, exchange: Exchange) -> Result<(), AiError> {
        let now = kernel::time::now();
        let mut all = self.lock();
        all.retain(|_, c| !self.expired(&c.head, now));
        let id = exchange.head.id.clone();
        if exchange.continues && !all.contains_key(&id) {
            return Ok(());
        }
        if !all.contains_key(&id) && all.len() >= self.max {
            let oldest = all
                .values()
                .min_by_key(|c| c.head.updated_at)
                .map(|c| c.head.id.clone());
            if let Some(oldest) = oldest {
                all.remove(&oldest);
            }
        }
        let entry = all.entry(id).or_insert_with(|| Conversation {
            head: exchange.head.clone(),
            messages: Vec::new(),
        });
        entry.head = exchange.head;
        entry.messages.push(exchange.question);
        entry.messages.push(exchange.answer);
        Ok(())
    }

    async fn list(&self, user_id: &str, limit: usize) -> Result<Vec<ConversationHead>, AiError> {
        let now = kernel::time::now();
        let all = self.lock();
        let mut heads: Vec<ConversationHead> = all
            .values()
            .filter(|c| c.head.user_id == user_id && !self.expired(&c.head, now))
            .map(|c| c.head.clone())
            .collect();
        heads.sort_by_key(|h| std::cmp::Reverse(h.updated_at));
        heads.truncate(limit);
        Ok(heads)
    }

    async fn count(&self) -> Result<i64, AiError> {
        Ok(i64::try_from(self.lock().len()).unwrap_or(i64::MAX))
    }

    async fn delete(&self, id: &str, user_id: &str) -> Result<bool, AiError> {
        let now = kernel::time::now();
        let mut all = self.lock();
        let owned = all
            .get(id)
            .is_some_and(|c| c.head.user_id == user_id && !self.expired(&c.head, now));
        if owned {
            all.remove(id);
        }
        Ok(owned)
    }
}

/// Conversations in the database (`AI_CONVERSATION_STORE=database`): shared by every instance.
pub struct DatabaseStore {
    pool: DbPool,
}

impl DatabaseStore {
    pub fn new(pool: DbPool) -> Self {
        DatabaseStore { pool }
    }
}

#[derive(diesel::Queryable, diesel::Selectable, diesel::Insertable, diesel::AsChangeset)]
#[diesel(table_name = ai_conversations)]
struct HeadRow {
    id: String,
    user_id: String,
    title: String,
    provider: String,
    model: String,
    message_count: i64,
    last_response_time_ms: Option<f64>,
    created_at: NaiveDateTime,
    updated_at: NaiveDateTime,
}

#[derive(diesel::Queryable, diesel::Selectable, diesel::Insertable)]
#[diesel(table_name = ai_messages)]
struct MessageRow {
    id: String,
    conversation_id: String,
    seq: i64,
    role: String,
    content: String,
    created_at: NaiveDateTime,
    provider: Option<String>,
    model: Option<String>,
}

impl From<HeadRow> for ConversationHead {
    fn from(r: HeadRow) -> Self {
        ConversationHead {
            id: r.id,
            user_id: r.user_id,
            title: r.title,
            provider: r.provider,
            model: r.model,
            message_count: r.message_count,
            last_response_time_ms: r.last_response_time_ms,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

impl From<&ConversationHead> for HeadRow {
    fn from(h: &ConversationHead) -> Self {
        HeadRow {
            id: h.id.clone(),
            user_id: h.user_id.clone(),
            title: h.title.clone(),
            provider: h.provider.clone(),
            model: h.model.clone(),
            message_count: h.message_count,
            last_response_time_ms: h.last_response_time_ms,
            created_at: h.created_at,
            updated_at: h.updated_at,
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

fn message_row(conversation_id: &str, seq: i64, m: &StoredMessage) -> MessageRow {
    MessageRow {
        id: m.id.clone(),
        conversation_id: conversation_id.to_owned(),
        seq,
        role: role_name(m.role).to_owned(),
        content: m.content.clone(),
        created_at: m.timestamp,
        provider: m.provider.clone(),
        model: m.model.clone(),
    }
}

#[async_trait::async_trait]
impl ConversationStore for DatabaseStore {
    async fn get(&self, id: &str, context: Option<usize>) -> Result<Option<Conversation>, AiError> {
        let mut pooled = self.pool.read().await?;
        let mut conn = pooled.conn();
        let found: QueryResult<Option<(HeadRow, Vec<MessageRow>)>> = with_conn!(&mut conn, |c| {
            let Some(head) = ai_conversations::table
                .find(id)
                .select(HeadRow::as_select())
                .get_result(c)
                .await
                .optional()?
            else {
                return Ok(None);
            };
            let limit = context.map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
            let mut messages: Vec<MessageRow> = ai_messages::table
                .filter(ai_messages::conversation_id.eq(id))
                .order(ai_messages::seq.desc())
                .limit(limit)
                .select(MessageRow::as_select())
                .load(c)
                .await?;
            messages.reverse();
            Ok(Some((head, messages)))
        });
        Ok(found?.map(|(head, messages)| Conversation {
            head: head.into(),
            messages: messages
                .into_iter()
                .map(|m| StoredMessage {
                    id: m.id,
                    role: if m.role == "assistant" {
                        Role::Assistant
                    } else {
                        Role::User
                    },
                    content: m.content,
                    timestamp: m.created_at,
                    provider: m.provider,
                    model: m.model,
                })
                .collect(),
        }))
    }

    async fn append(&self, exchange: Exchange) -> Result<(), AiError> {
        let head = HeadRow::from(&exchange.head);
        let id = exchange.head.id.clone();
        write_tx!(&self.pool, AiError, |tx| {
            if exchange.continues {
                // Its row, written first, is locked until the commit: a delete running meanwhile
                // waits for this exchange (and takes it along), or went first and leaves nothing
                // to continue.
                let found = with_conn!(tx, |c| {
                    diesel::update(ai_conversations::table.find(&id))
                        .set((
                            ai_conversations::provider.eq(&head.provider),
                            ai_conversations::model.eq(&head.model),
                            ai_conversations::last_response_time_ms.eq(head.last_response_time_ms),
                            ai_conversations::updated_at.eq(head.updated_at),
                        ))
                        .execute(c)
                        .await
                })?;
                if found == 0 {
                    return Ok(());
                }
            }
            // The exchange's two messages take the next two positions.
            let seq = with_conn!(tx, |c| {
                ai_messages::table
                    .filter(ai_messages::conversation_id.eq(&id))
                    .count()
                    .get_result::<i64>(c)
                    .await
            })?;
            let rows = [
                message_row(&id, seq, &exchange.question),
                message_row(&id, seq + 1, &exchange.answer),
            ];
            with_conn!(tx, |c| {
                diesel::insert_into(ai_conversations::table)
                    .values(&head)
                    .on_conflict(ai_conversations::id)
                    .do_update()
                    .set((
                        ai_conversations::provider.eq(&head.provider),
                        ai_conversations::model.eq(&head.model),
                        ai_conversations::message_count.eq(seq + 2),
                        ai_conversations::last_response_time_ms.eq(head.last_response_time_ms),
                        ai_conversations::updated_at.eq(head.updated_at),
                    ))
                    .execute(c)
                    .await?;
                for row in &rows {
                    diesel::insert_into(ai_messages::table)
                        .values(row)
                        .execute(c)
                        .await?;
                }
                QueryResult::Ok(())
            })?;
            Ok(())
        })
    }

    async fn list(&self, user_id: &str, limit: usize) -> Result<Vec<ConversationHead>, AiError> {
        let mut pooled = self.pool.read().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<HeadRow> = with_conn!(&mut pooled.conn(), |c| {
            ai_conversations::table
                .filter(ai_conversations::user_id.eq(user_id))
                .order(ai_conversations::updated_at.desc())
                .limit(limit)
                .select(HeadRow::as_select())
                .load(c)
                .await
        })?;
        Ok(rows.into_iter().map(ConversationHead::from).collect())
    }

    async fn count(&self) -> Result<i64, AiError> {
        let mut pooled = self.pool.read().await?;
        let n: i64 = with_conn!(&mut pooled.conn(), |c| {
            ai_conversations::table.count().get_result(c).await
        })?;
        Ok(n)
    }

    /// Both deletes in one transaction, the conversation's row first (only the owner's): an
    /// exchange being added to it waits for that row, then finds nothing to continue.
    async fn delete(&self, id: &str, user_id: &str) -> Result<bool, AiError> {
        write_tx!(&self.pool, AiError, |tx| {
            let deleted = with_conn!(tx, |c| {
                diesel::delete(
                    ai_conversations::table
                        .filter(ai_conversations::id.eq(id))
                        .filter(ai_conversations::user_id.eq(user_id)),
                )
                .execute(c)
                .await
            })?;
            if deleted == 0 {
                return Ok(false);
            }
            // Also without the foreign key's cascade (SQLite enforces it only when asked).
            with_conn!(tx, |c| {
                diesel::delete(ai_messages::table.filter(ai_messages::conversation_id.eq(id)))
                    .execute(c)
                    .await
            })?;
            Ok(true)
        })
    }
}
