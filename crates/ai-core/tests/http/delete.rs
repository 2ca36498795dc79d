//! `DELETE /ai/conversations/{id}`: the owner's conversation goes with every message (204);
//! another user's, or one that does not exist, is 404; in both stores, on both backends.

use super::*;

kernel::backend_tests! {
    an_owner_deletes_a_conversation_with_its_messages,
    a_token_user_deletes_only_their_own,
    a_reply_in_flight_does_not_bring_a_deleted_conversation_back,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Rows of `table` whose `column` is `id`, read straight from the database.
async fn rows(db: &TestDb, table: &str, column: &str, id: &str) -> i64 {
    let pool = kernel::DbPool::connect(&db.url, 1).await.unwrap();
    let mut pooled = pool.get().await.unwrap();
    let query = format!("SELECT COUNT(*) AS n FROM {table} WHERE {column} = '{id}'");
    let found: Count = kernel::with_conn!(&mut pooled.conn(), |c| {
        diesel::sql_query(query.as_str()).get_result(c).await
    })
    .unwrap();
    found.n
}

impl Ctx {
    async fn delete(&self, path: &str) -> (u16, Option<Value>) {
        let res = self
            .server
            .client
            .delete(self.server.url(path))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body = res.bytes().await.unwrap();
        (status, serde_json::from_slice(&body).ok())
    }
}

async fn an_owner_deletes_a_conversation_with_its_messages(db: TestDb) {
    for store in [StoreChoice::Memory, StoreChoice::Database] {
        let c = start(&db, |config| config.store = store).await;
        let (_, first) = c
            .post(
                "/chat",
                json!({"message": "keep this?", "user_id": "alice"}),
            )
            .await;
        let id = first["conversation_id"].as_str().unwrap().to_owned();
        c.post(
            "/chat",
            json!({"message": "more", "conversation_id": id, "user_id": "alice"}),
        )
        .await;
        let (_, other) = c
            .post("/chat", json!({"message": "another", "user_id": "alice"}))
            .await;
        let other = other["conversation_id"].as_str().unwrap().to_owned();
        if store == StoreChoice::Database {
            assert_eq!(rows(&db, "ai_messages", "conversation_id", &id).await, 4);
        }
        // Someone else, or nobody named: 404, and nothing is gone.
        for who in ["bob", "api-user"] {
            let (status, body) = c
                .delete(&format!("/ai/conversations/{id}?user_id={who}"))
                .await;
            assert_eq!(status, 404, "{who}: {body:?}");
            assert_eq!(
                body.unwrap()["detail"],
                format!("Conversation error: Conversation {id} not found")
            );
        }
        assert_eq!(
            c.get(&format!("/conversations/{id}?user_id=alice")).await.1["message_count"],
            4
        );
        let (status, body) = c
            .delete(&format!("/ai/conversations/{id}?user_id=alice"))
            .await;
        assert_eq!((status, body), (204, None));
        let (status, _) = c.get(&format!("/conversations/{id}?user_id=alice")).await;
        assert_eq!(status, 404);
        let (_, list) = c.get("/conversations?user_id=alice").await;
        assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
        assert_eq!(list[0]["id"], other.as_str());
        if store == StoreChoice::Database {
            assert_eq!(rows(&db, "ai_messages", "conversation_id", &id).await, 0);
            assert_eq!(rows(&db, "ai_conversations", "id", &id).await, 0);
            assert_eq!(rows(&db, "ai_messages", "conversation_id", &other).await, 2);
        }
        // Gone is gone; continuing it is a 404 too.
        let (status, _) = c
            .delete(&format!("/api/v1/ai/conversations/{id}?user_id=alice"))
            .await;
        assert_eq!(status, 404);
        let (status, _) = c
            .post(
                "/chat",
                json!({"message": "x", "conversation_id": id, "user_id": "alice"}),
            )
            .await;
        assert_eq!(status, 404);
        // The id in another form is the same conversation; not a UUID is a 400.
        let upper = other.to_uppercase();
        let (status, _) = c
            .delete(&format!("/api/v1/ai/conversations/{upper}?user_id=alice"))
            .await;
        assert_eq!(status, 204);
        for bad in ["nope", "%00", "1%20OR%201=1"] {
            let (status, body) = c.delete(&format!("/ai/conversations/{bad}")).await;
            assert_eq!(status, 400, "{bad}");
            assert!(
                body.unwrap()["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with("Invalid conversation_id"),
                "{bad}"
            );
        }
        let long = "u".repeat(256);
        let (status, _) = c
            .delete(&format!("/ai/conversations/{id}?user_id={long}"))
            .await;
        assert_eq!(status, 400);
        assert_eq!(c.get("/conversations?user_id=alice").await.1, json!([]));
    }
}

async fn a_token_user_deletes_only_their_own(db: TestDb) {
    let sim = ProviderSim::start(SimConfig::default()).unwrap();
    let server = serve(
        &db,
        config(&sim, |config| config.store = StoreChoice::Database),
        true,
    )
    .await;
    let c = Ctx { server, sim };
    let res = c
        .server
        .client
        .post(c.server.url("/ai/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"message": "mine"}))
        .send()
        .await
        .unwrap();
    let answer: Value = res.json().await.unwrap();
    let id = answer["conversation_id"].as_str().unwrap();
    // The account's id without its token: 401; another name: 404.
    let (status, _) = c.delete(&format!("/ai/conversations/{id}?user_id=7")).await;
    assert_eq!(status, 401);
    let (status, _) = c.delete(&format!("/ai/conversations/{id}")).await;
    assert_eq!(status, 404);
    let delete = |token: &'static str| {
        c.server
            .client
            .delete(c.server.url(&format!("/ai/conversations/{id}")))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(delete("bad").await.unwrap().status().as_u16(), 401);
    assert_eq!(delete(TOKEN).await.unwrap().status().as_u16(), 204);
    assert_eq!(delete(TOKEN).await.unwrap().status().as_u16(), 404);
    assert_eq!(rows(&db, "ai_messages", "conversation_id", id).await, 0);
}

/// A conversation deleted while a reply to it is with the provider: the reply is answered but not
/// stored, and the conversation stays deleted.
async fn a_reply_in_flight_does_not_bring_a_deleted_conversation_back(db: TestDb) {
    for store in [StoreChoice::Memory, StoreChoice::Database] {
        let c = start(&db, |config| config.store = store).await;
        let (_, first) = c.post("/chat", json!({"message": "first"})).await;
        let id = first["conversation_id"].as_str().unwrap().to_owned();
        c.sim
            .push_fault(Provider::Openai, Fault::default().delay_ms(800));
        let pending = c
            .server
            .client
            .post(c.server.url("/ai/chat"))
            .json(&json!({"message": "slow", "conversation_id": id}))
            .send();
        let deleting = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            c.delete(&format!("/ai/conversations/{id}")).await.0
        };
        let (answer, deleted) = tokio::join!(pending, deleting);
        assert_eq!(deleted, 204);
        let answer: Value = answer.unwrap().json().await.unwrap();
        assert_eq!(answer["content"], "slow", "{answer}");
        assert_eq!(c.get(&format!("/conversations/{id}")).await.0, 404);
        assert_eq!(c.get("/conversations").await.1, json!([]));
        if store == StoreChoice::Database {
            assert_eq!(rows(&db, "ai_messages", "conversation_id", &id).await, 0);
        }
    }
}
