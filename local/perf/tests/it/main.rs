//! The performance tools' own tests, on DynamoDB Local and the release bootstraps: the
//! simulator's and cost model's capacity rules and their generated reports, the generated
//! access-pattern docs, the load test, the benchmark's harness (its own Runtime API, the
//! Python peer) and the shipped bootstraps under it. One binary, as `tests/it/`: run one area
//! with `cargo test -p fleet-perf --test it <module>::`.

mod bench_harness;
mod generated_docs;
mod load_smoke;
mod simulator;
mod smoke;
