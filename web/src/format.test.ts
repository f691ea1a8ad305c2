import { describe, expect, it } from 'vitest';
import { ago, bandColumns, intervalValue, retryAfterSeconds, seriesCsv, seriesNdjson, sparkPoints, toCsv, toNdjson, series, trailValues } from './format';

const events = [
  { id: 'b', type: 'temperature', value: 21.5, at: '2026-11-20T10:05:00Z' },
  { id: 'a', type: 'note', value: 'door "front", open', at: '2026-11-20T10:00:00Z' },
  { id: 'c', type: 'temperature', value: 22, at: '2026-11-20T10:10:00Z' },
];

describe('downloads of a range', () => {
  it('CSV is oldest first, quotes what needs quoting, ends each line with CRLF', () => {
    expect(toCsv(events)).toBe(
      'at,type,value,id\r\n' +
        '2026-11-20T10:00:00Z,note,"door ""front"", open",a\r\n' +
        '2026-11-20T10:05:00Z,temperature,21.5,b\r\n' +
        '2026-11-20T10:10:00Z,temperature,22,c\r\n',
    );
  });
  it('NDJSON has one parseable event a line, values keep their JSON type', () => {
    const lines = toNdjson(events).trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id)).toEqual(['a', 'b', 'c']);
    expect(lines[1].value).toBe(21.5);
    expect(toNdjson([])).toBe('');
  });
});

describe('reading the API', () => {
  it('Retry-After in seconds or as a date, bounded, 1 s when unusable', () => {
    expect(retryAfterSeconds('7')).toBe(7);
    expect(retryAfterSeconds(null)).toBe(1);
    expect(retryAfterSeconds('soon')).toBe(1);
    expect(retryAfterSeconds('99999')).toBe(300);
    const now = Date.parse('2026-11-20T10:00:00Z');
    expect(retryAfterSeconds('Fri, 20 Nov 2026 10:00:05 GMT', now)).toBe(5);
  });
  it('says how long ago', () => {
    const now = Date.parse('2026-11-20T10:00:00Z');
    expect(ago('2026-11-20T09:57:00Z', now)).toBe('3 min ago');
    expect(ago(null, now)).toBe('never');
  });
  it('sends a typed interval as a number when it is one, else as typed for the API to refuse', () => {
    expect(intervalValue(' 300 ')).toBe(300);
    expect(intervalValue('5m')).toBe('5m');
    expect(intervalValue('1.5')).toBe('1.5');
  });
});

describe('charts', () => {
  it('a series holds only numbers of its type, oldest first', () => {
    expect(series(events, 'temperature')).toEqual([[Date.parse(events[0].at) / 1000, Date.parse(events[2].at) / 1000], [21.5, 22]]);
  });
  it('sparkline points span the box, highest value at the top', () => {
    expect(sparkPoints([1, 3], 100, 20)).toBe('0.0,19.0 100.0,1.0');
    expect(sparkPoints([5, 5], 100, 20)).toBe('0.0,10.0 100.0,10.0');
  });
});

const summaries = {
  deviceId: 'weather-roof',
  type: 'temperature',
  resolution: '1h' as const,
  from: '2026-11-20T10:00:00Z',
  to: '2026-11-20T13:00:00Z',
  buckets: [
    { start: '2026-11-20T10:00:00.000Z', count: 60, min: 10.5, max: 12.25, avg: 11.5, sum: 690 },
    { start: '2026-11-20T12:00:00.000Z', count: 2 },
  ],
};

describe('downloads and chart of the summaries', () => {
  it('CSV has one bucket a line, oldest first, empty cells where a bucket has counts only', () => {
    expect(seriesCsv(summaries)).toBe(
      'start,type,resolution,count,min,max,avg,sum\r\n' +
        '2026-11-20T10:00:00.000Z,temperature,1h,60,10.5,12.25,11.5,690\r\n' +
        '2026-11-20T12:00:00.000Z,temperature,1h,2,,,,\r\n',
    );
  });
  it('NDJSON has one bucket object a line with its type and resolution', () => {
    const lines = seriesNdjson(summaries).trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { type: 'temperature', resolution: '1h', ...summaries.buckets[0] },
      { type: 'temperature', resolution: '1h', ...summaries.buckets[1] },
    ]);
    expect(seriesNdjson({ ...summaries, buckets: [] })).toBe('');
  });
  it('the chart draws the average with its min-max band, skipping count-only buckets', () => {
    expect(bandColumns(summaries)).toEqual([[Date.parse('2026-11-20T10:00:00Z') / 1000], [11.5], [10.5], [12.25]]);
  });
  it("the dashboard's trail is its hourly averages, oldest first", () => {
    expect(trailValues({ type: 'temperature', hours: [{ start: '2026-11-20T11:00:00Z', avg: 2 }, { start: '2026-11-20T10:00:00Z', avg: 1 }] })).toEqual([1, 2]);
  });
});
