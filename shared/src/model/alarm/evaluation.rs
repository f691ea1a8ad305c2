//! Evaluation, without I/O: the transitions (raised, cleared) a batch of readings causes on
//! one device, given its alarm statuses and its owner's rules, and the writes they take.

use super::ids::AlarmSource;
use super::rule::Rule;
use super::severity::Severity;
use super::status::{AlarmReading, AlarmStatus, AlarmStatuses};
use super::OFFLINE;
use crate::model::ids::{DeviceId, DeviceType, EventId, EventType, Tag};
use crate::model::readings::EventValue;
use crate::model::timestamp::Timestamp;

/// A change of one device's alarms that a batch (or the offline detector) caused.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// A new alarm.
    Raised {
        /// Its source.
        source: AlarmSource,
        /// Its severity.
        severity: Severity,
        /// When (the reading's time; the detector's time for offline).
        at: Timestamp,
        /// The reading that raised it (none for offline).
        reading: Option<AlarmReading>,
    },
    /// An open alarm cleared.
    Cleared {
        /// Its source.
        source: AlarmSource,
        /// When it was raised (with the source, its key).
        raised_at: Timestamp,
        /// Its severity.
        severity: Severity,
        /// When it cleared.
        at: Timestamp,
        /// The reading that cleared it (none when its rule was deleted).
        reading: Option<AlarmReading>,
    },
}

/// One reading of a batch, as evaluation needs it.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// Event id.
    pub id: &'a EventId,
    /// Type.
    pub event_type: &'a EventType,
    /// Value.
    pub value: &'a EventValue,
    /// Time.
    pub at: Timestamp,
}

/// The device a batch is evaluated for.
pub struct Subject<'a> {
    /// Its id.
    pub device: &'a DeviceId,
    /// Its type.
    pub device_type: &'a DeviceType,
    /// Its tags.
    pub tags: &'a [Tag],
}

/// The most alarm writes (transaction actions) one batch's transitions may take: DynamoDB's
/// 100 actions per transaction less the live state's update that goes with them and the
/// check that the rules they open alarms for still exist (`ops::alarms::record::rule_check`).
/// An owner's 32 rules take at most 96, and an offline clear 2.
pub const MAX_ALARM_WRITES: usize = 98;

/// The writes that record one source's transitions of one batch (see
/// `ops::alarms::transition_actions`): a clear of the alarm that was open before the batch
/// updates it, a new alarm is one put, and the source's open pointer is put or deleted when the
/// open alarm changes. At most three.
pub fn alarm_writes(transitions: &[Transition]) -> usize {
    let mut clears_earlier = false;
    let mut raised: Option<Timestamp> = None;
    let mut open_at_end = false;
    for t in transitions {
        match t {
            Transition::Raised { at, .. } => {
                raised = Some(*at);
                open_at_end = true;
            }
            Transition::Cleared { raised_at, .. } if Some(*raised_at) == raised => {
                open_at_end = false;
            }
            Transition::Cleared { .. } => clears_earlier = true,
        }
    }
    usize::from(clears_earlier)
        + usize::from(raised.is_some())
        + usize::from(clears_earlier || open_at_end)
}

/// Evaluates `readings` (one device's batch) against `rules`: the statuses after it and the
/// transitions, in time order. Only readings newer than `newest_before` for their type (the
/// device's latest reading of the type before this batch) count, so a replayed or late batch
/// changes nothing. An open alarm of a rule that no longer exists or no longer covers the
/// device clears with no reading. An open offline alarm clears on the batch's newest reading
/// (the device reports again); only the detector raises one.
///
/// A batch's alarm work is bounded whatever its readings: per rule it nets out to at most a
/// clear of the alarm open before the batch and one new alarm, raised at the batch's first
/// crossing and, if the batch ends clear, cleared at its last clearing reading (a sensor that
/// flaps across a threshold within one batch is one alarm, not one per crossing; its id,
/// `{raisedAt}.{rule}`, is unique because only readings newer than the state's count). The
/// writes stay within [`MAX_ALARM_WRITES`]: the offline clear first, then the rules, then
/// clears of rules that went away; a clear that does not fit keeps its status and happens on
/// a later batch (only possible after many rules were deleted at once).
pub fn evaluate(
    subject: &Subject<'_>,
    rules: &[Rule],
    statuses: &AlarmStatuses,
    readings: &[Observed<'_>],
    newest_before: impl Fn(&EventType) -> Option<i64>,
) -> (AlarmStatuses, Vec<Transition>) {
    let mut next = statuses.clone();
    let mut transitions = Vec::new();
    let mut writes = 0;
    let applicable: Vec<&Rule> = rules
        .iter()
        .filter(|r| {
            r.definition
                .scope
                .covers(subject.device, subject.device_type, subject.tags)
        })
        .collect();
    if let Some(offline) = statuses.get(OFFLINE) {
        if let (Some(raised), Some(severity), Some(last)) = (
            offline.raised_at,
            offline.severity,
            readings.iter().max_by_key(|r| r.at),
        ) {
            let cleared = [Transition::Cleared {
                source: AlarmSource::Offline,
                raised_at: Timestamp::from_epoch_millis(raised).unwrap_or_else(Timestamp::min),
                severity,
                at: last.at,
                reading: Some(AlarmReading {
                    id: last.id.clone(),
                    event_type: last.event_type.clone(),
                    value: last.value.clone(),
                    at: last.at,
                }),
            }];
            writes += alarm_writes(&cleared);
            transitions.extend(cleared);
            next.remove(OFFLINE);
        }
    }
    let mut ordered: Vec<&Observed<'_>> = readings
        .iter()
        .filter(|r| newest_before(r.event_type).is_none_or(|before| r.at.epoch_millis() > before))
        .collect();
    ordered.sort_by_key(|r| (r.at, r.id.as_str()));
    for rule in &applicable {
        let key = rule.rule_id.as_str().to_string();
        let before = next.remove(&key).unwrap_or_default();
        let (status, netted) = evaluate_rule(rule, &before, &ordered);
        let needed = alarm_writes(&netted);
        if writes + needed > MAX_ALARM_WRITES {
            // Unreachable within MAX_RULES_PER_OWNER; kept so no rule set can overflow.
            if before.matters() {
                next.insert(key, before);
            }
            continue;
        }
        writes += needed;
        transitions.extend(netted);
        if status.matters() {
            next.insert(key, status);
        }
    }
    // Open alarms whose rule went away clear, as far as the transaction has room.
    for (source, status) in statuses {
        let Ok(AlarmSource::Rule(id)) = AlarmSource::parse(source) else {
            continue;
        };
        if applicable.iter().any(|r| r.rule_id == id) {
            continue;
        }
        if let (Some(raised), Some(severity)) = (status.raised_at, status.severity) {
            let raised_at = Timestamp::from_epoch_millis(raised).unwrap_or_else(Timestamp::min);
            let cleared = [Transition::Cleared {
                source: AlarmSource::Rule(id),
                raised_at,
                severity,
                at: newest(readings).unwrap_or(raised_at),
                reading: None,
            }];
            if writes + alarm_writes(&cleared) > MAX_ALARM_WRITES {
                continue;
            }
            writes += alarm_writes(&cleared);
            transitions.extend(cleared);
        }
        next.remove(source);
    }
    (next, transitions)
}

/// One rule over a batch's new readings (time order): its status after them and its netted
/// transitions (see [`evaluate`]).
fn evaluate_rule(
    rule: &Rule,
    before: &AlarmStatus,
    ordered: &[&Observed<'_>],
) -> (AlarmStatus, Vec<Transition>) {
    let def = &rule.definition;
    let source = || AlarmSource::Rule(rule.rule_id.clone());
    let mut status = before.clone();
    let mut earlier_cleared: Option<Transition> = None;
    let mut raised: Option<Transition> = None;
    let mut raised_cleared: Option<Transition> = None;
    for r in ordered.iter().filter(|r| *r.event_type == def.event_type) {
        let at = r.at.epoch_millis();
        let reading = || AlarmReading {
            id: r.id.clone(),
            event_type: r.event_type.clone(),
            value: r.value.clone(),
            at: r.at,
        };
        match status.raised_at {
            Some(open) => {
                if def.clears(r.value) {
                    let raised_at =
                        Timestamp::from_epoch_millis(open).unwrap_or_else(Timestamp::min);
                    let cleared = Transition::Cleared {
                        source: source(),
                        raised_at,
                        severity: status.severity.unwrap_or(def.severity),
                        at: r.at,
                        reading: Some(reading()),
                    };
                    if raised.is_some() {
                        raised_cleared = Some(cleared);
                    } else {
                        earlier_cleared = Some(cleared);
                    }
                    status = AlarmStatus::default();
                }
            }
            None if def.condition.holds(r.value) => {
                let since = *status.pending_since.get_or_insert(at);
                if at - since >= (def.for_seconds as i64) * 1000 {
                    // The batch's first raise is its one new alarm; a later raise reopens it.
                    let first = raised.get_or_insert_with(|| Transition::Raised {
                        source: source(),
                        severity: def.severity,
                        at: r.at,
                        reading: Some(reading()),
                    });
                    let Transition::Raised { at: first_at, .. } = first else {
                        unreachable!("a raise")
                    };
                    raised_cleared = None;
                    status = AlarmStatus {
                        raised_at: Some(first_at.epoch_millis()),
                        severity: Some(def.severity),
                        pending_since: None,
                    };
                }
            }
            None => status.pending_since = None,
        }
    }
    let netted = earlier_cleared
        .into_iter()
        .chain(raised)
        .chain(raised_cleared)
        .collect();
    (status, netted)
}

fn newest(readings: &[Observed<'_>]) -> Option<Timestamp> {
    readings.iter().map(|r| r.at).max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alarm::ids::RuleId;
    use crate::model::alarm::rule::tests::rule;
    use crate::model::alarm::MAX_RULES_PER_OWNER;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    fn temp_rule(extra: Value) -> Rule {
        let mut body = json!({"name": "hot", "eventType": "temperature",
            "scope": {"deviceType": "thermostat"}, "condition": {"above": 80},
            "clear": {"below": 75}, "severity": "major"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        rule(body)
    }

    struct Batch {
        ids: Vec<EventId>,
        types: Vec<EventType>,
        values: Vec<EventValue>,
        ats: Vec<Timestamp>,
    }

    fn batch(values: &[(f64, i64)]) -> Batch {
        Batch {
            ids: (0..values.len())
                .map(|i| EventId::parse(format!("e{i}-{}", values[i].1)).unwrap())
                .collect(),
            types: values
                .iter()
                .map(|_| EventType::parse("temperature").unwrap())
                .collect(),
            values: values.iter().map(|(v, _)| EventValue::Number(*v)).collect(),
            ats: values
                .iter()
                .map(|(_, s)| Timestamp::from_epoch_millis(1_700_000_000_000 + s * 1000).unwrap())
                .collect(),
        }
    }

    impl Batch {
        fn observed(&self) -> Vec<Observed<'_>> {
            (0..self.ids.len())
                .map(|i| Observed {
                    id: &self.ids[i],
                    event_type: &self.types[i],
                    value: &self.values[i],
                    at: self.ats[i],
                })
                .collect()
        }
    }

    fn run(
        rules: &[Rule],
        statuses: &AlarmStatuses,
        values: &[(f64, i64)],
        before: Option<i64>,
    ) -> (AlarmStatuses, Vec<Transition>) {
        let device = DeviceId::parse("d").unwrap();
        let device_type = DeviceType::parse("thermostat").unwrap();
        let subject = Subject {
            device: &device,
            device_type: &device_type,
            tags: &[],
        };
        let b = batch(values);
        evaluate(&subject, rules, statuses, &b.observed(), |_| before)
    }

    fn raised(t: &[Transition]) -> usize {
        t.iter()
            .filter(|t| matches!(t, Transition::Raised { .. }))
            .count()
    }
    fn cleared(t: &[Transition]) -> usize {
        t.iter()
            .filter(|t| matches!(t, Transition::Cleared { .. }))
            .count()
    }

    #[test]
    fn a_hundred_readings_over_the_threshold_raise_one_alarm_and_hysteresis_clears_it_once() {
        let rules = [temp_rule(json!({}))];
        let hot: Vec<(f64, i64)> = (0..100).map(|i| (90.0, i)).collect();
        let (s, t) = run(&rules, &AlarmStatuses::new(), &hot, None);
        assert_eq!((raised(&t), cleared(&t)), (1, 0));
        // Between the thresholds nothing changes; below the clear threshold it clears once.
        let (s2, t) = run(&rules, &s, &[(78.0, 200), (81.0, 201), (79.0, 202)], None);
        assert!(t.is_empty(), "{t:?}");
        assert_eq!(s2, s);
        let (s3, t) = run(&rules, &s2, &[(74.0, 300), (70.0, 301), (78.0, 302)], None);
        assert_eq!((raised(&t), cleared(&t)), (0, 1));
        assert!(s3.is_empty(), "a cleared rule keeps no status");
    }

    fn writes_per_source(t: &[Transition]) -> BTreeMap<String, usize> {
        let mut by_source: BTreeMap<String, Vec<Transition>> = BTreeMap::new();
        for tr in t {
            let (Transition::Raised { source, .. } | Transition::Cleared { source, .. }) = tr;
            by_source
                .entry(source.as_str().to_string())
                .or_default()
                .push(tr.clone());
        }
        by_source
            .into_iter()
            .map(|(k, v)| (k, alarm_writes(&v)))
            .collect()
    }

    fn alarm_keys(t: &[Transition]) -> Vec<(String, Timestamp)> {
        t.iter()
            .filter_map(|tr| match tr {
                Transition::Raised { source, at, .. } => Some((source.as_str().to_string(), *at)),
                Transition::Cleared { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_flapping_batch_across_two_rules_nets_to_one_alarm_per_rule() {
        let hot = temp_rule(json!({}));
        let cold =
            temp_rule(json!({"name": "cold", "condition": {"below": 10}, "clear": {"above": 15}}));
        let rules = [hot.clone(), cold.clone()];
        // 100 readings alternating 90, 0, 90, ...: every reading crosses both rules.
        let flapping: Vec<(f64, i64)> = (0..100)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (s, t) = run(&rules, &AlarmStatuses::new(), &flapping, None);
        // One new alarm per rule, raised at its first crossing; the batch ends on 0.0 (cold open,
        // hot cleared by it), so hot's alarm is raised and cleared, cold's stays open.
        assert_eq!((raised(&t), cleared(&t)), (2, 1), "{t:?}");
        let first = |n: i64| Timestamp::from_epoch_millis(1_700_000_000_000 + n * 1000).unwrap();
        let mut keys = alarm_keys(&t);
        keys.sort();
        let mut expected = vec![
            (hot.rule_id.as_str().to_string(), first(0)),
            (cold.rule_id.as_str().to_string(), first(1)),
        ];
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(
            s[cold.rule_id.as_str()].raised_at,
            Some(first(1).epoch_millis())
        );
        assert!(!s.contains_key(hot.rule_id.as_str()));
        let writes: usize = writes_per_source(&t).values().sum();
        assert!(writes <= 6, "{writes} writes for two rules");
        // The next flapping batch clears the open alarm and nets to one new one per rule.
        let later: Vec<(f64, i64)> = (100..200)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (_, t) = run(&rules, &s, &later, None);
        assert!(writes_per_source(&t).values().all(|w| *w <= 3), "{t:?}");
        let keys = alarm_keys(&t);
        let unique: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "alarm keys repeat: {keys:?}");
    }

    #[test]
    fn readings_sharing_one_time_raise_one_alarm_per_rule() {
        let rules = [temp_rule(json!({}))];
        // Four readings at the same instant, flapping: ids differ, the time does not.
        let same: Vec<(f64, i64)> = vec![(90.0, 5), (70.0, 5), (91.0, 5), (60.0, 5)];
        let (s, t) = run(&rules, &AlarmStatuses::new(), &same, None);
        assert_eq!(alarm_keys(&t).len(), 1, "{t:?}");
        assert_eq!(writes_per_source(&t).values().sum::<usize>(), 1);
        assert!(s.is_empty());
    }

    #[test]
    fn every_rule_moving_at_once_stays_within_one_transaction() {
        // An owner's full rule set flapping while as many deleted rules' alarms are open: the
        // writes stay within one transaction; clears that do not fit wait for a later batch.
        let rules: Vec<Rule> = (0..MAX_RULES_PER_OWNER)
            .map(|i| temp_rule(json!({"name": format!("r{i}")})))
            .collect();
        let mut open = AlarmStatuses::new();
        for i in 0..40 {
            let gone = RuleId::parse(&format!("r{:016x}", i + 1)).unwrap();
            open.insert(
                gone.as_str().to_string(),
                AlarmStatus {
                    raised_at: Some(1_600_000_000_000),
                    severity: Some(Severity::Minor),
                    pending_since: None,
                },
            );
        }
        open.insert(
            OFFLINE.into(),
            AlarmStatus {
                raised_at: Some(1_600_000_000_000),
                severity: Some(Severity::Major),
                pending_since: None,
            },
        );
        let flapping: Vec<(f64, i64)> = (0..100)
            .map(|i| (if i % 2 == 0 { 90.0 } else { 0.0 }, i))
            .collect();
        let (s, t) = run(&rules, &open, &flapping, None);
        let writes: usize = writes_per_source(&t).values().sum();
        assert!(writes <= MAX_ALARM_WRITES, "{writes} writes");
        assert_eq!(
            raised(&t),
            MAX_RULES_PER_OWNER,
            "every rule's crossing recorded"
        );
        let still_open = s.values().filter(|st| st.raised_at.is_some()).count();
        assert!(still_open > 0, "deferred clears keep their status");
        // A later quiet batch clears what waited.
        let (s2, t2) = run(&rules, &s, &[(78.0, 500)], None);
        assert!(cleared(&t2) > 0);
        assert!(s2.len() < s.len());
    }

    #[test]
    fn a_replayed_or_late_batch_changes_nothing() {
        let rules = [temp_rule(json!({}))];
        let (s, _) = run(&rules, &AlarmStatuses::new(), &[(90.0, 10)], None);
        let (s, _) = run(&rules, &s, &[(70.0, 20)], Some(10_000));
        let newest = 1_700_000_000_000 + 20_000;
        let (again, t) = run(&rules, &s, &[(90.0, 10)], Some(newest));
        assert!(t.is_empty());
        assert_eq!(again, s);
    }

    #[test]
    fn a_duration_rule_ignores_a_single_spike() {
        let rules = [temp_rule(json!({"forSeconds": 300}))];
        let (s, t) = run(
            &rules,
            &AlarmStatuses::new(),
            &[(90.0, 0), (70.0, 60), (90.0, 120)],
            None,
        );
        assert!(t.is_empty());
        assert!(s.values().all(|s| s.raised_at.is_none()));
        // Holding across readings for the duration raises it, at the reading that completed it.
        let (_, t) = run(&rules, &s, &[(91.0, 300), (92.0, 420)], None);
        assert_eq!(raised(&t), 1);
        match &t[0] {
            Transition::Raised { reading, .. } => {
                assert_eq!(reading.as_ref().unwrap().value, EventValue::Number(92.0))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_open_alarm_of_a_deleted_rule_clears() {
        let rules = [temp_rule(json!({}))];
        let (s, _) = run(&rules, &AlarmStatuses::new(), &[(90.0, 0)], None);
        let (s, t) = run(&[], &s, &[(90.0, 10)], None);
        assert_eq!(cleared(&t), 1);
        assert!(s.is_empty());
    }
}
