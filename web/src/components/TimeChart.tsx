import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** One numeric series over time on a canvas (uPlot). */
export function TimeChart({ label, x, y }: { label: string; x: number[]; y: number[] }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!box.current) return;
    const width = Math.max(320, box.current.clientWidth || 640);
    const plot = new uPlot(
      {
        width,
        height: 260,
        scales: { x: { time: true } },
        series: [{}, { label, stroke: '#1d5fa8', width: 1.5, points: { show: x.length < 60 } }],
        axes: [{}, { size: 60 }],
      },
      [x, y],
      box.current,
    );
    return () => plot.destroy();
  }, [label, x, y]);
  return <div ref={box} class="chart" role="img" aria-label={`${label} over the chosen range: ${y.length} readings`} />;
}
