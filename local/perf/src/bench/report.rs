//! `docs/benchmarks.md` from a [`BenchReport`]: the headline ratios, the machine, then one
//! section per measurement. Everything below [`KEPT_MARKER`] in the existing file is kept as
//! it is (the hand-written record of changes and their before/after figures).

use shared::model::pattern_id::PatternId;

use super::common::Latency;
use super::figures::BenchReport;
use crate::stats::quantile;

/// The Markdown document.
pub const MARKDOWN_PATH: &str = "docs/benchmarks.md";
/// Its JSON twin: the same figures, every sample's quantiles.
pub const JSON_PATH: &str = "docs/benchmarks.json";
/// The line after which `make bench` keeps the file's text.
pub const KEPT_MARKER: &str =
    "<!-- Generated above this line by `make bench`; the text below it is kept as written. -->";

fn ratio(slow: f64, fast: f64) -> f64 {
    if fast > 0.0 {
        slow / fast
    } else {
        0.0
    }
}

/// The headline ratios, one line each (also printed by `make bench`).
pub fn headline(report: &BenchReport) -> String {
    let mut out = String::new();
    for p in &report.peer {
        let (r, py) = (&p.rust, &p.python);
        out.push_str(&format!(
            "- **{}**: Rust cold start is **{:.1}x faster** than Python ({:.0} ms vs {:.0} ms, median of {}), warm p50 **{:.1}x** ({:.2} vs {:.2} ms), warm p99 **{:.1}x** ({:.2} vs {:.2} ms), **{:.1}x less memory** ({:.1} vs {:.1} MiB peak RSS).\n",
            p.path,
            ratio(py.cold_ms.p50, r.cold_ms.p50),
            r.cold_ms.p50,
            py.cold_ms.p50,
            r.cold_ms.n,
            ratio(py.warm_ms.p50, r.warm_ms.p50),
            r.warm_ms.p50,
            py.warm_ms.p50,
            ratio(py.warm_ms.p99, r.warm_ms.p99),
            r.warm_ms.p99,
            py.warm_ms.p99,
            ratio(py.peak_rss_mib, r.peak_rss_mib),
            r.peak_rss_mib,
            py.peak_rss_mib,
        ));
    }
    for point in report.power.points.iter().filter(|p| p.memory_mb == 128) {
        for c in &point.paths {
            out.push_str(&format!(
                "- **{} at {} MB of Lambda CPU** ({:.1} ms per 100 ms, section 5): Rust cold start **{:.1}x faster** than Python ({:.0} vs {:.0} ms), warm p50 **{:.1}x** ({:.2} vs {:.2} ms), warm p99 **{:.1}x** ({:.2} vs {:.2} ms).\n",
                c.path,
                point.memory_mb,
                point.quota_ms,
                ratio(c.python.cold_ms.p50, c.rust.cold_ms.p50),
                c.rust.cold_ms.p50,
                c.python.cold_ms.p50,
                ratio(c.python.warm_ms.p50, c.rust.warm_ms.p50),
                c.rust.warm_ms.p50,
                c.python.warm_ms.p50,
                ratio(c.python.warm_ms.p99, c.rust.warm_ms.p99),
                c.rust.warm_ms.p99,
                c.python.warm_ms.p99,
            ));
        }
    }
    let tls = &report.tls;
    for plain in &tls.peer_plain {
        if let Some(with_tls) = tls.peer_tls.iter().find(|t| t.path == plain.path) {
            out.push_str(&format!(
                "- **{} cold start with TLS to DynamoDB** (section 6): Rust {:.0} ms ({:+.0} ms for the handshake), Python {:.0} ms ({:+.0} ms): Rust **{:.1}x faster**.\n",
                plain.path,
                with_tls.rust.cold_ms.p50,
                with_tls.rust.cold_ms.p50 - plain.rust.cold_ms.p50,
                with_tls.python.cold_ms.p50,
                with_tls.python.cold_ms.p50 - plain.python.cold_ms.p50,
                ratio(with_tls.python.cold_ms.p50, with_tls.rust.cold_ms.p50),
            ));
        }
    }
    let i = &report.ingest;
    out.push_str(&format!(
        "- **ingest throughput**: the Rust handler runs at **{:.0}% of the raw BatchWriteItem ceiling** of this DynamoDB Local ({:.0} vs {:.0} events/s); the Python peer at {:.0}% ({:.0} events/s): Rust **{:.2}x** Python, using **{:.1}x less CPU** per event ({:.2} vs {:.2} CPU ms per 100-event batch).\n",
        100.0 * ratio(i.rust.events_per_second, i.raw.events_per_second),
        i.rust.events_per_second,
        i.raw.events_per_second,
        100.0 * ratio(i.python.events_per_second, i.raw.events_per_second),
        i.python.events_per_second,
        ratio(i.rust.events_per_second, i.python.events_per_second),
        ratio(cpu_ms_per_batch(&i.python), cpu_ms_per_batch(&i.rust)),
        cpu_ms_per_batch(&i.rust),
        cpu_ms_per_batch(&i.python),
    ));
    let unlimited: Vec<_> = report
        .orders
        .iter()
        .filter(|o| o.memory_mb.is_none())
        .collect();
    if let (Some(worst), Some(best)) = (
        unlimited
            .iter()
            .min_by(|a, b| a.of_ceiling().total_cmp(&b.of_ceiling())),
        unlimited
            .iter()
            .max_by(|a, b| a.of_ceiling().total_cmp(&b.of_ceiling())),
    ) {
        out.push_str(&format!(
            "- **ingest by arrival order** (section 2): from **{:.2}** ({}, {} a request) to **{:.2}** ({}, {} a request) of the raw ceiling.\n",
            worst.of_ceiling(),
            worst.workload.order.label(),
            worst.workload.events_per_request,
            best.of_ceiling(),
            best.workload.order.label(),
            best.workload.events_per_request,
        ));
    }
    out
}

fn cpu_ms_per_batch(t: &super::ingest::Throughput) -> f64 {
    let batches = t.events as f64 / 100.0;
    t.function_cpu_seconds
        .map_or(0.0, |s| 1000.0 * s / batches.max(1.0))
}

fn ms(l: &Latency) -> String {
    format!("{:.2} / {:.2}", l.p50, l.p99)
}

/// The whole document; `previous` is the file as it was (its kept part is carried over).
pub fn markdown(report: &BenchReport, previous: &str) -> String {
    let m = &report.machine;
    let s = &report.settings;
    let mut out = String::new();
    out.push_str("# Benchmarks\n\n");
    out.push_str(&format!(
        "Generated by `make bench` from one run on DynamoDB Local (figures and every sample's quantiles in [benchmarks.json](benchmarks.json)). Measured {} at commit `{}` on {} ({} logical cores, {} MiB), Linux {}; load average {} at the start and {} at the end (this machine is shared: the load is other work). {}; Python peer on {}; DynamoDB Local from npm `{}`. Speed is never asserted by the tests; these are measurements, not contracts.\n\n",
        m.date, m.commit, m.cpu, m.cores, m.memory_mib, m.kernel, m.load_before, m.load_after, m.rustc, m.python, m.dynamodb_local
    ));
    out.push_str("## Headline\n\n");
    out.push_str(&headline(report));
    out.push_str(
        "\nRatios are Python's figure over Rust's (medians unless a percentile is named).\n\n",
    );

    out.push_str("## How it is measured\n\n");
    out.push_str(&format!(
        "Every function runs as its **release bootstrap** (`make smoke-build`: the release profile with fat LTO, for this machine's architecture) in its own process under the local Lambda Runtime API (`local/perf/src/bench/runtime_api.rs`), with the environment `template.yaml` gives it, exactly as `smoke` replays the samples. The Python + boto3 peer (`bench/python-peer/`) runs as `python -m awslambdaric handler.<fn>` under the same Runtime API, with the same environment, table, data and events. The latency of a request is taken two ways: the **invocation** time from queueing the event at the Runtime API to the answer posted back (what Lambda bills: the runtime client's polling and JSON work included), and the **handler** time the function logs itself in its request line (`latency_ms`).\n\n\
Why not measure the handlers in-process, in a release build of the benchmark? Because that measures a different binary than the one shipped (another fat-LTO release build of `fleet-perf` and everything it links, 6-10 minutes on this machine, and it would not contain the runtime client), and the Python peer cannot run in that process anyway: one harness for both sides keeps the ratios fair. The cost is that the Runtime API emulator and the driver run in this debug-built process: their time is in the invocation figure of both sides alike (the handler figure excludes it), and the driver's CPU use is reported next to the throughputs.\n\n\
Settings: {} measured calls per pattern after {} unmeasured; {} cold starts per bootstrap, each followed by {} warm invocations; throughput with {} devices sending at once, {} timed batches of 100 events each after one untimed batch, {} rounds.\n\n",
        s.calls, s.warmup, s.cold_runs, s.warm_invocations, s.devices, s.batches, s.rounds
    ));

    out.push_str("## 1. Access patterns\n\n");
    out.push_str("Requests and capacity from the reference measurement of `make docs` (`fleet_testkit::pricing::measure_priced`; RCU as DynamoDB Local reports them, WCU as DynamoDB bills them, priced from the items each case changed; seed 000's user with 10 devices x 10 events); latency from the calls of each pattern's route through its warm release bootstrap on the same dataset, taken in rounds of one call of every pattern (so other load on the machine spreads over all patterns alike). Latencies in ms, p50 / p99.\n\n");
    out.push_str("| id | reference workload | requests | RCU | WCU | request timed | function | invocation p50 / p99 | handler p50 / p99 |\n|---|---|---:|---:|---:|---|---|---:|---:|\n");
    for row in &report.patterns {
        let (request, function, invocation, handler) = match &row.latency {
            Some(l) => (
                format!("`{}`", l.request),
                l.function.trim_end_matches("Function").to_string(),
                ms(&l.invocation_ms),
                ms(&l.handler_ms),
            ),
            None => (
                if row.id.definition().budget == shared::ops::pattern::RequestBudget::ZeroAtReadTime
                {
                    format!(
                        "no request (a field of the {} report)",
                        PatternId::DailyReport
                    )
                } else {
                    "no route (a scheduled run)".into()
                },
                String::new(),
                "-".into(),
                "-".into(),
            ),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.id,
            row.workload,
            row.requests,
            row.rcu,
            row.wcu,
            request,
            function,
            invocation,
            handler
        ));
    }
    out.push_str(&format!("\n{}'s reference workload is a cold Lambda (it reads the registration: 1 GetItem + 4 BatchWriteItem + 1 UpdateItem + the conditional summary retry); the timed calls run warm, with the registration and device summary cached (4 BatchWriteItem + 1 UpdateItem).\n\n", PatternId::IngestEvents));

    let i = &report.ingest;
    out.push_str("## 2. Ingest throughput\n\n");
    out.push_str(&format!(
        "{} devices send at once, each one batch of 100 events at a time, {} batches each ({} events), every contender on its own fresh table created from the template, in {} rounds with each contender once in every position of the order (DynamoDB Local's JVM gets faster as it warms up: the first writer of a run is slower); the table shows each contender's median round, every round is in the JSON. **Rust**: one warm ingest bootstrap per device (as concurrent Lambdas). **Raw ceiling**: exactly the items an untimed Rust run stored before the rounds (that run also warms DynamoDB Local up for every contender), read back and written by a bare SDK client (no handler, no metering; asking for the consumed capacity, as every handler request does for its log line, which costs DynamoDB Local real CPU) into an empty table with the same concurrency: per device one batch at a time, its 4 chunks of 25 at once. **Python**: one warm peer process per device (4 writer threads each). The driver's CPU is this benchmark process (the Runtime APIs, or the bare client, built in release by `make bench`).\n\n",
        i.devices, i.batches, i.devices * i.batches * 100, i.rounds.len()
    ));
    out.push_str("| contender | events | seconds | events/s | % of raw | batch p50 / p99 ms | function CPU s | CPU ms per batch | driver CPU s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (name, t) in [
        ("Rust ingest bootstraps", &i.rust),
        ("raw BatchWriteItem (bare client)", &i.raw),
        ("Python + boto3 peer", &i.python),
    ] {
        out.push_str(&format!(
            "| {} | {} | {:.2} | {:.0} | {:.0}% | {} | {} | {} | {:.2} |\n",
            name,
            t.events,
            t.seconds,
            t.events_per_second,
            100.0 * ratio(t.events_per_second, i.raw.events_per_second),
            ms(&t.batch_ms),
            t.function_cpu_seconds
                .map_or("-".to_string(), |c| format!("{c:.2}")),
            t.function_cpu_seconds
                .map_or("-".to_string(), |_| format!("{:.2}", cpu_ms_per_batch(t))),
            t.driver_cpu_seconds,
        ));
    }

    out.push_str("\n### Ingest by arrival order\n\n");
    out.push_str(&format!(
        "The same readings (one a minute, three types, ids and values fixed by the minute) from {} devices at once, each one request at a time: {} requests of 100 events or {} of one event a device, reaching ingest **oldest first** (a live device), **newest first** (a backfill after an outage), **shuffled** (a gateway's buffer) and as a **replay** (the oldest-first requests sent again after they were stored), each against the raw BatchWriteItem ceiling of exactly the event items an untimed Rust run of that workload stored, written with the same request size and concurrency (for the replay, over items already there). {} rounds, Rust and raw in turns, median rounds shown (`local/perf/src/bench/orders.rs`; `make bench-orders` prints this table alone). Without a CPU limit, and under the CPU share of the ingest function's memory size (a cgroup quota from the first `/next` poll on, as in section 5). The last column is the bootstraps' CPU per event over the live order's, same request size and CPU: what a late reading costs beside a live one.\n\n",
        s.devices, s.batches, 4 * s.batches, s.rounds
    ));
    out.push_str(&crate::bench::orders::markdown(&report.orders));

    out.push_str("\n## 3. Cold start and memory of each release bootstrap\n\n");
    out.push_str(&format!(
        "Process start to first response through the local Runtime API (Lambda's own sandbox start-up is not in it), then warm invocations and peak resident memory (`VmHWM`), {} runs per bootstrap, each function's first 2xx sample event from `events/` on the demo data (`crate::bench::cold_start::measure`, as `make cold-start`).\n\n",
        s.cold_runs
    ));
    out.push_str(&crate::bench::cold_start::markdown(&report.bootstraps));

    out.push_str("\n## 4. Rust and the Python + boto3 peer\n\n");
    out.push_str(&format!(
        "The same Runtime API, table (the reference dataset), events and environment for both. {} cold starts each, every one followed by {} warm invocations; the dashboard is Alice's (10 devices x 10 events), the ingest calls send a new batch of 100 events each time (the same batches to a Rust and a Python device).\n\n",
        s.cold_runs, s.warm_invocations
    ));
    out.push_str("| path | measure | Rust | Python | Python / Rust |\n|---|---|---:|---:|---:|\n");
    for p in &report.peer {
        let rows = [
            (
                "cold start p50 (min-max), ms",
                format!(
                    "{:.1} ({:.1}-{:.1})",
                    p.rust.cold_ms.p50, p.rust.cold_ms.min, p.rust.cold_ms.max
                ),
                format!(
                    "{:.1} ({:.1}-{:.1})",
                    p.python.cold_ms.p50, p.python.cold_ms.min, p.python.cold_ms.max
                ),
                ratio(p.python.cold_ms.p50, p.rust.cold_ms.p50),
            ),
            (
                "warm p50, ms",
                format!("{:.2}", p.rust.warm_ms.p50),
                format!("{:.2}", p.python.warm_ms.p50),
                ratio(p.python.warm_ms.p50, p.rust.warm_ms.p50),
            ),
            (
                "warm p99, ms",
                format!("{:.2}", p.rust.warm_ms.p99),
                format!("{:.2}", p.python.warm_ms.p99),
                ratio(p.python.warm_ms.p99, p.rust.warm_ms.p99),
            ),
            (
                "peak RSS, MiB",
                format!("{:.1}", p.rust.peak_rss_mib),
                format!("{:.1}", p.python.peak_rss_mib),
                ratio(p.python.peak_rss_mib, p.rust.peak_rss_mib),
            ),
        ];
        for (measure, rust, python, r) in rows {
            out.push_str(&format!(
                "| {} | {measure} | {rust} | {python} | {r:.1}x |\n",
                p.path
            ));
        }
    }
    out.push_str(&format!(
        "| ingest | throughput, events/s (section 2) | {:.0} | {:.0} | {:.2}x |\n",
        i.rust.events_per_second,
        i.python.events_per_second,
        ratio(i.python.events_per_second, i.rust.events_per_second)
    ));
    let rss: Vec<f64> = report
        .bootstraps
        .iter()
        .flat_map(|b| b.peak_rss_kib.iter().map(|k| *k as f64 / 1024.0))
        .collect();
    out.push_str(&format!(
        "\nThe Rust bootstraps' peak RSS ranges {:.1}-{:.1} MiB across all four functions (section 3).\n\n",
        quantile(&rss, 0.0),
        quantile(&rss, 1.0)
    ));

    out.push_str("## 5. Power tuning: Lambda-sized CPU\n\n");
    out.push_str(&format!(
        "Sections 3 and 4 let each process use this machine's cores. Lambda gives a function CPU in proportion to its memory (one vCPU at 1,769 MB) and runs its Init phase with more. So here each process (Rust bootstrap and Python peer alike) starts unthrottled and, from its first `/next` poll of the Runtime API, runs in a cgroup of its own whose CFS quota is memory / 1,769 MB of one CPU per {} ms period (`fleet_perf::bench::cpu_quota`; only the processes the benchmark starts are moved, and their groups are removed afterwards). {} cold starts per size, path and implementation, each followed by {} warm invocations, on the reference dataset as in section 4. Cost per million requests: Lambda's arm64 price ($0.20 per million requests and $0.0000133334 per GB-second), billed in whole milliseconds of the warm p50.\n\n",
        super::power::PERIOD.as_millis(),
        s.power_runs,
        s.warm_invocations
    ));
    out.push_str(&super::power::markdown(&report.power));

    out.push_str("\n## 6. TLS on the first call\n\n");
    out.push_str(&format!(
        "DynamoDB Local speaks plain HTTP; on AWS a function's first DynamoDB request pays a TLS handshake. Here the same cold starts run twice, back to back: against DynamoDB Local directly, and through a local TLS endpoint in front of it (`fleet_perf::bench::tls_endpoint`: a throwaway CA and a certificate for 127.0.0.1/localhost; the processes trust it only through standard configuration, `SSL_CERT_FILE` for the Rust SDK's `rustls-native-certs` and `AWS_CA_BUNDLE` for botocore). {} cold starts each, unthrottled (section 5 gives the CPU of each memory size).\n\n",
        s.power_runs
    ));
    out.push_str(&super::tls::markdown(&report.tls));
    out.push('\n');
    out.push_str(KEPT_MARKER);
    out.push('\n');
    match previous.split_once(KEPT_MARKER) {
        Some((_, kept)) => out.push_str(kept.strip_prefix('\n').unwrap_or(kept)),
        None => out.push_str("\n## Changes and their before/after figures\n\nNone recorded yet.\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figures::{IngestFigures, Machine, Settings};
    use crate::bench::ingest::Throughput;

    fn report() -> BenchReport {
        let throughput = |events_per_second: f64| Throughput {
            events: 1000,
            seconds: 1000.0 / events_per_second,
            events_per_second,
            batch_ms: Latency::of(&[10.0, 20.0]),
            function_cpu_seconds: Some(1.0),
            driver_cpu_seconds: 0.5,
        };
        BenchReport {
            machine: Machine::describe(),
            settings: Settings::default(),
            patterns: Vec::new(),
            ingest: IngestFigures {
                devices: 1,
                batches: 10,
                rust: throughput(900.0),
                raw: throughput(1000.0),
                python: throughput(300.0),
                rounds: Vec::new(),
            },
            orders: Vec::new(),
            bootstraps: Vec::new(),
            peer: Vec::new(),
            power: super::super::power::PowerTuning {
                points: Vec::new(),
                short_period: Vec::new(),
                skipped: Some("not measured in this test".into()),
            },
            tls: super::super::tls::TlsFigures {
                plain: Vec::new(),
                tls: Vec::new(),
                peer_plain: Vec::new(),
                peer_tls: Vec::new(),
            },
        }
    }

    #[test]
    fn the_text_below_the_marker_survives_a_new_run() {
        let first = markdown(&report(), "");
        assert!(first.contains(KEPT_MARKER));
        assert!(first.contains("None recorded yet."));
        let edited = first.replace("None recorded yet.", "Before: 1 ms. After: 0.5 ms.");
        let second = markdown(&report(), &edited);
        assert!(second.contains("Before: 1 ms. After: 0.5 ms."));
        assert!(!second.contains("None recorded yet."));
        assert_eq!(second.matches(KEPT_MARKER).count(), 1);
    }

    #[test]
    fn the_headline_puts_ingest_against_the_raw_ceiling() {
        let text = headline(&report());
        assert!(
            text.contains("**90% of the raw BatchWriteItem ceiling**"),
            "{text}"
        );
        assert!(text.contains("the Python peer at 30%"), "{text}");
        assert!(text.contains("Rust **3.00x** Python"), "{text}");
    }
}
