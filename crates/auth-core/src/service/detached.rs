//! The service as the module hands it out (to its handlers, its CLI, and behind the
//! authenticator it lends): every call a unit of work ([`Detached`]), so that a request dropped
//! mid-call (the client went away) cannot cut a write in half. Each method copies its borrowed
//! arguments and forwards to the wrapped service; a method added to [`AuthService`] without a
//! line here does not compile.

use async_trait::async_trait;
use kernel::Role;
use kernel::identity::AuthFailure;
use kernel::pagination::Page;
use kernel::plans::Plan;
use kernel::unit::Detached;

use super::{AccessToken, AuthService, ClientIp, Logout, Registration, User, UserPatch};
use crate::error::AuthError;
use crate::mail::Issued;

#[async_trait]
impl AuthService for Detached<dyn AuthService> {
    async fn register(&self, input: Registration, ip: ClientIp<'_>) -> Result<User, AuthError> {
        let ip = ip.map(str::to_owned);
        self.run(move |s| async move { s.register(input, ip.as_deref()).await })
            .await
    }

    async fn login(
        &self,
        email: &str,
        password: &str,
        ip: ClientIp<'_>,
    ) -> Result<AccessToken, AuthError> {
        let (email, password) = (email.to_owned(), password.to_owned());
        let ip = ip.map(str::to_owned);
        self.run(move |s| async move { s.login(&email, &password, ip.as_deref()).await })
            .await
    }

    async fn user_for_token(&self, token: &str) -> Result<User, AuthFailure> {
        let token = token.to_owned();
        self.run(move |s| async move { s.user_for_token(&token).await })
            .await
    }

    /// From memory: no unit.
    fn cached_user_for_token(&self, token: &str) -> Option<Result<User, AuthFailure>> {
        self.inner().cached_user_for_token(token)
    }

    async fn list_users(&self, page: Page) -> Result<(Vec<User>, i64), AuthError> {
        self.run(move |s| async move { s.list_users(page).await })
            .await
    }

    async fn find_by_email(&self, email: &str) -> Result<Option<User>, AuthError> {
        let email = email.to_owned();
        self.run(move |s| async move { s.find_by_email(&email).await })
            .await
    }

    async fn update_user(
        &self,
        actor: Option<i64>,
        id: i64,
        patch: UserPatch,
    ) -> Result<User, AuthError> {
        self.run(move |s| async move { s.update_user(actor, id, patch).await })
            .await
    }

    async fn create_user(&self, input: Registration, role: Role) -> Result<User, AuthError> {
        self.run(move |s| async move { s.create_user(input, role).await })
            .await
    }

    async fn refresh(&self, refresh_token: &str) -> Result<AccessToken, AuthError> {
        let token = refresh_token.to_owned();
        self.run(move |s| async move { s.refresh(&token).await })
            .await
    }

    async fn logout(&self, what: Logout) -> Result<(), AuthError> {
        self.run(move |s| async move { s.logout(what).await }).await
    }

    async fn request_verification(&self, user: &User) -> Result<(), AuthError> {
        let user = user.clone();
        self.run(move |s| async move { s.request_verification(&user).await })
            .await
    }

    async fn request_verification_for(&self, email: &str) -> Result<(), AuthError> {
        let email = email.to_owned();
        self.run(move |s| async move { s.request_verification_for(&email).await })
            .await
    }

    async fn verify_email(&self, token: &str) -> Result<User, AuthError> {
        let token = token.to_owned();
        self.run(move |s| async move { s.verify_email(&token).await })
            .await
    }

    async fn forgot_password(&self, email: &str) -> Result<(), AuthError> {
        let email = email.to_owned();
        self.run(move |s| async move { s.forgot_password(&email).await })
            .await
    }

    async fn reset_password(&self, token: &str, password: &str) -> Result<(), AuthError> {
        let (token, password) = (token.to_owned(), password.to_owned());
        self.run(move |s| async move { s.reset_password(&token, &password).await })
            .await
    }

    async fn reset_link(&self, email: &str) -> Result<(User, Issued), AuthError> {
        let email = email.to_owned();
        self.run(move |s| async move { s.reset_link(&email).await })
            .await
    }

    /// From memory: no unit.
    fn offers_plans(&self) -> bool {
        self.inner().offers_plans()
    }

    async fn plan(&self, user_id: i64) -> Result<Option<Plan>, AuthError> {
        self.run(move |s| async move { s.plan(user_id).await })
            .await
    }
}
