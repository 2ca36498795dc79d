//! The service as the module hands it out (to its handlers, its CLI, and behind the mailer it
//! lends): every call a unit of work ([`Detached`]), so that a request dropped mid-call (the
//! client went away) cannot leave a message sent but not recorded. Each method copies its
//! borrowed arguments and forwards to the wrapped service; a method added to [`CommsService`]
//! without a line here does not compile.

use kernel::pagination::Page;
use kernel::unit::Detached;

use super::{
    CallReceipt, CallRequest, CommsService, EmailReceipt, EmailRequest, EventReport, InboundReport,
    ListFilter, Message, SmsReceipt, SmsRequest, Suppression, SuppressionFilter, TwilioCallback,
    Viewer,
};
use crate::config::CommsConfig;
use crate::error::CommsError;

#[async_trait::async_trait]
impl CommsService for Detached<dyn CommsService> {
    async fn send_email(
        &self,
        sender: Option<i64>,
        request: EmailRequest,
    ) -> Result<EmailReceipt, CommsError> {
        // Its database work all goes through group commits: see `Detached::run_here`.
        self.run_here(move |s| async move { s.send_email(sender, request).await })
            .await
    }

    async fn send_sms(
        &self,
        sender: Option<i64>,
        request: SmsRequest,
    ) -> Result<SmsReceipt, CommsError> {
        self.run(move |s| async move { s.send_sms(sender, request).await })
            .await
    }

    async fn make_call(
        &self,
        sender: Option<i64>,
        request: CallRequest,
    ) -> Result<CallReceipt, CommsError> {
        self.run(move |s| async move { s.make_call(sender, request).await })
            .await
    }

    async fn messages(
        &self,
        viewer: Viewer,
        filter: ListFilter,
        page: Page,
    ) -> Result<(Vec<Message>, i64), CommsError> {
        self.run(move |s| async move { s.messages(viewer, filter, page).await })
            .await
    }

    async fn message(&self, viewer: Viewer, id: i64) -> Result<Message, CommsError> {
        self.run(move |s| async move { s.message(viewer, id).await })
            .await
    }

    async fn twilio_status(&self, callback: TwilioCallback) -> Result<EventReport, CommsError> {
        self.run(move |s| async move { s.twilio_status(callback).await })
            .await
    }

    async fn twilio_inbound(&self, callback: TwilioCallback) -> Result<InboundReport, CommsError> {
        self.run(move |s| async move { s.twilio_inbound(callback).await })
            .await
    }

    async fn suppressions(
        &self,
        filter: SuppressionFilter,
        page: Page,
    ) -> Result<(Vec<Suppression>, i64), CommsError> {
        self.run(move |s| async move { s.suppressions(filter, page).await })
            .await
    }

    async fn unsuppress(&self, address: String) -> Result<Suppression, CommsError> {
        self.run(move |s| async move { s.unsuppress(address).await })
            .await
    }

    async fn resend_event(
        &self,
        svix: [Option<&str>; 3],
        body: &[u8],
    ) -> Result<EventReport, CommsError> {
        let svix = svix.map(|header| header.map(str::to_owned));
        let body = body.to_vec();
        self.run(move |s| async move {
            s.resend_event(svix.each_ref().map(Option::as_deref), &body)
                .await
        })
        .await
    }

    /// A setting: no unit.
    fn config(&self) -> &CommsConfig {
        self.inner().config()
    }

    async fn log_reachable(&self) -> Result<i64, CommsError> {
        self.run(move |s| async move { s.log_reachable().await })
            .await
    }
}
