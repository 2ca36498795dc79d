"""The suppression list fed by webhooks signed with the providers' own libraries: a STOP reply
signed by the `twilio` package's `RequestValidator` (as Twilio signs a number's incoming-message
webhook), and a hard bounce signed by the `svix` package's `Webhook` (as Resend signs its events
through Svix). Each suppresses its recipient: the next send answers 409 naming it, and an
administrator takes it off the list."""

import datetime
import random
import uuid

import requests
from svix.webhooks import Webhook
from twilio.request_validator import RequestValidator

INBOUND = "/api/v1/comms/webhooks/twilio/inbound"
RESEND = "/api/v1/comms/webhooks/resend"


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def send_sms(base_url, token, to):
    return requests.post(
        f"{base_url}/api/v1/comms/sms/send",
        json={"to": to, "body": "Hello from the client tests"},
        headers=bearer(token),
        timeout=30,
    )


def incoming(base_url, settings, sender, body, signature=None):
    """An SMS from `sender` to the service's number, signed over the URL Twilio would call."""
    params = {
        "MessageSid": "SM" + uuid.uuid4().hex,
        "SmsSid": "SM" + uuid.uuid4().hex,
        "AccountSid": settings["TWILIO_ACCOUNT_SID"],
        "From": sender,
        "To": settings.get("TWILIO_PHONE_NUMBER", "+15005550006"),
        "Body": body,
        "NumMedia": "0",
        "SmsStatus": "received",
        "ApiVersion": "2010-04-01",
    }
    if signature is None:
        validator = RequestValidator(settings["TWILIO_AUTH_TOKEN"])
        signature = validator.compute_signature(base_url + INBOUND, params)
        assert validator.validate(base_url + INBOUND, params, signature)
    return requests.post(
        base_url + INBOUND, data=params, headers={"X-Twilio-Signature": signature}, timeout=30
    )


def test_a_stop_reply_signed_by_the_twilio_sdk_suppresses_the_number(
    base_url, settings, new_user, admin_token
):
    _, _, token = new_user
    number = "+1555" + "".join(random.choice("0123456789") for _ in range(7))
    assert send_sms(base_url, token, number).status_code == 200

    # A forged STOP is refused and suppresses nothing.
    forged = RequestValidator("0" * 32).compute_signature(base_url + INBOUND, {"Body": "STOP"})
    answer = incoming(base_url, settings, number, "STOP", signature=forged)
    assert (answer.status_code, answer.json()) == (403, {"detail": "Invalid signature"})
    assert send_sms(base_url, token, number).status_code == 200

    answer = incoming(base_url, settings, number, "Stop")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/xml")
    assert "<Response></Response>" in answer.text
    refused = send_sms(base_url, token, number)
    assert refused.status_code == 409, refused.text
    assert refused.json() == {"detail": f"Recipient is suppressed: {number} (stop)"}

    listed = requests.get(
        f"{base_url}/api/v1/comms/suppressions",
        params={"channel": "sms", "q": number[1:]},
        headers=bearer(admin_token),
        timeout=30,
    )
    assert listed.status_code == 200, listed.text
    (entry,) = listed.json()["suppressions"]
    assert (entry["address"], entry["reason"], entry["detail"]) == (number, "stop", "replied Stop")
    # Not for ordinary users.
    assert (
        requests.get(
            f"{base_url}/api/v1/comms/suppressions", headers=bearer(token), timeout=30
        ).status_code
        == 403
    )

    # START (Twilio's opt-in keyword) lifts it.
    assert incoming(base_url, settings, number, "START").status_code == 200
    assert send_sms(base_url, token, number).status_code == 200


def test_a_hard_bounce_signed_by_the_svix_library_suppresses_the_address(
    base_url, settings, sim_url, new_user, admin_token
):
    _, _, token = new_user
    address = f"bounce-{uuid.uuid4().hex[:10]}@example.com"
    email = {"to": [address], "subject": "Hello", "text": "Hi"}
    sent = requests.post(
        f"{base_url}/api/v1/comms/email/send", json=email, headers=bearer(token), timeout=30
    )
    assert sent.status_code == 200, sent.text
    # Resend's events carry the email's tags as one object: keel's reference among them.
    outbox = requests.get(f"{sim_url}/_sim/outbox", timeout=30).json()
    [tags] = [e["tags"] for e in outbox["emails"] if e["id"] == sent.json()["id"]]
    reference = {t["name"]: t["value"] for t in tags}["keel_message"]
    payload = (
        '{"type":"email.bounced","created_at":"2026-11-26T10:00:00.000Z","data":{'
        f'"email_id":"{sent.json()["id"]}","to":["{address.upper()}"],"subject":"Hello",'
        f'"tags":{{"keel_message":"{reference}"}},'
        '"bounce":{"message":"Mailbox does not exist","type":"Permanent","subType":"General"}}}'
    )
    webhook = Webhook(settings["RESEND_WEBHOOK_SECRET"])
    msg_id = "msg_" + uuid.uuid4().hex
    now = datetime.datetime.now(tz=datetime.timezone.utc)
    signature = webhook.sign(msg_id, now, payload)
    headers = {
        "svix-id": msg_id,
        "svix-timestamp": str(int(now.timestamp())),
        "svix-signature": signature,
        "content-type": "application/json",
    }
    # The library's own check agrees.
    webhook.verify(payload, headers)
    answer = requests.post(base_url + RESEND, data=payload, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"applied": True, "suppressed": [address]}

    refused = requests.post(
        f"{base_url}/api/v1/comms/email/send", json=email, headers=bearer(token), timeout=30
    )
    assert refused.status_code == 409, refused.text
    assert refused.json() == {"detail": f"Recipient is suppressed: {address} (hard_bounce)"}

    removed = requests.delete(
        f"{base_url}/api/v1/comms/suppressions/{address}", headers=bearer(admin_token), timeout=30
    )
    assert removed.status_code == 200, removed.text
    assert removed.json()["reason"] == "hard_bounce"
    again = requests.post(
        f"{base_url}/api/v1/comms/email/send", json=email, headers=bearer(token), timeout=30
    )
    assert again.status_code == 200, again.text
