import { useEffect, useRef, useState } from 'preact/hooks';
import { messageOf } from '../api/client';

/** One page of a listing the API pages with a cursor (`cursor` is null on the last page). */
export interface CursorPage<T> {
  items: T[];
  cursor: string | null;
}

/** Reads the page after `cursor` (the first page for null). */
export type ReadPage<T> = (cursor: string | null) => Promise<CursorPage<T>>;

/**
 * A list read page by page with the API's cursor: the first page on arrival (unless `initial`
 * is false) and whenever `key` changes or `reload` is called, the next on `more`. `readPage`
 * null reads nothing. `show` puts a first page read elsewhere (the dashboard's poll) in place;
 * `replace` puts a changed item (same `idOf`) in place, its order kept until the next reload.
 */
export function useCursorPages<T>(readPage: ReadPage<T> | null, key: unknown, { initial = true, idOf }: { initial?: boolean; idOf?: (item: T) => string } = {}) {
  const [items, setItems] = useState<T[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  // The latest closure: the pages read with what the caller holds now.
  const read = useRef(readPage);
  read.current = readPage;

  const show = (page: CursorPage<T>) => {
    setItems(page.items);
    setCursor(page.cursor);
  };
  const reload = async () => {
    if (!read.current) return;
    setLoading(true);
    setError(null);
    try {
      show(await read.current(null));
    } catch (e) {
      setError(messageOf(e));
      setItems(null);
    } finally {
      setLoading(false);
    }
  };
  const more = async () => {
    if (!read.current || !cursor) return;
    setLoading(true);
    try {
      const page = await read.current(cursor);
      setItems((list) => [...(list ?? []), ...page.items]);
      setCursor(page.cursor);
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setLoading(false);
    }
  };

  useEffect(() => {
    if (!initial) return;
    setItems(null);
    setCursor(null);
    void reload();
  }, [key]);

  const replace = (item: T) => setItems((list) => list?.map((old) => (idOf?.(old) === idOf?.(item) ? item : old)) ?? null);

  return { items, hasMore: Boolean(cursor), error, setError, loading, reload, more, show, replace };
}

/** What `useCursorPages` gives its caller: the items read so far, their state, and what reads more. */
export type CursorPages<T> = ReturnType<typeof useCursorPages<T>>;

/** Every page from the first until the last or until `max` items are read; `truncated` when stopped at `max`. */
export async function readPages<T>(readPage: ReadPage<T>, max: number): Promise<{ items: T[]; truncated: boolean }> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const page: CursorPage<T> = await readPage(cursor);
    items.push(...page.items);
    cursor = page.cursor;
  } while (cursor && items.length < max);
  return { items, truncated: Boolean(cursor) };
}
