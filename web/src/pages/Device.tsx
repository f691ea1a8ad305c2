import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, apiUrl, bodyOf, fieldOf, isRoleRefusal, messageOf, type Schemas } from '../api/client';
import { DeviceFirmware } from '../components/DeviceFirmware';
import { useFleet } from '../hooks/useFleet';
import { fleetHref, moveTargets, NEEDS, type OrgFleet } from '../fleet';
import { bandColumns, dateTime, fromInputTime, intervalValue, series, seriesCsv, seriesNdjson, showValue, toCsv, toInputTime, toNdjson } from '../format';
import { TimeChart } from '../components/TimeChart';
import { Confirm } from '../components/Confirm';
import { FieldError } from '../components/FieldError';
import { TokenPanel } from '../components/TokenPanel';
import { TwinPanel } from '../components/TwinPanel';
import { STATUSES } from '../api/client';
import { ALARM_PAGE, alarmPage, AlarmTable } from '../components/AlarmTable';
import { ConnectivityBadge } from '../components/AlarmBadges';
import { readPages, useCursorPages } from '../hooks/useCursorPages';

type Device = Schemas['Device'];
type Summaries = Schemas['Series'];

/** AP-04 pages are at most 100 events; a range is read page after page up to this many. */
const PAGE = 100;
const MAX_EVENTS = 10_000;

const RANGES: [string, number][] = [
  ['Last hour', 3600],
  ['Last 24 hours', 86400],
  ['Last 7 days', 7 * 86400],
  ['Last 30 days', 30 * 86400],
  ['Last 90 days', 90 * 86400],
  ['Last year', 365 * 86400],
];

/**
 * Ranges longer than this are drawn from the summaries (`GET .../series`, one request of any
 * length); shorter ones from the raw events (AP-04 pages), which the table lists too. A day
 * and its minute. The quick ranges end a minute after now.
 */
const RAW_UP_TO_MS = 86400_000 + 60_000;

const RESOLUTION_NAMES: Record<Summaries['resolution'], string> = { '5m': '5-minute', '1h': 'hourly', '1d': 'daily' };

function download(name: string, type: string, text: string) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** The device form's fields, as typed. */
interface Edit {
  name: string;
  status: Device['status'];
  tags: string;
  reportEverySeconds: string;
  offlineDetection: Schemas['OfflineDetection'];
}

function editOf(device: Device): Edit {
  return { name: device.name, status: device.status, tags: device.tags.join(', '), reportEverySeconds: device.reportEverySeconds ? String(device.reportEverySeconds) : '', offlineDetection: device.offlineDetection ?? 'standard' };
}

export function DevicePage({ deviceId, orgs = null }: { deviceId: string; orgs?: OrgFleet[] | null }) {
  const { api, href, can, org } = useFleet();
  const [device, setDevice] = useState<Device | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [range, setRange] = useState<{ from: string; to: string }>(() => {
    const now = Date.now();
    return { from: toInputTime(now - 86400_000), to: toInputTime(now + 60_000) };
  });
  const [rangeErrors, setRangeErrors] = useState<Record<string, string>>({});
  /** The range shown, RFC 3339; null until the first one is read. */
  const [shown, setShown] = useState<{ from: string; to: string } | null>(null);
  const [events, setEvents] = useState<Schemas['Event'][] | null>(null);
  const [truncated, setTruncated] = useState(false);
  const [summaries, setSummaries] = useState<Summaries | null>(null);
  /** The latest read asked for: an answer to an older one (the user moved on) is dropped. */
  const latestRead = useRef(0);
  const [chartType, setChartType] = useState<string | null>(null);
  const [edit, setEdit] = useState<Edit | null>(null);
  const [editErrors, setEditErrors] = useState<Record<string, string>>({});
  const [notice, setNotice] = useState<string | null>(null);
  /** The API's 403 `role_required` for a change: said at the top, as the form may go away. */
  const [refused, setRefused] = useState<string | null>(null);
  const [token, setToken] = useState<{ token: string; until: string | null } | null>(null);
  /** The fleet chosen to move the device into ('' for My fleet). */
  const [moveTo, setMoveTo] = useState<string | null>(null);
  /** The move that took the device out of this fleet: where to, and its history's progress. */
  const [moved, setMoved] = useState<{ label: string; href: string; history: Schemas['MoveHistory'] | null; token: { token: string; until: string | null } | null } | null>(null);
  /** Whether a move out of an organization gives the device a new token: its members know the current one. */
  const [rotateOnMove, setRotateOnMove] = useState(true);
  // The page turns into the move's outcome: its heading takes the focus, as a new page's does.
  useEffect(() => {
    if (moved) document.querySelector<HTMLElement>('main h1')?.focus();
  }, [moved]);
  const history = useCursorPages(
    async (cursor) => alarmPage(bodyOf(await api.GET('/me/devices/{deviceId}/alarms', { params: { path: { deviceId }, query: { limit: ALARM_PAGE, cursor: cursor ?? undefined } } }))),
    deviceId,
    { idOf: (a) => a.alarmId },
  );

  const loadDevice = async () => {
    try {
      const { device } = bodyOf(await api.GET('/me/devices/{deviceId}', { params: { path: { deviceId } } }));
      setDevice(device);
      setEdit(editOf(device));
    } catch (e) {
      setError(e instanceof ApiError && e.status === 404 && e.message !== 'organization not found' ? `No such device in ${org ? `${org.name}'s fleet` : 'your fleet'}.` : messageOf(e));
    }
  };

  /** AP-04, page after page, until the range is read (or MAX_EVENTS). */
  const readEvents = (from: string, to: string) =>
    readPages(async (cursor) => {
      const page = bodyOf(await api.GET('/me/devices/{deviceId}/events', { params: { path: { deviceId }, query: { from, to, limit: PAGE, cursor: cursor ?? undefined } } }));
      return { items: page.events, cursor: page.cursor };
    }, MAX_EVENTS);

  /** AP-29: the summaries of one type over the range, in one request (the API picks the resolution). */
  const readSummaries = async (from: string, to: string, type: string) =>
    bodyOf(await api.GET('/me/devices/{deviceId}/series', { params: { path: { deviceId }, query: { type, from, to } } }));

  /** A failed read: beside the range field the API named, else instead of the page. */
  const readFailed = (e: unknown) => {
    const field = fieldOf(e);
    if (field === 'from' || field === 'to') setRangeErrors({ [field]: messageOf(e) });
    else setError(messageOf(e));
  };

  /** Checks the typed range and shows it (the effects below read it). */
  const show = (from: string, to: string) => {
    const fromIso = fromInputTime(from);
    const toIso = fromInputTime(to);
    setRangeErrors({});
    if (!fromIso || !toIso) {
      setRangeErrors(fromIso ? { to: 'Enter a date and time.' } : { from: 'Enter a date and time.' });
      return;
    }
    setShown({ from: fromIso, to: toIso });
  };

  useEffect(() => {
    void loadDevice();
    show(range.from, range.to);
  }, [deviceId]);

  const long = shown !== null && Date.parse(shown.to) - Date.parse(shown.from) > RAW_UP_TO_MS;
  const eventTypes = useMemo(() => [...new Set((events ?? []).filter((e) => typeof e.value === 'number').map((e) => e.type))].sort(), [events]);
  // A long range charts a type the device reports numbers for (its latest readings say which).
  const deviceTypes = useMemo(
    () =>
      Object.entries(device?.latest ?? {})
        .filter(([, r]) => typeof r.value === 'number')
        .map(([type]) => type)
        .sort(),
    [device],
  );
  const numericTypes = long ? deviceTypes : eventTypes;
  const shownType = chartType && numericTypes.includes(chartType) ? chartType : numericTypes[0];
  const [x, y] = useMemo(() => (shownType ? series(events ?? [], shownType) : [[], []]), [events, shownType]);
  const [bx, avg, low, high] = useMemo(() => (summaries ? bandColumns(summaries) : [[], [], [], []]), [summaries]);
  const band = useMemo(() => ({ min: low, max: high }), [low, high]);

  // Up to a day: the raw events.
  useEffect(() => {
    if (!shown || long) return;
    const read = ++latestRead.current;
    setEvents(null);
    setSummaries(null);
    readEvents(shown.from, shown.to).then(
      ({ items, truncated }) => {
        if (read !== latestRead.current) return;
        setTruncated(truncated);
        setEvents(items);
      },
      (e) => {
        if (read !== latestRead.current) return;
        readFailed(e);
        setEvents([]);
      },
    );
  }, [shown]);

  // Longer: the chosen type's summaries, one request (again when another type is chosen).
  useEffect(() => {
    if (!shown || !long || !shownType) return;
    const read = ++latestRead.current;
    setEvents(null);
    setSummaries(null);
    readSummaries(shown.from, shown.to, shownType).then(
      (answer) => read === latestRead.current && setSummaries(answer),
      (e) => read === latestRead.current && readFailed(e),
    );
  }, [shown, long ? shownType : null]);

  /** The range's raw events for a download: those read, else read now (a long range). */
  const rawForDownload = async () => (events ? { items: events, truncated } : shown ? await readEvents(shown.from, shown.to) : { items: [], truncated: false });
  /** The range's summaries for a download: those read, else read now (a range up to a day). */
  const summariesForDownload = async () => summaries ?? (shown && shownType ? await readSummaries(shown.from, shown.to, shownType) : null);
  const downloadRaw = async (csv: boolean) => {
    try {
      const { items, truncated } = await rawForDownload();
      if (truncated) setNotice(`The download holds the first ${items.length} events of the range; narrow the range for the rest.`);
      download(`${stamp}.${csv ? 'csv' : 'ndjson'}`, csv ? 'text/csv' : 'application/x-ndjson', csv ? toCsv(items) : toNdjson(items));
    } catch (e) {
      readFailed(e);
    }
  };
  const downloadSummaries = async (csv: boolean) => {
    try {
      const answer = await summariesForDownload();
      if (!answer) return;
      const name = `${stamp}-${answer.type}-${answer.resolution}`;
      download(`${name}.${csv ? 'csv' : 'ndjson'}`, csv ? 'text/csv' : 'application/x-ndjson', csv ? seriesCsv(answer) : seriesNdjson(answer));
    } catch (e) {
      readFailed(e);
    }
  };

  const save = async (e: Event) => {
    e.preventDefault();
    if (!device || !edit) return;
    setEditErrors({});
    const tags = edit.tags.split(',').map((t) => t.trim()).filter(Boolean);
    // The interval only when it changed: empty means "learn it" (null), as the API says.
    const interval = edit.reportEverySeconds.trim() ? intervalValue(edit.reportEverySeconds) : null;
    const intervalChanged = interval !== (device.reportEverySeconds ?? null);
    // The detection only when it changed, so saving a name leaves a standard device as it was.
    const detectionChanged = edit.offlineDetection !== (device.offlineDetection ?? 'standard');
    try {
      const answer = bodyOf(
        await api.PATCH('/me/devices/{deviceId}', {
          params: { path: { deviceId }, header: { 'If-Match': String(device.version) } },
          // A typed interval that is no number is sent as typed, for the API's 400 to name it.
          body: {
            name: edit.name,
            status: edit.status,
            tags,
            ...(intervalChanged ? { reportEverySeconds: interval as number | null } : {}),
            ...(detectionChanged ? { offlineDetection: edit.offlineDetection } : {}),
          },
        }),
      );
      setDevice(answer.device);
      setEdit(editOf(answer.device));
      setNotice('Saved.');
    } catch (err) {
      const field = fieldOf(err);
      if (isRoleRefusal(err)) setRefused(messageOf(err));
      else if (err instanceof ApiError && err.status === 412) {
        setEditErrors({ form: 'Someone changed this device meanwhile; the form now shows their version. Apply your change again.' });
        void loadDevice();
      } else if (field && ['name', 'status', 'tags', 'reportEverySeconds', 'offlineDetection'].includes(field)) setEditErrors({ [field]: messageOf(err) });
      else setEditErrors({ form: messageOf(err) });
    }
  };

  /**
   * POST .../move: any 2xx is done (the history's progress shown as the answer gives it). Out
   * of an organization the token is rotated unless the admin unticks it; the new one is shown once.
   */
  const move = async (toOrgId: string | null, label: string) => {
    const rotateToken = org !== null && rotateOnMove;
    try {
      const answer = bodyOf(await api.POST('/me/devices/{deviceId}/move', { params: { path: { deviceId } }, body: rotateToken ? { toOrgId, rotateToken } : { toOrgId } })) as Partial<Schemas['MovedDevice']> | undefined;
      setMoved({
        label,
        href: fleetHref(toOrgId, `/devices/${encodeURIComponent(deviceId)}`),
        history: answer?.history ?? null,
        token: answer?.token ? { token: answer.token, until: answer.previousTokenValidUntil ?? null } : null,
      });
    } catch (e) {
      if (isRoleRefusal(e)) setRefused(messageOf(e));
      else setNotice(messageOf(e));
    }
  };

  if (moved)
    return (
      <section>
        <h1 tabIndex={-1}>
          {device?.name ?? deviceId} moved to {moved.label}
        </h1>
        <p role="status" data-moved={moved.history?.status ?? 'moved'}>
          {moved.history?.status === 'moving'
            ? `Its readings are still being copied (${moved.history.itemsMoved} items so far); the new fleet shows them as they arrive.`
            : `Everything moved with it${moved.history ? ` (${moved.history.itemsMoved} items)` : ''}.`}{' '}
          {moved.token ? 'The device keeps its id and has a new token, shown below once.' : 'The device keeps its id and its token.'}
        </p>
        <p>
          <a href={moved.href}>Open it in {moved.label}</a> · <a href={href('/')}>Back to the fleet</a>
        </p>
        {moved.token && (
          <TokenPanel
            deviceId={deviceId}
            token={moved.token.token}
            apiBase={apiUrl('') || location.origin}
            note={moved.token.until ? `The previous token works until ${dateTime(moved.token.until)}: give the device the new one before then.` : 'The previous token no longer works.'}
          />
        )}
      </section>
    );

  if (error)
    return (
      <section>
        <h1 tabIndex={-1}>Device {deviceId}</h1>
        <p class="error" role="alert">
          {error}
        </p>
        <a href={href('/')}>Back to the fleet</a>
      </section>
    );

  const apiBase = apiUrl('') || location.origin;
  const stamp = `${deviceId}-${range.from.replace(/[:T]/g, '')}-${range.to.replace(/[:T]/g, '')}`;
  return (
    <section>
      <h1 tabIndex={-1}>{device ? device.name : deviceId}</h1>
      {device && (
        <p class="muted">
          <span class="mono">{device.deviceId}</span> · {device.type} · <span class={`status ${device.status}`}>{device.status}</span>
          {device.tags.length > 0 && <> · tags {device.tags.join(', ')}</>} · version {device.version}
        </p>
      )}
      {device && (
        <p data-connectivity>
          Connectivity: <ConnectivityBadge connectivity={device.connectivity} />
          {device.reportEverySeconds ? (
            <span class="muted"> · expected to report every {device.reportEverySeconds} s</span>
          ) : device.learnedEverySeconds ? (
            <span class="muted"> · reports about every {device.learnedEverySeconds} s (learned)</span>
          ) : null}
        </p>
      )}
      {device && <DeviceFirmware deviceId={deviceId} />}
      {notice && (
        <p role="status" class="notice">
          {notice}
        </p>
      )}
      {refused && (
        <p role="alert" class="error">
          Refused: {refused}
        </p>
      )}

      <h2>History</h2>
      <form
        class="range"
        onSubmit={(e) => {
          e.preventDefault();
          show(range.from, range.to);
        }}
      >
        <div class="field">
          <label for="range-from">From</label>
          <input id="range-from" type="datetime-local" value={range.from} aria-describedby={rangeErrors.from ? 'range-from-error' : undefined} onInput={(e) => setRange({ ...range, from: e.currentTarget.value })} />
          <FieldError id="range-from-error" message={rangeErrors.from} />
        </div>
        <div class="field">
          <label for="range-to">To</label>
          <input id="range-to" type="datetime-local" value={range.to} aria-describedby={rangeErrors.to ? 'range-to-error' : undefined} onInput={(e) => setRange({ ...range, to: e.currentTarget.value })} />
          <FieldError id="range-to-error" message={rangeErrors.to} />
        </div>
        <button type="submit" class="primary">
          Show
        </button>
        <span class="quick">
          {RANGES.map(([label, seconds]) => (
            <button
              type="button"
              key={label}
              onClick={() => {
                const now = Date.now();
                const next = { from: toInputTime(now - seconds * 1000), to: toInputTime(now + 60_000) };
                setRange(next);
                show(next.from, next.to);
              }}
            >
              {label}
            </button>
          ))}
        </span>
      </form>
      {!long && events === null && <p role="status">Loading events…</p>}
      {!long && events && (
        <>
          <p class="muted">
            {events.length} event{events.length === 1 ? '' : 's'} in the range{truncated ? ` (the first ${events.length}; narrow the range for the rest)` : ''}.
          </p>
          {numericTypes.length > 0 && (
            <>
              <div class="field inline">
                <label for="chart-type">Chart</label>
                <select id="chart-type" value={shownType} onChange={(e) => setChartType(e.currentTarget.value)}>
                  {numericTypes.map((t) => (
                    <option key={t} value={t}>
                      {t}
                    </option>
                  ))}
                </select>
              </div>
              <TimeChart label={shownType ?? ''} x={x} y={y} />
            </>
          )}
          <p class="downloads">
            <button type="button" disabled={events.length === 0} onClick={() => void downloadRaw(true)}>
              Download CSV
            </button>{' '}
            <button type="button" disabled={events.length === 0} onClick={() => void downloadRaw(false)}>
              Download NDJSON
            </button>{' '}
            <button type="button" disabled={!shownType || summaries?.buckets.length === 0} onClick={() => void downloadSummaries(true)}>
              Download summaries CSV
            </button>{' '}
            <button type="button" disabled={!shownType || summaries?.buckets.length === 0} onClick={() => void downloadSummaries(false)}>
              Download summaries NDJSON
            </button>
          </p>
          {events.length > 0 && (
            <div class="scroll events">
              <table>
                <caption class="sr-only">Events in the range, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Type</th>
                    <th scope="col">Value</th>
                    <th scope="col">Event id</th>
                  </tr>
                </thead>
                <tbody>
                  {events.slice(0, 200).map((e) => (
                    <tr key={`${e.at}${e.id}`}>
                      <td>{dateTime(e.at)}</td>
                      <td>{e.type}</td>
                      <td class="num">{showValue(e.value)}</td>
                      <td class="mono">{e.id}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {events.length > 200 && <p class="muted">The table shows the newest 200; the downloads hold all {events.length}.</p>}
            </div>
          )}
        </>
      )}

      {long && !shownType && device && <p class="muted">This device has no numeric readings to summarise.</p>}
      {long && shownType && summaries === null && <p role="status">Loading summaries…</p>}
      {long && summaries && (
        <>
          <p class="muted" data-summaries={summaries.resolution}>
            {summaries.buckets.reduce((n, b) => n + b.count, 0)} {summaries.type} readings in {summaries.buckets.length} {RESOLUTION_NAMES[summaries.resolution]} summaries: the average, with the minimum and maximum of each as a band.
          </p>
              <div class="field inline">
                <label for="chart-type">Chart</label>
                <select id="chart-type" value={shownType} onChange={(e) => setChartType(e.currentTarget.value)}>
                  {numericTypes.map((t) => (
                    <option key={t} value={t}>
                      {t}
                    </option>
                  ))}
                </select>
              </div>
          {bx.length > 0 && <TimeChart label={shownType ?? ''} x={bx} y={avg} band={band} />}
          <p class="downloads">
            <button type="button" disabled={!long && events?.length === 0} onClick={() => void downloadRaw(true)}>
              Download CSV
            </button>{' '}
            <button type="button" disabled={!long && events?.length === 0} onClick={() => void downloadRaw(false)}>
              Download NDJSON
            </button>{' '}
            <button type="button" disabled={!shownType || summaries?.buckets.length === 0} onClick={() => void downloadSummaries(true)}>
              Download summaries CSV
            </button>{' '}
            <button type="button" disabled={!shownType || summaries?.buckets.length === 0} onClick={() => void downloadSummaries(false)}>
              Download summaries NDJSON
            </button>
          </p>
        </>
      )}
      <section aria-labelledby="device-alarms-title">
        <h2 id="device-alarms-title">Alarms</h2>
        {history.error && (
          <p class="error" role="alert">
            {history.error}
          </p>
        )}
        {history.items === null && !history.error && <p role="status">Loading alarms…</p>}
        {history.items && history.items.length === 0 && <p class="muted">No alarms for this device.</p>}
        {history.items && history.items.length > 0 && <AlarmTable alarms={history.items} caption="This device's alarms, newest first" showDevice={false} onChanged={can(NEEDS.operate) ? history.replace : undefined} onReload={() => void history.reload()} />}
        {history.hasMore && (
          <button type="button" onClick={() => void history.more()} disabled={history.loading}>
            Older alarms
          </button>
        )}
      </section>

      {device && !can(NEEDS.manage) && (
        <TwinPanel deviceId={deviceId} twin={device.twin} onChanged={loadDevice} />
      )}
      {device && edit && can(NEEDS.manage) && (
        <>
          <h2>Settings</h2>
          <form class="edit" onSubmit={save} noValidate>
            {editErrors.form && (
              <p class="error" role="alert">
                {editErrors.form}
              </p>
            )}
            <div class="field">
              <label for="edit-name">Name</label>
              <input id="edit-name" value={edit.name} aria-invalid={Boolean(editErrors.name)} aria-describedby={editErrors.name ? 'edit-name-error' : undefined} onInput={(e) => setEdit({ ...edit, name: e.currentTarget.value })} />
              <FieldError id="edit-name-error" message={editErrors.name} />
            </div>
            <div class="field">
              <label for="edit-status">Status</label>
              <select id="edit-status" value={edit.status} onChange={(e) => setEdit({ ...edit, status: e.currentTarget.value as Device['status'] })}>
                {STATUSES.map((s) => (
                  <option key={s} value={s}>
                    {s}
                  </option>
                ))}
              </select>
              <FieldError id="edit-status-error" message={editErrors.status} />
            </div>
            <div class="field">
              <label for="edit-tags">Tags (comma-separated)</label>
              <input id="edit-tags" value={edit.tags} aria-invalid={Boolean(editErrors.tags)} aria-describedby={editErrors.tags ? 'edit-tags-error' : undefined} onInput={(e) => setEdit({ ...edit, tags: e.currentTarget.value })} />
              <FieldError id="edit-tags-error" message={editErrors.tags} />
            </div>
            <div class="field">
              <label for="edit-interval">Reports every (seconds)</label>
              <input
                id="edit-interval"
                inputMode="numeric"
                value={edit.reportEverySeconds}
                aria-invalid={Boolean(editErrors.reportEverySeconds)}
                aria-describedby={['edit-interval-hint', editErrors.reportEverySeconds ? 'edit-interval-error' : ''].filter(Boolean).join(' ')}
                onInput={(e) => setEdit({ ...edit, reportEverySeconds: e.currentTarget.value })}
              />
              <span id="edit-interval-hint" class="hint">
                Offline after this plus a grace. Empty: learned from its reports.
              </span>
              <FieldError id="edit-interval-error" message={editErrors.reportEverySeconds} />
            </div>
            <fieldset class="field" aria-describedby="edit-detection-hint">
              <legend>Offline detection</legend>
              {(['standard', 'tight'] as const).map((d) => (
                <label key={d} class="inline">
                  <input type="radio" name="edit-detection" value={d} checked={edit.offlineDetection === d} onChange={() => setEdit({ ...edit, offlineDetection: d })} />{' '}
                  {d === 'standard' ? 'Standard' : 'Tight'}
                </label>
              ))}
              <span id="edit-detection-hint" class="hint">
                Standard: offline within its interval plus a grace and up to 15 minutes. Tight: within its interval plus two minutes of its last report, for 2 more write units per request that moves its last report.
              </span>
              <FieldError id="edit-detection-error" message={editErrors.offlineDetection} />
            </fieldset>
            <button type="submit" class="primary">
              Save changes
            </button>
          </form>

          <TwinPanel deviceId={deviceId} twin={device.twin} onChanged={loadDevice} />

          <h2>Token</h2>
          <p>Rotating issues a new token; the old one keeps working for an overlap so the device can switch. Revoking refuses every token of the device until a rotation issues a new one.</p>
          <div class="actions">
            <Confirm
              label="Rotate token…"
              question={`Issue a new token for ${deviceId}?`}
              confirmLabel="Rotate token"
              onConfirm={async () => {
                try {
                  const answer = bodyOf(await api.POST('/me/devices/{deviceId}/token', { params: { path: { deviceId } } }));
                  setToken({ token: answer.token, until: answer.previousTokenValidUntil });
                  setNotice('New token issued.');
                } catch (e) {
                  if (isRoleRefusal(e)) setRefused(messageOf(e));
                  else setNotice(messageOf(e));
                }
              }}
            />
            <Confirm
              label="Revoke token…"
              danger
              question={`Refuse every token of ${deviceId} from now on?`}
              confirmLabel="Revoke token"
              onConfirm={async () => {
                try {
                  await api.DELETE('/me/devices/{deviceId}/token', { params: { path: { deviceId } } });
                  setToken(null);
                  setNotice('Token revoked: the device can no longer send events.');
                } catch (e) {
                  if (isRoleRefusal(e)) setRefused(messageOf(e));
                  else setNotice(messageOf(e));
                }
              }}
            />
            <Confirm
              label="Delete device…"
              danger
              question={`Delete ${deviceId} and its history? This cannot be undone.`}
              confirmLabel="Delete device"
              onConfirm={async () => {
                try {
                  await api.DELETE('/me/devices/{deviceId}', { params: { path: { deviceId } } });
                  location.hash = href('/');
                } catch (e) {
                  if (isRoleRefusal(e)) setRefused(messageOf(e));
                  else setNotice(messageOf(e));
                }
              }}
            />
          </div>
          {token && (
            <TokenPanel
              deviceId={deviceId}
              token={token.token}
              apiBase={apiBase}
              note={token.until ? `The previous token works until ${dateTime(token.until)}.` : undefined}
            />
          )}

          {moveTargets(orgs, org?.orgId ?? null).length > 0 && (
            <section aria-labelledby="move-title">
              <h2 id="move-title">Move</h2>
              <p>
                Move this device, with its history, twin and alarms, to another fleet you administer; this fleet's members lose sight of it. It keeps its id
                {org ? ', and its token unless the move rotates it.' : ' and its token.'}
              </p>
              {org && (
                <div class="field">
                  <label>
                    <input type="checkbox" checked={rotateOnMove} onChange={(e) => setRotateOnMove(e.currentTarget.checked)} /> Rotate the device token (the previous owner knows it)
                  </label>
                </div>
              )}
              <div class="actions">
                <div class="field inline">
                  <label for="move-to">Move to</label>
                  <select id="move-to" value={moveTo ?? ''} onChange={(e) => setMoveTo(e.currentTarget.value)}>
                    <option value="" disabled>
                      Choose a fleet
                    </option>
                    {moveTargets(orgs, org?.orgId ?? null).map((t) => (
                      <option key={t.orgId ?? 'me'} value={t.orgId ?? 'me'}>
                        {t.label}
                      </option>
                    ))}
                  </select>
                </div>
                {moveTo && (
                  <Confirm
                    label="Move device…"
                    question={`Move ${deviceId} to ${moveTargets(orgs, org?.orgId ?? null).find((t) => (t.orgId ?? 'me') === moveTo)?.label ?? moveTo}?`}
                    confirmLabel="Move device"
                    onConfirm={() => {
                      const target = moveTargets(orgs, org?.orgId ?? null).find((t) => (t.orgId ?? 'me') === moveTo);
                      return target ? move(target.orgId, target.label) : undefined;
                    }}
                  />
                )}
              </div>
            </section>
          )}
        </>
      )}
    </section>
  );
}
