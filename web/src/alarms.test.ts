import { describe, expect, it } from 'vitest';
import { conditionText, durationText, EMPTY_RULE_FORM, equalsValue, formOfRule, ruleBody, ruleFieldOf, scopeText, severityRank, type RuleForm } from './alarms';
import type { Schemas } from './api/client';

const form = (change: Partial<RuleForm>): RuleForm => ({ ...EMPTY_RULE_FORM, name: 'Too hot', eventType: 'temperature', scopeValue: 'thermostat', conditionValue: '80', ...change });

describe('the rule form builds the API body', () => {
  it('a threshold rule with hysteresis, a duration and reminders', () => {
    const { body, errors } = ruleBody(form({ clearKind: 'below', clearValue: '75', forSeconds: '300', remindEvery: '3600', severity: 'critical' }));
    expect(errors).toEqual({});
    expect(body).toEqual({
      name: 'Too hot',
      eventType: 'temperature',
      scope: { deviceType: 'thermostat' },
      condition: { above: 80 },
      clear: { below: 75 },
      forSeconds: 300,
      severity: 'critical',
      remindEverySeconds: 3600,
    });
  });
  it('a new rule leaves out what was not given; an edited one clears it with null', () => {
    const created = ruleBody(form({ forSeconds: '' })).body!;
    expect(created).not.toHaveProperty('clear');
    expect(created).not.toHaveProperty('remindEverySeconds');
    expect(created.forSeconds).toBe(0);
    const edited = ruleBody(form({}), true).body!;
    expect(edited.clear).toBeNull();
    expect(edited.remindEverySeconds).toBeNull();
  });
  it('outside a range, scoped to a device or a tag', () => {
    expect(ruleBody(form({ conditionKind: 'outside', conditionValue: '5', conditionHigh: ' 80.5 ', scopeKind: 'tag', scopeValue: ' cellar ' })).body).toMatchObject({
      condition: { outside: [5, 80.5] },
      scope: { tag: 'cellar' },
    });
    expect(ruleBody(form({ scopeKind: 'deviceId', scopeValue: 'thermo-kitchen' })).body?.scope).toEqual({ deviceId: 'thermo-kitchen' });
  });
  it('equals sends flags and numbers as such, anything else as text', () => {
    expect(equalsValue('open')).toBe('open');
    expect(equalsValue('true')).toBe(true);
    expect(equalsValue('false')).toBe(false);
    expect(equalsValue('3')).toBe(3);
    expect(ruleBody(form({ eventType: 'door', conditionKind: 'equals', conditionValue: 'open' })).body?.condition).toEqual({ equals: 'open' });
  });
  it('text where a number belongs is caught beside its field, and nothing is sent', () => {
    const { body, errors } = ruleBody(form({ conditionValue: 'hot', clearKind: 'outside', clearValue: '1', clearHigh: '', forSeconds: '5 min', remindEvery: 'hourly' }));
    expect(body).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(['clear', 'condition', 'forSeconds', 'remindEvery']);
    expect(errors.clear).toMatch(/high end/);
  });
  it('values the API judges (empty name, negative seconds) are sent for the API to answer', () => {
    const { body, errors } = ruleBody(form({ name: ' ', forSeconds: '-5' }));
    expect(errors).toEqual({});
    expect(body).toMatchObject({ name: '', forSeconds: -5 });
  });
  it('an edited rule shows in the form as it was typed, and builds the same body back', () => {
    const rule: Omit<Schemas['Rule'], 'createdAt' | 'updatedAt'> = {
      ruleId: 'r1',
      version: 3,
      name: 'Door left open',
      eventType: 'door',
      scope: { tag: 'garage' },
      condition: { outside: [2, 9] },
      clear: { equals: false },
      forSeconds: 120,
      severity: 'minor',
      remindEverySeconds: 900,
    };
    const shown = formOfRule(rule);
    expect(shown).toMatchObject({ scopeKind: 'tag', scopeValue: 'garage', conditionKind: 'outside', conditionValue: '2', conditionHigh: '9', clearKind: 'equals', clearValue: 'false', remindEvery: '900' });
    const sent: Record<string, unknown> = { ...rule };
    delete sent.ruleId;
    delete sent.version;
    expect(ruleBody(shown, true).body).toEqual(sent);
  });
});

describe("the API's 400 goes beside its field", () => {
  it('nested and indexed names go to their form field', () => {
    expect(ruleFieldOf('scope.deviceId')).toBe('scope');
    expect(ruleFieldOf('condition.outside[1]')).toBe('condition');
    expect(ruleFieldOf('clear')).toBe('clear');
    expect(ruleFieldOf('remindEverySeconds')).toBe('remindEvery');
    expect(ruleFieldOf('eventType')).toBe('eventType');
  });
  it('a field the form does not have goes above the form', () => {
    expect(ruleFieldOf('ruleId')).toBeNull();
    expect(ruleFieldOf(undefined)).toBeNull();
  });
});

describe('rules and alarms in words', () => {
  it('conditions, scopes and durations', () => {
    expect(conditionText({ outside: [5, 80] })).toBe('outside 5 to 80');
    expect(conditionText({ equals: 'open' })).toBe('equals "open"');
    expect(conditionText({ below: 5 })).toBe('below 5');
    expect(scopeText({ deviceType: 'thermostat' })).toBe('devices of type thermostat');
    expect(durationText(45)).toBe('45 s');
    expect(durationText(900)).toBe('15 min');
    expect(durationText(9000)).toBe('2 h 30 min');
  });
  it('severities rank critical first', () => {
    expect(['warning', 'critical', 'minor', 'major'].sort((a, b) => severityRank(a) - severityRank(b))).toEqual(['critical', 'major', 'minor', 'warning']);
  });
});
