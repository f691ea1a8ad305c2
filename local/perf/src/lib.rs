//! The performance tools: the benchmark (release bootstraps under the local Runtime API, the
//! Python peer), cold start, load test, throughput, the fault-run command, the key-distribution
//! simulator, the cost model, and the generator of docs/access-patterns.md
//! and docs/model.json. Every figure they print is measured on DynamoDB Local or computed
//! from the profiles in `bench/`. Never a dependency of a Lambda.

pub mod bench;
pub mod cost;
pub mod key_distribution;
pub mod load;
pub mod model_docs;
pub mod simulate;
pub mod stats;
pub mod throughput;
