// The firmware and rollout pages' rules (issue 40 item 8), unit-tested in firmware.test.ts: an
// image's SHA-256 computed in the browser a slice at a time, its PUT, the upload form's and the
// staged-rollout form's bodies, which API field a message belongs beside, a stage's progress as
// chart segments, a rollout's progress in words, and which actions a role has on a rollout in
// which state.

import { sha256 } from '@noble/hashes/sha2.js';
import { ApiError, type Schemas } from './api/client';
import { atLeast, type Role } from './fleet';

export type Firmware = Schemas['Firmware'];
export type Rollout = Schemas['Rollout'];
export type RolloutStage = NonNullable<Rollout['stages']>[number];
export type DeviceFirmware = NonNullable<Schemas['DeviceFirmwareAnswer']['firmware']>;

/** The largest image the API takes (256 MiB). */
export const MAX_IMAGE_BYTES = 256 * 1024 * 1024;

/** Lowercase hex of `bytes`. */
export function hex(bytes: ArrayBuffer | Uint8Array): string {
  return Array.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * How much of an image is read at a time while it is hashed. Web Crypto has no incremental
 * digest, so the image is read in slices fed to one SHA-256: only a slice is in memory at a
 * time (not up to 256 MiB), and the page redraws its progress between slices. 4 MiB keeps the
 * reads few (64 for the largest image) and each slice's hashing short enough not to freeze the page.
 */
export const DIGEST_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * The SHA-256 of `image` as 64 lowercase hex digits, computed here (never taken by the server on
 * our word), reading it `chunkBytes` at a time. `onProgress` gets the whole percent hashed after
 * each slice, rising to 100 (once, for an empty image).
 */
export async function imageSha256Hex(image: Blob, onProgress: (percent: number) => void = () => {}, chunkBytes: number = DIGEST_CHUNK_BYTES): Promise<string> {
  if (!(chunkBytes > 0)) throw new RangeError(`chunkBytes must be positive, not ${chunkBytes}`);
  const digest = sha256.create();
  for (let start = 0; start < image.size; start += chunkBytes) {
    const end = Math.min(start + chunkBytes, image.size);
    digest.update(new Uint8Array(await image.slice(start, end).arrayBuffer()));
    if (end < image.size) onProgress(Math.floor((end / image.size) * 100));
  }
  onProgress(100);
  return hex(digest.digest());
}

/**
 * What a refused image PUT says: its HTTP status and, when the body is S3's XML error, its code
 * and message (an expired URL is `403 AccessDenied: Request has expired`).
 */
export function uploadRefusalText(status: number, body: string): string {
  const code = body.match(/<Code>([^<]*)<\/Code>/)?.[1];
  const message = body.match(/<Message>([^<]*)<\/Message>/)?.[1];
  const detail = [code, message].filter(Boolean).join(': ');
  return `The upload was refused (${status}${detail ? ` ${detail}` : ''}); the package stays pending.`;
}

/**
 * PUTs `image` to its presigned `uploadUrl`. The body is the File itself, so the browser streams
 * it from disk rather than from a copy in memory; XMLHttpRequest rather than fetch because only
 * it reports upload progress. `onProgress` gets the whole percent sent. Rejects with an Error
 * saying what went wrong: the refusal's status, or that the image store could not be reached.
 */
export function putImage(uploadUrl: string, image: Blob, onProgress: (percent: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('PUT', uploadUrl);
    // A listener on `upload` before send: without one the browser reports no upload progress.
    request.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) onProgress(Math.floor((e.loaded / e.total) * 100));
    };
    request.onload = () => (request.status >= 200 && request.status < 300 ? resolve() : reject(new Error(uploadRefusalText(request.status, request.responseText))));
    request.onerror = () => reject(new Error('The upload could not reach the image store (network error, or the request was blocked); the package stays pending.'));
    request.onabort = () => reject(new Error('The upload was interrupted; the package stays pending.'));
    request.send(image);
  });
}

/** What the upload form holds, as typed. */
export interface FirmwareForm {
  deviceType: string;
  version: string;
  signature: string;
}

export const EMPTY_FIRMWARE_FORM: FirmwareForm = { deviceType: '', version: '', signature: '' };

/** The upload form's fields a message may stand beside. */
export type FirmwareField = 'deviceType' | 'version' | 'signature' | 'file' | 'form';

/** `POST /me/firmware`'s body. */
export interface FirmwareBody {
  deviceType: string;
  version: string;
  sha256: string;
  size: number;
  signature?: string;
}

/** A chosen image: its size and the digest computed in the browser. */
export interface ImageFacts {
  size: number;
  sha256: string;
}

/**
 * The create body of the form and the chosen image, or the errors that keep it from being sent.
 * Only what needs no API is checked here (empty fields, no file, a file too large); the
 * version's and type's rules are the API's, whose 400 names the field.
 */
export function firmwareBody(form: FirmwareForm, image: ImageFacts | null): { body: FirmwareBody | null; errors: Partial<Record<FirmwareField, string>> } {
  const errors: Partial<Record<FirmwareField, string>> = {};
  const deviceType = form.deviceType.trim();
  const version = form.version.trim();
  const signature = form.signature.trim();
  if (!deviceType) errors.deviceType = 'Enter the device type the image is for.';
  if (!version) errors.version = 'Enter the image’s version (MAJOR.MINOR.PATCH).';
  if (!image) errors.file = 'Choose the image file.';
  else if (image.size === 0) errors.file = 'The file is empty.';
  else if (image.size > MAX_IMAGE_BYTES) errors.file = 'The image is larger than 256 MiB.';
  if (Object.keys(errors).length || !image) return { body: null, errors };
  return { body: { deviceType, version, sha256: image.sha256, size: image.size, ...(signature ? { signature } : {}) }, errors };
}

/** Which upload-form field an API error names; null for none of them. */
export function firmwareFieldOf(field: string | undefined): FirmwareField | null {
  if (field === 'deviceType' || field === 'version' || field === 'signature') return field;
  if (field === 'sha256' || field === 'size') return 'file';
  return null;
}

/** A package's state in words. */
export function packageStateText(f: Firmware): string {
  if (f.status === 'ready') return 'ready: checked by the service';
  if (f.status === 'rejected') return `rejected: ${f.reason ?? 'the image did not match'}`;
  return 'pending: waiting for its image';
}

/** What the staged-rollout form holds, as typed (numbers as text, so the form can say what is wrong). */
export interface RolloutForm {
  firmwareId: string;
  targetKind: 'tag' | 'type';
  target: string;
  stages: string;
  soakSeconds: string;
  healthyCheckIns: string;
  successPercent: string;
  failurePercent: string;
  minFinished: string;
  windowStart: string;
  windowEnd: string;
}

/** The API's defaults (docs/design.md section 15). */
export const DEFAULT_ROLLOUT_FORM: RolloutForm = {
  firmwareId: '',
  targetKind: 'type',
  target: '',
  stages: '1, 5, 25, 100',
  soakSeconds: '3600',
  healthyCheckIns: '2',
  successPercent: '95',
  failurePercent: '10',
  minFinished: '20',
  windowStart: '',
  windowEnd: '',
};

/** The rollout form's fields a message may stand beside. */
export type RolloutField = 'firmwareId' | 'target' | 'stages' | 'soakSeconds' | 'healthyCheckIns' | 'successPercent' | 'failurePercent' | 'minFinished' | 'window' | 'form';

/** The staged-rollout body (`POST /me/rollouts` with `firmwareId`). */
export interface StagedRolloutBody {
  target: { tag: string } | { type: string };
  firmwareId: string;
  stages: number[];
  soakSeconds: number;
  healthyCheckIns: number;
  successPercent: number;
  abort: { failurePercent: number; minFinished: number };
  maintenanceWindow?: { startHour: number; endHour: number };
}

const WHOLE = /^\d+$/;

/**
 * The staged-rollout body of the form, or the errors that keep it from being sent: each number
 * must be a whole number (the ranges are the API's, whose 400 names the field); stages are
 * comma- or space-separated percents.
 */
export function rolloutBody(form: RolloutForm): { body: StagedRolloutBody | null; errors: Partial<Record<RolloutField, string>> } {
  const errors: Partial<Record<RolloutField, string>> = {};
  if (!form.firmwareId) errors.firmwareId = 'Choose a ready package.';
  const target = form.target.trim();
  if (!target) errors.target = form.targetKind === 'tag' ? 'Enter the tag of the devices to update.' : 'Enter the device type to update.';
  const parts = form.stages.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0 || parts.some((p) => !WHOLE.test(p))) errors.stages = 'Enter whole percents separated by commas, such as 1, 5, 25, 100.';
  const whole = (field: RolloutField, text: string, what: string): number => {
    if (!WHOLE.test(text.trim())) errors[field] = `${what} must be a whole number.`;
    return Number(text.trim());
  };
  const soakSeconds = whole('soakSeconds', form.soakSeconds, 'Soak');
  const healthyCheckIns = whole('healthyCheckIns', form.healthyCheckIns, 'Healthy check-ins');
  const successPercent = whole('successPercent', form.successPercent, 'Success share');
  const failurePercent = whole('failurePercent', form.failurePercent, 'Failure share');
  const minFinished = whole('minFinished', form.minFinished, 'Finished devices');
  let maintenanceWindow: StagedRolloutBody['maintenanceWindow'];
  const [start, end] = [form.windowStart.trim(), form.windowEnd.trim()];
  if (start || end) {
    if (!WHOLE.test(start) || !WHOLE.test(end)) errors.window = 'Enter both hours (0 to 23, UTC), or neither.';
    else maintenanceWindow = { startHour: Number(start), endHour: Number(end) };
  }
  if (Object.keys(errors).length) return { body: null, errors };
  return {
    body: {
      target: form.targetKind === 'tag' ? { tag: target } : { type: target },
      firmwareId: form.firmwareId,
      stages: parts.map(Number),
      soakSeconds,
      healthyCheckIns,
      successPercent,
      abort: { failurePercent, minFinished },
      ...(maintenanceWindow ? { maintenanceWindow } : {}),
    },
    errors,
  };
}

/** Which rollout-form field an API error names (`abort.minFinished` is `minFinished`); null for none. */
export function rolloutFieldOf(field: string | undefined): RolloutField | null {
  if (!field) return null;
  if (field.startsWith('target')) return 'target';
  if (field.startsWith('maintenanceWindow')) return 'window';
  if (field.startsWith('stages')) return 'stages';
  const name = field.replace(/^abort\./, '');
  const known: RolloutField[] = ['firmwareId', 'soakSeconds', 'healthyCheckIns', 'successPercent', 'failurePercent', 'minFinished'];
  return (known as string[]).includes(name) ? (name as RolloutField) : null;
}

/** One segment of a stage's bar. */
export interface Segment {
  kind: 'succeeded' | 'inProgress' | 'failed' | 'waiting';
  label: string;
  count: number;
}

/**
 * A stage's offered devices split for its bar: succeeded, in progress, failed, and offered but
 * not heard from yet (the rest). Timeouts are among the failed (the API counts them there).
 */
export function stageSegments(s: RolloutStage): Segment[] {
  const waiting = Math.max(0, s.offered - s.succeeded - s.inProgress - s.failed);
  return [
    { kind: 'succeeded', label: 'succeeded', count: s.succeeded },
    { kind: 'inProgress', label: 'in progress', count: s.inProgress },
    { kind: 'failed', label: s.timedOut ? `failed (${s.timedOut} timed out)` : 'failed', count: s.failed },
    { kind: 'waiting', label: 'not started', count: waiting },
  ];
}

/** A stage's status in words. */
export function stageStatusText(s: RolloutStage): string {
  switch (s.status) {
    case 'waiting':
      return 'waiting';
    case 'open':
      return 'open';
    case 'soaking':
      return 'met its success share, soaking';
    case 'passed':
      return 'passed';
  }
}

/** The target as a list says it. */
/** The health rule's last whole walk as lines: each stage's updated devices offline or alarmed, then the devices not yet updated. */
export function healthLines(health: Rollout['health']): string[] {
  if (!health) return [];
  const share = (g: { devices: number; unhealthy: number }) => `${g.unhealthy} of ${g.devices} offline or alarmed${g.devices ? ` (${((g.unhealthy / g.devices) * 100).toFixed(1)}%)` : ''}`;
  return [
    ...health.updated.map((g, stage) => `stage ${stage}, updated: ${share(g)}`),
    `not yet updated: ${share(health.notUpdated)}`,
  ];
}

export function targetText(target: Rollout['target']): string {
  return 'tag' in target ? `tag ${target.tag}` : `type ${target.type}`;
}

/** A rollout's progress in a line: devices changed for a desired-state change, the open stage for a firmware one. */
export function progressText(r: Rollout): string {
  if (!r.firmware) return `${r.devicesUpdated} device${r.devicesUpdated === 1 ? '' : 's'} changed${r.devicesFailed ? `, ${r.devicesFailed} left as they were` : ''}`;
  const stages = r.firmware.stages;
  if (r.stages) {
    const open = r.stages.reduce((last, s, i) => (s.status === 'waiting' ? last : i), 0);
    const offered = r.stages.reduce((n, s) => n + s.offered, 0);
    const succeeded = r.stages.reduce((n, s) => n + s.succeeded, 0);
    const failed = r.stages.reduce((n, s) => n + s.failed, 0);
    return `stage ${open} of 0 to ${stages.length - 1} (${stages[open]}%): ${succeeded} of ${offered} offered succeeded, ${failed} failed`;
  }
  return `firmware ${r.firmware.version} in ${stages.length} stage${stages.length === 1 ? '' : 's'} (${stages.join(', ')}%)`;
}

/** The buttons a role has on a rollout as it stands (the API enforces the same roles). */
export function rolloutActions(r: Rollout, role: Role | null): { pause: boolean; resume: boolean; cancel: boolean } {
  const can = (needed: Role) => role === null || atLeast(role, needed);
  const live = r.status === 'running' || r.status === 'paused';
  return {
    pause: Boolean(r.firmware) && r.status === 'running' && can('operator'),
    resume: Boolean(r.firmware) && r.status === 'paused' && can('admin'),
    cancel: live && can('operator'),
  };
}

/** A refused pause, resume or cancel said as what happened. */
export function rolloutRefusalText(e: unknown): string {
  if (!(e instanceof ApiError)) return e instanceof Error ? e.message : String(e);
  switch (e.code) {
    case 'rollout_paused':
      return 'It is paused already.';
    case 'rollout_not_paused':
      return 'It is running already.';
    case 'rollout_ended':
      return 'It has ended (done or cancelled): nothing to change.';
    case 'rollout_not_running':
      return 'It stopped running meanwhile.';
    case 'rollout_not_firmware':
      return 'A desired-state change cannot be paused: cancel it instead.';
    default:
      return e.message;
  }
}

/** A device's firmware phase in words. */
export function devicePhaseText(f: DeviceFirmware): string {
  switch (f.phase) {
    case 'offered':
      return `offered ${f.version}, not started yet`;
    case 'downloading':
      return `downloading ${f.version}`;
    case 'installing':
      return `installing ${f.version}`;
    case 'updated':
      return `running ${f.version}, ${f.healthyCheckIns} healthy check-in${f.healthyCheckIns === 1 ? '' : 's'} so far`;
    case 'succeeded':
      return `updated to ${f.version}`;
    case 'failed':
      return `failed (${f.failure ?? 'unknown'})${f.reason ? `: ${f.reason}` : ''}`;
  }
}
