import { describe, expect, it } from 'vitest';
import { readPages, type CursorPage } from './useCursorPages';

/** A listing of `total` numbers served `size` a page, the cursor being the next index. */
function listing(total: number, size: number) {
  const asked: (string | null)[] = [];
  const readPage = async (cursor: string | null): Promise<CursorPage<number>> => {
    asked.push(cursor);
    const start = cursor ? Number(cursor) : 0;
    const end = Math.min(total, start + size);
    return { items: Array.from({ length: end - start }, (_, i) => start + i), cursor: end < total ? String(end) : null };
  };
  return { readPage, asked };
}

describe('reading a listing page by page', () => {
  it('follows the cursor from the first page to the last', async () => {
    const { readPage, asked } = listing(7, 3);
    expect(await readPages(readPage, 100)).toEqual({ items: [0, 1, 2, 3, 4, 5, 6], truncated: false });
    expect(asked).toEqual([null, '3', '6']);
  });

  it('stops once it holds the most it may, saying the rest was left', async () => {
    const { readPage } = listing(10, 4);
    expect(await readPages(readPage, 5)).toEqual({ items: [0, 1, 2, 3, 4, 5, 6, 7], truncated: true });
  });
});
