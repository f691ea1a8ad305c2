//! `docs/access-patterns.md` and `docs/model.json` are generated from the catalog and a
//! measured run on the reference dataset; this fails when the checked-in files are stale
//! (`make docs` regenerates them).

use fleet_perf::model_docs::{render, MARKDOWN_PATH, MODEL_PATH};
use fleet_testkit::pricing::measure_priced;
use fleet_tests::*;

#[tokio::test]
async fn generated_docs_are_current() {
    let (table, tokens) = reference_table().await;
    let measurements = measure_priced(&table, &tokens).await.expect("patterns run");
    let (markdown, model) = render(&measurements);
    let root = fleet_testkit::repo_root();
    for (path, generated) in [(MARKDOWN_PATH, markdown), (MODEL_PATH, model)] {
        let current = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        assert!(
            current == generated,
            "{path} is stale: run `make docs`\n--- generated ---\n{generated}"
        );
    }
}
