// The one way the console talks to the API: a client generated from docs/openapi.yaml
// (openapi-fetch over ./schema.d.ts) whose fetch carries the bearer token and the console's
// failure rules: a 401 returns to sign-in, a 429 (and a read's 503) waits for `Retry-After`, a
// lost connection shows the banner and a read retries until the API answers again. Any other
// answer that is not a success is thrown as an `ApiError`.

import createClient from 'openapi-fetch';
import { retryAfterSeconds } from '../format';
import { setConnection } from '../connection';
import { fleetUrl } from '../fleet';
import type { components, paths } from './schema';

/** The API's JSON shapes, as docs/openapi.yaml declares them. */
export type Schemas = components['schemas'];

/** The device statuses (`DeviceStatus`), in the order the forms offer them. */
export const STATUSES: readonly Schemas['DeviceStatus'][] = ['active', 'inactive', 'maintenance', 'error'];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API named (`deviceId`, `tags[1]`, `from`...). */
    readonly field?: string,
    /** On a 403 `role_required`: the role the action needs. */
    readonly requiredRole?: string,
  ) {
    super(message);
  }
}

let apiBase = '';
let bearer: string | null = null;
let onUnauthorized: () => void = () => {};
let onRoleRefused: () => void = () => {};

export function configureApi(base: string, token: string | null, unauthorized: () => void, roleRefused: () => void = () => {}): void {
  const next = base.replace(/\/$/, '');
  if (next !== apiBase) fleetClients.clear();
  apiBase = next;
  bearer = token;
  onUnauthorized = unauthorized;
  onRoleRefused = roleRefused;
  api = createClient<paths>({ baseUrl: apiBase, fetch: (r) => fetchWithRules(r, null) });
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

/**
 * `fetch` with the console's failure rules; the generated client builds `request`. `orgId`
 * sends a fleet route (`/me/...`) to that organization's twin (`/orgs/{orgId}/...`).
 */
async function fetchWithRules(request: Request, orgId: string | null): Promise<Response> {
  const headers = new Headers(request.headers);
  if (bearer) headers.set('authorization', `Bearer ${bearer}`);
  // The dashboard's own ETag logic decides; the browser cache must not answer for the API.
  const prepared = new Request(fleetUrl(request.url, orgId, apiBase), {
    method: request.method,
    headers,
    body: request.body === null ? undefined : await request.text(),
    cache: 'no-store',
  });
  const isRead = request.method === 'GET';
  let waits = 0;
  for (let pause = 1000; ; ) {
    let response: Response;
    try {
      response = await fetch(prepared.clone());
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
    if (!response.ok && response.status !== 304) {
      const error = await errorOf(response);
      // A role lowered (or a membership ended) since the page was drawn: the console reloads
      // the person's organizations, so the page stops offering what the role cannot do.
      if (error.code === 'role_required' || (orgId && error.status === 404 && error.message === 'organization not found')) onRoleRefused();
      throw error;
    }
    return response;
  }
}

/** The API's error body (`Error`) or API Gateway's (`GatewayMessage`) as an `ApiError`. */
async function errorOf(response: Response): Promise<ApiError> {
  let body: Partial<Schemas['Error'] & Schemas['GatewayMessage']> | null = null;
  try {
    body = JSON.parse(await response.text());
  } catch {
    body = null;
  }
  const error = body?.error;
  const message = error?.message ?? body?.message ?? `HTTP ${response.status}`;
  return new ApiError(response.status, error?.code ?? 'http_error', message, error?.field, error?.requiredRole);
}

/**
 * The API, typed by docs/openapi.yaml: `api.GET('/me/devices/{deviceId}', { params: ... })`.
 * Every failure is thrown (above), so a call that returns has the success answer.
 */
export let api = createClient<paths>({ fetch: (r) => fetchWithRules(r, null) });

/** A client of the API, typed by docs/openapi.yaml. */
export type Api = typeof api;

const fleetClients = new Map<string, Api>();

/**
 * The API of one fleet: its paths are the `/me/...` fleet routes, sent as they are for My
 * fleet (`orgId` null) and to the organization's `/orgs/{orgId}/...` twin otherwise (same
 * method, body and answer). Pages take it from `useFleet()`; other routes use `api`.
 */
export function fleetApi(orgId: string | null): Api {
  if (orgId === null) return api;
  let client = fleetClients.get(orgId);
  if (!client) {
    client = createClient<paths>({ baseUrl: apiBase, fetch: (r) => fetchWithRules(r, orgId) });
    fleetClients.set(orgId, client);
  }
  return client;
}

/** A success answer's body: `bodyOf(await api.GET(...))`. */
export function bodyOf<T>(answer: { data?: T; response: Response }): T {
  if (answer.data === undefined) throw new ApiError(answer.response.status, 'http_error', `HTTP ${answer.response.status} without a body`);
  return answer.data;
}

/** The part of a field name a form shows its message beside: `tags[1]` -> `tags`. */
export function fieldOf(error: unknown): string | null {
  if (!(error instanceof ApiError) || !error.field) return null;
  return error.field.replace(/\[\d+\].*$/, '').replace(/\..*$/, '');
}

/**
 * The API's 403 `role_required`: the person's role in the organization does not allow what
 * was asked (it may have been lowered since the page was drawn). Pages say it outside the form
 * that sent it, since that form goes away once the console follows the role.
 */
export function isRoleRefusal(error: unknown): error is ApiError {
  return error instanceof ApiError && error.code === 'role_required';
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
