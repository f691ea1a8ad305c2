import type { ComponentChildren, VNode } from 'preact';
import type { CursorPages } from '../hooks/useCursorPages';

/** A column heading of a `ListTable`; `num` right-aligns it over a column of numbers. */
export interface Column {
  label: string;
  num?: boolean;
}

/**
 * A list of things as a table, one row each (the row's own `th scope="row"` names it), in a
 * horizontally scrolling frame; `actions` adds a last column, named for screen readers only,
 * for the buttons a role that may change the things gets.
 */
export function ListTable({ tableClass, caption, columns, actions = false, children }: { tableClass: string; caption: string; columns: Column[]; actions?: boolean; children: ComponentChildren }) {
  return (
    <div class="scroll">
      <table class={tableClass}>
        <caption class="sr-only">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.label} scope="col" class={c.num ? 'num' : undefined}>
                {c.label}
              </th>
            ))}
            {actions && (
              <th scope="col">
                <span class="sr-only">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/**
 * A listing read page by page (`useCursorPages`) as a `ListTable`: its error, a loading line
 * until the first page, `empty` when there is nothing, then the rows and, while the API has
 * more, a button (`more`) that appends the next page.
 */
export function PagedTable<T>({ list, loading, empty, more, row, ...table }: { list: CursorPages<T>; loading: string; empty: string; more: string; row: (item: T) => VNode; tableClass: string; caption: string; columns: Column[]; actions?: boolean }) {
  return (
    <>
      {list.error && (
        <p class="error" role="alert">
          {list.error}
        </p>
      )}
      {list.items === null && !list.error && <p role="status">{loading}</p>}
      {list.items && list.items.length === 0 && <p class="muted">{empty}</p>}
      {list.items && list.items.length > 0 && <ListTable {...table}>{list.items.map((item) => row(item))}</ListTable>}
      {list.hasMore && (
        <button type="button" disabled={list.loading} onClick={() => void list.more()}>
          {more}
        </button>
      )}
    </>
  );
}
