// Pure helpers, unit-tested in format.test.ts: parsing of API answers' headers, times for
// people, the downloads of a range, the sparkline's points.

import type { Schemas } from './api/client';

/** An event as the API lists it: what the downloads, the chart and the sparkline read. */
type ApiEvent = Schemas['RecentEvent'];

/** Seconds to wait from a `Retry-After` header: delta-seconds or an HTTP date; 1 s if unusable. */
export function retryAfterSeconds(header: string | null, now: number = Date.now()): number {
  if (!header) return 1;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Math.max(1, Math.min(300, Number(trimmed)));
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return 1;
  return Math.max(1, Math.min(300, Math.ceil((at - now) / 1000)));
}

/** "3 min ago", "just now", "never". */
export function ago(at: string | null | undefined, now: number = Date.now()): string {
  if (!at) return 'never';
  const seconds = Math.round((now - Date.parse(at)) / 1000);
  if (Number.isNaN(seconds)) return 'unknown';
  if (seconds < 10) return 'just now';
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

/** A timestamp of the API for people, in their locale and time zone; empty when there is none. */
export function dateTime(at: string | null | undefined): string {
  return at ? new Date(at).toLocaleString() : '';
}

export function showValue(value: Schemas['EventValue']): string {
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
  return String(value);
}

function csvField(text: string): string {
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The events as CSV (RFC 4180: header line, CRLF, quoted where needed), oldest first. */
export function toCsv(events: ApiEvent[]): string {
  const rows = [...events].sort((a, b) => a.at.localeCompare(b.at));
  const lines = ['at,type,value,id'];
  for (const e of rows) lines.push([e.at, e.type, String(e.value), e.id].map(csvField).join(','));
  return lines.join('\r\n') + '\r\n';
}

/** The events as NDJSON, one API event object a line, oldest first. */
export function toNdjson(events: ApiEvent[]): string {
  const rows = [...events].sort((a, b) => a.at.localeCompare(b.at));
  return rows.map((e) => JSON.stringify({ at: e.at, type: e.type, value: e.value, id: e.id })).join('\n') + (rows.length ? '\n' : '');
}

/** A series answer of `GET /me/devices/{deviceId}/series` (the summaries of one type). */
type ApiSeries = Schemas['Series'];

/** The summaries as CSV (RFC 4180), one bucket a line, oldest first; empty cells for a count-only bucket. */
export function seriesCsv(answer: ApiSeries): string {
  const lines = ['start,type,resolution,count,min,max,avg,sum'];
  for (const b of answer.buckets)
    lines.push([b.start, answer.type, answer.resolution, String(b.count), ...[b.min, b.max, b.avg, b.sum].map((v) => (v === undefined ? '' : String(v)))].map(csvField).join(','));
  return lines.join('\r\n') + '\r\n';
}

/** The summaries as NDJSON, one bucket object a line (with its type and resolution), oldest first. */
export function seriesNdjson(answer: ApiSeries): string {
  return answer.buckets.map((b) => JSON.stringify({ type: answer.type, resolution: answer.resolution, ...b })).join('\n') + (answer.buckets.length ? '\n' : '');
}

/**
 * The chart's columns of a series: [epoch seconds, avg, min, max], oldest first, for the
 * buckets with numeric readings (a count-only bucket has nothing to draw).
 */
export function bandColumns(answer: ApiSeries): [number[], number[], number[], number[]] {
  const numeric = answer.buckets.filter((b) => b.avg !== undefined && b.min !== undefined && b.max !== undefined);
  return [numeric.map((b) => Date.parse(b.start) / 1000), numeric.map((b) => b.avg as number), numeric.map((b) => b.min as number), numeric.map((b) => b.max as number)];
}

/** The dashboard trail's hourly averages, oldest first. */
export function trailValues(trail: NonNullable<Schemas['Device']['trail']>): number[] {
  return [...trail.hours].sort((a, b) => a.start.localeCompare(b.start)).map((h) => h.avg);
}

/** Numeric readings of one type as [epoch seconds, value] pairs, oldest first. */
export function series(events: ApiEvent[], type: string): [number[], number[]] {
  const points = events
    .filter((e) => e.type === type && typeof e.value === 'number')
    .map((e) => [Date.parse(e.at) / 1000, e.value as number] as const)
    .sort((a, b) => a[0] - b[0]);
  return [points.map((p) => p[0]), points.map((p) => p[1])];
}

/** An SVG polyline's points for `values` in a `width` x `height` box (a flat line if constant). */
export function sparkPoints(values: number[], width: number, height: number): string {
  if (values.length === 0) return '';
  const min = Math.min(...values);
  const max = Math.max(...values);
  const span = max - min || 1;
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  return values
    .map((v, i) => {
      const x = values.length > 1 ? i * step : width / 2;
      const y = max === min ? height / 2 : height - 1 - ((v - min) / span) * (height - 2);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    })
    .join(' ');
}

/** `datetime-local` input value (local time, minutes) <-> RFC 3339 UTC. */
export function toInputTime(ms: number): string {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

export function fromInputTime(value: string): string | null {
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * A typed reporting interval as the API takes it: a whole number of seconds as a number;
 * anything else as typed, so the API's 400 names `reportEverySeconds` with its own message
 * (the console does not keep a second copy of the rule).
 */
export function intervalValue(typed: string): number | string {
  const text = typed.trim();
  return /^\d{1,9}$/.test(text) ? Number(text) : text;
}
