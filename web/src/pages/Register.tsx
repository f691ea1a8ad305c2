import { useEffect, useState } from 'preact/hooks';
import { ApiError, apiUrl, bodyOf, fieldOf, messageOf, type Schemas } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import { RoleNeeded } from '../components/RoleNeeded';
import { FieldError } from '../components/FieldError';
import { TokenPanel } from '../components/TokenPanel';
import { intervalValue } from '../format';

const FIELDS = ['deviceId', 'name', 'type', 'tags', 'reportEverySeconds'] as const;
type Field = (typeof FIELDS)[number];

const LABELS: Record<Field, string> = {
  deviceId: 'Device id',
  name: 'Name',
  type: 'Type',
  tags: 'Tags (comma-separated, optional)',
  reportEverySeconds: 'Reports every (seconds, optional)',
};

const HINTS: Partial<Record<Field, string>> = {
  deviceId: 'Unique across the service: letters, digits and - _ . : @ +',
  type: 'e.g. thermostat, power-meter',
  reportEverySeconds: 'How often the device promises to report; it is offline after that plus a grace. Left empty, the interval is learned from its reports.',
};

const EMPTY: Record<Field, string> = { deviceId: '', name: '', type: '', tags: '', reportEverySeconds: '' };

export function Register() {
  const { api, href, can, org } = useFleet();
  const [form, setForm] = useState<Record<Field, string>>(EMPTY);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [created, setCreated] = useState<{ device: Schemas['Device']; token: string } | null>(null);
  const [busy, setBusy] = useState(false);
  // The token view replaces the form: start keyboard and screen reader users at its heading.
  useEffect(() => {
    if (created) document.querySelector<HTMLElement>('main h1')?.focus();
  }, [created]);

  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setBusy(true);
    const tags = form.tags.split(',').map((t) => t.trim()).filter(Boolean);
    try {
      const answer = await api.POST('/me/devices', {
        body: {
          deviceId: form.deviceId,
          name: form.name,
          type: form.type,
          ...(tags.length ? { tags } : {}),
          // A typed interval that is no number is sent as typed, for the API's 400 to name it.
          ...(form.reportEverySeconds.trim() ? { reportEverySeconds: intervalValue(form.reportEverySeconds) as number } : {}),
        },
      });
      setCreated(bodyOf(answer));
    } catch (err) {
      const field = fieldOf(err);
      if (err instanceof ApiError && err.code === 'device_id_taken') setErrors({ deviceId: err.message });
      else if (field && (FIELDS as readonly string[]).includes(field)) setErrors({ [field]: messageOf(err) });
      else setErrors({ form: messageOf(err) });
      // Move focus to the first field in error, so the message is read out with it.
      setTimeout(() => document.querySelector<HTMLElement>('[aria-invalid="true"]')?.focus());
    } finally {
      setBusy(false);
    }
  };

  if (created)
    return (
      <section>
        <h1 tabIndex={-1}>Registered {created.device.name}</h1>
        <TokenPanel deviceId={created.device.deviceId} token={created.token} apiBase={apiUrl('') || location.origin} />
        <p>
          <a href={href(`/devices/${encodeURIComponent(created.device.deviceId)}`)}>Open {created.device.name}</a> ·{' '}
          <a href={href('/')}>Back to the fleet</a> ·{' '}
          <button
            type="button"
            class="link"
            onClick={() => {
              setCreated(null);
              setForm(EMPTY);
            }}
          >
            Register another
          </button>
        </p>
      </section>
    );

  if (!can(NEEDS.manage)) return <RoleNeeded title="Register a device" needed={NEEDS.manage} org={org} />;

  return (
    <section>
      <h1 tabIndex={-1}>Register a device{org ? ` in ${org.name}` : ''}</h1>
      <form onSubmit={submit} noValidate class="register">
        {errors.form && (
          <p class="error" role="alert">
            {errors.form}
          </p>
        )}
        {FIELDS.map((f) => (
          <div class="field" key={f}>
            <label for={`reg-${f}`}>{LABELS[f]}</label>
            <input
              id={`reg-${f}`}
              name={f}
              value={form[f]}
              aria-invalid={Boolean(errors[f])}
              aria-describedby={[HINTS[f] ? `reg-${f}-hint` : '', errors[f] ? `reg-${f}-error` : ''].filter(Boolean).join(' ') || undefined}
              onInput={(e) => setForm({ ...form, [f]: e.currentTarget.value })}
            />
            {HINTS[f] && (
              <span id={`reg-${f}-hint`} class="hint">
                {HINTS[f]}
              </span>
            )}
            <FieldError id={`reg-${f}-error`} message={errors[f]} />
          </div>
        ))}
        <button type="submit" class="primary" disabled={busy}>
          Register
        </button>
      </form>
    </section>
  );
}
