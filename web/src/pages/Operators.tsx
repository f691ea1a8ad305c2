import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, bodyOf, fieldOf, messageOf, STATUSES, type Schemas } from '../api/client';
import { dateTime, fromInputTime, showValue, toInputTime } from '../format';
import { Bars } from '../components/Bars';
import { SEVERITIES } from '../alarms';
import { ALARM_PAGE, alarmPage, AlarmTable } from '../components/AlarmTable';
import { FieldError } from '../components/FieldError';
import { useCursorPages } from '../hooks/useCursorPages';

type Severity = Schemas['Severity'];

const entries = (o: Record<string, number>): [string, number][] => Object.entries(o).sort((a, b) => b[1] - a[1]);
const today = () => new Date().toISOString().slice(0, 10);

function DailyReport() {
  const [date, setDate] = useState(today());
  const [report, setReport] = useState<Schemas['Report'] | null>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const load = async (day: string) => {
    setErrors({});
    setReport(null);
    try {
      setReport(bodyOf(await api.GET('/admin/reports/{date}', { params: { path: { date: day } } })));
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) setErrors({ form: `No report for ${day} yet: the daily run writes it after the day ends (00:15 UTC).` });
      else if (fieldOf(e) === 'date') setErrors({ date: messageOf(e) });
      else setErrors({ form: messageOf(e) });
    }
  };
  // The report of the day shown first, once.
  useEffect(() => void load(date), []);
  return (
    <section aria-labelledby="report-title">
      <h2 id="report-title">Daily report</h2>
      <form
        class="range"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          void load(date);
        }}
      >
        <div class="field">
          <label for="report-date">Day (UTC)</label>
          <input id="report-date" type="date" value={date} aria-invalid={Boolean(errors.date)} aria-describedby={errors.date ? 'report-date-error' : undefined} onInput={(e) => setDate(e.currentTarget.value)} />
          <FieldError id="report-date-error" message={errors.date} />
        </div>
        <button type="submit" class="primary">
          Show report
        </button>
      </form>
      {errors.form && <p class="error" role="alert">{errors.form}</p>}
      {report && (
        <>
          <dl class="figures">
            <div>
              <dt>Devices</dt>
              <dd>{report.devices.total}</dd>
            </div>
            <div>
              <dt>Online during the day</dt>
              <dd>{report.devices.online24h}</dd>
            </div>
            <div>
              <dt>Users</dt>
              <dd>{report.users.total}</dd>
            </div>
            <div>
              <dt>Active users, 30 days</dt>
              <dd>{report.users.active30d}</dd>
            </div>
            <div>
              <dt>Events</dt>
              <dd>{report.events.total}</dd>
            </div>
          </dl>
          <div class="grid">
            <Bars title="Devices by status" rows={entries(report.devices.byStatus)} />
            <Bars title="Devices by type" rows={entries(report.devices.byType)} />
            <Bars title="Events by type" rows={entries(report.events.byType)} />
            <Bars title="Top devices (events)" rows={report.topDevices.map((d) => [`${d.deviceId} (${d.userId})`, d.events])} />
          </div>
          <Bars
            title="Partition heat: share of the day's event writes (hot over 10%)"
            rows={report.partitionHeat.map((h) => [h.key, Math.round(h.share * 1000) / 10])}
            unit="%"
            mark={(key) => (report.partitionHeat.find((h) => h.key === key)?.hot ? 'hot' : null)}
          />
          {report.indexHeat && report.indexHeat.length > 0 && (
            <Bars title="Index heat (GSI1 TYPE# partitions)" rows={report.indexHeat.map((h) => [h.key, Math.round(h.share * 1000) / 10])} unit="%" />
          )}
        </>
      )}
    </section>
  );
}

function EventsOfType() {
  const now = Date.now();
  const [form, setForm] = useState({ type: 'alarm', from: toInputTime(now - 86400_000), to: toInputTime(now + 60_000) });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [events, setEvents] = useState<Schemas['Event'][] | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    const query = { type: form.type, from: fromInputTime(form.from) ?? form.from, to: fromInputTime(form.to) ?? form.to, limit: 100 };
    try {
      setEvents(bodyOf(await api.GET('/admin/events', { params: { query } })).events);
    } catch (err) {
      const field = fieldOf(err);
      setErrors(field && ['type', 'from', 'to'].includes(field) ? { [field]: messageOf(err) } : { form: messageOf(err) });
      setEvents(null);
    }
  };
  return (
    <section aria-labelledby="types-title">
      <h2 id="types-title">Events of a type</h2>
      <form class="range" onSubmit={submit} noValidate>
        {(['type', 'from', 'to'] as const).map((f) => (
          <div class="field" key={f}>
            <label for={`ev-${f}`}>{f === 'type' ? 'Event type' : f === 'from' ? 'From' : 'To'}</label>
            <input
              id={`ev-${f}`}
              type={f === 'type' ? 'text' : 'datetime-local'}
              value={form[f]}
              aria-invalid={Boolean(errors[f])}
              aria-describedby={errors[f] ? `ev-${f}-error` : undefined}
              onInput={(e) => setForm({ ...form, [f]: e.currentTarget.value })}
            />
            <FieldError id={`ev-${f}-error`} message={errors[f]} />
          </div>
        ))}
        <button type="submit" class="primary">
          Find events
        </button>
      </form>
      {errors.form && <p class="error" role="alert">{errors.form}</p>}
      {events && (events.length === 0 ? <p class="muted">No such events in the range.</p> : (
        <div class="scroll">
          <table>
            <caption class="sr-only">Events of type {form.type}, newest first</caption>
            <thead>
              <tr><th scope="col">Time</th><th scope="col">Device</th><th scope="col">Owner</th><th scope="col">Value</th></tr>
            </thead>
            <tbody>
              {events.map((ev) => (
                <tr key={`${ev.at}${ev.id}${ev.deviceId}`}>
                  <td>{dateTime(ev.at)}</td>
                  <td class="mono">{ev.deviceId}</td>
                  <td class="mono">{ev.userId}</td>
                  <td>{showValue(ev.value)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}

function DevicesByStatus() {
  const [form, setForm] = useState<{ status: Schemas['DeviceStatus']; seenSince: string }>({ status: 'active', seenSince: toInputTime(Date.now() - 86400_000) });
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [devices, setDevices] = useState<Schemas['FleetDevice'][] | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    const query = { status: form.status, seenSince: fromInputTime(form.seenSince) ?? form.seenSince, limit: 100 };
    try {
      setDevices(bodyOf(await api.GET('/admin/devices', { params: { query } })).devices);
    } catch (err) {
      const field = fieldOf(err);
      setErrors(field && ['status', 'seenSince'].includes(field) ? { [field]: messageOf(err) } : { form: messageOf(err) });
      setDevices(null);
    }
  };
  return (
    <section aria-labelledby="status-title">
      <h2 id="status-title">Devices by status</h2>
      <form class="range" onSubmit={submit} noValidate>
        <div class="field">
          <label for="st-status">Status</label>
          <select id="st-status" value={form.status} onChange={(e) => setForm({ ...form, status: e.currentTarget.value as Schemas['DeviceStatus'] })}>
            {STATUSES.map((s) => (
              <option key={s} value={s}>{s}</option>
            ))}
          </select>
          <FieldError id="st-status-error" message={errors.status} />
        </div>
        <div class="field">
          <label for="st-seen">Seen since</label>
          <input id="st-seen" type="datetime-local" value={form.seenSince} aria-invalid={Boolean(errors.seenSince)} aria-describedby={errors.seenSince ? 'st-seen-error' : undefined} onInput={(e) => setForm({ ...form, seenSince: e.currentTarget.value })} />
          <FieldError id="st-seen-error" message={errors.seenSince} />
        </div>
        <button type="submit" class="primary">
          Find devices
        </button>
      </form>
      {errors.form && <p class="error" role="alert">{errors.form}</p>}
      {devices && (devices.length === 0 ? <p class="muted">No such devices.</p> : (
        <div class="scroll">
          <table>
            <caption class="sr-only">Devices with status {form.status}</caption>
            <thead>
              <tr><th scope="col">Device</th><th scope="col">Owner</th><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Last seen</th></tr>
            </thead>
            <tbody>
              {devices.map((d) => (
                <tr key={d.deviceId}>
                  <td class="mono">{d.deviceId}</td>
                  <td class="mono">{d.userId}</td>
                  <td>{d.name}</td>
                  <td>{d.type}</td>
                  <td>{dateTime(d.seen) || 'never'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}

/** Open alarms across owners, one severity at a time (`GET /admin/alarms?severity=`). */
function OpenAlarms() {
  const [severity, setSeverity] = useState<Severity>('critical');
  const [shown, setShown] = useState<Severity | null>(null);
  const read = shown && (async (cursor: string | null) => alarmPage(bodyOf(await api.GET('/admin/alarms', { params: { query: { severity: shown, limit: ALARM_PAGE, cursor: cursor ?? undefined } } }))));
  const list = useCursorPages(read || null, shown);
  return (
    <section aria-labelledby="open-alarms-title">
      <h2 id="open-alarms-title">Open alarms</h2>
      <form
        class="range"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (shown === severity) void list.reload();
          else setShown(severity);
        }}
      >
        <div class="field">
          <label for="oa-severity">Severity</label>
          <select id="oa-severity" value={severity} onChange={(e) => setSeverity(e.currentTarget.value as Severity)}>
            {SEVERITIES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" class="primary">
          Find alarms
        </button>
      </form>
      {list.error && <p class="error" role="alert">{list.error}</p>}
      {shown && list.items === null && !list.error && <p role="status">Loading alarms…</p>}
      {list.items && (list.items.length === 0 ? <p class="muted">No open {shown} alarms.</p> : <AlarmTable alarms={list.items} caption={`Open ${shown} alarms across owners`} showOwner />)}
      {list.hasMore && (
        <button type="button" onClick={() => void list.more()} disabled={list.loading}>
          More alarms
        </button>
      )}
    </section>
  );
}

export function Operators() {
  return (
    <section>
      <h1 tabIndex={-1}>Operators</h1>
      <p class="muted">Reads across every user, for members of the admin group.</p>
      <DailyReport />
      <OpenAlarms />
      <EventsOfType />
      <DevicesByStatus />
    </section>
  );
}
