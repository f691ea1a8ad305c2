import { useEffect, useState } from 'preact/hooks';
import { bodyOf, fieldOf, isRoleRefusal, messageOf, type Schemas } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import { FieldError } from '../components/FieldError';

type Retention = Schemas['Retention'];

/**
 * The fleet's settings: how long raw readings are kept per device type (`GET/PUT
 * .../retention`, AP-R1/R2). Everyone sees the retentions; an admin (always, in My fleet)
 * shortens or restores a type's. Offline detection is per device: its page sets it.
 */
export function Settings() {
  const { api, can, org, title } = useFleet();
  const [retention, setRetention] = useState<Retention | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [form, setForm] = useState({ deviceType: '', rawDays: '' });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);
  const manage = can(NEEDS.manage);

  useEffect(() => {
    void (async () => {
      try {
        setRetention(bodyOf(await api.GET('/me/retention')));
      } catch (e) {
        setError(messageOf(e));
      }
    })();
  }, [org?.orgId]);

  /** PUT one type's raw retention (`null` days: back to the default). */
  const put = async (deviceType: string, rawDays: number | null) => {
    setErrors({});
    setNotice(null);
    try {
      const answer = bodyOf(await api.PUT('/me/retention', { body: { deviceType, rawDays } }));
      setRetention(answer);
      setNotice(rawDays === null ? `Raw readings of ${deviceType} are kept for the default again.` : `Raw readings of ${deviceType} are kept for ${rawDays} day${rawDays === 1 ? '' : 's'}.`);
      return true;
    } catch (e) {
      const field = fieldOf(e);
      if (isRoleRefusal(e)) setErrors({ form: messageOf(e) });
      else if (field === 'deviceType' || field === 'rawDays') setErrors({ [field]: messageOf(e) });
      else setErrors({ form: messageOf(e) });
      return false;
    }
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    const typed = form.rawDays.trim();
    // A typed value that is no whole number goes as typed, for the API's 400 to name it.
    const days = typed === '' ? null : /^\d+$/.test(typed) ? Number(typed) : (typed as unknown as number);
    if (await put(form.deviceType.trim(), days)) setForm({ deviceType: '', rawDays: '' });
  };

  return (
    <section>
      <h1 tabIndex={-1}>Settings</h1>
      <p class="muted">{title}: how long readings are kept. Offline detection (standard or tight) is set on each device's page.</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {notice && (
        <p role="status" class="notice">
          {notice}
        </p>
      )}
      {retention === null && !error && <p role="status">Loading retention…</p>}
      {retention && (
        <section aria-labelledby="retention-title">
          <h2 id="retention-title">Retention</h2>
          <p data-retention-default>
            Raw readings are kept for <strong>{retention.defaultRawDays} days</strong> unless their device type says less; hourly summaries for {retention.hourlyDays} days and daily summaries for {retention.dailyDays} days, whatever the type.
          </p>
          {retention.deviceTypes.length === 0 ? (
            <p class="muted">No device type keeps its raw readings for less.</p>
          ) : (
            <table class="retention">
              <caption class="sr-only">Device types whose raw readings are kept for less than the default</caption>
              <thead>
                <tr>
                  <th scope="col">Device type</th>
                  <th scope="col">Raw readings kept</th>
                  {manage && <th scope="col">Action</th>}
                </tr>
              </thead>
              <tbody>
                {retention.deviceTypes.map((t) => (
                  <tr key={t.deviceType} data-retention-type={t.deviceType}>
                    <th scope="row" class="mono">
                      {t.deviceType}
                    </th>
                    <td class="num">
                      {t.rawDays} day{t.rawDays === 1 ? '' : 's'}
                    </td>
                    {manage && (
                      <td>
                        <button type="button" onClick={() => void put(t.deviceType, null)} aria-label={`Restore default for ${t.deviceType}`}>
                          Restore default
                        </button>
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {manage ? (
            <form class="edit" onSubmit={submit} noValidate>
              <h3>Keep a device type's raw readings for less</h3>
              {errors.form && (
                <p class="error" role="alert">
                  {errors.form}
                </p>
              )}
              <div class="field">
                <label for="retention-type">Device type</label>
                <input id="retention-type" value={form.deviceType} aria-invalid={Boolean(errors.deviceType)} aria-describedby={errors.deviceType ? 'retention-type-error' : undefined} onInput={(e) => setForm({ ...form, deviceType: e.currentTarget.value })} />
                <FieldError id="retention-type-error" message={errors.deviceType} />
              </div>
              <div class="field">
                <label for="retention-days">Raw readings kept (days)</label>
                <input
                  id="retention-days"
                  inputMode="numeric"
                  value={form.rawDays}
                  aria-invalid={Boolean(errors.rawDays)}
                  aria-describedby={['retention-days-hint', errors.rawDays ? 'retention-days-error' : ''].filter(Boolean).join(' ')}
                  onInput={(e) => setForm({ ...form, rawDays: e.currentTarget.value })}
                />
                <span id="retention-days-hint" class="hint">
                  1 to {retention.defaultRawDays}; empty restores the default. Applies to readings stored from now on.
                </span>
                <FieldError id="retention-days-error" message={errors.rawDays} />
              </div>
              <button type="submit" class="primary">
                Save retention
              </button>
            </form>
          ) : (
            <p class="muted" data-role-note>
              Changing retention needs the admin role{org ? `; yours is ${org.role}` : ''}.
            </p>
          )}
        </section>
      )}
    </section>
  );
}
