// The one way the console talks to the API: bearer token, JSON, and the failure rules of the
// console: a 401 returns to sign-in, a 429 (and a read's 503) waits for `Retry-After`, a lost
// connection shows the banner and a read retries until the API answers again.

import { retryAfterSeconds } from './format';
import { setConnection } from './status';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API named (`deviceId`, `tags[1]`, `from`...). */
    readonly field?: string,
  ) {
    super(message);
  }
}

export interface Answer<T> {
  status: number;
  body: T;
  etag: string | null;
}

interface Options {
  body?: unknown;
  headers?: Record<string, string>;
}

let apiBase = '';
let bearer: string | null = null;
let onUnauthorized: () => void = () => {};

export function configureApi(base: string, token: string | null, unauthorized: () => void): void {
  apiBase = base.replace(/\/$/, '');
  bearer = token;
  onUnauthorized = unauthorized;
}

export function apiUrl(path: string): string {
  return apiBase + path;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Longest pause between two tries while the API cannot be reached. */
const MAX_OFFLINE_PAUSE_MS = 8000;
/** How many times a 429 (or a read's 503) is waited out before the error is shown. */
const MAX_RETRY_AFTER_WAITS = 5;

let probing = false;
/** After a write failed to connect: try `GET /me` (AP-01, the cheapest read) until the API answers. */
async function probeUntilOnline(): Promise<void> {
  if (probing) return;
  probing = true;
  for (let pause = 1000; ; pause = Math.min(pause * 2, MAX_OFFLINE_PAUSE_MS)) {
    await sleep(pause);
    try {
      await fetch(apiUrl('/me'), { headers: bearer ? { authorization: `Bearer ${bearer}` } : {} });
      break;
    } catch {
      // still offline
    }
  }
  probing = false;
  setConnection({ offline: false });
}

export async function api<T>(method: string, path: string, options: Options = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const init: RequestInit = {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    // The dashboard's own ETag logic decides; the browser cache must not answer for the API.
    cache: 'no-store',
  };
  const isRead = method === 'GET';
  let waits = 0;
  for (let pause = 1000; ; ) {
    let response: Response;
    try {
      response = await fetch(apiUrl(path), init);
    } catch {
      setConnection({ offline: true });
      if (!isRead) {
        void probeUntilOnline();
        throw new ApiError(0, 'offline', 'The API cannot be reached; nothing was changed. Try again when the banner is gone.');
      }
      await sleep(pause);
      pause = Math.min(pause * 2, MAX_OFFLINE_PAUSE_MS);
      continue;
    }
    setConnection({ offline: false });
    const waitable = response.status === 429 || (response.status === 503 && isRead);
    if (waitable && waits < MAX_RETRY_AFTER_WAITS) {
      waits += 1;
      const seconds = retryAfterSeconds(response.headers.get('retry-after'));
      setConnection({ retryAfter: seconds });
      await sleep(seconds * 1000);
      setConnection({ retryAfter: null });
      continue;
    }
    if (response.status === 401) {
      onUnauthorized();
      throw new ApiError(401, 'unauthorized', 'Your session has ended; sign in again.');
    }
    const text = response.status === 204 || response.status === 304 ? '' : await response.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!response.ok && response.status !== 304) {
      const error = (body as { error?: { code?: string; message?: string; field?: string } } | null)?.error;
      const message = error?.message ?? (body as { message?: string } | null)?.message ?? `HTTP ${response.status}`;
      throw new ApiError(response.status, error?.code ?? 'http_error', message, error?.field);
    }
    return { status: response.status, body: body as T, etag: response.headers.get('etag') };
  }
}

/** The part of a field name a form shows its message beside: `tags[1]` -> `tags`. */
export function fieldOf(error: unknown): string | null {
  if (!(error instanceof ApiError) || !error.field) return null;
  return error.field.replace(/\[\d+\].*$/, '').replace(/\..*$/, '');
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
