import { useEffect, useRef, useState } from 'preact/hooks';
import { bodyOf, messageOf } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import { ago, showValue } from '../format';
import { Sparkline } from '../components/Sparkline';
import { ActiveAlarms, ConnectivityBadge } from '../components/AlarmBadges';
import { useCursorPages } from '../hooks/useCursorPages';

/** How often an open, visible dashboard asks `GET .../dashboard` whether anything changed. */
export const POLL_SECONDS = 5;

export function Dashboard() {
  const { api, href, can, title, org } = useFleet();
  // The first page comes from the poll below; "More devices" reads the next ones.
  const pages = useCursorPages(
    async (cursor) => {
      const page = bodyOf(await api.GET('/me/dashboard', { params: { query: { cursor: cursor ?? undefined } } }));
      return { items: page.devices, cursor: page.cursor };
    },
    null,
    { initial: false },
  );
  const { items: devices, hasMore: more, error, setError } = pages;
  const [checked, setChecked] = useState<Date | null>(null);
  const etag = useRef<string | null>(null);
  const rendered = useRef(false);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        // AP-DASH with If-None-Match: an unchanged fleet is a bodiless 304.
        const { data, response } = await api.GET('/me/dashboard', {
          params: { header: etag.current ? { 'If-None-Match': etag.current } : {} },
        });
        if (stopped) return;
        if (response.status === 200 && data) {
          etag.current = response.headers.get('etag');
          pages.show({ items: data.devices, cursor: data.cursor });
        }
        setChecked(new Date());
        setError(null);
      } catch (e) {
        if (!stopped) setError(messageOf(e));
      }
      if (!stopped) schedule();
    };
    const schedule = () => {
      clearTimeout(timer);
      // A hidden tab does not poll; it asks once when shown again.
      if (!document.hidden) timer = setTimeout(poll, POLL_SECONDS * 1000);
    };
    const onVisible = () => {
      if (!document.hidden) {
        clearTimeout(timer);
        void poll();
      }
    };
    document.addEventListener('visibilitychange', onVisible);
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, []);

  useEffect(() => {
    if (devices && !rendered.current) {
      rendered.current = true;
      performance.mark('fleet:dashboard-rendered');
    }
  }, [devices]);


  return (
    <section>
      <h1 tabIndex={-1}>{title}</h1>
      {org && <p class="muted" data-role={org.role}>An organization's fleet; your role: <strong>{org.role}</strong>.</p>}
      <p class="muted" aria-live="off">
        {devices ? `${devices.length} device${devices.length === 1 ? '' : 's'}` : 'Loading…'}
        {checked ? ` · checked ${checked.toLocaleTimeString()}, every ${POLL_SECONDS} s while this tab is visible` : ''}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {devices && devices.length === 0 && (
        <p>
          No devices yet.{' '}
          {can(NEEDS.manage) ? <a href={href('/register')}>Register the first device</a> : 'An admin of this organization registers them.'}
        </p>
      )}
      {devices && devices.length > 0 && (
        <div class="scroll">
          <table class="fleet">
            <caption class="sr-only">Devices with their latest readings</caption>
            <thead>
              <tr>
                <th scope="col">Device</th>
                <th scope="col">Type</th>
                <th scope="col">Status</th>
                <th scope="col">Connectivity</th>
                <th scope="col">Active alarms</th>
                <th scope="col">Last seen</th>
                <th scope="col">Latest readings</th>
                <th scope="col">Trend</th>
              </tr>
            </thead>
            <tbody>
              {devices.map((d) => {
                const latest = Object.entries(d.latest ?? {}).sort(([a], [b]) => a.localeCompare(b));
                const firstNumeric = latest.find(([, r]) => typeof r.value === 'number')?.[0];
                return (
                  <tr key={d.deviceId} data-device={d.deviceId}>
                    <th scope="row">
                      <a href={href(`/devices/${encodeURIComponent(d.deviceId)}`)}>{d.name}</a>
                      <div class="muted mono">{d.deviceId}</div>
                    </th>
                    <td>{d.type}</td>
                    <td>
                      <span class={`status ${d.status}`}>{d.status}</span>
                    </td>
                    <td data-connectivity>
                      <ConnectivityBadge connectivity={d.connectivity} />
                    </td>
                    <td data-alarms>
                      <ActiveAlarms alarms={d.alarms} />
                    </td>
                    <td title={d.lastSeen ?? ''}>{ago(d.lastSeen)}</td>
                    <td>
                      {latest.length === 0 ? (
                        <span class="muted">none yet</span>
                      ) : (
                        <dl class="readings">
                          {latest.map(([type, r]) => (
                            <div key={type}>
                              <dt>{type}</dt>
                              <dd data-reading={type}>{showValue(r.value)}</dd>
                            </div>
                          ))}
                        </dl>
                      )}
                    </td>
                    <td>{d.trail || firstNumeric ? <Sparkline trail={d.trail} recent={d.recent ?? []} type={d.trail?.type ?? firstNumeric ?? ''} /> : <span class="muted">—</span>}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {more && (
        <button type="button" onClick={() => void pages.more()}>
          More devices
        </button>
      )}
    </section>
  );
}
