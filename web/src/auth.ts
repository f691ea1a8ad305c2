// Sign-in. On AWS: the stack's Cognito user pool through its hosted UI, authorization code with
// PKCE (no client secret in a browser). Locally (config.json says local): the dev server's
// stand-in users, each a button that asks the dev server for a stand-in token.
//
// The session (the ID token) lives in this module's memory only, never in sessionStorage or
// localStorage: a script injected into the page could read those, and they outlive the tab's
// page. A reload signs in again (on AWS the hosted UI's own cookie makes that one redirect).

export interface Session {
  token: string;
  userId: string;
  name: string;
  admin: boolean;
}

export type Config =
  | { mode: 'local' }
  | { mode: 'cognito'; apiUrl: string; cognitoDomain: string; clientId: string; redirectUri: string };

/** The PKCE verifier and state between leaving for the hosted UI and coming back (not a token). */
const PKCE_KEY = 'fleet.pkce';

let session: Session | null = null;

export function currentSession(): Session | null {
  return session;
}

export function saveSession(signedIn: Session): void {
  session = signedIn;
}

export function clearSession(): void {
  session = null;
}

/** Why the console cannot start: it shows this instead of any sign-in. */
export class ConfigError extends Error {}

function isConfig(value: unknown): value is Config {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  if (v.mode === 'local') return true;
  return (
    v.mode === 'cognito' &&
    ['apiUrl', 'cognitoDomain', 'clientId', 'redirectUri'].every((k) => typeof v[k] === 'string' && v[k] !== '')
  );
}

/**
 * `config.json` beside index.html: written by `make deploy` on AWS, served by the dev server
 * locally. The console fails closed: without a readable, valid one it does not start (it never
 * falls back to local sign-in, which on AWS would be a sign-in that cannot work or, worse, one
 * that trusts whatever answers on its origin).
 */
export async function loadConfig(): Promise<Config> {
  let response: Response;
  try {
    response = await fetch('config.json', { cache: 'no-store' });
  } catch {
    throw new ConfigError('The console could not load its configuration (config.json): the network failed.');
  }
  if (!response.ok) throw new ConfigError(`The console could not load its configuration: config.json answered ${response.status}.`);
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    throw new ConfigError('The console could not read its configuration: config.json is not JSON.');
  }
  if (!isConfig(body)) throw new ConfigError('The console could not read its configuration: config.json names no sign-in it knows.');
  return body;
}

export interface StandInUser {
  userId: string;
  name: string;
  admin: boolean;
}

export async function standInUsers(): Promise<StandInUser[]> {
  const response = await fetch('/local/users');
  if (!response.ok) throw new Error(`The dev server answered ${response.status} for its users.`);
  return ((await response.json()) as { users: StandInUser[] }).users;
}

export async function signInStandIn(userId: string): Promise<Session> {
  const response = await fetch(`/local/users/${encodeURIComponent(userId)}/token`, { method: 'POST' });
  if (!response.ok) throw new Error(`The dev server refused to sign in ${userId}.`);
  const body = (await response.json()) as { token: string; userId: string; name: string; admin: boolean };
  return { token: body.token, userId: body.userId, name: body.name, admin: body.admin };
}

function base64url(bytes: Uint8Array): string {
  let text = '';
  bytes.forEach((b) => (text += String.fromCharCode(b)));
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

/** Sends the browser to Cognito's hosted UI with a PKCE challenge. */
export async function startCognitoSignIn(config: Extract<Config, { mode: 'cognito' }>): Promise<void> {
  const verifier = randomString();
  const state = randomString();
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: config.redirectUri,
    scope: 'openid email profile',
    code_challenge_method: 'S256',
    code_challenge: base64url(digest),
    state,
  });
  location.assign(`${config.cognitoDomain}/oauth2/authorize?${query}`);
}

function claims(jwt: string): Record<string, unknown> {
  const payload = jwt.split('.')[1] ?? '';
  const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
  return JSON.parse(decodeURIComponent(escape(json))) as Record<string, unknown>;
}

/** Back from the hosted UI with `?code=&state=`: the code and verifier for tokens. */
export async function finishCognitoSignIn(config: Extract<Config, { mode: 'cognito' }>): Promise<Session | null> {
  const params = new URLSearchParams(location.search);
  const code = params.get('code');
  if (!code) return null;
  const saved = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? 'null') as { verifier: string; state: string } | null;
  sessionStorage.removeItem(PKCE_KEY);
  history.replaceState(null, '', location.pathname + location.hash);
  if (!saved || saved.state !== params.get('state')) throw new Error('The sign-in answer does not match the sign-in we started; sign in again.');
  const response = await fetch(`${config.cognitoDomain}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: config.clientId,
      code,
      redirect_uri: config.redirectUri,
      code_verifier: saved.verifier,
    }),
  });
  if (!response.ok) throw new Error('Cognito refused the sign-in code; sign in again.');
  const tokens = (await response.json()) as { id_token: string };
  const c = claims(tokens.id_token);
  const groups = c['cognito:groups'];
  return {
    token: tokens.id_token,
    userId: String(c.sub),
    name: String(c.email ?? c.sub),
    admin: Array.isArray(groups) && groups.includes('admin'),
  };
}

export function cognitoSignOutUrl(config: Extract<Config, { mode: 'cognito' }>): string {
  const query = new URLSearchParams({ client_id: config.clientId, logout_uri: config.redirectUri });
  return `${config.cognitoDomain}/logout?${query}`;
}
