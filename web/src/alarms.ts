// Alarm rules and alarms (issue 22), their JSON as docs/openapi.yaml declares it: the pure parts of
// the pages, unit-tested in alarms.test.ts: the rule form's body, where an API error goes on
// the form, and how a condition, a scope or a reading reads for people.

import type { Schemas } from './api/client';
import { dateTime } from './format';

type Rule = Schemas['Rule'];
type Alarm = Schemas['Alarm'];
type Condition = Schemas['ValueCondition'];
type Severity = Schemas['Severity'];

export const SEVERITIES: readonly Severity[] = ['critical', 'major', 'minor', 'warning'];

/** The keys of each member of a union of one-key objects (`{ above } | { below }` -> `'above' | 'below'`). */
type KeysOf<U> = U extends unknown ? keyof U : never;

/** The comparisons of a condition (`ValueCondition`'s keys), as the form offers them. */
export type Comparison = KeysOf<Condition>;
export const COMPARISONS: readonly Comparison[] = ['above', 'below', 'outside', 'equals'];

/** What a rule applies to (`RuleScope`'s keys). */
export type ScopeKind = KeysOf<Schemas['RuleScope']>;
export const SCOPE_KINDS: readonly ScopeKind[] = ['deviceId', 'deviceType', 'tag'];

// ------------------------------------------------------------------ the rule form

/** The rule form as typed: every input is text until the body is built. */
export interface RuleForm {
  name: string;
  eventType: string;
  scopeKind: ScopeKind;
  scopeValue: string;
  conditionKind: Comparison;
  /** The threshold; for `outside`, the low end of the range. */
  conditionValue: string;
  /** For `outside`: the high end of the range. */
  conditionHigh: string;
  clearKind: Comparison | 'none';
  clearValue: string;
  clearHigh: string;
  forSeconds: string;
  severity: Severity;
  /** Seconds; empty for no reminders. */
  remindEvery: string;
}

/** The form's fields that show a message beside them (`form` is the message above it). */
export type RuleField = 'name' | 'eventType' | 'scope' | 'condition' | 'clear' | 'forSeconds' | 'severity' | 'remindEvery';

export const EMPTY_RULE_FORM: RuleForm = {
  name: '',
  eventType: '',
  scopeKind: 'deviceType',
  scopeValue: '',
  conditionKind: 'above',
  conditionValue: '',
  conditionHigh: '',
  clearKind: 'none',
  clearValue: '',
  clearHigh: '',
  forSeconds: '0',
  severity: 'major',
  remindEvery: '',
};

/** The form showing `rule`, for editing. */
export function formOfRule(rule: Omit<Rule, 'createdAt' | 'updatedAt'>): RuleForm {
  const [scopeKind, scopeValue] = Object.entries(rule.scope)[0] as [ScopeKind, string];
  const [conditionKind, conditionValue, conditionHigh] = conditionParts(rule.condition);
  const [clearKind, clearValue, clearHigh] = rule.clear ? conditionParts(rule.clear) : (['none', '', ''] as const);
  return {
    name: rule.name,
    eventType: rule.eventType,
    scopeKind,
    scopeValue,
    conditionKind,
    conditionValue,
    conditionHigh,
    clearKind,
    clearValue,
    clearHigh,
    forSeconds: String(rule.forSeconds ?? 0),
    severity: rule.severity,
    remindEvery: rule.remindEverySeconds ? String(rule.remindEverySeconds) : '',
  };
}

function conditionParts(condition: Condition): [Comparison, string, string] {
  if ('outside' in condition) return ['outside', String(condition.outside[0]), String(condition.outside[1])];
  if ('above' in condition) return ['above', String(condition.above), ''];
  if ('below' in condition) return ['below', String(condition.below), ''];
  return ['equals', String(condition.equals), ''];
}

/** A number typed in a form, or null when the text is not one. */
function number(text: string): number | null {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  const n = Number(trimmed);
  return Number.isFinite(n) ? n : null;
}

/** `equals` compares with a flag, a number or a text: `true`/`false` and numbers are sent as such. */
export function equalsValue(text: string): string | number | boolean {
  const trimmed = text.trim();
  if (trimmed === 'true') return true;
  if (trimmed === 'false') return false;
  const n = number(trimmed);
  return n === null ? text : n;
}

function condition(kind: Comparison, value: string, high: string, field: RuleField, errors: Partial<Record<RuleField, string>>): Condition | undefined {
  if (kind === 'equals') {
    if (value.trim() === '') {
      errors[field] = 'Enter the value to compare with.';
      return undefined;
    }
    return { equals: equalsValue(value) };
  }
  const low = number(value);
  if (low === null) {
    errors[field] = kind === 'outside' ? 'Enter the low end of the range as a number.' : 'Enter the threshold as a number.';
    return undefined;
  }
  if (kind === 'outside') {
    const top = number(high);
    if (top === null) {
      errors[field] = 'Enter the high end of the range as a number.';
      return undefined;
    }
    return { outside: [low, top] };
  }
  return kind === 'above' ? { above: low } : { below: low };
}

/**
 * The JSON body of `POST /me/rules` (or, with `editing`, of `PATCH /me/rules/{ruleId}`) from
 * the form. Only what cannot be sent at all is caught here (a number field that is not a
 * number); every rule about values (ranges, limits, names) is the API's, whose 400 names the
 * field. When editing, emptied optional fields are sent as null so the change is not lost.
 */
export function ruleBody(form: RuleForm, editing = false): { body: Schemas['RulePatch'] | null; errors: Partial<Record<RuleField, string>> } {
  const errors: Partial<Record<RuleField, string>> = {};
  const body: Record<string, unknown> = {
    name: form.name.trim(),
    eventType: form.eventType.trim(),
    scope: { [form.scopeKind]: form.scopeValue.trim() },
    severity: form.severity,
  };
  body.condition = condition(form.conditionKind, form.conditionValue, form.conditionHigh, 'condition', errors);
  if (form.clearKind !== 'none') body.clear = condition(form.clearKind, form.clearValue, form.clearHigh, 'clear', errors);
  else if (editing) body.clear = null;
  const forSeconds = form.forSeconds.trim() === '' ? 0 : number(form.forSeconds);
  if (forSeconds === null) errors.forSeconds = 'Enter a number of seconds (0 fires on the first reading).';
  else body.forSeconds = forSeconds;
  if (form.remindEvery.trim() === '') {
    if (editing) body.remindEverySeconds = null;
  } else {
    const remind = number(form.remindEvery);
    if (remind === null) errors.remindEvery = 'Enter a number of seconds, or leave it empty for no reminders.';
    else body.remindEverySeconds = remind;
  }
  return { body: Object.keys(errors).length ? null : (body as Schemas['RulePatch']), errors };
}

/**
 * Where the API's error field goes on the rule form: `scope.deviceId` beside the scope,
 * `condition.outside[1]` beside the condition, `remindEverySeconds` beside the reminder;
 * null for a field the form does not have (the message goes above the form).
 */
export function ruleFieldOf(apiField: string | undefined | null): RuleField | null {
  if (!apiField) return null;
  const head = apiField.replace(/[.[].*$/, '');
  switch (head) {
    case 'name':
    case 'eventType':
    case 'scope':
    case 'condition':
    case 'clear':
    case 'forSeconds':
    case 'severity':
      return head;
    case 'remindEverySeconds':
      return 'remindEvery';
    default:
      return null;
  }
}

// ------------------------------------------------------------------ for people

function showNumber(value: string | number | boolean): string {
  return typeof value === 'string' ? `"${value}"` : String(value);
}

/** "above 80", "outside 5 to 80", "equals "open"". */
export function conditionText(condition: Condition | null | undefined): string {
  if (!condition) return '';
  if ('outside' in condition) return `outside ${condition.outside[0]} to ${condition.outside[1]}`;
  if ('above' in condition) return `above ${condition.above}`;
  if ('below' in condition) return `below ${condition.below}`;
  return `equals ${showNumber(condition.equals)}`;
}

export function scopeText(scope: Schemas['RuleScope']): string {
  if ('deviceId' in scope) return `device ${scope.deviceId}`;
  if ('deviceType' in scope) return `devices of type ${scope.deviceType}`;
  return `devices tagged ${scope.tag}`;
}

/** "every 90 s", "every 15 min", "every 2 h 30 min". */
export function durationText(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return seconds % 60 ? `${Math.floor(seconds / 60)} min ${seconds % 60} s` : `${seconds / 60} min`;
  const minutes = Math.round((seconds % 3600) / 60);
  return minutes ? `${Math.floor(seconds / 3600)} h ${minutes} min` : `${Math.floor(seconds / 3600)} h`;
}

/** 0 for critical, 3 for warning; unknown severities after them. */
export function severityRank(severity: string | null | undefined): number {
  const i = SEVERITIES.indexOf(severity as Severity);
  return i < 0 ? SEVERITIES.length : i;
}

/** What raised the alarm, in words: "temperature 91.5 at …" (an offline alarm has no reading). */
export function readingText(reading: Alarm['reading']): string {
  if (!reading) return '';
  const value = typeof reading.value === 'string' ? reading.value : String(reading.value);
  return `${reading.type} ${value} at ${dateTime(reading.at)}`;
}

/** The alarm's cause: its rule's name, or "offline". */
export function alarmTitle(alarm: Alarm): string {
  if (alarm.kind === 'offline') return 'Offline';
  return alarm.ruleName ?? alarm.ruleId ?? 'Threshold';
}

export function isOpen(alarm: Alarm): boolean {
  return alarm.state !== 'cleared';
}
