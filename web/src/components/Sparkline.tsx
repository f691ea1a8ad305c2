import type { Schemas } from '../api/client';
import { sparkPoints, showValue, trailValues } from '../format';

const WIDTH = 120;
const HEIGHT = 28;

/**
 * A device's recent numeric values as a small line (an SVG, no canvas per row): the hourly
 * averages of its last 24 hours (`trail`, from the dashboard answer: no read per device), else
 * its recent events of `type`.
 */
export function Sparkline({ trail, recent, type }: { trail?: Schemas['Device']['trail']; recent: Schemas['RecentEvent'][]; type: string }) {
  const hourly = trail && trail.hours.length > 0;
  const values = hourly
    ? trailValues(trail)
    : recent
        .filter((e) => e.type === type && typeof e.value === 'number')
        .sort((a, b) => a.at.localeCompare(b.at))
        .map((e) => e.value as number);
  if (values.length === 0) return <span class="muted">no numeric readings</span>;
  const shown = values.map(showValue).join(', ');
  const label = hourly ? `${trail.type}, hourly averages of the last 24 hours (${values.length}), oldest first: ${shown}` : `${type}, last ${values.length} values, oldest first: ${shown}`;
  return (
    <svg class="spark" data-trail={hourly ? 'hourly' : 'recent'} width={WIDTH} height={HEIGHT} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={label}>
      <polyline points={sparkPoints(values, WIDTH, HEIGHT)} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}
