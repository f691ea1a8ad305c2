import type { Schemas } from '../api/client';
import { sparkPoints, showValue } from '../format';

const WIDTH = 120;
const HEIGHT = 28;

/** The recent numeric values of one type as a small line: an SVG, no canvas per row. */
export function Sparkline({ recent, type }: { recent: Schemas['RecentEvent'][]; type: string }) {
  const values = recent
    .filter((e) => e.type === type && typeof e.value === 'number')
    .sort((a, b) => a.at.localeCompare(b.at))
    .map((e) => e.value as number);
  if (values.length === 0) return <span class="muted">no numeric readings</span>;
  const label = `${type}, last ${values.length} values, oldest first: ${values.map(showValue).join(', ')}`;
  return (
    <svg class="spark" width={WIDTH} height={HEIGHT} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={label}>
      <polyline points={sparkPoints(values, WIDTH, HEIGHT)} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}
