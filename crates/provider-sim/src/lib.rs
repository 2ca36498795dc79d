//! Stand-ins for Stripe, Resend, Twilio and the LLM chat APIs (OpenAI-compatible, Anthropic,
//! Gemini, Cohere), speaking their wire protocols on 127.0.0.1 so that Keel's real HTTP clients
//! are what tests exercise. Every request is journaled; faults can be scripted per provider;
//! Stripe events, Resend events (Svix) and Twilio status callbacks are signed exactly as the
//! providers sign them.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let sim = provider_sim::ProviderSim::start(provider_sim::SimConfig::default())?;
//! println!("STRIPE_API_BASE={}", sim.base_url());
//! # Ok(()) }
//! ```

mod control;
mod delivery;
mod faults;
mod form;
mod html;
mod ids;
mod journal;
mod llm;
mod outbox;
mod resend;
pub mod signing;
mod state;
mod stripe;
mod twilio;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpServer, web};
use serde_json::Value;

pub use delivery::{CallbackOptions, Delivery};
pub use faults::{Fault, FaultAction};
pub use journal::{JournalEntry, Provider};
pub use outbox::{Call, Email, Outbox, Sms};
pub use stripe::{DeliveryOptions, EVENT_TYPES, EventSpec, Outcome, Price};

use state::Sim;

/// How the simulator is set up. `Default` suits tests: port 0, fixed test credentials.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to bind, e.g. `127.0.0.1:0`.
    pub addr: String,
    /// Where Stripe events are delivered (Keel's `/api/v1/payment/webhook`).
    pub webhook_url: Option<String>,
    pub stripe_secret_key: String,
    pub stripe_webhook_secret: String,
    /// Prices that checkout sessions may use; any other `price` is a Stripe 404.
    pub prices: Vec<Price>,
    /// Deliver `charge.refunded` and `customer.subscription.*` events in the background after
    /// refunds and subscription changes made through the API.
    pub stripe_auto_events: bool,
    pub resend_api_key: String,
    /// Where Resend events go (Keel's `/api/v1/comms/webhooks/resend`); `None` sends none.
    pub resend_webhook_url: Option<String>,
    /// The Svix signing secret of Resend's events, `whsec_` then base64.
    pub resend_webhook_secret: String,
    pub twilio_account_sid: String,
    pub twilio_auth_token: String,
    /// Where incoming SMS go (the number's "A message comes in" webhook, Keel's
    /// `/api/v1/comms/webhooks/twilio/inbound`); `None`: only to a URL a call names.
    pub twilio_sms_url: Option<String>,
    /// The key the LLM APIs accept; `None` accepts any non-empty key.
    pub ai_api_key: Option<String>,
    /// Pause between streamed chunks (changeable at run time).
    pub chunk_delay: Duration,
    /// Pause before each Twilio status callback and Resend event of a background lifecycle.
    pub callback_delay: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            addr: "127.0.0.1:0".to_owned(),
            webhook_url: None,
            stripe_secret_key: "sk_test_provider_sim".to_owned(),
            stripe_webhook_secret: "whsec_provider_sim".to_owned(),
            prices: Price::defaults(),
            stripe_auto_events: false,
            resend_api_key: "re_provider_sim".to_owned(),
            resend_webhook_url: None,
            // base64 of the 24 bytes `provider-sim-resend-hook`.
            resend_webhook_secret: "whsec_cHJvdmlkZXItc2ltLXJlc2VuZC1ob29r".to_owned(),
            twilio_account_sid: "AC00000000000000000000000000000001".to_owned(),
            twilio_auth_token: "0123456789abcdef0123456789abcdef".to_owned(),
            twilio_sms_url: None,
            ai_api_key: None,
            chunk_delay: Duration::ZERO,
            callback_delay: Duration::from_millis(50),
        }
    }
}

/// The simulator's entry point.
pub struct ProviderSim;

impl ProviderSim {
    /// Binds `config.addr` and serves every provider in the background. Must be called inside a
    /// Tokio runtime; the server stops when the handle is dropped or [`SimHandle::stop`]ped.
    pub fn start(config: SimConfig) -> std::io::Result<SimHandle> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = TcpListener::bind(&config.addr)?;
        // std asks for a backlog of 128: too few for thousands of connections opened at once.
        socket2::SockRef::from(&listener).listen(4096)?;
        let addr = listener.local_addr()?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            // Deliveries run on several runtimes (test and server threads): never share connections.
            .pool_max_idle_per_host(0)
            .build()
            .map_err(std::io::Error::other)?;
        let sim = Arc::new(Sim::new(config, format!("http://{addr}"), client));
        let data = web::Data::from(sim.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(16 * 1024 * 1024))
                .configure(control::routes)
                .configure(llm::routes)
                .configure(stripe::routes)
                .configure(resend::routes)
                .configure(twilio::routes)
                .default_service(web::to(control::not_routed))
        })
        .workers(2)
        // As long as nginx keeps an idle connection (actix's own 5 s closed connections that a
        // client, keeping them longer, was about to reuse: a send then failed mid-request).
        .keep_alive(Duration::from_secs(75))
        .disable_signals()
        .listen(listener)?
        .run();
        let server_handle = server.handle();
        tokio::spawn(server);
        Ok(SimHandle {
            sim,
            server: server_handle,
        })
    }
}

/// A running simulator. Dropping it stops the server.
pub struct SimHandle {
    sim: Arc<Sim>,
    server: ServerHandle,
}

impl SimHandle {
    /// `http://127.0.0.1:<port>`, the base of every provider and of the control API.
    pub fn base_url(&self) -> &str {
        &self.sim.base_url
    }

    /// The absolute URL of `path` on the simulator.
    pub fn url(&self, path: &str) -> String {
        self.sim.url(path)
    }

    pub fn config(&self) -> &SimConfig {
        &self.sim.config
    }

    /// The environment settings that point Keel at this simulator, in print order.
    pub fn settings(&self) -> Vec<(String, String)> {
        control::settings(&self.sim)
    }

    /// Every request received so far, oldest first.
    pub fn journal(&self) -> Vec<JournalEntry> {
        self.sim.journal()
    }

    /// The requests one provider received, oldest first.
    pub fn journal_for(&self, provider: Provider) -> Vec<JournalEntry> {
        self.sim
            .journal()
            .into_iter()
            .filter(|e| e.provider == provider)
            .collect()
    }

    pub fn clear_journal(&self) {
        self.sim.clear_journal();
    }

    /// Scripts a fault for the next `fault.times` requests to `provider` (queued after earlier ones).
    pub fn push_fault(&self, provider: Provider, fault: Fault) {
        self.sim.push_fault(provider, fault);
    }

    pub fn clear_faults(&self) {
        self.sim.clear_faults();
    }

    /// Emails, SMS and calls received so far.
    pub fn outbox(&self) -> Outbox {
        state::lock(&self.sim.outbox).clone()
    }

    /// Webhook deliveries made so far (Stripe events, Resend events, Twilio status callbacks).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.sim.deliveries()
    }

    /// Forgets requests, faults, deliveries, callback knobs and the outbox (Stripe objects are
    /// kept).
    pub fn reset(&self) {
        self.sim.reset();
    }

    /// Sets the pause between streamed LLM chunks.
    pub fn set_chunk_delay(&self, delay: Duration) {
        self.sim.set_chunk_delay(delay);
    }

    /// Whether LLM replies report token usage (by default they do); without it they carry no
    /// usage field at all, as some OpenAI-compatible servers answer.
    pub fn set_llm_usage(&self, report: bool) {
        self.sim.set_llm_usage(report);
    }

    /// A Stripe object (customer, session, payment intent, charge, refund, subscription, invoice,
    /// dispute, ...) by id.
    pub fn stripe_object(&self, id: &str) -> Option<Value> {
        state::lock(&self.sim.stripe).get(id).cloned()
    }

    /// Builds a Stripe event (and registers the objects it names, so that later API calls find
    /// them) without delivering it.
    pub fn build_stripe_event(&self, spec: &EventSpec) -> Value {
        stripe::build_event(&self.sim, spec)
    }

    /// Builds, signs and delivers events to the webhook URL, with the knobs of `options`.
    pub async fn deliver_stripe_events(
        &self,
        specs: &[EventSpec],
        options: &DeliveryOptions,
    ) -> Vec<Delivery> {
        let events = specs
            .iter()
            .map(|s| stripe::build_event(&self.sim, s))
            .collect();
        stripe::deliver(&self.sim, events, options).await
    }

    /// Signs and delivers already-built events (e.g. one from [`Self::build_stripe_event`], again).
    pub async fn deliver_built_stripe_events(
        &self,
        events: Vec<Value>,
        options: &DeliveryOptions,
    ) -> Vec<Delivery> {
        stripe::deliver(&self.sim, events, options).await
    }

    /// Completes a checkout session as its hosted page's Pay or Fail button does, and delivers the
    /// matching events. `Err` names why the session cannot be completed.
    pub async fn complete_checkout(
        &self,
        session_id: &str,
        outcome: Outcome,
    ) -> Result<Vec<Delivery>, String> {
        stripe::complete_checkout(
            &self.sim,
            session_id,
            outcome,
            None,
            &DeliveryOptions::default(),
        )
        .await
    }

    /// Ends subscription `id`'s current period as Stripe would and delivers the events: the next
    /// period billed (`customer.subscription.updated`, `invoice.finalized`, then `invoice.paid`
    /// with `Outcome::Pay` or `invoice.payment_failed` and status `past_due` with `Outcome::Fail`),
    /// or, for a subscription set to cancel at the period's end, `customer.subscription.deleted`.
    /// `Err` names why it cannot be renewed.
    pub async fn renew_subscription(
        &self,
        id: &str,
        outcome: Outcome,
    ) -> Result<Vec<Delivery>, String> {
        stripe::renew_subscription(&self.sim, id, outcome, &DeliveryOptions::default()).await
    }

    /// Posts a Twilio status callback for a message or call in the outbox, with the given status.
    pub async fn twilio_status_callback(
        &self,
        sid: &str,
        status: &str,
    ) -> Result<Delivery, String> {
        self.twilio_status_callback_with(sid, status, &CallbackOptions::default())
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| "no callback was posted".to_owned())
    }

    /// Posts a Twilio status callback with the knobs of `options` (two deliveries with
    /// `duplicate`). `failed` and `undelivered` messages carry `ErrorCode`.
    pub async fn twilio_status_callback_with(
        &self,
        sid: &str,
        status: &str,
        options: &CallbackOptions,
    ) -> Result<Vec<Delivery>, String> {
        twilio::status_callback(&self.sim, sid, status, options).await
    }

    /// Posts an incoming SMS from `from` to `to` (default `+15005550006`) to `options.url` or
    /// [`SimConfig::twilio_sms_url`], signed like a status callback. An opt-out keyword (`STOP`,
    /// ...) makes later SMS to `from` fail with 21610 (at once when sent from a number, in the
    /// status callback through a messaging service); an opt-in keyword (`START`, ...) lifts that.
    pub async fn twilio_inbound_sms(
        &self,
        from: &str,
        to: Option<&str>,
        body: &str,
        options: &CallbackOptions,
    ) -> Result<Vec<Delivery>, String> {
        twilio::inbound_sms(&self.sim, from, to, body, options).await
    }

    /// The numbers that opted out of SMS (replied STOP, not START since).
    pub fn twilio_opted_out(&self) -> Vec<String> {
        state::lock(&self.sim.outbox)
            .opted_out
            .iter()
            .cloned()
            .collect()
    }

    /// Posts a Resend webhook event (`email.sent`, `email.delivered`, `email.delivery_delayed`,
    /// `email.bounced`, `email.complained`, or any other type) about an email in the outbox,
    /// signed the Svix way, to `options.url` or the configured Resend webhook URL. `Err` when the
    /// email is unknown or there is no URL.
    pub async fn resend_event(
        &self,
        email_id: &str,
        event_type: &str,
        options: &CallbackOptions,
    ) -> Result<Vec<Delivery>, String> {
        resend::event_for(&self.sim, email_id, event_type, options).await
    }

    /// The knobs the background lifecycles (Twilio status callbacks after a send, Resend events
    /// after a send) deliver with from now on, until changed or [`Self::reset`].
    pub fn set_callback_options(&self, options: CallbackOptions) {
        self.sim.set_callback_options(options);
    }

    pub fn callback_options(&self) -> CallbackOptions {
        self.sim.callback_options()
    }

    /// Stops the server (requests in flight finish first).
    pub async fn stop(&self) {
        self.server.stop(true).await;
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let server = self.server.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { server.stop(false).await });
        }
    }
}
