import { describe, expect, it } from 'vitest';
import { ApiError } from './api/client';
import {
  DEFAULT_ROLLOUT_FORM,
  devicePhaseText,
  DIGEST_CHUNK_BYTES,
  EMPTY_FIRMWARE_FORM,
  firmwareBody,
  firmwareFieldOf,
  healthLines,
  hex,
  imageSha256Hex,
  progressText,
  rolloutActions,
  rolloutBody,
  rolloutFieldOf,
  rolloutRefusalText,
  stageSegments,
  uploadRefusalText,
  type DeviceFirmware,
  type Rollout,
} from './firmware';

const rollout = (change: Partial<Rollout>): Rollout => ({
  rolloutId: 'r-000001732561234-00000000000000aa',
  target: { type: 'thermostat' },
  status: 'running',
  devicesUpdated: 0,
  devicesFailed: 0,
  failures: [],
  createdAt: '2026-11-29T06:00:00.000Z',
  firmware: {
    firmwareId: 'f-1',
    version: '2.0.0',
    deviceType: 'thermostat',
    stages: [50, 100],
    soakSeconds: 1,
    healthyCheckIns: 0,
    successPercent: 60,
    abort: { failurePercent: 50, minFinished: 2 },
  },
  ...change,
});

describe('the image digest', () => {
  /** `size` bytes that differ from slice to slice (a hash fed a slice twice or out of order would differ). */
  const bytesOf = (size: number) => Uint8Array.from({ length: size }, (_, i) => (i * 31 + (i >> 8)) % 251);
  const oneShot = async (bytes: Uint8Array) => hex(await crypto.subtle.digest('SHA-256', bytes as BufferSource));

  it('is the SHA-256 of the bytes, in lowercase hex', async () => {
    expect(await imageSha256Hex(new Blob([new TextEncoder().encode('abc')]))).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(await imageSha256Hex(new Blob([]))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(new Uint8Array([0, 15, 255]))).toBe('000fff');
  });

  it('read a slice at a time is the one-shot Web Crypto digest, on either side of every slice boundary, its progress rising to 100', async () => {
    const chunk = 7;
    for (const size of [0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3 * chunk + 4, 10 * chunk - 1]) {
      const bytes = bytesOf(size);
      const reported: number[] = [];
      const digest = await imageSha256Hex(new Blob([bytes]), (percent) => reported.push(percent), chunk);
      expect(digest, `${size} bytes`).toBe(await oneShot(bytes));
      // A report after each slice, none falling, the last 100 (and only the last).
      expect(reported, `${size} bytes`).toHaveLength(Math.max(1, Math.ceil(size / chunk)));
      expect(reported.every((p, i) => i === 0 || p >= reported[i - 1]), `${reported} rises`).toBe(true);
      expect(reported.at(-1)).toBe(100);
      expect(reported.indexOf(100)).toBe(reported.length - 1);
    }
    const reported: number[] = [];
    await imageSha256Hex(new Blob([bytesOf(4 * chunk)]), (percent) => reported.push(percent), chunk);
    expect(reported).toEqual([25, 50, 75, 100]);
  });

  it('reads the default slice size by default: an image of a few slices hashes as one', async () => {
    expect(DIGEST_CHUNK_BYTES).toBe(4 * 1024 * 1024);
    const bytes = bytesOf(2 * DIGEST_CHUNK_BYTES + 12345);
    const reported: number[] = [];
    expect(await imageSha256Hex(new Blob([bytes]), (percent) => reported.push(percent))).toBe(await oneShot(bytes));
    expect(reported).toEqual([49, 99, 100]);
  });

  it('takes no empty slice size (it would never finish)', async () => {
    await expect(imageSha256Hex(new Blob([bytesOf(3)]), () => {}, 0)).rejects.toThrow(RangeError);
  });
});

describe("a refused image upload's message", () => {
  it("says the status and, from S3's XML error, its code and message", () => {
    const expired = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Request has expired</Message><RequestId>1</RequestId></Error>';
    expect(uploadRefusalText(403, expired)).toBe('The upload was refused (403 AccessDenied: Request has expired); the package stays pending.');
    expect(uploadRefusalText(502, 'Bad Gateway')).toBe('The upload was refused (502); the package stays pending.');
    expect(uploadRefusalText(400, '<Error><Code>EntityTooLarge</Code></Error>')).toBe('The upload was refused (400 EntityTooLarge); the package stays pending.');
  });
});

describe('the upload form', () => {
  it('sends the declared type, version, digest and size, and a signature only when given', () => {
    const image = { size: 3000, sha256: 'a'.repeat(64) };
    expect(firmwareBody({ deviceType: ' thermostat ', version: '2.0.0', signature: '' }, image).body).toEqual({ deviceType: 'thermostat', version: '2.0.0', sha256: 'a'.repeat(64), size: 3000 });
    expect(firmwareBody({ deviceType: 't', version: '1.0.0', signature: 'c2ln' }, image).body?.signature).toBe('c2ln');
  });
  it('names each missing field and an empty or too large file, and sends nothing', () => {
    const { body, errors } = firmwareBody(EMPTY_FIRMWARE_FORM, null);
    expect(body).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(['deviceType', 'file', 'version']);
    expect(firmwareBody({ deviceType: 't', version: '1.0.0', signature: '' }, { size: 0, sha256: '' }).errors.file).toMatch(/empty/);
    expect(firmwareBody({ deviceType: 't', version: '1.0.0', signature: '' }, { size: 256 * 1024 * 1024 + 1, sha256: '' }).errors.file).toMatch(/256 MiB/);
  });
  it('puts the API’s field messages beside the field (the digest and size beside the file)', () => {
    expect(firmwareFieldOf('version')).toBe('version');
    expect(firmwareFieldOf('sha256')).toBe('file');
    expect(firmwareFieldOf('size')).toBe('file');
    expect(firmwareFieldOf('somethingElse')).toBeNull();
  });
});

describe('the staged rollout form', () => {
  it('sends the plan with whole numbers, the target by kind, and a window only when given', () => {
    const { body } = rolloutBody({ ...DEFAULT_ROLLOUT_FORM, firmwareId: 'f-1', target: 'thermostat', stages: '50,100' });
    expect(body).toEqual({
      target: { type: 'thermostat' },
      firmwareId: 'f-1',
      stages: [50, 100],
      soakSeconds: 3600,
      healthyCheckIns: 2,
      successPercent: 95,
      abort: { failurePercent: 10, minFinished: 20 },
    });
    const tagged = rolloutBody({ ...DEFAULT_ROLLOUT_FORM, firmwareId: 'f-1', targetKind: 'tag', target: 'lab', windowStart: '22', windowEnd: '4' }).body;
    expect(tagged?.target).toEqual({ tag: 'lab' });
    expect(tagged?.maintenanceWindow).toEqual({ startHour: 22, endHour: 4 });
    expect(tagged?.stages).toEqual([1, 5, 25, 100]);
  });
  it('names what is not a whole number, a missing target, package or half a window', () => {
    const { body, errors } = rolloutBody({ ...DEFAULT_ROLLOUT_FORM, stages: '1, five', soakSeconds: '1.5', windowStart: '3' });
    expect(body).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(['firmwareId', 'soakSeconds', 'stages', 'target', 'window']);
  });
  it('puts the API’s field messages beside the field', () => {
    expect(rolloutFieldOf('abort.minFinished')).toBe('minFinished');
    expect(rolloutFieldOf('target.type')).toBe('target');
    expect(rolloutFieldOf('maintenanceWindow.endHour')).toBe('window');
    expect(rolloutFieldOf('stages[2]')).toBe('stages');
    expect(rolloutFieldOf('soakSeconds')).toBe('soakSeconds');
    expect(rolloutFieldOf('desired')).toBeNull();
    expect(rolloutFieldOf(undefined)).toBeNull();
  });
});

describe('a rollout as the pages show it', () => {
  it('splits a stage into succeeded, in progress, failed (with its timeouts) and not started', () => {
    const segments = stageSegments({ percent: 50, status: 'open', offered: 10, inProgress: 2, succeeded: 3, failed: 4, timedOut: 1, retried: 0 });
    expect(segments.map((s) => [s.kind, s.count])).toEqual([
      ['succeeded', 3],
      ['inProgress', 2],
      ['failed', 4],
      ['waiting', 1],
    ]);
    expect(segments[2].label).toBe('failed (1 timed out)');
  });
  it('says the progress of each kind', () => {
    expect(progressText(rollout({ firmware: undefined, desired: { mode: 'eco' }, devicesUpdated: 1, devicesFailed: 2 }))).toBe('1 device changed, 2 left as they were');
    expect(progressText(rollout({}))).toBe('firmware 2.0.0 in 2 stages (50, 100%)');
    const stages = [
      { percent: 50, status: 'passed' as const, offered: 3, inProgress: 0, succeeded: 3, failed: 0, timedOut: 0, retried: 0 },
      { percent: 100, status: 'open' as const, offered: 4, inProgress: 0, succeeded: 0, failed: 2, timedOut: 0, retried: 0 },
    ];
    expect(progressText(rollout({ stages }))).toBe('stage 1 of 0 to 1 (100%): 3 of 7 offered succeeded, 2 failed');
  });
  it('offers pause to an operator of a running firmware rollout, resume to an admin of a paused one, cancel while it lives', () => {
    expect(rolloutActions(rollout({}), null)).toEqual({ pause: true, resume: false, cancel: true });
    expect(rolloutActions(rollout({ status: 'paused' }), 'admin')).toEqual({ pause: false, resume: true, cancel: true });
    expect(rolloutActions(rollout({ status: 'paused' }), 'operator')).toEqual({ pause: false, resume: false, cancel: true });
    expect(rolloutActions(rollout({}), 'viewer')).toEqual({ pause: false, resume: false, cancel: false });
    expect(rolloutActions(rollout({ status: 'done' }), 'owner')).toEqual({ pause: false, resume: false, cancel: false });
    expect(rolloutActions(rollout({ firmware: undefined }), null)).toEqual({ pause: false, resume: false, cancel: true });
  });
  it('says the health of the last walk, per stage and for the devices not yet updated', () => {
    expect(healthLines(undefined)).toEqual([]);
    expect(healthLines({ updated: [{ devices: 6, unhealthy: 2 }], notUpdated: { devices: 12, unhealthy: 1 } })).toEqual([
      'stage 0, updated: 2 of 6 offline or alarmed (33.3%)',
      'not yet updated: 1 of 12 offline or alarmed (8.3%)',
    ]);
  });
  it('says a refused action as what happened', () => {
    expect(rolloutRefusalText(new ApiError(409, 'rollout_paused', 'x'))).toBe('It is paused already.');
    expect(rolloutRefusalText(new ApiError(409, 'rollout_ended', 'x'))).toMatch(/ended/);
    expect(rolloutRefusalText(new ApiError(500, 'internal', 'boom'))).toBe('boom');
  });
  it('says a device’s phase', () => {
    const f: DeviceFirmware = { rolloutId: 'r', firmwareId: 'f', version: '2.0.0', stage: 0, phase: 'updated', healthyCheckIns: 1, attempts: 1, offeredAt: '2026-11-29T06:00:00.000Z', updatedAt: '2026-11-29T06:00:00.000Z' };
    expect(devicePhaseText(f)).toBe('running 2.0.0, 1 healthy check-in so far');
    expect(devicePhaseText({ ...f, phase: 'failed', failure: 'verify', reason: 'bad digest' })).toBe('failed (verify): bad digest');
  });
});
