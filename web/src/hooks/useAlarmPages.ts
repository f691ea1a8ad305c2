import { useEffect, useState } from 'preact/hooks';
import { api, messageOf } from '../api';
import type { Alarm, AlarmPage } from '../alarms';

/** How many alarms one request asks for. */
export const ALARM_PAGE = 25;

/**
 * A list of alarms read page by page with the API's cursor (`{"alarms", "cursor"}`): the first
 * page on arrival and on `reload`, the next on `more`. `path` carries its own query (or none).
 */
export function useAlarmPages(path: string | null) {
  const [alarms, setAlarms] = useState<Alarm[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  const url = (next: string | null) => {
    const query = new URLSearchParams({ limit: String(ALARM_PAGE) });
    if (next) query.set('cursor', next);
    return `${path}${path?.includes('?') ? '&' : '?'}${query}`;
  };
  const reload = async () => {
    if (!path) return;
    setLoading(true);
    setError(null);
    try {
      const answer = await api<AlarmPage>('GET', url(null));
      setAlarms(answer.body.alarms);
      setCursor(answer.body.cursor ?? null);
    } catch (e) {
      setError(messageOf(e));
      setAlarms(null);
    } finally {
      setLoading(false);
    }
  };
  const more = async () => {
    if (!path || !cursor) return;
    setLoading(true);
    try {
      const answer = await api<AlarmPage>('GET', url(cursor));
      setAlarms((list) => [...(list ?? []), ...answer.body.alarms]);
      setCursor(answer.body.cursor ?? null);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setLoading(false);
    }
  };
  /** One alarm changed (acknowledged): replaced in place, its order kept until the next reload. */
  const replace = (alarm: Alarm) => setAlarms((list) => list?.map((a) => (a.alarmId === alarm.alarmId ? alarm : a)) ?? null);

  useEffect(() => {
    setAlarms(null);
    setCursor(null);
    void reload();
  }, [path]);

  return { alarms, hasMore: Boolean(cursor), error, loading, reload, more, replace };
}
