//! How the Redis backend sends its commands.
//!
//! Every command that does not block goes over one multiplexed connection shared by the whole
//! process: concurrent commands are pipelined on it, and none pays for a pool checkout, whose
//! health check (`UNWATCH` + `PING`) would be a round trip of its own before each command. The
//! connection is opened on first use and opened again after it breaks (an I/O error or a
//! timeout drops it; the next command reconnects). It is named `<key prefix>link` in Redis's
//! `CLIENT LIST`. Blocking reads do not go here: they would hold up every other command behind
//! them, so they take a pooled connection of their own.
//!
//! Scripts are sent by their SHA1 (`EVALSHA`): Redis neither receives nor hashes the body again;
//! a server that does not know the script yet (first use, restart, `SCRIPT FLUSH`) is sent it
//! with `SCRIPT LOAD` and the call is repeated once.

use std::sync::{Mutex, MutexGuard, PoisonError};

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{
    self, AsyncConnectionConfig, Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError,
};
use sha1::{Digest as _, Sha1};

/// A Lua script and its SHA1, as Redis names it.
pub(super) struct Lua {
    body: String,
    sha: String,
}

impl Lua {
    pub(super) fn new(body: String) -> Lua {
        let sha = Sha1::digest(body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Lua { body, sha }
    }

    /// `EVALSHA <sha> <number of keys>`: add the keys, then the arguments.
    pub(super) fn call(&self, keys: usize) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.sha).arg(keys);
        cmd
    }

    #[cfg(test)]
    pub(super) fn sha(&self) -> &str {
        &self.sha
    }
}

/// The shared connection (see the module's documentation).
pub(super) struct Link {
    client: redis::Client,
    config: AsyncConnectionConfig,
    /// The connection's name in Redis.
    name: String,
    current: Mutex<Option<MultiplexedConnection>>,
    /// Held while a connection is being opened, so that concurrent commands wait for one
    /// connection instead of opening one each.
    opening: tokio::sync::Mutex<()>,
}

impl Link {
    pub(super) fn new(client: redis::Client, config: AsyncConnectionConfig, name: String) -> Link {
        Link {
            client,
            config,
            name,
            current: Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    fn current(&self) -> MutexGuard<'_, Option<MultiplexedConnection>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn connection(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(conn) = self.current().clone() {
            return Ok(conn);
        }
        let _opening = self.opening.lock().await;
        if let Some(conn) = self.current().clone() {
            return Ok(conn);
        }
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(&self.name)
            .query_async(&mut conn)
            .await?;
        *self.current() = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets the connection after an error that leaves it unusable.
    fn check<T>(&self, result: Result<T, RedisError>) -> Result<T, RedisError> {
        if let Err(e) = &result
            && (e.kind() == ErrorKind::Io || e.is_unrecoverable_error())
        {
            self.current().take();
        }
        result
    }

    pub(super) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, RedisError> {
        let mut conn = self.connection().await?;
        self.check(cmd.query_async(&mut conn).await)
    }

    pub(super) async fn pipe<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, RedisError> {
        let mut conn = self.connection().await?;
        self.check(pipe.query_async(&mut conn).await)
    }

    /// Runs `script` (a command made by [`Lua::call`]), loading it first when Redis does not
    /// know it.
    pub(super) async fn eval<T: FromRedisValue>(
        &self,
        script: &Lua,
        call: &Cmd,
    ) -> Result<T, RedisError> {
        match self.query(call).await {
            Err(e) if e.code() == Some("NOSCRIPT") => {
                let _: String = self
                    .query(redis::cmd("SCRIPT").arg("LOAD").arg(&script.body))
                    .await?;
                self.query(call).await
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_is_named_by_the_sha1_redis_gives_it() {
        // `redis-cli SCRIPT LOAD "return 1"` answers this.
        let script = Lua::new("return 1".to_owned());
        assert_eq!(script.sha(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
