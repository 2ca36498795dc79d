//! The `/v1` resources: customers, checkout sessions, billing portal sessions, refunds,
//! subscriptions and lookups by id.

use actix_web::http::Method;
use serde_json::{Value, json};

use super::objects::{self, Price, SubscriptionSeed};
use super::{ApiError, SessionExtra, State, error, events, invalid, missing_param, no_such};
use crate::form::str_at;
use crate::ids;
use crate::state::now;

/// A successful Stripe answer and the events it causes, or a Stripe error.
type Handled = Result<(Value, Vec<Value>), ApiError>;

pub(super) fn route(
    st: &mut State,
    base_url: &str,
    method: &Method,
    path: &str,
    p: &Value,
) -> Handled {
    let now = now();
    let rest = path.trim_start_matches("/v1/").trim_end_matches('/');
    let segments: Vec<&str> = rest.split('/').collect();
    let plain = |r: Result<Value, ApiError>| r.map(|v| (v, Vec::new()));
    match (method.as_str(), segments.as_slice()) {
        ("POST", ["customers"]) => plain(Ok(create_customer(st, p, now))),
        ("POST", ["customers", id]) => plain(update_customer(st, id, p)),
        ("GET", ["customers"]) => plain(Ok(list_customers(st, p))),
        ("POST", ["checkout", "sessions"]) => plain(create_session(st, base_url, p, now)),
        ("POST", ["billing_portal", "sessions"]) => {
            plain(super::portal::create_session(st, base_url, p, now))
        }
        ("GET", ["checkout", "sessions", id]) => plain(get(st, "checkout.session", id)),
        ("POST", ["refunds"]) => create_refund(st, p, now),
        ("POST", ["subscriptions", id]) => update_subscription(st, id, p, now),
        ("DELETE", ["subscriptions", id]) => cancel_subscription(st, id, p, now),
        ("GET", ["radar", "early_fraud_warnings", id]) => {
            plain(get(st, "radar.early_fraud_warning", id))
        }
        ("GET", [collection, id]) => match singular(collection) {
            Some(kind) => plain(get(st, kind, id)),
            None => Err(unrecognized(method, path)),
        },
        _ => Err(unrecognized(method, path)),
    }
}

fn unrecognized(method: &Method, path: &str) -> ApiError {
    error(
        404,
        "invalid_request_error",
        None,
        format!(
            "Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/."
        ),
        None,
    )
}

fn singular(collection: &str) -> Option<&'static str> {
    Some(match collection {
        "customers" => "customer",
        "payment_intents" => "payment_intent",
        "charges" => "charge",
        "refunds" => "refund",
        "subscriptions" => "subscription",
        "invoices" => "invoice",
        "disputes" => "dispute",
        "prices" => "price",
        _ => return None,
    })
}

fn get(st: &State, kind: &str, id: &str) -> Result<Value, ApiError> {
    st.get_kind(id, kind)
        .cloned()
        .ok_or_else(|| no_such(kind, id, "id"))
}

/// Applies `metadata[k]=v` params to an object's metadata (`""` removes a key).
fn apply_metadata(target: &mut Value, params: &Value) {
    let Some(meta) = params.get("metadata").and_then(Value::as_object) else {
        return;
    };
    if !target["metadata"].is_object() {
        target["metadata"] = json!({});
    }
    for (k, v) in meta {
        match v.as_str() {
            Some("") => {
                if let Some(m) = target["metadata"].as_object_mut() {
                    m.remove(k);
                }
            }
            _ => target["metadata"][k] = v.clone(),
        }
    }
}

fn create_customer(st: &mut State, p: &Value, now: i64) -> Value {
    let mut customer = objects::customer(
        &ids::stripe("cus_"),
        str_at(p, "email"),
        str_at(p, "name"),
        json!({}),
        now,
    );
    for field in ["phone", "description"] {
        if let Some(v) = str_at(p, field) {
            customer[field] = json!(v);
        }
    }
    apply_metadata(&mut customer, p);
    st.insert(customer.clone());
    customer
}

fn update_customer(st: &mut State, id: &str, p: &Value) -> Result<Value, ApiError> {
    let mut customer = get(st, "customer", id)?;
    for field in ["email", "name", "phone", "description"] {
        if let Some(v) = str_at(p, field) {
            customer[field] = if v.is_empty() { Value::Null } else { json!(v) };
        }
    }
    apply_metadata(&mut customer, p);
    st.insert(customer.clone());
    Ok(customer)
}

fn list_customers(st: &State, p: &Value) -> Value {
    let email = str_at(p, "email");
    let limit = str_at(p, "limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(10usize);
    let mut data: Vec<&Value> = st
        .objects
        .values()
        .filter(|o| o["object"] == "customer" && email.is_none_or(|e| o["email"] == e))
        .collect();
    data.sort_by_key(|o| std::cmp::Reverse(o["created"].as_i64()));
    let has_more = data.len() > limit;
    data.truncate(limit);
    json!({"object": "list", "url": "/v1/customers", "has_more": has_more, "data": data})
}

fn positive_int(p: &Value, param: &str, path: &str) -> Result<Option<i64>, ApiError> {
    match str_at(p, path) {
        None => Ok(None),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(invalid(
                "parameter_invalid_integer",
                format!("Invalid positive integer: {v}"),
                Some(param),
            )),
        },
    }
}

fn create_session(st: &mut State, base_url: &str, p: &Value, now: i64) -> Result<Value, ApiError> {
    let mode = str_at(p, "mode").ok_or_else(|| missing_param("mode"))?;
    if !["payment", "subscription", "setup"].contains(&mode) {
        return Err(invalid(
            "parameter_invalid_string",
            "Invalid mode: must be one of payment, setup, or subscription",
            Some("mode"),
        ));
    }
    let customer = str_at(p, "customer");
    let customer_email = str_at(p, "customer_email");
    if customer.is_some() && customer_email.is_some() {
        return Err(invalid(
            "parameter_invalid_string",
            "You may only specify one of these parameters: customer, customer_email.",
            Some("customer_email"),
        ));
    }
    if let Some(c) = customer {
        get(st, "customer", c).map_err(|_| no_such("customer", c, "customer"))?;
    }
    let mut items = Vec::new();
    let empty = Vec::new();
    for (i, item) in p
        .get("line_items")
        .and_then(Value::as_array)
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        let quantity_param = format!("line_items[{i}][quantity]");
        let quantity = positive_int(item, &quantity_param, "quantity")?.unwrap_or(1);
        let price = if let Some(id) = str_at(item, "price") {
            st.prices
                .iter()
                .find(|p| p.id == id)
                .cloned()
                .ok_or_else(|| no_such("price", id, &format!("line_items[{i}][price]")))?
        } else if let Some(data) = item.get("price_data") {
            price_data(data, i)?
        } else {
            return Err(missing_param(&format!("line_items[{i}][price]")));
        };
        items.push((price, quantity));
    }
    if mode != "setup" && items.is_empty() {
        return Err(missing_param("line_items"));
    }
    if mode == "subscription" && !items.iter().any(|(p, _)| p.recurring.is_some()) {
        return Err(invalid(
            "parameter_invalid_string",
            "You must provide at least one recurring price in `subscription` mode when using prices.",
            Some("line_items"),
        ));
    }
    if mode == "payment"
        && let Some(i) = items.iter().position(|(p, _)| p.recurring.is_some())
    {
        return Err(invalid(
            "parameter_invalid_string",
            "You specified `payment` mode but passed a recurring price. Either switch to `subscription` mode or use only one-time prices.",
            Some(&format!("line_items[{i}][price]")),
        ));
    }
    let currency = items.first().map(|(p, _)| p.currency.clone());
    if items
        .iter()
        .any(|(p, _)| Some(&p.currency) != currency.as_ref())
    {
        return Err(invalid(
            "parameter_invalid_string",
            "All prices must use the same currency.",
            Some("line_items"),
        ));
    }
    let amount: i64 = items.iter().map(|(p, q)| p.unit_amount * q).sum();
    let id = ids::stripe("cs_test_");
    let mut session = json!({
        "id": id,
        "object": "checkout.session",
        "url": format!("{base_url}/checkout/{id}"),
        "status": "open",
        "payment_status": "unpaid",
        "mode": mode,
        "amount_subtotal": amount,
        "amount_total": amount,
        "currency": currency,
        "expires_at": now + 24 * 3600,
        "created": now,
        "payment_intent": null,
        "subscription": null,
        "invoice": null,
        "customer": customer,
        "customer_email": customer_email,
        "customer_details": null,
        "client_reference_id": str_at(p, "client_reference_id"),
        "success_url": str_at(p, "success_url"),
        "cancel_url": str_at(p, "cancel_url"),
        "metadata": {},
        "payment_method_types": ["card"],
        "livemode": false,
    });
    apply_metadata(&mut session, p);
    let meta = |path: &str| {
        p.pointer(path)
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}))
    };
    st.sessions.insert(
        id,
        SessionExtra {
            items,
            subscription_metadata: meta("/subscription_data/metadata"),
            payment_intent_metadata: meta("/payment_intent_data/metadata"),
        },
    );
    st.insert(session.clone());
    Ok(session)
}

fn price_data(data: &Value, i: usize) -> Result<Price, ApiError> {
    let param = |f: &str| format!("line_items[{i}][price_data][{f}]");
    let currency = str_at(data, "currency").ok_or_else(|| missing_param(&param("currency")))?;
    let amount = str_at(data, "unit_amount")
        .ok_or_else(|| missing_param(&param("unit_amount")))?
        .parse::<i64>()
        .ok()
        .filter(|a| *a >= 0)
        .ok_or_else(|| {
            invalid(
                "parameter_invalid_integer",
                "Invalid non-negative integer",
                Some(&param("unit_amount")),
            )
        })?;
    let product = str_at(data, "product").map(str::to_owned);
    let name = str_at(data, "product_data/name").map(str::to_owned);
    if product.is_none() && name.is_none() {
        return Err(missing_param(&param("product_data][name")));
    }
    let interval = str_at(data, "recurring/interval");
    if let Some(interval) = interval
        && !["day", "week", "month", "year"].contains(&interval)
    {
        return Err(invalid(
            "parameter_invalid_string",
            "Invalid interval",
            Some(&param("recurring][interval")),
        ));
    }
    Ok(Price {
        id: ids::stripe("price_"),
        product: product.unwrap_or_else(|| ids::stripe("prod_")),
        product_name: name.unwrap_or_default(),
        unit_amount: amount,
        currency: currency.to_lowercase(),
        recurring: interval.map(str::to_owned),
    })
}

pub(super) fn money(amount: i64, currency: &str) -> String {
    let units = format!("{}.{:02}", amount / 100, amount % 100);
    if currency == "usd" {
        format!("${units}")
    } else {
        format!("{units} {}", currency.to_uppercase())
    }
}

fn create_refund(st: &mut State, p: &Value, now: i64) -> Handled {
    let charge_id = if let Some(id) = str_at(p, "charge") {
        get(st, "charge", id).map_err(|_| no_such("charge", id, "charge"))?;
        id.to_owned()
    } else if let Some(id) = str_at(p, "payment_intent") {
        let pi = get(st, "payment_intent", id)
            .map_err(|_| no_such("payment_intent", id, "payment_intent"))?;
        match (pi["status"].as_str(), pi["latest_charge"].as_str()) {
            (Some("succeeded"), Some(charge)) => charge.to_owned(),
            _ => {
                return Err(invalid(
                    "charge_not_refundable",
                    format!(
                        "This PaymentIntent ({id}) does not have a successful charge to refund."
                    ),
                    Some("payment_intent"),
                ));
            }
        }
    } else {
        return Err(invalid(
            "parameter_missing",
            "One of the following params should be provided for this request: payment_intent or charge.",
            None,
        ));
    };
    let mut charge =
        get(st, "charge", &charge_id).map_err(|_| no_such("charge", &charge_id, "charge"))?;
    let total = charge["amount"].as_i64().unwrap_or(0);
    let refunded = charge["amount_refunded"].as_i64().unwrap_or(0);
    let currency = charge["currency"].as_str().unwrap_or("usd").to_owned();
    let remaining = total - refunded;
    if remaining <= 0 {
        return Err(invalid(
            "charge_already_refunded",
            format!("Charge {charge_id} has already been refunded."),
            None,
        ));
    }
    let amount = positive_int(p, "amount", "amount")?.unwrap_or(remaining);
    if amount > remaining {
        return Err(invalid(
            "amount_too_large",
            format!(
                "Refund amount ({}) is greater than unrefunded amount on charge ({})",
                money(amount, &currency),
                money(remaining, &currency)
            ),
            Some("amount"),
        ));
    }
    let reason = str_at(p, "reason");
    if let Some(r) = reason
        && !["duplicate", "fraudulent", "requested_by_customer"].contains(&r)
    {
        return Err(invalid(
            "parameter_invalid_string",
            "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer",
            Some("reason"),
        ));
    }
    let mut refund = objects::refund(&ids::stripe("re_"), amount, &charge, reason, json!({}), now);
    apply_metadata(&mut refund, p);
    charge["amount_refunded"] = json!(refunded + amount);
    charge["refunded"] = json!(refunded + amount == total);
    st.insert(charge.clone());
    st.insert(refund.clone());
    let event = events::envelope(None, "charge.refunded", charge, None, now);
    Ok((refund, vec![event]))
}

fn parse_bool(p: &Value, param: &str) -> Result<Option<bool>, ApiError> {
    match str_at(p, param) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(v) => Err(invalid(
            "parameter_invalid_boolean",
            format!("Invalid boolean: {v}"),
            Some(param),
        )),
    }
}

pub(super) fn update_subscription(st: &mut State, id: &str, p: &Value, now: i64) -> Handled {
    let mut sub = get(st, "subscription", id)?;
    if sub["status"] == "canceled" {
        return Err(invalid(
            "parameter_invalid_string",
            "A canceled subscription can only update its cancellation_details and metadata.",
            None,
        ));
    }
    let before = sub.clone();
    if let Some(at_end) = parse_bool(p, "cancel_at_period_end")? {
        sub["cancel_at_period_end"] = json!(at_end);
        sub["cancel_at"] = if at_end {
            sub["items"]["data"][0]["current_period_end"].clone()
        } else {
            Value::Null
        };
    }
    for field in ["comment", "feedback"] {
        if let Some(v) = str_at(p, &format!("cancellation_details/{field}")) {
            sub["cancellation_details"][field] = json!(v);
        }
    }
    apply_metadata(&mut sub, p);
    let previous: serde_json::Map<String, Value> = [
        "cancel_at_period_end",
        "cancel_at",
        "cancellation_details",
        "metadata",
    ]
    .iter()
    .filter(|k| before[**k] != sub[**k])
    .map(|k| ((*k).to_owned(), before[*k].clone()))
    .collect();
    st.insert(sub.clone());
    let events = if previous.is_empty() {
        Vec::new()
    } else {
        vec![events::envelope(
            None,
            "customer.subscription.updated",
            sub.clone(),
            Some(Value::Object(previous)),
            now,
        )]
    };
    Ok((sub, events))
}

fn cancel_subscription(st: &mut State, id: &str, p: &Value, now: i64) -> Handled {
    let mut sub = get(st, "subscription", id)?;
    if sub["status"] == "canceled" {
        return Err(invalid(
            "parameter_invalid_string",
            format!("The subscription {id} has already been canceled."),
            None,
        ));
    }
    sub["status"] = json!("canceled");
    sub["canceled_at"] = json!(now);
    sub["ended_at"] = json!(now);
    sub["cancellation_details"]["reason"] = json!("cancellation_requested");
    if let Some(comment) = str_at(p, "cancellation_details/comment") {
        sub["cancellation_details"]["comment"] = json!(comment);
    }
    st.insert(sub.clone());
    let event = events::envelope(
        None,
        "customer.subscription.deleted",
        sub.clone(),
        None,
        now,
    );
    Ok((sub, vec![event]))
}

/// Creates the subscription a paid subscription-mode checkout starts.
pub(super) fn start_subscription(
    st: &mut State,
    session: &Value,
    extra: &SessionExtra,
    customer: &str,
    now: i64,
) -> Value {
    let recurring: Vec<(Price, i64)> = extra
        .items
        .iter()
        .filter(|(p, _)| p.recurring.is_some())
        .cloned()
        .collect();
    let id = ids::stripe("sub_");
    let invoice = ids::stripe("in_");
    let seed = SubscriptionSeed {
        id: &id,
        customer,
        items: &recurring,
        latest_invoice: Some(&invoice),
        metadata: extra.subscription_metadata.clone(),
    };
    let mut sub = objects::subscription(&seed, now);
    if sub["metadata"]
        .as_object()
        .is_some_and(serde_json::Map::is_empty)
    {
        sub["metadata"] = session["metadata"].clone();
    }
    st.insert(sub.clone());
    sub
}
