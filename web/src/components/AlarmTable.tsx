import { useRef, useState } from 'preact/hooks';
import { ApiError, bodyOf, messageOf, type Api, type Schemas } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { alarmTitle, readingText } from '../alarms';
import { dateTime as when } from '../format';
import type { CursorPage } from '../hooks/useCursorPages';
import { SeverityBadge, StateBadge } from './AlarmBadges';

type Alarm = Schemas['Alarm'];

/** How many alarms one request asks for. */
export const ALARM_PAGE = 25;

/** An `AlarmPage` answer as the paging hook reads it. */
export const alarmPage = (page: Schemas['AlarmPage']): CursorPage<Alarm> => ({ items: page.alarms, cursor: page.cursor });

/**
 * `POST .../alarms/{alarmId}/ack` in the fleet of `api`: the alarm as it is now. An alarm that
 * cleared meanwhile is the API's 409; the caller shows the message and reloads.
 */
export async function acknowledge(api: Api, alarm: Alarm): Promise<Alarm> {
  return bodyOf(await api.POST('/me/alarms/{alarmId}/ack', { params: { path: { alarmId: alarm.alarmId } } })).alarm;
}

/**
 * Alarms as a table: severity and state badges, what raised it, and an Acknowledge button on
 * active ones (when `onChanged` is given: the fleet's pages for a role that may acknowledge,
 * not the operators' pages).
 */
export function AlarmTable({ alarms, caption, showDevice = true, showOwner = false, onChanged, onReload }: { alarms: Alarm[]; caption: string; showDevice?: boolean; showOwner?: boolean; onChanged?: (alarm: Alarm) => void; onReload?: () => void }) {
  const { api, href } = useFleet();
  const [busy, setBusy] = useState<string | null>(null);
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);
  // The Acknowledge button goes away once used: keyboard focus moves to what happened instead.
  const noticeRef = useRef<HTMLParagraphElement>(null);
  const ack = async (alarm: Alarm) => {
    setBusy(alarm.alarmId);
    setNotice(null);
    try {
      const now = await acknowledge(api, alarm);
      onChanged?.(now);
      setNotice({ text: `Acknowledged: ${alarmTitle(alarm)} on ${alarm.deviceName ?? alarm.deviceId}.`, error: false });
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        setNotice({ text: `${alarmTitle(alarm)} on ${alarm.deviceName ?? alarm.deviceId} cleared before it was acknowledged; the list is reloaded.`, error: true });
        onReload?.();
      } else setNotice({ text: messageOf(e), error: true });
    } finally {
      setBusy(null);
      setTimeout(() => noticeRef.current?.focus());
    }
  };
  return (
    <>
      <p role="status" tabIndex={-1} ref={noticeRef} class={notice?.error ? 'error' : 'notice'}>
        {notice?.text ?? ''}
      </p>
      <div class="scroll">
        <table class="alarms">
          <caption class="sr-only">{caption}</caption>
          <thead>
            <tr>
              <th scope="col">Alarm</th>
              {showDevice && <th scope="col">Device</th>}
              {showOwner && <th scope="col">Owner</th>}
              <th scope="col">Severity</th>
              <th scope="col">State</th>
              <th scope="col">Raised</th>
              <th scope="col">Reading</th>
              <th scope="col">Cleared</th>
              {onChanged && <th scope="col"><span class="sr-only">Action</span></th>}
            </tr>
          </thead>
          <tbody>
            {alarms.map((a) => (
              <tr key={a.alarmId} data-alarm={a.alarmId} data-device={a.deviceId} data-state={a.state}>
                <th scope="row">
                  {alarmTitle(a)}
                  {a.reminders ? <div class="muted">{a.reminders} reminder{a.reminders === 1 ? '' : 's'} sent</div> : null}
                </th>
                {showDevice && (
                  <td>
                    <a href={href(`/devices/${encodeURIComponent(a.deviceId)}`)}>{a.deviceName ?? a.deviceId}</a>
                    {a.deviceName && <div class="muted mono">{a.deviceId}</div>}
                  </td>
                )}
                {showOwner && <td class="mono">{a.userId}</td>}
                <td>
                  <SeverityBadge severity={a.severity} />
                </td>
                <td>
                  <StateBadge state={a.state} />
                  {a.acknowledgedAt && <div class="muted">{when(a.acknowledgedAt)}</div>}
                </td>
                <td>{when(a.raisedAt)}</td>
                <td>{readingText(a.reading)}</td>
                <td>{a.clearedAt ? when(a.clearedAt) : <span class="muted">open</span>}</td>
                {onChanged && (
                  <td>
                    {a.state === 'active' && (
                      <button type="button" disabled={busy === a.alarmId} aria-label={`Acknowledge ${alarmTitle(a)} on ${a.deviceName ?? a.deviceId}`} onClick={() => void ack(a)}>
                        Acknowledge
                      </button>
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
