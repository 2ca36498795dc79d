"""Stripe's own Python SDK (the `stripe` package) against provider-sim and Keel's billing
self-service: the simulator's billing portal sessions, invoices and errors have the shapes the SDK
reads; its webhook deliveries verify with `stripe.Webhook`; Keel opens the portal for a user's
Stripe customer and lists their invoices; and an event signed by the SDK's own signing is
accepted by Keel's webhook, once.
"""

import json
import time
import uuid

import pytest
import requests
import stripe

PAYMENT = "/api/v1/payment"


@pytest.fixture(scope="module")
def sdk(settings, sim_url) -> stripe.StripeClient:
    """The SDK pointed at provider-sim, as a deployment's STRIPE_API_BASE points Keel at it."""
    return stripe.StripeClient(
        settings["STRIPE_SECRET_KEY"],
        base_addresses={"api": settings.get("STRIPE_API_BASE", sim_url)},
        max_network_retries=0,
    )


def call(base_url, token, method, path, body=None):
    answer = requests.request(
        method,
        f"{base_url}{PAYMENT}{path}",
        headers={"Authorization": f"Bearer {token}"},
        json=body,
        timeout=30,
    )
    return answer.status_code, answer.json()


def test_the_sdk_opens_portal_sessions_on_the_simulator(sdk, sim_url):
    customer = sdk.v1.customers.create(params={"email": f"sdk-{uuid.uuid4().hex[:8]}@example.com"})
    session = sdk.v1.billing_portal.sessions.create(
        params={"customer": customer.id, "return_url": "https://app.example/account"}
    )
    assert isinstance(session, stripe.billing_portal.Session)
    assert session.object == "billing_portal.session"
    assert session.id.startswith("bps_")
    assert session.customer == customer.id
    assert session.return_url == "https://app.example/account"
    assert session.livemode is False
    assert session.configuration.startswith("bpc_")
    assert session.url.startswith(sim_url)
    page = requests.get(session.url, timeout=30)
    assert page.status_code == 200 and customer.id in page.text
    # Stripe's errors, as the SDK raises them.
    with pytest.raises(stripe.InvalidRequestError) as unknown:
        sdk.v1.billing_portal.sessions.create(params={"customer": "cus_nobody"})
    assert (unknown.value.http_status, unknown.value.code) == (404, "resource_missing")
    with pytest.raises(stripe.InvalidRequestError) as bad_url:
        sdk.v1.billing_portal.sessions.create(
            params={"customer": customer.id, "return_url": "not a url"}
        )
    assert (bad_url.value.code, bad_url.value.param) == ("url_invalid", "return_url")


def test_keel_opens_the_portal_and_lists_invoices(base_url, sim_url, settings, sdk, new_user):
    _, _, token = new_user
    status, body = call(base_url, token, "POST", "/portal")
    assert status == 409, body
    assert body["detail"].startswith("No billing account yet")
    status, checkout = call(
        base_url, token, "POST", "/checkout", {"price_id": "price_monthly", "mode": "subscription"}
    )
    assert status == 200, checkout
    paid = requests.post(
        f"{sim_url}/_sim/stripe/checkout/{checkout['session_id']}/pay", json={}, timeout=30
    )
    assert paid.status_code == 200, paid.text
    deliveries = paid.json()["deliveries"]
    assert [d["status"] for d in deliveries] == [200] * len(deliveries), deliveries
    # Every delivery verifies with the SDK, and its invoices parse as the SDK's invoices.
    secret = settings["STRIPE_WEBHOOK_SECRET"]
    kinds = []
    for delivery in deliveries:
        headers = {name.lower(): value for name, value in delivery["headers"]}
        event = stripe.Webhook.construct_event(
            delivery["body"], headers["stripe-signature"], secret
        )
        kinds.append(event.type)
        if event.type.startswith("invoice."):
            assert isinstance(event.data.object, stripe.Invoice)
    assert kinds[:3] == ["customer.subscription.created", "invoice.finalized", "invoice.paid"]

    status, portal = call(base_url, token, "POST", "/portal", {"return_url": f"{base_url}/app"})
    assert status == 200, portal
    assert portal["return_url"] == f"{base_url}/app"
    assert portal["url"].startswith(sim_url)
    assert requests.get(portal["url"], timeout=30).status_code == 200
    status, refused = call(
        base_url, token, "POST", "/portal", {"return_url": "https://evil.example/"}
    )
    assert status == 422 and "PUBLIC_BASE_URL" in refused["detail"], refused

    status, listed = call(base_url, token, "GET", "/invoices")
    assert status == 200 and listed["total"] == 1, listed
    mine = listed["invoices"][0]
    # What Keel stored is what Stripe's SDK reads of the same invoice.
    invoice = sdk.v1.invoices.retrieve(mine["provider_invoice_id"])
    assert isinstance(invoice, stripe.Invoice)
    assert (invoice.status, invoice.amount_paid, invoice.number) == (
        mine["status"],
        mine["amount_paid"],
        mine["number"],
    )
    assert invoice.hosted_invoice_url == mine["hosted_invoice_url"]
    assert requests.get(mine["hosted_invoice_url"], timeout=30).status_code == 200

    # The next period's payment fails: a second, open invoice, newest first.
    status, subs = call(base_url, token, "GET", "/subscriptions")
    sub = subs["subscriptions"][0]["provider_subscription_id"]
    renewed = requests.post(f"{sim_url}/_sim/stripe/subscriptions/{sub}/renew/fail", timeout=30)
    assert renewed.status_code == 200, renewed.text
    status, listed = call(base_url, token, "GET", "/invoices?page_size=1")
    assert (listed["total"], listed["invoices"][0]["status"]) == (2, "open"), listed


def test_an_event_signed_by_the_sdk_is_accepted_once(base_url, settings, new_user):
    _, _, token = new_user
    me = requests.get(
        f"{base_url}/auth/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).json()
    invoice_id = f"in_sdk{uuid.uuid4().hex[:16]}"
    now = int(time.time())
    event = {
        "id": f"evt_sdk{uuid.uuid4().hex[:16]}",
        "object": "event",
        "type": "invoice.paid",
        "created": now,
        "data": {
            "object": {
                "id": invoice_id,
                "object": "invoice",
                "customer": f"cus_sdk{uuid.uuid4().hex[:12]}",
                "status": "paid",
                "number": "SDK-0001",
                "amount_due": 4200,
                "amount_paid": 4200,
                "amount_remaining": 0,
                "currency": "eur",
                "hosted_invoice_url": f"https://invoice.stripe.com/i/{invoice_id}",
                "parent": {
                    "type": "subscription_details",
                    "subscription_details": {
                        "subscription": "sub_sdk",
                        "metadata": {"user_id": str(me["id"])},
                    },
                },
                "created": now,
            }
        },
    }
    payload = json.dumps(event)
    secret = settings["STRIPE_WEBHOOK_SECRET"]
    signature = stripe.WebhookSignature.generate_signature_header(payload, secret)

    def deliver(signature_header):
        return requests.post(
            f"{base_url}{PAYMENT}/webhook",
            data=payload.encode(),
            headers={"Stripe-Signature": signature_header, "Content-Type": "application/json"},
            timeout=30,
        )

    first = deliver(signature)
    assert first.status_code == 200, first.text
    assert first.json() == {"status": "processed", "event_type": "invoice.paid"}
    assert deliver(signature).json()["duplicate"] is True
    wrong = stripe.WebhookSignature.generate_signature_header(payload, "whsec_other")
    assert deliver(wrong).status_code == 400
    status, listed = call(base_url, token, "GET", "/invoices")
    assert status == 200 and listed["total"] == 1, listed
    assert (listed["invoices"][0]["number"], listed["invoices"][0]["amount_paid"]) == (
        "SDK-0001",
        4200,
    )
