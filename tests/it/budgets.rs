//! Access-pattern contracts: every implemented pattern in the catalog runs on DynamoDB Local
//! against the reference dataset (seed 000's 10 devices x 10 events, and more), and what it
//! issued (requests, operations, consumed capacity) is checked against its budget in
//! `shared::catalog`. The budgets live in the catalog; the runs live in
//! `fleet_testkit::reference`, which also feeds the generated docs.

use std::collections::BTreeSet;

use fleet_testkit::reference::measure_patterns;
use fleet_tests::*;
use shared::catalog::{pattern, RequestBudget, CATALOG};

#[tokio::test]
async fn every_implemented_pattern_stays_within_its_budget_on_the_reference_dataset() {
    let (table, tokens) = reference_table().await;
    let measurements = measure_patterns(&table, &tokens)
        .await
        .expect("patterns run");

    let mut violations = Vec::new();
    for m in &measurements {
        let p = pattern(m.id).unwrap_or_else(|| panic!("{} is not in the catalog", m.id));
        assert!(
            p.implemented_by.is_some(),
            "{} is measured but not marked implemented",
            m.id
        );
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

    let implemented: BTreeSet<&str> = CATALOG
        .iter()
        .filter(|p| p.implemented_by.is_some())
        .map(|p| p.id)
        .collect();
    let measured: BTreeSet<&str> = measurements.iter().map(|m| m.id).collect();
    assert_eq!(
        implemented, measured,
        "every implemented pattern has a contract run"
    );

    let dash = measurements.iter().find(|m| m.id == "AP-DASH").unwrap();
    assert_eq!(dash.used.requests(), 1);
    assert!(dash.used.read_units <= 2.5, "{:?}", dash.used);
    let status = measurements.iter().find(|m| m.id == "AP-06").unwrap();
    assert_eq!(
        status.used.requests(),
        1,
        "a status change is one write, no read"
    );
}

#[test]
fn a_budget_violation_is_reported() {
    // The check the contract relies on fails for a Scan and for an extra request.
    let dash = pattern("AP-DASH").unwrap();
    let mut used = shared::metrics::MeterSnapshot::default();
    used.operations.insert("Query".into(), 2);
    assert!(dash
        .check(&used, &shared::catalog::BudgetScale::one())
        .is_err());
    used.operations.clear();
    used.operations.insert("Scan".into(), 1);
    assert!(dash
        .check(&used, &shared::catalog::BudgetScale::one())
        .is_err());
}
