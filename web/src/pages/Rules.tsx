import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, bodyOf, isRoleRefusal, messageOf, type Schemas } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import {
  COMPARISONS,
  conditionText,
  durationText,
  EMPTY_RULE_FORM,
  formOfRule,
  ruleBody,
  ruleFieldOf,
  SCOPE_KINDS,
  scopeText,
  SEVERITIES,
  type Comparison,
  type RuleField,
  type RuleForm,
  type ScopeKind,
} from '../alarms';
import { SeverityBadge } from '../components/AlarmBadges';
import { Confirm } from '../components/Confirm';
import { ListTable } from '../components/ListTable';
import { FieldError as FieldMessage } from '../components/FieldError';

type Rule = Schemas['Rule'];
type Errors = Partial<Record<RuleField | 'form', string>>;

const SCOPE_LABELS: Record<ScopeKind, [string, string]> = {
  deviceId: ['One device', 'Device id'],
  deviceType: ['Devices of a type', 'Device type'],
  tag: ['Devices with a tag', 'Tag'],
};

const COMPARISON_LABELS: Record<Comparison, string> = {
  above: 'above',
  below: 'below',
  outside: 'outside a range',
  equals: 'equal to',
};

/** A rule field's error, under the id `describedBy` names. */
const FieldError = ({ field, errors }: { field: RuleField; errors: Errors }) => <FieldMessage id={`rule-${field}-error`} message={errors[field]} />;

/** `aria-describedby` for an input: its hint and, when there is one, its field's error. */
const describedBy = (field: RuleField, errors: Errors, hint?: string) => [hint ?? '', errors[field] ? `rule-${field}-error` : ''].filter(Boolean).join(' ') || undefined;

/** The inputs of a condition (the firing one or the clearing one): a comparison and its value(s). */
function ConditionInputs({ field, legend, kind, value, high, errors, allowNone, onChange }: { field: 'condition' | 'clear'; legend: string; kind: Comparison | 'none'; value: string; high: string; errors: Errors; allowNone?: boolean; onChange: (kind: Comparison | 'none', value: string, high: string) => void }) {
  const invalid = Boolean(errors[field]);
  return (
    <fieldset class="field group">
      <legend>{legend}</legend>
      <div class="row">
        <div class="field">
          <label for={`rule-${field}-kind`}>The value is</label>
          <select id={`rule-${field}-kind`} value={kind} onChange={(e) => onChange(e.currentTarget.value as Comparison | 'none', value, high)}>
            {allowNone && <option value="none">the alarm condition stops holding</option>}
            {COMPARISONS.map((c) => (
              <option key={c} value={c}>
                {COMPARISON_LABELS[c]}
              </option>
            ))}
          </select>
        </div>
        {kind !== 'none' && (
          <div class="field">
            <label for={`rule-${field}-value`}>{kind === 'outside' ? 'Low' : kind === 'equals' ? 'Value' : 'Threshold'}</label>
            <input id={`rule-${field}-value`} value={value} aria-invalid={invalid} aria-describedby={describedBy(field, errors, kind === 'equals' ? `rule-${field}-hint` : undefined)} onInput={(e) => onChange(kind, e.currentTarget.value, high)} />
          </div>
        )}
        {kind === 'outside' && (
          <div class="field">
            <label for={`rule-${field}-high`}>High</label>
            <input id={`rule-${field}-high`} value={high} aria-invalid={invalid} aria-describedby={describedBy(field, errors)} onInput={(e) => onChange(kind, value, e.currentTarget.value)} />
          </div>
        )}
      </div>
      {kind === 'equals' && (
        <span id={`rule-${field}-hint`} class="hint">
          A text (open), a number, or true / false.
        </span>
      )}
      <FieldError field={field} errors={errors} />
    </fieldset>
  );
}

/** The fleet's alarm rules (`GET .../rules`): list, and for a role that may, create, edit (If-Match), delete. */
export function Rules() {
  const { api, href, can, org } = useFleet();
  const manage = can(NEEDS.manage);
  const [rules, setRules] = useState<Rule[] | null>(null);
  const [limit, setLimit] = useState<number | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [form, setForm] = useState<RuleForm>(EMPTY_RULE_FORM);
  const [editing, setEditing] = useState<Rule | null>(null);
  const [errors, setErrors] = useState<Errors>({});
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const formHeading = useRef<HTMLHeadingElement>(null);

  const load = async (): Promise<Rule[] | null> => {
    try {
      const answer = bodyOf(await api.GET('/me/rules'));
      setRules(answer.rules);
      setLimit(answer.limit);
      setLoadError(null);
      return answer.rules;
    } catch (e) {
      setLoadError(messageOf(e));
      return null;
    }
  };
  useEffect(() => void load(), [org?.orgId]);

  const startEdit = (rule: Rule) => {
    setEditing(rule);
    setForm(formOfRule(rule));
    setErrors({});
    setNotice(null);
    setTimeout(() => formHeading.current?.focus());
  };
  const stopEdit = () => {
    setEditing(null);
    setForm(EMPTY_RULE_FORM);
    setErrors({});
  };

  const showErrors = (next: Errors) => {
    setErrors(next);
    // Focus the first field in error (or the form's message), so it is read out.
    setTimeout(() => document.querySelector<HTMLElement>('form.rule [aria-invalid="true"], form.rule .error')?.focus());
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setNotice(null);
    const { body, errors: local } = ruleBody(form, Boolean(editing));
    if (!body) return showErrors(local);
    setErrors({});
    setBusy(true);
    try {
      if (editing) {
        const { rule: saved } = bodyOf(
          await api.PATCH('/me/rules/{ruleId}', {
            params: { path: { ruleId: editing.ruleId }, header: { 'If-Match': String(editing.version) } },
            body,
          }),
        );
        setRules((list) => list?.map((r) => (r.ruleId === saved.ruleId ? saved : r)) ?? [saved]);
        setNotice(`Saved “${saved.name}”.`);
        stopEdit();
      } else {
        // A new rule's body has every field the form requires and no null (those only clear an edited rule's).
        const { rule: created } = bodyOf(await api.POST('/me/rules', { body: body as Schemas['RuleBody'] }));
        setRules((list) => [...(list ?? []), created]);
        setNotice(`Created “${created.name}”.`);
        setForm(EMPTY_RULE_FORM);
      }
    } catch (err) {
      if (isRoleRefusal(err)) {
        setLoadError(`Refused: ${messageOf(err)}`);
        return;
      }
      if (editing && err instanceof ApiError && err.status === 412) {
        // Someone else saved this rule since it was opened: show theirs, keep nothing stale.
        const fresh = (await load())?.find((r) => r.ruleId === editing.ruleId);
        if (fresh) {
          setEditing(fresh);
          setForm(formOfRule(fresh));
          showErrors({ form: 'Someone else changed this rule meanwhile; the form now shows their version. Apply your change again.' });
        } else {
          stopEdit();
          showErrors({ form: 'Someone else deleted this rule meanwhile.' });
        }
      } else if (editing && err instanceof ApiError && err.status === 404 && !err.field) {
        stopEdit();
        void load();
        showErrors({ form: 'This rule no longer exists; the list is reloaded.' });
      } else {
        const field = err instanceof ApiError ? ruleFieldOf(err.field) : null;
        if (field) showErrors({ [field]: messageOf(err) });
        else if (err instanceof ApiError && err.status === 404 && form.scopeKind === 'deviceId') showErrors({ scope: `No device ${form.scopeValue.trim()} in ${org ? `${org.name}'s fleet` : 'your fleet'}.` });
        else showErrors({ form: messageOf(err) });
      }
    } finally {
      setBusy(false);
    }
  };

  const remove = async (rule: Rule) => {
    setNotice(null);
    try {
      await api.DELETE('/me/rules/{ruleId}', { params: { path: { ruleId: rule.ruleId } } });
      setNotice(`Deleted “${rule.name}”.`);
    } catch (e) {
      setNotice(e instanceof ApiError && e.status === 404 ? `“${rule.name}” was already deleted.` : messageOf(e));
    }
    if (editing?.ruleId === rule.ruleId) stopEdit();
    void load();
  };

  const set = (change: Partial<RuleForm>) => setForm({ ...form, ...change });
  const scopeLabel = SCOPE_LABELS[form.scopeKind][1];

  return (
    <section>
      <h1 tabIndex={-1}>Alarm rules</h1>
      <p class="muted">
        A rule raises an alarm when a device's readings of one type meet its condition (for at least the time it says), and clears it when the clear condition holds.{' '}
        <a href={href('/alarms')}>Alarms</a>
      </p>
      <p role="status" class="notice">
        {notice ?? ''}
      </p>
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      {rules === null && !loadError && <p role="status">Loading rules…</p>}
      {rules && (
        <p class="muted">
          {rules.length} rule{rules.length === 1 ? '' : 's'}
          {limit !== null ? ` of at most ${limit}` : ''}
        </p>
      )}
      {rules && rules.length > 0 && (
        <ListTable
          tableClass="rules"
          caption={org ? `${org.name}'s alarm rules` : 'Your alarm rules'}
          columns={[{ label: 'Rule' }, { label: 'Applies to' }, { label: 'Fires when' }, { label: 'Clears when' }, { label: 'Severity' }, { label: 'Reminders' }]}
          actions={manage}
        >
          {rules.map((r) => (
            <tr key={r.ruleId} data-rule={r.ruleId}>
              <th scope="row">
                {r.name}
                <div class="muted mono">version {r.version}</div>
              </th>
              <td>{scopeText(r.scope)}</td>
              <td>
                {r.eventType} {conditionText(r.condition)}
                {r.forSeconds ? ` for ${durationText(r.forSeconds)}` : ''}
              </td>
              <td>{r.clear ? `${r.eventType} ${conditionText(r.clear)}` : <span class="muted">the condition stops</span>}</td>
              <td>
                <SeverityBadge severity={r.severity} />
              </td>
              <td>{r.remindEverySeconds ? `every ${durationText(r.remindEverySeconds)}` : <span class="muted">none</span>}</td>
              {manage && (
                <td>
                  <div class="actions">
                    <button type="button" aria-label={`Edit ${r.name}`} onClick={() => startEdit(r)}>
                      Edit
                    </button>
                    <Confirm label={`Delete…`} danger question={`Delete the rule “${r.name}”? Its open alarms stay in the history.`} confirmLabel="Delete rule" onConfirm={() => remove(r)} />
                  </div>
                </td>
              )}
            </tr>
          ))}
        </ListTable>
      )}

      {!manage && <p class="muted">An admin of {org?.name ?? 'the organization'} creates and changes the rules; your role is {org?.role}.</p>}
      {manage && (
      <>
      <h2 tabIndex={-1} ref={formHeading}>
        {editing ? `Edit “${editing.name}”` : 'New rule'}
      </h2>
      <form class="rule" onSubmit={submit} noValidate>
        {errors.form && (
          <p class="error" role="alert" tabIndex={-1}>
            {errors.form}
          </p>
        )}
        <div class="field">
          <label for="rule-name">Name</label>
          <input id="rule-name" value={form.name} aria-invalid={Boolean(errors.name)} aria-describedby={describedBy('name', errors)} onInput={(e) => set({ name: e.currentTarget.value })} />
          <FieldError field="name" errors={errors} />
        </div>
        <div class="field">
          <label for="rule-eventType">Event type</label>
          <input id="rule-eventType" value={form.eventType} aria-invalid={Boolean(errors.eventType)} aria-describedby={describedBy('eventType', errors, 'rule-eventType-hint')} onInput={(e) => set({ eventType: e.currentTarget.value })} />
          <span id="rule-eventType-hint" class="hint">
            The readings' type, e.g. temperature
          </span>
          <FieldError field="eventType" errors={errors} />
        </div>
        <fieldset class="field group">
          <legend>Applies to</legend>
          <div class="row">
            <div class="field">
              <label for="rule-scopeKind">Scope</label>
              <select id="rule-scopeKind" value={form.scopeKind} onChange={(e) => set({ scopeKind: e.currentTarget.value as ScopeKind })}>
                {SCOPE_KINDS.map((k) => (
                  <option key={k} value={k}>
                    {SCOPE_LABELS[k][0]}
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="rule-scopeValue">{scopeLabel}</label>
              <input id="rule-scopeValue" value={form.scopeValue} aria-invalid={Boolean(errors.scope)} aria-describedby={describedBy('scope', errors)} onInput={(e) => set({ scopeValue: e.currentTarget.value })} />
            </div>
          </div>
          <FieldError field="scope" errors={errors} />
        </fieldset>
        <ConditionInputs
          field="condition"
          legend="Raise an alarm when"
          kind={form.conditionKind}
          value={form.conditionValue}
          high={form.conditionHigh}
          errors={errors}
          onChange={(kind, value, high) => set({ conditionKind: kind as Comparison, conditionValue: value, conditionHigh: high })}
        />
        <div class="field">
          <label for="rule-forSeconds">For at least (seconds)</label>
          <input id="rule-forSeconds" inputMode="numeric" value={form.forSeconds} aria-invalid={Boolean(errors.forSeconds)} aria-describedby={describedBy('forSeconds', errors, 'rule-forSeconds-hint')} onInput={(e) => set({ forSeconds: e.currentTarget.value })} />
          <span id="rule-forSeconds-hint" class="hint">
            0 raises it on the first reading; more ignores a single spike
          </span>
          <FieldError field="forSeconds" errors={errors} />
        </div>
        <ConditionInputs
          field="clear"
          legend="Clear it when"
          kind={form.clearKind}
          value={form.clearValue}
          high={form.clearHigh}
          errors={errors}
          allowNone
          onChange={(kind, value, high) => set({ clearKind: kind, clearValue: value, clearHigh: high })}
        />
        <div class="field">
          <label for="rule-severity">Severity</label>
          <select id="rule-severity" value={form.severity} aria-invalid={Boolean(errors.severity)} aria-describedby={describedBy('severity', errors)} onChange={(e) => set({ severity: e.currentTarget.value as RuleForm['severity'] })}>
            {SEVERITIES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
          <FieldError field="severity" errors={errors} />
        </div>
        <div class="field">
          <label for="rule-remindEvery">Remind every (seconds, optional)</label>
          <input id="rule-remindEvery" inputMode="numeric" value={form.remindEvery} aria-invalid={Boolean(errors.remindEvery)} aria-describedby={describedBy('remindEvery', errors, 'rule-remindEvery-hint')} onInput={(e) => set({ remindEvery: e.currentTarget.value })} />
          <span id="rule-remindEvery-hint" class="hint">
            An alarm nobody acknowledged is notified again at this interval; empty: once only
          </span>
          <FieldError field="remindEvery" errors={errors} />
        </div>
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {editing ? 'Save rule' : 'Create rule'}
          </button>
          {editing && (
            <button type="button" onClick={stopEdit}>
              Cancel editing
            </button>
          )}
        </div>
      </form>
      </>
      )}
    </section>
  );
}
