//! `GET /payment/invoices`: the invoices Stripe's events told, one row per invoice whatever the
//! order and repetition of the events, each user seeing those of their own Stripe customers.

use provider_sim::Outcome;

use super::*;

kernel::backend_tests! {
    a_subscriptions_invoices_are_listed_for_its_user_only,
    invoice_events_in_any_order_and_repeated_keep_the_latest_state,
    an_invoice_is_its_customers_users_even_when_the_user_comes_later,
}

async fn invoices(c: &Ctx, token: &str, query: &str) -> Value {
    let (status, body) = c
        .call("GET", &format!("/invoices{query}"), Some(token), None)
        .await;
    assert_eq!(status, 200, "{query}: {body}");
    body
}

async fn a_subscriptions_invoices_are_listed_for_its_user_only(db: TestDb) {
    let c = start(&db, |_| {}).await;
    assert_eq!(c.call("GET", "/invoices", None, None).await.0, 401);
    assert_eq!(invoices(&c, ALICE, "").await["total"], 0);
    c.pay(ALICE, "subscription", "price_monthly").await;
    let first = invoices(&c, ALICE, "").await;
    assert_eq!(first["total"], 1, "{first}");
    let invoice = &first["invoices"][0];
    assert_eq!(
        (
            invoice["status"].as_str(),
            invoice["amount_due"].as_i64(),
            invoice["amount_paid"].as_i64(),
            invoice["amount_remaining"].as_i64(),
            invoice["currency"].as_str(),
        ),
        (Some("paid"), Some(1500), Some(1500), Some(0), Some("usd"))
    );
    let sub = c.call("GET", "/subscriptions", Some(ALICE), None).await.1["subscriptions"][0]
        ["provider_subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(invoice["provider_subscription_id"], sub.as_str());
    assert!(
        invoice["number"].as_str().unwrap().ends_with("-0001"),
        "{invoice}"
    );
    assert!(invoice["period_start"].is_string() && invoice["period_end"].is_string());
    // The hosted page is the provider's, and it is served.
    let hosted = invoice["hosted_invoice_url"].as_str().unwrap();
    let page = c.server.client.get(hosted).send().await.unwrap();
    assert_eq!(page.status(), 200, "{hosted}");
    assert!(page.text().await.unwrap().contains("paid"));
    // The next period's payment fails, then the one after is paid.
    for outcome in [Outcome::Fail, Outcome::Pay] {
        let deliveries = c.sim.renew_subscription(&sub, outcome).await.unwrap();
        assert!(
            deliveries.iter().all(|d| d.status == Some(200)),
            "{deliveries:?}"
        );
    }
    let all = invoices(&c, ALICE, "").await;
    assert_eq!(all["total"], 3, "{all}");
    let statuses: Vec<&str> = all["invoices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    // Newest first: created in one second they are ordered by id.
    assert_eq!(statuses, ["paid", "open", "paid"], "{all}");
    let failed = &all["invoices"][1];
    assert_eq!(
        (
            failed["amount_paid"].as_i64(),
            failed["amount_remaining"].as_i64()
        ),
        (Some(0), Some(1500))
    );
    assert!(failed["number"].as_str().unwrap().ends_with("-0002"));
    assert!(failed["period_start"].as_str() > invoice["period_start"].as_str());
    // Paginated like the transactions, and filtered by status.
    let second = invoices(&c, ALICE, "?page=2&page_size=1").await;
    assert_eq!(
        (
            second["total"].as_i64(),
            second["page"].as_i64(),
            second["page_size"].as_i64()
        ),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(second["invoices"][0]["id"], failed["id"]);
    assert_eq!(invoices(&c, ALICE, "?status=open").await["total"], 1);
    assert_eq!(invoices(&c, ALICE, "?status=paid").await["total"], 2);
    for bad in ["?status=bogus", "?status=%00", "?page=0", "?page_size=101"] {
        let (status, body) = c
            .call("GET", &format!("/invoices{bad}"), Some(ALICE), None)
            .await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
    // Nobody else sees them: Bob, nor an administrator's own list.
    assert_eq!(invoices(&c, BOB, "").await["total"], 0);
    assert_eq!(invoices(&c, ADMIN, "").await["total"], 0);
    // The renewals moved the subscription on: past due after the failure, active once paid.
    let subs = c.call("GET", "/subscriptions", Some(ALICE), None).await.1;
    assert_eq!(subs["subscriptions"][0]["status"], "active");
}

/// An invoice `in_<n>` of Alice's customer, in `status`.
fn invoice(n: u32, status: &str, paid: bool) -> Value {
    json!({
        "id": format!("in_{n}"), "object": "invoice", "customer": "cus_alice",
        "status": status, "number": format!("ALICE-{n:04}"),
        "amount_due": 900, "amount_paid": if paid { 900 } else { 0 },
        "amount_remaining": if paid { 0 } else { 900 }, "currency": "eur",
        "hosted_invoice_url": format!("https://invoice.example/i/in_{n}"),
        "invoice_pdf": format!("https://invoice.example/i/in_{n}/pdf"),
        "period_start": 1_700_000_000, "period_end": 1_700_000_000,
        "lines": {"data": [{"period": {"start": 1_800_000_000, "end": 1_802_592_000}}]},
        "parent": {"subscription_details": {"subscription": "sub_alice", "metadata": {"user_id": "1"}}},
        "created": 1_800_000_000 + i64::from(n),
    })
}

/// Every invoice Alice sees, as comparable lines.
async fn invoice_lines(c: &Ctx) -> Vec<String> {
    let body = invoices(c, ALICE, "?page_size=100").await;
    body["invoices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!(
                "{} {} {} {} {} {} {}",
                i["provider_invoice_id"],
                i["status"],
                i["amount_paid"],
                i["amount_remaining"],
                i["number"],
                i["period_start"],
                i["created"]
            )
        })
        .collect()
}

async fn invoice_events_in_any_order_and_repeated_keep_the_latest_state(db: TestDb) {
    let events = vec![
        // in_1: finalized, a failed attempt, then paid; a late "failed" of a retry changes
        // nothing once it is paid.
        event(
            "evt_i1",
            "invoice.finalized",
            100,
            invoice(1, "open", false),
        ),
        event(
            "evt_i2",
            "invoice.payment_failed",
            200,
            invoice(1, "open", false),
        ),
        event("evt_i3", "invoice.paid", 300, invoice(1, "paid", true)),
        event(
            "evt_i4",
            "invoice.payment_failed",
            400,
            invoice(1, "open", false),
        ),
        // in_2: finalized and paid in the same second.
        event(
            "evt_i5",
            "invoice.finalized",
            500,
            invoice(2, "open", false),
        ),
        event("evt_i6", "invoice.paid", 500, invoice(2, "paid", true)),
        // in_3: finalized, then voided; in_4: marked uncollectible, then paid after all.
        event(
            "evt_i7",
            "invoice.finalized",
            600,
            invoice(3, "open", false),
        ),
        event("evt_i8", "invoice.voided", 700, invoice(3, "void", false)),
        event(
            "evt_i9",
            "invoice.finalized",
            800,
            invoice(4, "open", false),
        ),
        event(
            "evt_i10",
            "invoice.marked_uncollectible",
            900,
            invoice(4, "uncollectible", false),
        ),
        event("evt_i11", "invoice.paid", 1000, invoice(4, "paid", true)),
    ];
    let in_order = start(&db, |_| {}).await;
    for e in &events {
        assert_eq!(send_event(&in_order, e.clone()).await.0, 200);
    }
    let expected = invoice_lines(&in_order).await;
    assert_eq!(expected.len(), 4, "{expected:?}");
    let status_of = |lines: &[String], id: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("\"{id}\"")))
            .map(|l| l.split(' ').nth(1).unwrap().to_owned())
    };
    for (id, status) in [
        ("in_1", "\"paid\""),
        ("in_2", "\"paid\""),
        ("in_3", "\"void\""),
        ("in_4", "\"paid\""),
    ] {
        assert_eq!(
            status_of(&expected, id).as_deref(),
            Some(status),
            "{expected:?}"
        );
    }
    // The period is the first line's (the invoice-level one is the period just ended), and the
    // newest invoice is first.
    assert!(expected[0].starts_with("\"in_4\""), "{expected:?}");
    assert!(expected[0].contains("2027-01-15T08:00:00"), "{expected:?}");
    // The same events last first, then shuffled, each delivered twice, on another database.
    let other_db = TestDb::sqlite().await;
    let shuffled = start(&other_db, |_| {}).await;
    let mut order: Vec<&Value> = events.iter().rev().collect();
    order.extend((0..events.len()).map(|i| &events[(i * 7) % events.len()]));
    for e in order {
        let (status, body) = send_event(&shuffled, e.clone()).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(invoice_lines(&shuffled).await, expected);
    // A repeated delivery is a duplicate and changes nothing.
    let (_, again) = send_event(&shuffled, events[2].clone()).await;
    assert_eq!(again["duplicate"], true);
    // The invoice.paid events wrote their charges too, as before.
    let (_, tx) = shuffled
        .call("GET", "/transactions", Some(ALICE), None)
        .await;
    assert_eq!(tx["total"], 3, "{tx}");
}

async fn an_invoice_is_its_customers_users_even_when_the_user_comes_later(db: TestDb) {
    let c = start(&db, |_| {}).await;
    // An invoice of a customer nobody is tied to yet: nobody's.
    let mut orphan = invoice(7, "open", false);
    orphan["customer"] = json!("cus_later");
    orphan["parent"] = json!({"subscription_details": {"subscription": "sub_later"}});
    let (status, _) = send_event(&c, event("evt_o1", "invoice.finalized", 100, orphan)).await;
    assert_eq!(status, 200);
    assert_eq!(invoices(&c, ALICE, "").await["total"], 0);
    assert_eq!(invoices(&c, BOB, "").await["total"], 0);
    // Bob's own invoice (his user id in the subscription's metadata) is his only.
    let mut bobs = invoice(8, "paid", true);
    bobs["customer"] = json!("cus_bob");
    bobs["parent"]["subscription_details"]["metadata"]["user_id"] = json!("2");
    assert_eq!(
        send_event(&c, event("evt_b1", "invoice.paid", 110, bobs))
            .await
            .0,
        200
    );
    assert_eq!(invoices(&c, BOB, "").await["total"], 1);
    assert_eq!(invoices(&c, ALICE, "").await["total"], 0);
    // Alice's checkout completes with that customer: the invoice becomes hers.
    let session = json!({"id": "cs_later", "object": "checkout.session", "mode": "subscription",
                         "customer": "cus_later", "client_reference_id": "1",
                         "subscription": "sub_later", "status": "complete"});
    let (status, _) = send_event(
        &c,
        event("evt_o2", "checkout.session.completed", 120, session),
    )
    .await;
    assert_eq!(status, 200);
    let mine = invoices(&c, ALICE, "").await;
    assert_eq!(mine["total"], 1, "{mine}");
    assert_eq!(mine["invoices"][0]["provider_invoice_id"], "in_7");
    assert_eq!(invoices(&c, BOB, "").await["total"], 1);
}

/// `keel payment invoices` (through the module's command, in process): everyone's, or a user's
/// by their customer's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_lists_invoices() {
    use kernel::Module as _;
    let db = TestDb::sqlite().await;
    let pool = db.migrated_pool(&[payment_core::MIGRATIONS]).await;
    let module = PaymentModule::build(PaymentConfig::default(), &Deps::new(pool).unwrap())
        .await
        .unwrap();
    let replayed = json!([event(
        "evt_cli",
        "invoice.paid",
        1,
        invoice(1, "paid", true)
    )]);
    let file = tempfile_dir().join("invoices.json");
    std::fs::write(&file, replayed.to_string()).unwrap();
    let run = |args: &[&str]| {
        let mut argv = vec!["payment"];
        argv.extend_from_slice(args);
        payment_core::cli::command().get_matches_from(argv)
    };
    let replay = run(&["replay-webhooks", file.to_str().unwrap(), "--trust"]);
    assert_eq!(module.run_command("payment", &replay).await, Ok(()));
    let listed = run(&["invoices", "--status", "paid"]);
    assert_eq!(module.run_command("payment", &listed).await, Ok(()));
    let bad = run(&["invoices", "--status", "bogus"]);
    assert!(module.run_command("payment", &bad).await.is_err());
    let nobody = run(&["invoices", "--user", "nobody@example.com"]);
    assert_eq!(
        module.run_command("payment", &nobody).await,
        Err("no payment customer with the address nobody@example.com".to_owned())
    );
    let (rows, total) = module
        .service()
        .invoices(
            payment_core::Caller::User(1),
            None,
            kernel::pagination::Page {
                page: 1,
                page_size: 10,
            },
        )
        .await
        .unwrap();
    assert_eq!((total, rows[0].status.as_str()), (1, "paid"));
}
