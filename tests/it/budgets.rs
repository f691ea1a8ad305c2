//! Access-pattern contracts: every pattern case (`fleet_testkit::reference::cases`, one or more
//! per pattern) runs on DynamoDB Local against the reference dataset (a user's 10 devices x
//! 10 events, and more), and what it issued (requests, operations, consumed capacity) is
//! checked against its pattern's budget. The budgets live with the pattern definitions beside
//! their functions in `shared::ops`; the same cases feed the generated docs and the bench.

use std::collections::BTreeSet;

use fleet_testkit::reference::measure_patterns;
use fleet_tests::*;
use shared::model::pattern_id::PatternId;
use shared::ops::pattern::{BudgetScale, RequestBudget};
use shared::store::metrics::MeterSnapshot;

#[tokio::test]
async fn every_pattern_stays_within_its_budget_on_the_reference_dataset() {
    let (table, tokens) = reference_table().await;
    let measurements = measure_patterns(&table, &tokens)
        .await
        .expect("patterns run");

    let mut violations = Vec::new();
    for m in &measurements {
        let p = m.id.definition();
        // A report field (AP-10, AP-11) costs nothing of its own; anything else that issued
        // no request means the meter is not wired.
        if p.budget != RequestBudget::ZeroAtReadTime {
            assert!(
                m.used.requests() >= 1,
                "{}: nothing metered: {:?}",
                m.id,
                m.used
            );
        }
        if let Err(v) = p.check(&m.used, &m.scale) {
            violations.push(format!("{v} ({})", m.workload));
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");

    let measured: BTreeSet<PatternId> = measurements.iter().map(|m| m.id).collect();
    assert_eq!(
        measured,
        PatternId::all().collect::<BTreeSet<_>>(),
        "every pattern has a contract run"
    );

    let dash = measurements
        .iter()
        .find(|m| m.id == PatternId::Dashboard)
        .unwrap();
    assert_eq!(dash.used.requests(), 1);
    assert!(dash.used.read_units <= 2.5, "{:?}", dash.used);
    let status = measurements
        .iter()
        .find(|m| m.id == PatternId::UpdateDevice)
        .unwrap();
    assert_eq!(
        status.used.requests(),
        2,
        "a status change is two writes (the device, its live state's copy), no read"
    );
}

#[test]
fn a_budget_violation_is_reported() {
    // The check the contract relies on fails for a Scan and for an extra request.
    let dash = PatternId::Dashboard.definition();
    let mut used = MeterSnapshot::default();
    used.operations.insert("Query".into(), 2);
    assert!(dash.check(&used, &BudgetScale::one()).is_err());
    used.operations.clear();
    used.operations.insert("Scan".into(), 1);
    assert!(dash.check(&used, &BudgetScale::one()).is_err());
}

#[tokio::test]
async fn every_case_call_answers_its_expected_status_round_after_round() {
    // The bench's rounds (`make bench`, each round one call of every case in order), in
    // process and after the cases' runs, as the bench makes them: the calls' fixtures and
    // ordering hold after the runs and for repeated rounds, not only the first.
    let (table, tokens) = reference_table().await;
    measure_patterns(&table, &tokens)
        .await
        .expect("patterns run");
    // The rollouts the firmware calls pause, resume and cancel (after the runs: AP-T7's would
    // walk them).
    fleet_testkit::reference::seed_rollout_fixtures(&table)
        .await
        .expect("rollout fixtures");
    let from = shared::model::timestamp::Timestamp::parse_field("from", "2026-11-21T00:00:00.000Z")
        .unwrap();
    let mut calls: Vec<_> = fleet_testkit::reference::cases::CASES
        .iter()
        .filter_map(|case| {
            let call = case.call.as_ref()?;
            Some((case.id, call, (call.events)(&tokens, from)))
        })
        .collect();
    for round in 0..3 {
        for (id, call, events) in &mut calls {
            let event = String::from_utf8(events(round)).unwrap();
            let answer =
                fleet_testkit::functions::invoke(template(), &table, call.function, &event)
                    .await
                    .unwrap();
            assert_eq!(
                answer["statusCode"].as_u64(),
                Some(u64::from(call.expected)),
                "{id} {} (round {round}): {answer}",
                call.request
            );
        }
    }
}
