import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

const LINE = '#1d5fa8';
/** The min–max band: the line's blue, light enough for the average to read over it. */
const BAND = 'rgba(29, 95, 168, 0.18)';

/**
 * One numeric series over time on a canvas (uPlot). With `band` (the summaries' per-bucket
 * minimum and maximum), `y` is the buckets' average drawn over its min–max band.
 */
export function TimeChart({ label, x, y, band }: { label: string; x: number[]; y: number[]; band?: { min: number[]; max: number[] } }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current) return;
    const width = Math.max(320, box.current.clientWidth || 640);
    const edge = { stroke: BAND, width: 1, points: { show: false } };
    const plot = new uPlot(
      {
        width,
        height: 260,
        scales: { x: { time: true } },
        series: band
          ? [{}, { label: `${label} (average)`, stroke: LINE, width: 1.5, points: { show: x.length < 60 } }, { ...edge, label: 'min' }, { ...edge, label: 'max' }]
          : [{}, { label, stroke: LINE, width: 1.5, points: { show: x.length < 60 } }],
        // uPlot fills between series 3 (max) and series 2 (min).
        bands: band ? [{ series: [3, 2], fill: BAND }] : undefined,
        axes: [{}, { size: 60 }],
      },
      band ? [x, y, band.min, band.max] : [x, y],
      box.current,
    );
    return () => plot.destroy();
  }, [label, x, y, band]);
  const what = band ? `${y.length} summaries, average with its minimum–maximum band` : `${y.length} readings`;
  return <div ref={box} class="chart" data-band={band ? 'min-max' : undefined} role="img" aria-label={`${label} over the chosen range: ${what}`} />;
}
