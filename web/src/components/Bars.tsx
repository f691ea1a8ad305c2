/** A bar chart as a table: readable without the bars, by screen readers and in print. */
export function Bars({ title, rows, unit, mark }: { title: string; rows: [string, number][]; unit?: string; mark?: (label: string) => string | null }) {
  const max = Math.max(1, ...rows.map(([, v]) => v));
  return (
    <figure class="bars">
      <figcaption>{title}</figcaption>
      {rows.length === 0 ? (
        <p class="muted">nothing this day</p>
      ) : (
        <table>
          <tbody>
            {rows.map(([label, value]) => (
              <tr key={label}>
                <th scope="row">
                  {label}
                  {mark?.(label) && <span class="flag"> {mark(label)}</span>}
                </th>
                <td class="bar-cell">
                  <span class="bar" style={{ width: `${(value / max) * 100}%` }} />
                </td>
                <td class="num">
                  {value}
                  {unit ?? ''}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </figure>
  );
}
