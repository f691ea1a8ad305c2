//! The report (docs/key-distribution.md): per profile, the fleet, the item sizes, the busiest
//! keys of each table and index with their flags and fixes; and the `simulate` command.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use shared::model::pattern_id::PatternId;

use super::firmware::{hours, FirmwareRolloutPeak};
use super::numbers::{group, num, pct};
use super::orgs::OrgReport;
use super::partitions::{Flag, TableLoad, MAX_SHARDS, RCU_LIMIT, WCU_LIMIT};
use super::profile::{documented_profiles, Error, Profile};
use super::simulation::{simulate, Simulation};
use super::traffic::ROLLOUT_DEVICES_PER_SECOND;
use fleet_testkit::capacity::write_units;

/// The generated report.
pub const REPORT_PATH: &str = "docs/key-distribution.md";

/// The markdown section of one simulation.
pub fn render(sim: &Simulation) -> String {
    let p = &sim.profile;
    let w = &sim.workload;
    let s = &sim.sizes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {}\n\n`{}`: {}\n",
        p.name,
        sim.source,
        p.description.trim()
    );
    let _ = writeln!(
        out,
        "| users | devices | devices per user (min / median / max) | events/s | ingest requests/s | dashboard opens/s | other reads/s |\n|---|---|---|---|---|---|---|\n| {} | {} | {} / {} / {} | {} | {} | {} | {} |\n",
        group(w.users),
        group(w.devices),
        w.fleet_min,
        w.fleet_median,
        group(u64::from(w.fleet_max)),
        num(w.events_per_second),
        num(w.ingest_requests_per_second),
        num(w.dashboard_per_second),
        num(w.other_reads_per_second),
    );
    let types: Vec<String> = p
        .events
        .types
        .iter()
        .map(|(t, share)| format!("{t} {share}"))
        .collect();
    let hot = p
        .events
        .hot_devices
        .as_ref()
        .map_or("none".to_string(), |h| {
            format!(
                "{} at {} events/min",
                group(h.count),
                h.per_device_per_minute
            )
        });
    let _ = writeln!(
        out,
        "Events: {} per device per minute, batches of {}, hot devices: {hot}; types: {}. Shards: `ACTIVE_STATUS_SHARDS` {}, `STATUS_SHARDS` {}, `SEARCHABLE_EVENT_TYPES` {}, `DEVICES_PER_SHARD` {}. Seed {}.\n",
        p.events.per_device_per_minute,
        p.events.batch_size,
        types.join(", "),
        sim.shards.active_status,
        sim.shards.status,
        sim.shards
            .searchable
            .iter()
            .map(|(t, n)| format!("{t}:{n}"))
            .collect::<Vec<_>>()
            .join(","),
        p.devices_per_shard(),
        p.seed,
    );
    let r = &sim.rollout_peak;
    let _ = writeln!(
        out,
        "Device twin (assumed rates, profile `twin`): {} desired changes and {} commands per device a month, {} fleet-wide changes a month reaching every device; their writes and reads are in the device and live-state partitions above (a document of {} B). A fleet-wide change of the largest fleet ({} devices) at the worker's pace of {} devices/s takes {} s: the owner's partition reads {} RCU/s while it runs (limit 3,000), one live-state partition takes {} WCU/s, each device's own key {} WCU once.\n",
        p.twin.desired_changes_per_device_per_month,
        p.twin.commands_per_device_per_month,
        p.twin.rollouts_per_month,
        s.twin_document,
        group(r.devices),
        group(ROLLOUT_DEVICES_PER_SECOND as u64),
        num(r.seconds),
        num(r.owner_partition_rcu),
        num(r.state_partition_wcu),
        num(r.device_key_wcu),
    );
    let events: Vec<String> = s
        .events
        .iter()
        .map(|(t, b, g1, g2)| {
            format!(
                "{t} {b} B ({} WCU), GSI1 {g1} B, GSI2 {g2} B",
                write_units(*b)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "Item sizes (real items, DynamoDB's size rules): event {}; device live state {} B ({} WCU per update), its GSI1 entry {} B; profile {} B; registration {} B.\n",
        events.join("; "),
        s.state,
        write_units(s.state),
        s.state_gsi1,
        s.profile,
        s.registration,
    );
    for table in &sim.tables {
        let _ = writeln!(out, "### {}\n", table.name);
        let peak_w = table.top_writes.first().map_or(0.0, |k| k.wcu);
        let peak_r = table.top_reads.first().map_or(0.0, |k| k.rcu);
        let _ = writeln!(
            out,
            "{} partition keys with traffic; {} WCU/s and {} RCU/s in all. The busiest key uses {} of a partition's 1,000 WCU/s; the most read {} of its 3,000 RCU/s.\n",
            group(table.keys),
            num(table.wcu),
            num(table.rcu),
            pct(peak_w / WCU_LIMIT),
            pct(peak_r / RCU_LIMIT),
        );
        for (title, list) in [("writes", &table.top_writes), ("reads", &table.top_reads)] {
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "Top keys by {title}:\n\n| key | holds | WCU/s | share of writes | RCU/s | share of reads |\n|---|---|---|---|---|---|"
            );
            for load in list.iter().take(5) {
                let (ws, rs) = table.shares(load);
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} | {} |",
                    load.key,
                    load.kind.describe(),
                    num(load.wcu),
                    pct(ws),
                    num(load.rcu),
                    pct(rs)
                );
            }
            out.push('\n');
        }
        if table.flags.is_empty() {
            let _ = writeln!(
                out,
                "**Verdict: fine.** No key over 1,000 WCU/s, 3,000 RCU/s or 10% of the {}'s traffic.\n",
                table.name
            );
            continue;
        }
        let limit = table.flags.iter().any(|f| f.over_limit);
        let _ = writeln!(
            out,
            "**Verdict: {}.**\n",
            if limit {
                "throttles: keys over DynamoDB's per-partition limits"
            } else {
                "uneven but under the per-partition limits"
            }
        );
        // A sharded family's keys are flagged together: one line per family.
        let mut lines: Vec<(String, &Flag, Vec<String>)> = Vec::new();
        for f in &table.flags {
            let (prefix, shard) = match &f.load.family {
                Some(_) => f
                    .load
                    .key
                    .rsplit_once('#')
                    .map_or((f.load.key.clone(), None), |(p, s)| {
                        (p.to_string(), Some(s))
                    }),
                None => (f.load.key.clone(), None),
            };
            match lines.iter_mut().find(|(p, ..)| *p == prefix) {
                Some((_, _, shards)) => shards.extend(shard.map(str::to_string)),
                None => lines.push((prefix, f, shard.map(str::to_string).into_iter().collect())),
            }
        }
        for (prefix, f, shards) in &mut lines {
            shards.sort_by_key(|s| s.parse::<u32>().unwrap_or(u32::MAX));
            let key = if shards.is_empty() {
                format!("`{prefix}`")
            } else {
                format!("`{prefix}#{{{}}}`", shards.join(","))
            };
            let _ = writeln!(
                out,
                "- {key} ({}): {}. Fix: {}.",
                f.load.kind.describe(),
                f.reasons.join("; "),
                f.fix
            );
        }
        let mut settings: BTreeMap<&str, (u16, u16)> = BTreeMap::new();
        for f in &table.flags {
            if let (Some(n), Some(family)) = (f.suggested_shards, &f.load.family) {
                let e = settings.entry(family.setting).or_insert((family.shards, n));
                e.1 = e.1.max(n);
            }
        }
        for (setting, (now, needed)) in settings {
            if needed > now {
                let beyond = if needed > MAX_SHARDS {
                    format!(" That is beyond the {MAX_SHARDS} the configuration accepts, and every {} read would scatter over that many Queries: at this rate the key needs a finer time bucket than a day", PatternId::EventsByType)
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "- Shard setting that fixes every flagged family of the {}: `{setting}` = {} (now {now}).{beyond}",
                    table.name,
                    group(u64::from(needed))
                );
            }
        }
        if table.unlisted_over_limit() > 0 {
            let _ = writeln!(
                out,
                "- and {} more keys over a limit.",
                group(table.unlisted_over_limit())
            );
        }
        out.push('\n');
    }
    let devices = w.devices.max(1) as f64 / 1e6;
    let _ = writeln!(
        out,
        "### Offline detection (alarm-watch)\n\n| offline alarms a day | detector read units a day | offline alarm write units a day | due-entry moves, write units a day (ingest) | per million devices a day: detector reads / alarm writes / due moves | outage storm WCU/s: busiest DUE# / OPEN# shard |\n|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} / {} / {} | {} / {} |\n",
        num(w.offline_alarms_per_day),
        num(w.detector_read_units_per_day),
        num(w.offline_write_units_per_day),
        num(w.due_move_write_units_per_day),
        num(w.detector_read_units_per_day / devices),
        num(w.offline_write_units_per_day / devices),
        num(w.due_move_write_units_per_day / devices),
        num(w.storm_wcu_per_due_shard),
        num(w.storm_wcu_per_open_shard),
    );
    for org in &sim.orgs {
        render_org(&mut out, org);
    }
    if let Some(f) = &sim.firmware {
        render_firmware(&mut out, f);
    }
    out
}

/// The staged firmware rollout's section: a healthy device's write units, the stages' timing
/// against issue 40's goal, and the keys loaded while the last stage is offered.
fn render_firmware(out: &mut String, f: &FirmwareRolloutPeak) {
    let stages: Vec<String> = f.stages.iter().map(|s| format!("{s} %")).collect();
    let _ = writeln!(
        out,
        "### Staged firmware rollout (issue 40) to the largest fleet ({} devices)\n\n\
         The engine as built (docs/design.md section 15). Plan: stages {}, a soak of {}, {} \
         healthy check-ins, {} % success. Assumed device: it checks in every {} (the profile's \
         batch interval) at a random phase; at its first check-in after the walk offered it, it \
         gets the offer, downloads, installs and reboots before its next check-in, where it \
         reports the new version; {} more check-ins make it succeed. The worker walks the target \
         a page of {} a turn in a lane of its own, at most {} devices a second for {} s of each \
         one-minute run (a walk a run at most): one whole walk takes {}, {} devices a second \
         on average.\n",
        group(f.devices),
        stages.join(", "),
        hours(f.soak_seconds),
        f.healthy_check_ins,
        f.success_percent,
        hours(f.wake_seconds),
        f.healthy_check_ins,
        shared::ops::twin::rollout::ROLLOUT_PAGE,
        group(shared::ops::twin::rollout::ROLLOUT_DEVICES_PER_SECOND as u64),
        num(super::firmware::WORKER_RUN_SECONDS),
        hours(f.walk_seconds),
        num(f.walk_devices_per_second),
    );
    let _ = writeln!(
        out,
        "**Write units per healthy device: {}** (issue 40's goal: at most 3), priced on the real \
         items with a live state of {} B with its part; ingestion's own live-state writes left out (the part's moves ride on them).\n\n\
         | step | write units |\n|---|---|",
        f.write_units_per_device(),
        group(f.marked_state_bytes),
    );
    for s in &f.steps {
        let _ = writeln!(out, "| {} | {} |", s.step, s.write_units);
    }
    let _ = writeln!(
        out,
        "\nBeside them, the worker's walks checkpoint the rollout item ({} B at its largest) every \
         {} s of walking and when a run stops ({} checkpoints a walk of {} devices; {:.1} walks \
         from start to done): **{:.4} write units a device**, so **{:.2} in all** per healthy \
         device.",
        group(f.rollout_bytes),
        shared::ops::twin::rollout::WALK_CHECKPOINT_SECONDS,
        num(f.checkpoints_per_walk),
        group(f.devices),
        f.walks,
        f.checkpoint_write_units,
        f.all_write_units_per_device(),
    );
    let _ = writeln!(
        out,
        "\n| stage | devices | opens after | meets its criterion after (the last: done) |\n|---|---|---|---|"
    );
    for (k, t) in f.timings.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {k} ({} %) | {} | {} | {} |",
            t.percent,
            group(t.devices),
            hours(t.opens_at),
            hours(t.met_after),
        );
    }
    let verdict = if f.completion_seconds <= f.goal_seconds {
        "within it"
    } else {
        "over it: each stage waits for its devices' offer, reboot and healthy check-ins, and only then soaks"
    };
    let _ = writeln!(
        out,
        "\n**Completion: {}** from start to done; issue 40's goal, stages x soak + 2 wake \
         intervals, is {}: {verdict}.\n\n\
         While the last stage is offered (units per second; the walk's pace sets the rate):\n\n\
         | key | holds | WCU/s | RCU/s | of the partition's limit |\n|---|---|---|---|---|",
        hours(f.completion_seconds),
        hours(f.goal_seconds),
    );
    for k in &f.keys {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            k.key,
            k.holds,
            num(k.wcu),
            num(k.rcu),
            pct(k.of_limit()),
        );
    }
    if let Some(k) = f.busiest() {
        let _ = writeln!(
            out,
            "\n**Busiest key of the rollout: `{}`** ({}): {} WCU/s and {} RCU/s, {} of a partition's limit.\n",
            k.key,
            k.holds,
            num(k.wcu),
            num(k.rcu),
            pct(k.of_limit()),
        );
    }
}

/// An organization's section: its ordinary moment and bursts, each key's units a second while
/// it lasts against the per-partition limits, and its busiest key.
fn render_org(out: &mut String, org: &OrgReport) {
    let _ = writeln!(
        out,
        "### Organization `{}` ({} devices, {} members)\n\n\
         Its fleet is an owner like any other, under the owner key `org:{}`: its devices' keys, \
         live-state partitions ({} of them) and due entries are in the tables above. At an \
         ordinary moment its members make {} organization requests a second, each reading the \
         caller's membership on the caller's own `MEMBER#` partition ({} RCU/s in all, 0.5 per \
         request). The bursts below are peaks, not averages: each key's steady load plus the \
         burst, in units per second while the burst lasts.\n\n\
         | scenario | lasts | key | table | holds | WCU/s | RCU/s | of the partition's limit |\n|---|---|---|---|---|---|---|---|",
        org.org,
        group(org.devices),
        group(u64::from(org.members)),
        org.org,
        group(u64::from(org.steady.partitions)),
        num(org.requests_per_second),
        num(org.membership_rcu),
    );
    for s in &org.scenarios {
        for (n, k) in s.keys.iter().enumerate() {
            let lasts = if s.seconds > 0.0 {
                format!("{} s", num(s.seconds))
            } else {
                "steady".to_string()
            };
            let _ = writeln!(
                out,
                "| {} | {} | `{}` | {} | {} | {} | {} | {} |",
                if n == 0 { s.name } else { "" },
                if n == 0 { lasts.as_str() } else { "" },
                k.key,
                k.table,
                k.holds,
                num(k.wcu),
                num(k.rcu),
                pct(k.of_limit()),
            );
        }
    }
    out.push('\n');
    for s in &org.scenarios {
        let _ = writeln!(out, "- **{}**: {}.", s.name, s.what);
    }
    if let Some((scenario, k)) = org.busiest() {
        let verdict = if k.over_limit() {
            "over DynamoDB's per-partition limits: this key throttles"
        } else {
            "under DynamoDB's per-partition limits"
        };
        let _ = writeln!(
            out,
            "\n**Busiest key of the organization: `{}`** ({}) during the {scenario}: {} WCU/s and {} RCU/s, {} of a partition's limit (1,000 WCU/s, 3,000 RCU/s): {verdict}.\n",
            k.key,
            k.holds,
            num(k.wcu),
            num(k.rcu),
            pct(k.of_limit()),
        );
    }
    let _ = writeln!(
        out,
        "With the same activity per member, the incident's reads of the owner partition reach 3,000 RCU/s at {} members (the limit per organization, `MAX_MEMBERS_PER_ORG`, is {}, under it): every poll and opening reads the same first dashboard page there.\n",
        group(org.incident_members_at_read_limit.floor() as u64),
        group(shared::model::org::MAX_MEMBERS_PER_ORG),
    );
}

/// The whole `docs/key-distribution.md` for `sims`, with `other_sections` (what models above
/// the simulator add, rendered by the caller: the webhook outage storm of `cost::webhooks`)
/// after the summary table.
pub fn render_report(sims: &[Simulation], other_sections: &str) -> String {
    let mut out = String::from(
        "# Key distribution: simulated load per partition key\n\n\
         Generated by `make simulate` (`cargo run -p fleet-perf -- simulate`) from the profiles in \
         `bench/profiles/`; do not edit by hand. The simulator draws each fleet with a seeded RNG, \
         builds every key with the real builders of `shared::model::keys` and the real shard function and \
         counts, prices the real items with DynamoDB's size rules (`local/testkit/src/capacity.rs`), and adds \
         up steady-state units per second per partition key. A key is flagged over 1,000 WCU/s or \
         3,000 RCU/s (DynamoDB's per-partition limits) or over 10% of its table's or index's traffic \
         (docs/key-distribution.md's target); for a write-sharded key it gives the shard count that fixes it \
         (`shard::shards_for_peak_wcu`: 2x headroom, and at most 10% per shard).\n\n\
         Assumptions: rates are steady averages (no diurnal peak); every device is `active`; \
         API Gateway spreads a device's batches over containers, so every ingest request reads \
         the registration (eventually consistent) and the device's live state (consistent; a per-container cache \
         is assumed to miss); event values are numbers; the dashboard, AP-04 and AP-05 reads \
         are spread evenly over users or devices; each read returns one page (at most 50 events). \
         Searchable types (docs/design.md, \"The event-type index\"): each event's own GSI1 entry is \
         under its device and type; every batch holding a searchable type puts that hour's type mark \
         again (a table write; an identical put changes no index entry), and the type's shared \
         `TYPE#` partitions take one mark per device, type and hour a device sends the type in \
         (Poisson events: 1 - e^(-rate x hour) of the hours); AP-09 reads one page of marks per \
         shard and at most 25 devices' own keys. Offline detection (docs/design.md, \"Offline \
         detection\"): every reporting device is on the due index (GSI3 `DUE#`), whose entry moves \
         with its `SEEN#` entry; `offline.per_day` of the devices go silent a day (default 1%, an \
         assumption) and are raised by the detector (one transaction each) and cleared by their next \
         batch; the detector Queries its 64 `DUE#` and 16 `REMIND#` shards every minute. The outage \
         storm is every watched device due within one 15-minute window.\n\n",
    );
    out.push_str("| profile | devices | events/s | base table peak WCU/s | GSI1 peak WCU/s | GSI2 peak WCU/s | GSI3 peak WCU/s | outage storm WCU/s (DUE# / OPEN# shard) | verdict |\n|---|---|---|---|---|---|---|---|---|\n");
    for sim in sims {
        let peak = |t: &TableLoad| t.top_writes.first().map_or(0.0, |k| k.wcu);
        let w = &sim.workload;
        let limit = sim
            .tables
            .iter()
            .any(|t| t.flags.iter().any(|f| f.over_limit))
            || w.storm_wcu_per_due_shard > WCU_LIMIT
            || w.storm_wcu_per_open_shard > WCU_LIMIT
            || sim
                .orgs
                .iter()
                .filter_map(|o| o.busiest())
                .any(|(_, k)| k.over_limit());
        let uneven = sim.tables.iter().any(|t| !t.flags.is_empty());
        let verdict = if limit {
            "keys over the per-partition limits"
        } else if uneven {
            "under the limits; some keys over 10%"
        } else {
            "fine"
        };
        let _ = writeln!(
            out,
            "| [{}](#{}) | {} | {} | {} | {} | {} | {} | {} / {} | {verdict} |",
            sim.profile.name,
            sim.profile.name,
            group(sim.workload.devices),
            num(sim.workload.events_per_second),
            num(peak(&sim.tables[0])),
            num(peak(&sim.tables[1])),
            num(peak(&sim.tables[2])),
            num(peak(&sim.tables[3])),
            num(w.storm_wcu_per_due_shard),
            num(w.storm_wcu_per_open_shard),
        );
    }
    out.push('\n');
    out.push_str(other_sections);
    for sim in sims {
        out.push_str(&render(sim));
    }
    out
}

/// Runs the profiles named in `args` (all documented ones when none is named) and either
/// prints `render(sims)` (profiles named), writes it to `path` (none named), or with `--check`
/// fails when `path` is stale.
pub fn write_or_print(
    profiles: &[std::path::PathBuf],
    check: bool,
    path: &str,
    render: impl FnOnce(&[Simulation]) -> String,
) -> Result<(), Error> {
    let root = fleet_testkit::repo_root();
    let (sims, documented) = if profiles.is_empty() {
        (documented_simulations(&root)?, true)
    } else {
        (
            &*Box::leak(simulate_all(&root, profiles)?.into_boxed_slice()),
            false,
        )
    };
    let text = render(sims);
    if !documented {
        print!("{text}");
        return Ok(());
    }
    let full = root.join(path);
    if check {
        let current = std::fs::read_to_string(&full).unwrap_or_default();
        if current != text {
            return Err(format!("{path} is stale: run `make simulate` and `make cost`").into());
        }
        return Ok(());
    }
    std::fs::write(&full, text)?;
    println!("wrote {path}");
    Ok(())
}

/// The documented profiles' simulations, made once per process: the key distribution and the
/// cost model both render them (the docs check of `make test` renders both).
fn documented_simulations(root: &std::path::Path) -> Result<&'static [Simulation], Error> {
    static DOCUMENTED: std::sync::OnceLock<Vec<Simulation>> = std::sync::OnceLock::new();
    if let Some(sims) = DOCUMENTED.get() {
        return Ok(sims);
    }
    let sims = simulate_all(root, &documented_profiles(root)?)?;
    Ok(DOCUMENTED.get_or_init(|| sims))
}

/// The simulations of `paths`, in their order, on as many threads as there are cores (each is
/// independent and CPU-bound; one at a time per core bounds the memory).
fn simulate_all(
    root: &std::path::Path,
    paths: &[std::path::PathBuf],
) -> Result<Vec<Simulation>, Error> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(paths.len().max(1));
    let mut done: Vec<(usize, Result<Simulation, Error>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break mine };
                        let shown = p.strip_prefix(root).unwrap_or(p).display().to_string();
                        mine.push((i, Profile::load(p).and_then(|pr| simulate(pr, &shown))));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a simulation thread panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, sim)| sim).collect()
}
