import { bodyOf } from '../api/client';
import { useFleet } from '../hooks/useFleet';
import { NEEDS } from '../fleet';
import { ALARM_PAGE, alarmPage, AlarmTable } from '../components/AlarmTable';
import { useCursorPages } from '../hooks/useCursorPages';
import { isOpen } from '../alarms';

/** The fleet's alarms (`GET .../alarms`): open ones first, then newest; paged by cursor. */
export function Alarms() {
  const { api, href, can, org } = useFleet();
  const { items: alarms, hasMore, error, loading, reload, more, replace } = useCursorPages(
    async (cursor) => alarmPage(bodyOf(await api.GET('/me/alarms', { params: { query: { limit: ALARM_PAGE, cursor: cursor ?? undefined } } }))),
    org?.orgId ?? '/me/alarms',
    { idOf: (a) => a.alarmId },
  );
  const open = alarms?.filter(isOpen).length ?? 0;
  return (
    <section>
      <h1 tabIndex={-1}>Alarms</h1>
      <p class="muted">
        Open alarms first, then the newest. An acknowledged alarm stays open until its condition clears.{' '}
        <a href={href('/rules')}>Alarm rules</a>
      </p>
      <p class="actions">
        <button type="button" onClick={() => void reload()} disabled={loading}>
          Refresh
        </button>
        {alarms && (
          <span class="muted" aria-live="polite">
            {alarms.length} alarm{alarms.length === 1 ? '' : 's'} shown, {open} open{hasMore ? '; more below' : ''}
          </span>
        )}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {alarms === null && !error && <p role="status">Loading alarms…</p>}
      {alarms && alarms.length === 0 && (
        <p>
          No alarms.{' '}
          {can(NEEDS.manage) ? (
            <>
              <a href={href('/rules')}>Define a rule</a> to be told when a reading crosses a limit.
            </>
          ) : null}
        </p>
      )}
      {alarms && alarms.length > 0 && <AlarmTable alarms={alarms} caption={org ? `${org.name}'s alarms, open first` : 'Your alarms, open first'} onChanged={can(NEEDS.operate) ? replace : undefined} onReload={() => void reload()} />}
      {hasMore && (
        <button type="button" onClick={() => void more()} disabled={loading}>
          More alarms
        </button>
      )}
    </section>
  );
}
