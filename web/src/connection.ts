// The console-wide connection state the banner shows: offline (a request could not reach the
// API), or waiting out a 429/503 `Retry-After`. Plain listeners, so the API client needs no
// framework.

export interface ConnectionState {
  offline: boolean;
  /** Seconds the API asked us to wait (429 or 503), while we wait. */
  retryAfter: number | null;
}

let state: ConnectionState = { offline: false, retryAfter: null };
const listeners = new Set<(s: ConnectionState) => void>();

export function connection(): ConnectionState {
  return state;
}

export function setConnection(change: Partial<ConnectionState>): void {
  const next = { ...state, ...change };
  if (next.offline === state.offline && next.retryAfter === state.retryAfter) return;
  state = next;
  listeners.forEach((l) => l(state));
}

export function onConnection(listener: (s: ConnectionState) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
