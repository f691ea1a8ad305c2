//! Generates `docs/access-patterns.md` and `docs/model.json` from the catalog, the key
//! templates, the template's indexes and one measured run of every pattern case on the
//! reference dataset. Each pattern links to the file that holds its definition, budget and
//! code, and to its case (contract run and bench call). `fleet-perf docs` writes them; a test
//! fails when the checked-in files differ from what the code generates.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};
use shared::model::entities::EntityType;
use shared::model::pattern_id::PatternId;
use shared::model::schema::INDEXES;
use shared::ops::catalog::CATALOG;
use shared::ops::pattern::{AccessPattern, Frequency, RequestBudget};

use fleet_testkit::reference::cases::CASES_SOURCE;
use fleet_testkit::reference::Measurement;

/// Where the generated files live, relative to the repository root.
pub const MARKDOWN_PATH: &str = "docs/access-patterns.md";
/// The JSON model.
pub const MODEL_PATH: &str = "docs/model.json";

fn frequency(f: Frequency) -> &'static str {
    match f {
        Frequency::Critical => "critical (most frequent, latency-sensitive)",
        Frequency::Important => "important (frequent, less latency-sensitive)",
        Frequency::Analytics => "analytics (operators and reports)",
    }
}

fn budget(b: RequestBudget) -> String {
    match b {
        RequestBudget::Fixed(n) => format!("{n}"),
        RequestBudget::FixedPlusSync(n) => format!("{n}, +1 when name, type or tags change"),
        RequestBudget::PerPage(n) => format!("{n} per page"),
        RequestBudget::PerPagePlusEmptyCheck(n) => {
            format!("{n} per page, +1 GetItem when the first page is empty")
        }
        RequestBudget::PerPagePlusFirstPageCheck(n) => {
            format!("{n} per page, +1 GetItem on the first page")
        }
        RequestBudget::PerShardPage => "1 per shard per page".into(),
        RequestBudget::PerShardPagePlus(n) => format!("1 per shard per page + {n}"),
        RequestBudget::PerPagePlusPlacedStates(n) => format!(
            "{n} per page, +1 BatchGetItem per page holding devices placed on another partition"
        ),
        RequestBudget::FixedPlusPlacedState(n) => {
            format!("{n}, +1 GetItem when the device's state is placed on another partition")
        }
        RequestBudget::PerDeviceGroupPage => {
            "per page: 1 (the device group) + 1 per device of the group".into()
        }
        RequestBudget::PerDayShardPlusDevices => {
            "1 per (day, shard) + 1 per marked device read (at most 25)".into()
        }
        RequestBudget::BatchOf25Plus(n) => format!("ceil(n/25) + {n}"),
        RequestBudget::ZeroAtReadTime => "0 at read time (daily report)".into(),
        RequestBudget::FixedPlusShardPagesAndAlarms(n) => format!(
            "{n} + 1 Query per partition page of open alarms + 2 per alarm cleared (a read and a transaction)"
        ),
        RequestBudget::BatchOf25PlusTwin(n) => format!(
            "ceil(n/25) + {n}, + the device's twin work (none when nothing is pending and it reports and acknowledges nothing)"
        ),
        RequestBudget::FixedPlusTwin(n) => format!(
            "{n}, + the device's twin work (1 live-state read when nothing else tells the versions)"
        ),
        RequestBudget::FixedPlusPlacedStateAndTwin(n) => format!(
            "{n}, +1 GetItem when the device's state is placed on another partition, +1 Query when it has a twin"
        ),
        RequestBudget::RolloutPages => {
            "1 + 3 per rollout + 4 per page of 50 devices + 1 transaction per device changed".into()
        }
        RequestBudget::FixedPlusPagesAndDevices(n) => format!(
            "{n} + 1 Query per page of the owner's devices + 1 UpdateItem per device of the type"
        ),
        RequestBudget::DueShardPages => {
            "1 Query per shard page + 1 BatchGetItem per page with entries + 1 write per entry acted on".into()
        }
        RequestBudget::SilentRollPages => {
            "2 (checkpoint) + 1 Query per partition page + 2 per page with devices + 3 per transaction of a device rolled".into()
        }
        RequestBudget::PartitionedLogPages => {
            "per page: 1 GetItem + 1 Query per log partition + at most 1 more per partition whose share ran out".into()
        }
        RequestBudget::FleetsEndpointsDeliveries => {
            "1 Query per fleet with a transition + 1 UpdateItem per endpoint (2 when a racing reservation beat it) + 1 PutItem per delivery".into()
        }
    }
}

fn measured(m: &Measurement) -> String {
    let ops: Vec<String> = m
        .used
        .operations
        .iter()
        .map(|(op, n)| format!("{n} {op}"))
        .collect();
    format!(
        "{} requests ({}), {} RCU, {} WCU: {}",
        m.used.requests(),
        ops.join(" + "),
        m.used.read_units,
        m.used.write_units,
        m.workload
    )
}

fn by_pattern(measurements: &[Measurement]) -> BTreeMap<PatternId, Vec<&Measurement>> {
    let mut map: BTreeMap<PatternId, Vec<&Measurement>> = BTreeMap::new();
    for m in measurements {
        map.entry(m.id).or_default().push(m);
    }
    map
}

/// A repository file as a link target from `docs/` (where the generated files live).
fn from_docs(file: &str) -> String {
    format!("../{file}")
}

/// The Markdown document.
pub fn markdown(measurements: &[Measurement]) -> String {
    let runs = by_pattern(measurements);
    let mut out = String::new();
    out.push_str("# Access patterns\n\n");
    out.push_str(
        "Generated by `make docs` from the pattern definitions (each beside the function that \
         implements it in `shared/src/ops/`, collected by `shared/src/ops/catalog.rs`) and one run of \
         every pattern case on the reference dataset (",
    );
    let _ = write!(
        out,
        "[`{CASES_SOURCE}`]({}): a user with 10 devices x 10 events, a second user with 2 \
         devices x 5 events) on DynamoDB Local. ",
        from_docs(CASES_SOURCE)
    );
    out.push_str(
        "Each id links to the file that holds the pattern's definition, budget and code. Do not \
         edit: a test fails when this file is stale. RCU are eventually consistent read units \
         as DynamoDB Local reports them (`ReturnConsumedCapacity=TOTAL`). WCU are the write \
         units DynamoDB bills, priced from the items each case changed by DynamoDB's rules \
         (`fleet_testkit::pricing`: a transaction bills 2 per started KB of each item, each index \
         entry 1 per started KB on its own, an update the larger image); DynamoDB Local's own \
         write figure (1 per item of a transaction, no index entry) is not used.\n\n",
    );
    out.push_str(
        "| id | pattern | operation | budget (requests) | measured |\n|---|---|---|---|---|\n",
    );
    for p in CATALOG {
        let figures = runs
            .get(&p.id)
            .map(|ms| {
                ms.iter()
                    .map(|m| {
                        format!(
                            "{} req, {} RCU, {} WCU",
                            m.used.requests(),
                            m.used.read_units,
                            m.used.write_units
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_else(|| "no case".into());
        let _ = writeln!(
            out,
            "| [{}]({}) | {} | {} | {} | {} |",
            p.id,
            from_docs(p.implemented_by.file),
            p.description,
            operations(p),
            budget(p.budget),
            figures
        );
    }
    for p in CATALOG {
        let _ = write!(
            out,
            "\n## {}: {}\n\n**Frequency:** {}\n**Route:** {}\n**Operations:** {}\n**Index:** {}\n**Key condition:** `{}`\n**Request budget:** {}\n",
            p.id,
            p.description,
            frequency(p.frequency),
            match (p.route, p.budget) {
                (Some(r), _) => format!("`{r}`"),
                (None, RequestBudget::ZeroAtReadTime) =>
                    format!("none (a field of the {} report)", PatternId::DailyReport),
                (None, _) => "none (a scheduled run)".into(),
            },
            operations(p),
            p.index.unwrap_or("base table"),
            p.key_condition,
            budget(p.budget),
        );
        if let Some(ceiling) = p.max_read_units {
            let _ = writeln!(
                out,
                "**Read ceiling:** {ceiling} RCU on the reference workload"
            );
        }
        let source = p.implemented_by;
        let _ = writeln!(
            out,
            "**Implemented by:** [`{}`]({}) (definition and budget beside it)",
            source.path(),
            from_docs(source.file)
        );
        let _ = writeln!(
            out,
            "**Contract and bench case:** [`{CASES_SOURCE}`]({})",
            from_docs(CASES_SOURCE)
        );
        if let Some(ms) = runs.get(&p.id) {
            for m in ms {
                let _ = writeln!(out, "**Measured:** {}", measured(m));
            }
        }
    }
    out
}

fn operations(p: &AccessPattern) -> String {
    if p.operations.is_empty() {
        return "none (daily report)".into();
    }
    p.operations
        .iter()
        .map(|o| o.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The JSON model, in the spirit of the access-pattern documentation seed: access patterns,
/// entities with key templates and `entityType`, and indexes.
pub fn model(measurements: &[Measurement]) -> Value {
    let runs = by_pattern(measurements);
    let mut entities = serde_json::Map::new();
    for t in EntityType::key_templates() {
        let mut entry = json!({
            "PK": t.pk,
            "SK": { t.sk: { "entityType": t.entity_type } },
        });
        if let Some((pk, sk)) = t.gsi1 {
            entry["GSI1PK"] = json!(pk);
            entry["GSI1SK"] = json!(sk);
        }
        if let Some((pk, sk)) = t.gsi2 {
            entry["GSI2PK"] = json!(pk);
            entry["GSI2SK"] = json!(sk);
        }
        entities.insert(t.entity_type.to_string(), json!([entry]));
    }
    let indexes: Vec<Value> = INDEXES
        .iter()
        .map(|i| {
            json!({
                "IndexName": i.name,
                "PartitionKey": i.partition_key,
                "SortKey": i.sort_key,
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": i.projected},
            })
        })
        .collect();
    let patterns: Vec<Value> = CATALOG
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "description": p.description,
                "operations": p.operations.iter().map(|o| o.name()).collect::<Vec<_>>(),
                "index": p.index,
                "keyCondition": p.key_condition,
                "requestBudget": budget(p.budget),
                "readCeilingRcu": p.max_read_units,
                "route": p.route,
                "implementedBy": p.implemented_by.path(),
                "source": p.implemented_by.file,
                "case": CASES_SOURCE,
                "measured": runs.get(&p.id).map(|ms| ms.iter().map(|m| json!({
                    "workload": m.workload,
                    "requests": m.used.requests(),
                    "operations": m.used.operations,
                    "rcu": m.used.read_units,
                    "wcu": m.used.write_units,
                })).collect::<Vec<_>>()),
            })
        })
        .collect();
    json!({
        "Access Patterns": CATALOG.iter().map(|p| p.description).collect::<Vec<_>>(),
        "table": {"PartitionKey": "PK", "SortKey": "SK", "TimeToLive": "ttl", "BillingMode": "PAY_PER_REQUEST"},
        "entities": entities,
        "indexes": indexes,
        "patterns": patterns,
    })
}

/// Both files' contents: (Markdown, JSON).
pub fn render(measurements: &[Measurement]) -> (String, String) {
    let json = serde_json::to_string_pretty(&model(measurements)).unwrap_or_default() + "\n";
    (markdown(measurements), json)
}
