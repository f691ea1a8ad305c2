// The console in a real browser (Debian's chromium through playwright-core) against a running
// dev stack: `fleet-dev serve` on a free port, with the built console (web/dist).
//
//   node tests/browser.mjs                 the tests; prints "test result: ok. N passed; M failed;"
//   node tests/browser.mjs --screenshots   the same, writing a PNG of each page into docs/
//   BROWSER_ONLY=regex node tests/browser.mjs   only the tests whose name matches (while working on them)
//
// Environment: FLEET_DEV_BIN (default $CARGO_TARGET_DIR/debug/fleet-dev), CHROMIUM
// (default /usr/bin/chromium), CONSOLE_METRICS (where the measured budgets go, JSON).
// Budgets (bundle size, first render, requests) are measured and written, never asserted as
// timings; behaviour (what a user sees) is asserted.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Buffer } from 'node:buffer';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const web = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(web, '..');
const screenshots = process.argv.includes('--screenshots');
const targetDir = process.env.CARGO_TARGET_DIR ? resolve(repo, process.env.CARGO_TARGET_DIR) : join(repo, 'target');
const devBin = process.env.FLEET_DEV_BIN ?? join(targetDir, 'debug', 'fleet-dev');
const metricsPath = process.env.CONSOLE_METRICS ?? join(targetDir, 'console-metrics.json');
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
  });
}

/**
 * A webhook receiver on a loopback port (the dev stack allows it by WEBHOOK_ALLOWED_LOCAL_TARGETS):
 * it keeps every request; under `/auto/` it answers a `webhook.confirm` delivery with its token
 * (the endpoint confirms itself), elsewhere with a plain 200 (its owner pastes the token).
 */
async function startReceiver() {
  const received = [];
  const server = createHttpServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      let parsed = null;
      try {
        parsed = JSON.parse(body);
      } catch {
        parsed = null;
      }
      received.push({ path: request.url, headers: request.headers, body, json: parsed });
      const token = parsed?.type === 'webhook.confirm' ? parsed.data?.confirmationToken : null;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(request.url.startsWith('/auto/') && token ? JSON.stringify({ confirmationToken: token }) : '{"ok":true}');
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const target = `127.0.0.1:${server.address().port}`;
  return { target, url: (path) => `http://${target}${path}`, received, stop: () => server.close() };
}

/** Whether a received delivery's `webhook-signature` verifies with `secret` (Standard Webhooks: HMAC-SHA256 of `id.timestamp.body`, keyed by the secret's base64 after `whsec_`). */
function signedWith(delivery, secret) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`).digest();
  return String(delivery.headers['webhook-signature'] ?? '')
    .split(' ')
    .some((s) => s.startsWith('v1,') && Buffer.from(s.slice(3), 'base64').length === expected.length && timingSafeEqual(Buffer.from(s.slice(3), 'base64'), expected));
}

/** `fleet-dev serve` on a free port; resolves once it printed its banner and wrote the demo history. */
async function startDevStack(receiver) {
  const port = await freePort();
  const child = spawn(devBin, ['serve'], {
    cwd: repo,
    env: { ...process.env, PORT: String(port), FLEET_CONSOLE_DIR: join(web, 'dist'), RUST_LOG: 'warn', WEBHOOK_ALLOWED_LOCAL_TARGETS: receiver.target },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`fleet-dev did not start and write its demo history in 300 s:\n${output}`)), 300_000);
    const read = (chunk) => {
      output += chunk;
      // The month of minute readings (weather-roof) is written after the banner: wait for it too.
      if (output.includes('Device Fleet is running locally') && output.includes('Demo history ready') && /DynamoDB Local\s+\S+\s+\(table [^,]+,/.test(output)) {
        clearTimeout(timer);
        ok();
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => fail(new Error(`fleet-dev exited (${code}):\n${output}`)));
    child.once('error', (e) => fail(new Error(`cannot start ${devBin}: ${e.message}`)));
  });
  child.stdout.resume();
  child.stderr.resume();
  // The banner names DynamoDB Local and the table: `fleet-dev invoke` runs a scheduled event
  // against them, as `sam local invoke` would.
  const [, endpoint, table] = output.match(/DynamoDB Local\s+(\S+)\s+\(table ([^,]+),/) ?? [];
  return { url: `http://127.0.0.1:${port}`, dynamodb: { endpoint, table }, stop: () => child.kill('SIGTERM'), exited: new Promise((r) => child.once('exit', r)) };
}

// ------------------------------------------------------------------ the catalog's patterns
/** Every fleet request the console may make, each an access pattern of the catalog. */
const FLEET_PATTERNS = [
  ['GET', /^\/me$/, 'AP-01'],
  ['GET', /^\/me\/dashboard$/, 'AP-DASH'],
  ['GET', /^\/me\/devices\/[^/]+$/, 'AP-03'],
  ['GET', /^\/me\/devices\/[^/]+\/events$/, 'AP-04'],
  ['GET', /^\/me\/devices\/[^/]+\/series$/, 'AP-29'],
  ['POST', /^\/me\/devices$/, 'AP-07'],
  ['PATCH', /^\/me\/devices\/[^/]+$/, 'AP-06'],
  ['DELETE', /^\/me\/devices\/[^/]+$/, 'AP-08'],
  ['POST', /^\/me\/devices\/[^/]+\/token$/, 'AP-17'],
  ['DELETE', /^\/me\/devices\/[^/]+\/token$/, 'AP-18'],
  ['GET', /^\/admin\/events$/, 'AP-09'],
  ['GET', /^\/admin\/devices$/, 'AP-13'],
  ['GET', /^\/admin\/reports\/[^/]+$/, 'AP-15'],
  // Alarms (issue 22).
  ['GET', /^\/me\/rules$/, 'AP-20'],
  ['POST', /^\/me\/rules$/, 'AP-19'],
  ['PATCH', /^\/me\/rules\/[^/]+$/, 'AP-21'],
  ['DELETE', /^\/me\/rules\/[^/]+$/, 'AP-22'],
  ['GET', /^\/me\/alarms$/, 'AP-23'],
  ['GET', /^\/me\/devices\/[^/]+\/alarms$/, 'AP-24'],
  ['POST', /^\/me\/alarms\/[^/]+\/ack$/, 'AP-25'],
  ['GET', /^\/admin\/alarms$/, 'AP-26'],
  // The device twin (issue 25).
  ['PUT', /^\/me\/devices\/[^/]+\/desired$/, 'AP-T1'],
  ['POST', /^\/me\/devices\/[^/]+\/commands$/, 'AP-T2'],
  ['GET', /^\/me\/devices\/[^/]+\/commands$/, 'AP-T3'],
  // Moves and retention (issues 33 and 32).
  ['POST', /^\/me\/devices\/[^/]+\/move$/, 'AP-M1'],
  ['GET', /^\/me\/retention$/, 'AP-R2'],
  ['PUT', /^\/me\/retention$/, 'AP-R1'],
];
/** The webhook routes the console calls (issue 41), each an access pattern of the catalog (AP-W1 to AP-W10; the console never reads one endpoint alone, AP-W3). */
const WEBHOOK_PATTERNS = [
  ['GET', /^\/me\/webhooks$/, 'AP-W2'],
  ['POST', /^\/me\/webhooks$/, 'AP-W1'],
  ['PATCH', /^\/me\/webhooks\/[^/]+$/, 'AP-W4'],
  ['DELETE', /^\/me\/webhooks\/[^/]+$/, 'AP-W5'],
  ['POST', /^\/me\/webhooks\/[^/]+\/rotate-secret$/, 'AP-W6'],
  ['POST', /^\/me\/webhooks\/[^/]+\/confirm$/, 'AP-W7'],
  ['POST', /^\/me\/webhooks\/[^/]+\/test$/, 'AP-W8'],
  ['GET', /^\/me\/webhooks\/[^/]+\/deliveries$/, 'AP-W9'],
  ['POST', /^\/me\/webhooks\/[^/]+\/deliveries\/[^/]+\/retry$/, 'AP-W10'],
];
/** The firmware and rollout routes (issue 40): AP-F1 to AP-F11, and AP-T6 for a rollout's progress. `POST /me/rollouts` is AP-T5 or, for a firmware rollout, AP-F6 ({@link countRequest} tells them apart). */
const FIRMWARE_PATTERNS = [
  ['GET', /^\/me\/firmware$/, 'AP-F3'],
  ['POST', /^\/me\/firmware$/, 'AP-F1'],
  ['GET', /^\/me\/firmware\/[^/]+$/, 'AP-F2'],
  ['DELETE', /^\/me\/firmware\/[^/]+$/, 'AP-F4'],
  ['PUT', /^\/me\/firmware-keys\/[^/]+$/, 'AP-F5'],
  ['GET', /^\/me\/rollouts$/, 'AP-F10'],
  ['POST', /^\/me\/rollouts$/, 'AP-T5'],
  ['GET', /^\/me\/rollouts\/[^/]+$/, 'AP-T6'],
  ['POST', /^\/me\/rollouts\/[^/]+\/pause$/, 'AP-F7'],
  ['POST', /^\/me\/rollouts\/[^/]+\/resume$/, 'AP-F8'],
  ['POST', /^\/me\/rollouts\/[^/]+\/cancel$/, 'AP-F9'],
  ['GET', /^\/me\/devices\/[^/]+\/firmware$/, 'AP-F11'],
];
/** Every API request the console may make: the fleet routes, their organizations' twins (the same pattern on the organization's fleet, after AP-O13, the caller's membership) and the organizations' own (AP-O1 to AP-O12). */
const PATTERNS = [
  ...FLEET_PATTERNS,
  ...WEBHOOK_PATTERNS,
  ...FIRMWARE_PATTERNS,
  ...[...FLEET_PATTERNS, ...WEBHOOK_PATTERNS, ...FIRMWARE_PATTERNS].filter(([, re]) => re.source.startsWith('^\\/me\\/')).map(([method, re, id]) => [method, new RegExp(re.source.replace('^\\/me\\/', '^\\/orgs\\/[^/]+\\/')), `${id} + AP-O13`]),
  ['GET', /^\/orgs$/, 'AP-O2'],
  ['POST', /^\/orgs$/, 'AP-O1'],
  ['GET', /^\/orgs\/[^/]+\/members$/, 'AP-O6'],
  ['PATCH', /^\/orgs\/[^/]+\/members\/[^/]+$/, 'AP-O7'],
  ['DELETE', /^\/orgs\/[^/]+\/members\/[^/]+$/, 'AP-O8'],
  ['PATCH', /^\/orgs\/[^/]+$/, 'AP-O4'],
  ['DELETE', /^\/orgs\/[^/]+$/, 'AP-O5'],
  ['GET', /^\/orgs\/[^/]+\/invitations$/, 'AP-O10'],
  ['POST', /^\/orgs\/[^/]+\/invitations$/, 'AP-O9'],
  ['DELETE', /^\/orgs\/[^/]+\/invitations\/[^/]+$/, 'AP-O11'],
  ['POST', /^\/invitations\/[^/]+\/accept$/, 'AP-O12'],
];
/** What the console loads that is not the API: its own files and, locally, the stand-in sign-in. */
const CONSOLE_FILES = /^\/(|index\.html|config\.json|assets\/.+|local\/users(\/[^/]+\/token)?)$/;

const requests = { byPattern: {}, consoleFiles: 0, imageUploads: 0, unknown: [], external: [] };
/** A firmware image's presigned PUT to the dev stack's image bucket on moto's server (the template's S3 hosts on AWS). */
const IMAGE_UPLOAD = /^http:\/\/127\.0\.0\.1:\d+\/device-fleet-firmware-dev\/firmware\/[^/?]+\/[^/?]+\?/;
function recordRequest(base, request) {
  const url = new URL(request.url());
  if (url.protocol === 'data:' || url.protocol === 'blob:') return;
  if (request.method() === 'PUT' && IMAGE_UPLOAD.test(request.url())) {
    requests.imageUploads += 1;
    return;
  }
  if (url.origin !== base) {
    requests.external.push(request.url());
    return;
  }
  if (CONSOLE_FILES.test(url.pathname)) {
    requests.consoleFiles += 1;
    return;
  }
  const hit = PATTERNS.find(([m, re]) => m === request.method() && re.test(url.pathname));
  if (hit) countRequest(hit[2], request);
  else requests.unknown.push(`${request.method()} ${url.pathname}`);
}

/** Counts one request of pattern `id`. */
function countPattern(id) {
  requests.byPattern[id] = (requests.byPattern[id] ?? 0) + 1;
}

/** Rollout starts whose pattern is told by their answer (awaited before the requests are checked). */
const rolloutStarts = [];

/**
 * Counts a request matched as `id`. A rollout start is AP-T5, or AP-F6 when it starts a firmware rollout: the console's
 * fetch sends its body as a stream that Chromium does not expose (`postData()` is null), so the answer tells them apart
 * (a firmware rollout has `firmware`).
 */
function countRequest(id, request) {
  if (!id.startsWith('AP-T5')) {
    countPattern(id);
    return;
  }
  rolloutStarts.push(
    request
      .response()
      .then((response) => response?.json())
      .then((body) => (body?.rollout?.firmware ? id.replace('AP-T5', 'AP-F6') : id))
      .catch(() => id)
      .then(countPattern),
  );
}

// ------------------------------------------------------------------ helpers
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const axeResults = {};
/** axe-core on the page as it is; fails on any serious or critical violation. */
async function axe(page, name) {
  // Evaluated through the DevTools protocol: an inline <script> tag would be refused by the
  // console's Content-Security-Policy (script-src 'self'), as it should be.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help }));
  });
  const blocking = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  axeResults[name] = { serious: result.filter((v) => v.impact === 'serious').length, critical: result.filter((v) => v.impact === 'critical').length, minorOrModerate: result.length - blocking.length, violations: result };
  assert.deepEqual(blocking, [], `axe-core on ${name}: serious or critical violations`);
}

async function shot(page, name) {
  if (!screenshots) return;
  mkdirSync(join(repo, 'docs'), { recursive: true });
  await page.screenshot({ path: join(repo, 'docs', `console-${name}.png`), fullPage: true });
}

async function text(locator) {
  return (await locator.textContent())?.trim() ?? '';
}

async function signIn(page, base, user) {
  await page.goto(`${base}/`);
  await page.getByRole('button', { name: user, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
}

/**
 * Reloads the page at its route and signs in again: the session lives in the page's memory
 * only, so a reload starts at the sign-in page and the route is kept.
 */
async function reloadSignedIn(page, user) {
  await page.reload();
  await page.getByRole('button', { name: user, exact: true }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** template.yaml's Content-Security-Policy for the console, as written (with its `${...}`). */
function templatePolicy() {
  const template = readFileSync(join(repo, 'template.yaml'), 'utf8');
  const match = template.match(/^\s+ContentSecurityPolicy: !Sub "(.+)"$/m);
  assert.ok(match, "template.yaml's ConsoleSecurityHeaders has a ContentSecurityPolicy");
  return match[1];
}

/** The policy the dev server must send: the template's, without the AWS origins (`${...}`). */
function localPolicy() {
  return templatePolicy()
    .split(';')
    .map((d) => d.trim().split(/\s+/).filter((s) => !s.includes('${')).join(' '))
    .filter(Boolean)
    .join('; ');
}

/** The page moved focus to its heading (each page does on arrival). */
async function focusOnHeading(page) {
  await page.waitForFunction(() => document.activeElement?.tagName === 'H1');
}

/**
 * Presses Tab (or Shift+Tab, `backwards`) until the focused element's text or label matches
 * `name` (at most 40 times).
 */
async function tabTo(page, name, backwards = false) {
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press(backwards ? 'Shift+Tab' : 'Tab');
    const focused = await page.evaluate(() => {
      const el = document.activeElement;
      return el ? `${el.textContent ?? ''} ${el.getAttribute('aria-label') ?? ''} ${el.id}`.trim() : '';
    });
    if (name instanceof RegExp ? name.test(focused) : focused.includes(name)) return;
  }
  throw new Error(`Tab never reached ${name}`);
}

async function sendEvent(base, deviceId, token, value) {
  const response = await fetch(`${base}/devices/${deviceId}/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events: [{ type: 'temperature', value, at: new Date().toISOString() }] }),
  });
  return response.status;
}

/** A stand-in user's bearer token, as the sign-in page gets it. */
async function userToken(base, sub) {
  const response = await fetch(`${base}/local/users/${sub}/token`, { method: 'POST' });
  assert.equal(response.status, 200, `a token for ${sub}`);
  return (await response.json()).token;
}

/** One API request with a user's token: { status, body, etag }. */
async function callApi(base, token, method, path, body, headers = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: response.status, body: parsed, etag: response.headers.get('etag') };
}

/** A test that cannot run yet: counted as ignored, with the reason, never as passed. */
class Skip extends Error {}

/**
 * Skips the test when the API has no route for `method path` yet (API Gateway's, or the dev
 * server's, 404 for a path no route serves). Any other answer means the route is there.
 */
async function needRoute(base, token, method, path) {
  const probe = await callApi(base, token, method, path);
  const routeless = probe.status === 404 && (probe.body?.message === 'Not Found' || probe.body?.error?.message === 'Not Found');
  if (routeless) throw new Skip(`the API has no route ${method} ${path} yet`);
}

/** Sends readings of `value` until `GET /me/alarms` shows an open alarm on the device (rules reach ingestion within their cache's bound). */
async function raiseAlarm(base, userTok, deviceId, deviceTok, value, seconds = 90) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    assert.equal(await sendEvent(base, deviceId, deviceTok, value), 200);
    const answer = await callApi(base, userTok, 'GET', '/me/alarms?limit=50');
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const alarm = answer.body.alarms.find((a) => a.deviceId === deviceId && a.state !== 'cleared');
    if (alarm) return alarm;
    await sleep(2000);
  }
  throw new Error(`no alarm on ${deviceId} after ${seconds} s of readings at ${value}`);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

// ------------------------------------------------------------------ the tests
const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const metrics = {};

test('the sign-in page lists one button per demo user, labelled with the user', async ({ page, base }) => {
  await page.goto(`${base}/`);
  await page.getByRole('heading', { name: 'Sign in to Device Fleet' }).waitFor();
  // The users come from their own request after the heading renders: wait for the list.
  const users = page.getByRole('list').getByRole('button');
  await users.first().waitFor();
  const buttons = await users.allTextContents();
  assert.deepEqual(buttons, ['demo-alice', 'demo-bob', 'demo-utility', 'demo-operator', 'demo-carol', 'demo-dave', 'demo-erin']);
  await axe(page, 'sign-in');
  await shot(page, 'sign-in');
});

test('a demo user signs in and sees the demo fleet with readings and sparklines', async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  const kitchen = page.locator('tr[data-device="thermo-kitchen"]');
  await kitchen.waitFor();
  assert.match(await text(kitchen.locator('th')), /Kitchen thermostat/);
  assert.equal(await text(kitchen.locator('.status')), 'active');
  assert.match(await text(kitchen.locator('[data-reading="temperature"]')), /^\d/);
  assert.match(await kitchen.locator('svg.spark').getAttribute('aria-label'), /^(humidity|temperature), (last \d+ values|hourly averages of the last 24 hours)/);
  assert.equal(await page.locator('tr[data-device="thermo-office"]').count(), 0, "Bob's device is not Alice's");
  await axe(page, 'dashboard');
  await shot(page, 'dashboard');

  // First render on the demo data: the sign-in click to the fleet table drawn, from a reload
  // (the session is in memory only, so a reload signs in again; median of 5).
  const renders = [];
  for (let i = 0; i < 5; i++) {
    await page.reload();
    const button = page.getByRole('button', { name: 'demo-alice', exact: true });
    await button.waitFor();
    const clickedAt = await page.evaluate(() => performance.now());
    await button.click();
    await kitchen.waitFor();
    renders.push(await page.evaluate((t0) => (performance.getEntriesByName('fleet:dashboard-rendered').at(-1)?.startTime ?? NaN) - t0, clickedAt));
  }
  metrics.firstRenderMs = { median: Math.round(median(renders)), runs: renders.map(Math.round) };
});

let registered = null;
test("registering shows the API's 400 beside its field, then the token once with its curl command", async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.getByRole('link', { name: 'Register a device' }).click();
  await page.getByRole('heading', { name: 'Register a device' }).waitFor();
  await page.getByLabel('Device id').fill('bad#id');
  await page.getByLabel('Name').fill('Porch sensor');
  await page.getByLabel('Type').fill('thermostat');
  await page.getByRole('button', { name: 'Register' }).click();
  const error = page.locator('#reg-deviceId-error');
  await error.waitFor();
  assert.match(await text(error), /deviceId/i, "the API's message, beside the device id");
  assert.equal(await page.getByLabel('Device id').getAttribute('aria-invalid'), 'true');
  await axe(page, 'register (with a field error)');

  const deviceId = `porch-${Date.now().toString(36)}`;
  await page.getByLabel('Device id').fill(deviceId);
  await page.getByRole('button', { name: 'Register' }).click();
  const tokenInput = page.locator('#token-value');
  await tokenInput.waitFor();
  const token = await tokenInput.inputValue();
  assert.match(token, /^dft_/);
  assert.ok((await text(page.locator('pre'))).includes(`Bearer ${token}`), 'the curl command carries the token');
  assert.ok((await text(page.locator('pre'))).includes(`${base}/devices/${deviceId}/events`));
  await axe(page, 'register (token shown)');
  await shot(page, 'register');
  registered = { deviceId, token };

  // Taken ids are the API's 409, beside the field too.
  await page.getByRole('button', { name: 'Register another' }).click();
  await page.getByLabel('Device id').fill(deviceId);
  await page.getByLabel('Name').fill('Again');
  await page.getByLabel('Type').fill('thermostat');
  await page.getByRole('button', { name: 'Register' }).click();
  await page.locator('#reg-deviceId-error').waitFor();
});

test('a reading sent with the device token appears on the dashboard without a reload', async ({ page, base }) => {
  assert.ok(registered, 'needs the registered device');
  await signIn(page, base, 'demo-alice');
  const row = page.locator(`tr[data-device="${registered.deviceId}"]`);
  await row.waitFor();
  assert.match(await text(row), /none yet/);
  await page.evaluate(() => (window.__sameDocument = true));
  assert.equal(await sendEvent(base, registered.deviceId, registered.token, 23.75), 200);
  await row.locator('[data-reading="temperature"]').waitFor({ timeout: 20_000 });
  assert.equal(await text(row.locator('[data-reading="temperature"]')), '23.75');
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'no reload happened');
});

test("the device page charts its history, downloads it, and shows a bad edit's 400 beside the field", async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.getByRole('link', { name: 'Kitchen thermostat' }).click();
  await page.getByRole('heading', { level: 1, name: 'Kitchen thermostat' }).waitFor();
  await page.getByRole('button', { name: 'Last 24 hours' }).click();
  await page.locator('.chart canvas').first().waitFor();
  // The chart of the range shown before may still be there: wait for the day's events, by the
  // line that counts them (on a busy machine the dev server took over 10 s to answer; a count
  // under 6 was seen in CI without saying how many, so the assertion says it).
  const counted = page.getByText(/^\d+ events? in the range/);
  await counted.waitFor({ timeout: 60_000 });
  const listed = Number((await text(counted)).match(/^\d+/)?.[0] ?? 0);
  assert.ok(listed >= 6, `the demo events are listed: "${await text(counted)}"`);
  await page.locator('.events tbody tr').nth(5).waitFor();
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
  const csvText = readFileSync(await csv.path(), 'utf8');
  assert.match(csvText, /^at,type,value,id\r\n/);
  assert.ok(csvText.trim().split('\r\n').length >= 7);
  const [nd] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download NDJSON' }).click()]);
  const lines = readFileSync(await nd.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, csvText.trim().split('\r\n').length - 1, 'both downloads hold the same events');
  await axe(page, 'device');
  await shot(page, 'device');

  await page.getByLabel('Tags (comma-separated)').fill('home, no#pe');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#edit-tags-error').waitFor();
  assert.match(await text(page.locator('#edit-tags-error')), /tags/i);
});

/** Pixels of the chart's canvas in the min–max band's colour (the line's blue, translucent). */
async function bandPixels(page) {
  return page.locator('.chart canvas').first().evaluate((canvas) => {
    const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    // The band is rgba(29, 95, 168, 0.18) on a transparent canvas: alpha about 46 (84 under its
    // edges), the colour un-premultiplied only roughly; the line itself is opaque.
    let n = 0;
    for (let i = 0; i < data.length; i += 4) {
      const [r, g, b, a] = [data[i], data[i + 1], data[i + 2], data[i + 3]];
      if (a >= 25 && a <= 100 && Math.abs(r - 29) < 25 && Math.abs(g - 95) < 25 && Math.abs(b - 168) < 25) n++;
    }
    return n;
  });
}

test('30 days of the minute-by-minute demo device are one summaries request, drawn as an average with its min–max band; 90 days and a year too; the summaries download', async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  // The dashboard's sparkline: the last 24 hours' hourly averages, from the dashboard answer.
  const roof = page.locator('tr[data-device="weather-roof"]');
  await roof.waitFor();
  assert.equal(await roof.locator('svg.spark').getAttribute('data-trail'), 'hourly');
  assert.match(await roof.locator('svg.spark').getAttribute('aria-label'), /^temperature, hourly averages of the last 24 hours \((24|25)\), oldest first: /);

  await roof.getByRole('link', { name: 'Roof weather station' }).click();
  await page.getByRole('heading', { level: 1, name: 'Roof weather station' }).waitFor();
  // The first range (24 hours) is the raw events, as before.
  await page.getByText(/^\d+ events in the range/).waitFor();
  const reads = { series: 0, events: 0 };
  page.on('request', (r) => {
    const path = new URL(r.url()).pathname;
    if (path === '/me/devices/weather-roof/series') reads.series++;
    if (path === '/me/devices/weather-roof/events') reads.events++;
  });

  await page.getByRole('button', { name: 'Last 30 days' }).click();
  const chart = page.locator('.chart[data-band="min-max"]');
  await chart.locator('canvas').first().waitFor();
  await sleep(1000); // any stray request would have gone by now
  metrics.thirtyDayChartRequests = { ...reads };
  assert.deepEqual(reads, { series: 1, events: 0 }, '30 days: one request, the summaries');
  assert.equal(await page.locator('[data-summaries]').getAttribute('data-summaries'), '1h');
  const summary = await text(page.locator('[data-summaries]'));
  const [, readings, buckets] = summary.match(/^(\d+) temperature readings in (\d+) hourly summaries/) ?? [];
  assert.ok(Number(readings) > 42_000 && Number(readings) <= 43_200, summary);
  assert.ok(Number(buckets) >= 719 && Number(buckets) <= 721, summary);
  assert.match(await chart.getAttribute('aria-label'), /average with its minimum–maximum band/);
  const band = await bandPixels(page);
  metrics.thirtyDayBandPixels = band;
  assert.ok(band > 5000, `the min–max band is drawn (${band} pixels in its colour)`);
  assert.equal(await page.locator('.events').count(), 0, 'no raw events were read for the table');
  await axe(page, 'device (30 days of summaries)');
  await shot(page, 'device-summaries');

  // The summaries as CSV: a bucket a line, the readings counted as on screen.
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download summaries CSV' }).click()]);
  const lines = readFileSync(await csv.path(), 'utf8').trim().split('\r\n');
  assert.equal(lines[0], 'start,type,resolution,count,min,max,avg,sum');
  assert.equal(lines.length - 1, Number(buckets));
  assert.equal(lines.slice(1).reduce((n, l) => n + Number(l.split(',')[3]), 0), Number(readings));
  assert.match(lines[1], /^\d{4}-\d\d-\d\dT\d\d:00:00(\.000)?Z,temperature,1h,\d+,[-\d.]+,[-\d.]+,[-\d.]+,[-\d.]+$/);
  const [nd] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download summaries NDJSON' }).click()]);
  assert.equal(readFileSync(await nd.path(), 'utf8').trim().split('\n').length, Number(buckets));
  assert.deepEqual(reads, { series: 1, events: 0 }, 'the downloads are what was read');

  // 90 days and a year: one request each, daily summaries.
  for (const [range, total] of [['Last 90 days', 2], ['Last year', 3]]) {
    await Promise.all([page.waitForResponse((r) => new URL(r.url()).pathname.endsWith('/series')), page.getByRole('button', { name: range }).click()]);
    await page.locator('[data-summaries="1d"]').waitFor();
    await chart.locator('canvas').first().waitFor();
    assert.ok((await bandPixels(page)) > 0, `${range}: the band is drawn`);
    await sleep(500);
    assert.deepEqual(reads, { series: total, events: 0 }, `${range}: one request`);
  }
});

test("the device page edits the desired state, sends a command and shows its state as the device takes them", async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.getByRole('link', { name: 'Kitchen thermostat' }).click();
  await page.getByRole('heading', { level: 1, name: 'Kitchen thermostat' }).waitFor();
  // A document nested too deep: the API's 400 beside the field.
  await page.getByLabel('Desired state (JSON)').fill('{"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}');
  await page.getByRole('button', { name: 'Save desired state' }).click();
  await page.locator('#twin-desired-error').waitFor();
  assert.match(await text(page.locator('#twin-desired-error')), /deep/);
  await page.getByLabel('Desired state (JSON)').fill('{"reportIntervalSeconds": 120}');
  await page.getByRole('button', { name: 'Save desired state' }).click();
  await page.locator('#twin-versions', { hasText: 'Desired version 1' }).waitFor();
  assert.match(await text(page.locator('#twin-versions')), /waiting for the device/);
  // A command: a bad name is a 400 beside its field, a good one is listed as queued.
  await page.getByLabel('Command', { exact: true }).fill('re#boot');
  await page.getByRole('button', { name: 'Send command' }).click();
  await page.locator('#command-name-error').waitFor();
  await page.getByLabel('Command', { exact: true }).fill('reboot');
  await page.getByRole('button', { name: 'Send command' }).click();
  await page.locator('#commands td.command-queued').first().waitFor();
  const id = await text(page.locator('#commands tbody tr').first().locator('td').first());
  // The device's next batch carries both; it reports and acknowledges in its next request.
  const token = 'dft_demo-thermo-kitchen-local-only-token';
  const batch = await fetch(`${base}/devices/thermo-kitchen/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events: [{ type: 'temperature', value: 21, at: new Date().toISOString() }] }),
  }).then((r) => r.json());
  assert.deepEqual(batch.desired, { version: 1, state: { reportIntervalSeconds: 120 } });
  assert.equal(batch.commands[0].commandId, id);
  const sync = await fetch(`${base}/devices/thermo-kitchen/sync`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reported: { version: 1, state: { reportIntervalSeconds: 120 } }, acks: [{ commandId: id, status: 'succeeded' }] }),
  }).then((r) => r.json());
  assert.deepEqual(sync.acknowledged, [id]);
  await reloadSignedIn(page, 'demo-alice');
  await page.locator('#twin-versions', { hasText: 'in sync' }).waitFor();
  await page.locator('#commands td.command-succeeded').first().waitFor();
  await axe(page, 'device twin');
});

test('rotating, revoking and deleting each ask first and take effect', async ({ page, base }) => {
  assert.ok(registered, 'needs the registered device');
  await signIn(page, base, 'demo-alice');
  await page.goto(`${base}/#/devices/${registered.deviceId}`);
  await page.getByRole('heading', { level: 1, name: 'Porch sensor' }).waitFor();
  await page.getByRole('button', { name: 'Rotate token…' }).click();
  await page.getByRole('button', { name: 'Rotate token', exact: true }).click();
  await page.locator('#token-value').waitFor();
  const fresh = await page.locator('#token-value').inputValue();
  assert.notEqual(fresh, registered.token);
  assert.equal(await sendEvent(base, registered.deviceId, fresh, 24), 200, 'the new token works');
  assert.equal(await sendEvent(base, registered.deviceId, registered.token, 24.5), 200, 'the old one during its overlap');

  await page.getByRole('button', { name: 'Revoke token…' }).click();
  await page.getByRole('button', { name: 'Revoke token', exact: true }).click();
  await page.getByText('Token revoked').waitFor();
  // Ingestion refuses it once its registration cache (REGISTRATION_CACHE_SECONDS, 30 s) turns
  // over; tests/it/credentials.rs holds the API to that, so this test does not wait for it.

  await page.getByRole('button', { name: 'Delete device…' }).click();
  await page.getByRole('button', { name: 'Cancel' }).click();
  assert.equal(await page.getByRole('button', { name: 'Delete device…' }).count(), 1, 'cancel keeps it');
  await page.getByRole('button', { name: 'Delete device…' }).click();
  await page.getByRole('button', { name: 'Delete device', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  assert.equal(await page.locator(`tr[data-device="${registered.deviceId}"]`).count(), 0);
});

test('an operator opens the daily report with its charts, events of a type and devices by status', async ({ page, base }) => {
  await signIn(page, base, 'demo-operator');
  await page.getByRole('link', { name: 'Operators' }).click();
  await page.getByRole('heading', { level: 1, name: 'Operators' }).waitFor();
  for (const chart of ['Devices by status', 'Devices by type', 'Events by type', 'Top devices (events)']) {
    const figure = page.locator('figure', { has: page.getByText(chart, { exact: true }) });
    await figure.waitFor();
    assert.ok((await figure.locator('tbody tr').count()) > 0, `${chart} has bars`);
  }
  assert.ok((await page.locator('figure', { hasText: 'Partition heat' }).locator('tbody tr').count()) > 0);
  await page.getByRole('button', { name: 'Find devices' }).click();
  await page.locator('section[aria-labelledby="status-title"] table', { hasText: 'thermo-kitchen' }).waitFor();
  await page.getByLabel('Event type').fill('temperature');
  await page.getByRole('button', { name: 'Find events' }).click();
  await page.locator('#ev-type-error').waitFor();
  assert.match(await text(page.locator('#ev-type-error')), /type/i, "a type that is not searchable: the API's 400 beside it");
  await page.getByLabel('Event type').fill('alarm');
  await page.getByRole('button', { name: 'Find events' }).click();
  await page.getByText('No such events in the range.').waitFor();
  await axe(page, 'operators');
  await shot(page, 'operators');
});

test("a rule is created with the API's 400 beside its field, edited (a 412 reloads it) and deleted after asking", async ({ page, base }) => {
  const alice = await userToken(base, 'demo-alice');
  await needRoute(base, alice, 'GET', '/me/rules');
  await signIn(page, base, 'demo-alice');
  await page.getByRole('navigation').getByRole('link', { name: 'Alarm rules' }).click();
  await page.getByRole('heading', { level: 1, name: 'Alarm rules' }).waitFor();
  const name = `Cellar too cold ${Date.now().toString(36)}`;
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Event type').fill('temperature');
  await page.getByLabel('Scope').selectOption('tag');
  await page.getByLabel('Tag', { exact: true }).fill('cellar');
  await page.locator('#rule-condition-kind').selectOption('below');
  await page.locator('#rule-condition-value').fill('4');
  await page.locator('#rule-clear-kind').selectOption('above');
  await page.locator('#rule-clear-value').fill('6');
  await page.getByLabel('Severity').selectOption('minor');
  await page.getByLabel('Remind every (seconds, optional)').fill('30');
  await page.getByRole('button', { name: 'Create rule' }).click();
  const error = page.locator('#rule-remindEvery-error');
  await error.waitFor();
  assert.match(await text(error), /remindEverySeconds/, "the API's message, beside the reminder");
  assert.equal(await page.getByLabel('Remind every (seconds, optional)').getAttribute('aria-invalid'), 'true');
  await axe(page, 'rules (with a field error)');

  await page.getByLabel('Remind every (seconds, optional)').fill('3600');
  await page.getByRole('button', { name: 'Create rule' }).click();
  const row = page.locator('tr[data-rule]', { hasText: name });
  await row.waitFor();
  assert.match(await text(row), /devices tagged cellar/);
  assert.match(await text(row), /temperature below 4/);
  assert.match(await text(row), /temperature above 6/);
  assert.match(await text(row), /every 1 h/);
  assert.equal(await text(row.locator('.badge')), 'minor');
  await axe(page, 'rules');
  await shot(page, 'rules');

  // Someone else changes the rule while it is open here: saving is the API's 412, and the form
  // shows their version.
  const ruleId = await row.getAttribute('data-rule');
  await row.getByRole('button', { name: `Edit ${name}` }).click();
  await page.getByRole('heading', { level: 2, name: `Edit “${name}”` }).waitFor();
  const listed = (await callApi(base, alice, 'GET', '/me/rules')).body.rules.find((r) => r.ruleId === ruleId);
  const theirs = await callApi(base, alice, 'PATCH', `/me/rules/${ruleId}`, { name: `${name} (theirs)` }, { 'if-match': String(listed.version) });
  assert.equal(theirs.status, 200, JSON.stringify(theirs.body));
  await page.getByLabel('Severity').selectOption('major');
  await page.getByRole('button', { name: 'Save rule' }).click();
  await page.getByText('Someone else changed this rule meanwhile').waitFor();
  assert.equal(await page.getByLabel('Name').inputValue(), `${name} (theirs)`);
  await page.getByLabel('Severity').selectOption('major');
  await page.getByRole('button', { name: 'Save rule' }).click();
  const saved = page.locator(`tr[data-rule="${ruleId}"]`);
  await saved.locator('.badge', { hasText: 'major' }).waitFor();
  assert.match(await text(saved), /\(theirs\)/);

  await saved.getByRole('button', { name: 'Delete…' }).click();
  await page.getByRole('button', { name: 'Cancel' }).click();
  assert.equal(await saved.count(), 1, 'cancel keeps it');
  await saved.getByRole('button', { name: 'Delete…' }).click();
  await page.getByRole('button', { name: 'Delete rule', exact: true }).click();
  await saved.waitFor({ state: 'detached' });
  assert.equal((await callApi(base, alice, 'GET', '/me/rules')).body.rules.some((r) => r.ruleId === ruleId), false, 'gone from the API too');
});

test('readings over a rule raise an alarm: on the alarms page, the dashboard and the device page; it is acknowledged', async ({ page, base }) => {
  // The utility's rules, which no other test's readings have put in ingestion's rule cache
  // (RULES_CACHE_SECONDS) yet; raiseAlarm keeps sending until the rule applies anyway.
  const owner = await userToken(base, 'demo-utility');
  await needRoute(base, owner, 'GET', '/me/rules');
  await needRoute(base, owner, 'GET', '/me/alarms');
  const deviceId = `freezer-${Date.now().toString(36)}`;
  const registered = await callApi(base, owner, 'POST', '/me/devices', { deviceId, name: 'Freezer probe', type: 'thermostat' });
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  const deviceTok = registered.body.token;

  await signIn(page, base, 'demo-utility');
  await page.getByRole('navigation').getByRole('link', { name: 'Alarm rules' }).click();
  await page.getByRole('heading', { level: 1, name: 'Alarm rules' }).waitFor();
  await page.getByLabel('Name').fill('Freezer thawing');
  await page.getByLabel('Event type').fill('temperature');
  await page.getByLabel('Scope').selectOption('deviceId');
  await page.getByLabel('Device id').fill(deviceId);
  await page.locator('#rule-condition-kind').selectOption('above');
  await page.locator('#rule-condition-value').fill('-5');
  await page.locator('#rule-clear-kind').selectOption('below');
  await page.locator('#rule-clear-value').fill('-10');
  await page.getByLabel('Severity').selectOption('critical');
  await page.getByRole('button', { name: 'Create rule' }).click();
  await page.locator('tr[data-rule]', { hasText: 'Freezer thawing' }).waitFor();
  assert.equal(await sendEvent(base, deviceId, deviceTok, -18), 200);
  assert.deepEqual((await callApi(base, owner, 'GET', `/me/devices/${deviceId}/alarms`)).body.alarms, [], 'a normal reading raises nothing');

  const alarm = await raiseAlarm(base, owner, deviceId, deviceTok, 2.5);
  assert.equal(alarm.severity, 'critical');
  assert.equal(alarm.kind, 'threshold');

  await page.getByRole('navigation').getByRole('link', { name: 'Alarms', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Alarms' }).waitFor();
  const row = page.locator(`tr[data-alarm="${alarm.alarmId}"]`);
  await row.waitFor();
  assert.match(await text(row), /Freezer thawing/);
  assert.match(await text(row), /temperature 2\.5/);
  assert.equal(await text(row.locator('.badge.sev-critical')), 'critical');
  assert.equal(await text(row.locator('.badge.state-active')), 'active');
  assert.notEqual(await page.locator('tbody tr').first().getAttribute('data-state'), 'cleared', 'open alarms first');
  await axe(page, 'alarms');
  await shot(page, 'alarms');

  // The dashboard: the device's connectivity, its active alarm count and highest severity.
  await page.getByRole('link', { name: 'Fleet' }).click();
  const fleetRow = page.locator(`tr[data-device="${deviceId}"]`);
  await fleetRow.waitFor();
  assert.equal(await text(fleetRow.locator('[data-alarm-count]')), '1');
  assert.equal(await text(fleetRow.locator('[data-alarms] .badge')), 'critical');
  assert.equal(await text(fleetRow.locator('[data-connectivity]')), 'online', 'it has reported');
  await axe(page, 'dashboard (with an alarm)');

  // The device page: its alarm history; acknowledged there.
  await fleetRow.getByRole('link', { name: 'Freezer probe' }).click();
  await page.getByRole('heading', { level: 1, name: 'Freezer probe' }).waitFor();
  const history = page.locator(`section[aria-labelledby="device-alarms-title"] tr[data-alarm="${alarm.alarmId}"]`);
  await history.waitFor();
  assert.match(await text(page.locator('[data-connectivity]')), /^Connectivity: online/);
  await axe(page, 'device (with an alarm)');
  await history.getByRole('button', { name: /^Acknowledge/ }).click();
  await history.locator('.badge.state-acknowledged').waitFor();
  assert.equal(await history.getByRole('button', { name: /^Acknowledge/ }).count(), 0, 'nothing left to acknowledge');
  const after = (await callApi(base, owner, 'GET', '/me/alarms?limit=50')).body.alarms.find((a) => a.alarmId === alarm.alarmId);
  assert.equal(after.state, 'acknowledged');
  assert.ok(after.acknowledgedAt, 'the API recorded when');

  // Back to normal: the clear condition clears it, once.
  assert.equal(await sendEvent(base, deviceId, deviceTok, -20), 200);
  await page.getByRole('navigation').getByRole('link', { name: 'Alarms', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Alarms' }).waitFor();
  await page.locator(`tr[data-alarm="${alarm.alarmId}"][data-state="cleared"]`).waitFor();
});

test('an operator sees open alarms across owners by severity', async ({ page, base }) => {
  const operator = await userToken(base, 'demo-operator');
  await needRoute(base, operator, 'GET', '/admin/alarms?severity=critical');
  const bob = await userToken(base, 'demo-bob');
  // An open alarm of Bob's that is acknowledged nowhere: a major one on a fresh device.
  const deviceId = `boiler-${Date.now().toString(36)}`;
  const registered = await callApi(base, bob, 'POST', '/me/devices', { deviceId, name: 'Boiler', type: 'boiler' });
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  const rule = await callApi(base, bob, 'POST', '/me/rules', { name: 'Boiler pressure', eventType: 'temperature', scope: { deviceId }, condition: { above: 90 }, severity: 'major' });
  assert.equal(rule.status, 201, JSON.stringify(rule.body));
  const alarm = await raiseAlarm(base, bob, deviceId, registered.body.token, 95);

  await signIn(page, base, 'demo-operator');
  await page.getByRole('link', { name: 'Operators' }).click();
  await page.getByRole('heading', { level: 1, name: 'Operators' }).waitFor();
  await page.locator('#oa-severity').selectOption('major');
  await page.getByRole('button', { name: 'Find alarms' }).click();
  const section = page.locator('section[aria-labelledby="open-alarms-title"]');
  // Open alarms across owners are many in a long run: page on until this one shows.
  const row = section.locator(`tr[data-alarm="${alarm.alarmId}"]`);
  for (let i = 0; i < 20 && (await row.count()) === 0; i++) {
    await section.locator('table, p.muted').first().waitFor();
    if ((await row.count()) > 0) break;
    const more = section.getByRole('button', { name: 'More alarms' });
    if ((await more.count()) === 0) break;
    await more.click();
  }
  await row.waitFor();
  assert.match(await text(row), /demo-bob/);
  assert.equal(await text(row.locator('.badge.sev-major')), 'major');
  assert.equal(await row.getByRole('button', { name: /Acknowledge/ }).count(), 0, 'operators read; owners acknowledge');
  await axe(page, 'operators (open alarms)');
});

test('a user outside the admin group gets no operator page', async ({ page, base }) => {
  await signIn(page, base, 'demo-bob');
  assert.equal(await page.getByRole('link', { name: 'Operators' }).count(), 0);
  await page.goto(`${base}/#/operators`);
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
});

test('a 401 returns to sign-in', async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  // The token expires: the API's JWT authorizer answers 401 from now on.
  await page.route('**/me/dashboard', (route) => route.fulfill({ status: 401, contentType: 'application/json', body: '{"message":"Unauthorized"}' }));
  await page.getByRole('heading', { name: 'Sign in to Device Fleet' }).waitFor({ timeout: 30_000 });
});

test("the console runs under template.yaml's security headers, with no CSP violation, 404 or console error on load", async ({ page, base, consoleErrors }) => {
  const response = await page.goto(`${base}/`);
  const headers = response.headers();
  // Locally moto's server stands in for the template's S3 hosts (the console PUTs firmware images there).
  const served = headers['content-security-policy'];
  assert.match(served, /connect-src 'self' http:\/\/127\.0\.0\.1:\d+;/, "moto's server is the one origin connect-src adds");
  assert.equal(served.replace(/(connect-src 'self') http:\/\/127\.0\.0\.1:\d+;/, '$1;'), localPolicy(), "the dev server sends template.yaml's policy, AWS origins dropped");
  for (const directive of ["default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'"])
    assert.ok(headers['content-security-policy'].includes(directive), directive);
  assert.equal(headers['x-frame-options'], 'DENY');
  assert.equal(headers['x-content-type-options'], 'nosniff');
  assert.equal(headers['referrer-policy'], 'no-referrer');
  const failed = [];
  page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
  await page.getByRole('button', { name: 'demo-alice', exact: true }).click();
  await page.locator('tr[data-device="thermo-kitchen"] svg.spark').first().waitFor();
  // uPlot's chart on the device page: its styles and canvas under style-src 'self'.
  await page.getByRole('link', { name: 'Kitchen thermostat' }).click();
  await page.getByRole('button', { name: 'Last 24 hours' }).click();
  await page.locator('.chart canvas').first().waitFor();
  assert.deepEqual(failed, [], 'no request failed (config.json included)');
  assert.deepEqual(consoleErrors, [], "nothing in the browser's console");
});

test('the ID token is kept in memory: nothing in sessionStorage, localStorage or cookies after sign-in', async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  const stored = await page.evaluate(() => {
    const all = (s) => Object.fromEntries(Array.from({ length: s.length }, (_, i) => [s.key(i), s.getItem(s.key(i))]));
    return { session: all(sessionStorage), local: all(localStorage), cookie: document.cookie };
  });
  const everything = JSON.stringify(stored);
  assert.doesNotMatch(everything, /eyJ[\w-]+\.[\w-]+/, `no JWT stored: ${everything}`);
  assert.deepEqual(stored, { session: {}, local: {}, cookie: '' });
  // The token is gone with the page: a reload asks to sign in again.
  await page.reload();
  await page.getByRole('heading', { name: 'Sign in to Device Fleet' }).waitFor();
});

test('without a readable config.json the console fails closed: an error page, no sign-in', async ({ page, base }) => {
  const cases = [
    ['missing', { status: 404, contentType: 'application/json', body: '{"message":"Not Found"}' }, /answered 404/],
    ['not JSON', { status: 200, contentType: 'application/json', body: '<html>' }, /not JSON/],
    ['an unknown mode', { status: 200, contentType: 'application/json', body: '{"mode":"cognito","apiUrl":""}' }, /names no sign-in/],
  ];
  for (const [what, answer, message] of cases) {
    await page.route('**/config.json', (route) => route.fulfill(answer));
    const users = [];
    const onRequest = (r) => new URL(r.url()).pathname.startsWith('/local/') && users.push(r.url());
    page.on('request', onRequest);
    await page.goto(`${base}/`);
    await page.getByRole('heading', { level: 1, name: 'The console cannot start' }).waitFor();
    assert.match(await text(page.getByRole('alert')), message, what);
    assert.equal(await page.getByRole('button').count(), 0, `${what}: no sign-in of any kind`);
    assert.deepEqual(users, [], `${what}: the local sign-in is never asked`);
    page.off('request', onRequest);
    await page.unroute('**/config.json');
  }
  await axe(page, 'config failure');
});

test('a 429 waits for Retry-After, saying so, then shows the fleet', async ({ page, base }) => {
  let throttled = 0;
  const times = [];
  await page.route('**/me/dashboard', async (route) => {
    times.push(Date.now());
    if (throttled++ === 0) return route.fulfill({ status: 429, headers: { 'retry-after': '2' }, contentType: 'application/json', body: '{"message":"Too Many Requests"}' });
    return route.continue();
  });
  await page.goto(`${base}/`);
  await page.getByRole('button', { name: 'demo-alice', exact: true }).click();
  await page.getByText('asked us to slow down').waitFor();
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  assert.ok(times[1] - times[0] >= 1900, `retried after Retry-After (${times[1] - times[0]} ms), not before`);
  assert.equal(await page.getByText('asked us to slow down').count(), 0, 'the notice goes away');
});

test('a lost connection shows a banner and recovers by itself', async ({ page, base }) => {
  await signIn(page, base, 'demo-alice');
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  await page.route('**/me/dashboard', (route) => route.abort('internetdisconnected'));
  const banner = page.getByRole('alert').filter({ hasText: 'Connection lost' });
  await banner.waitFor({ timeout: 20_000 });
  assert.equal(await page.locator('tr[data-device="thermo-kitchen"]').count(), 1, 'the last fleet stays on screen');
  await page.unroute('**/me/dashboard');
  await banner.waitFor({ state: 'detached', timeout: 20_000 });
});

test('the main flow works with the keyboard alone', async ({ page, base }) => {
  await page.goto(`${base}/`);
  await page.getByRole('button', { name: 'demo-alice', exact: true }).waitFor();
  await tabTo(page, 'demo-alice');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
  await focusOnHeading(page);
  // The navigation is above the heading: back up to it.
  await tabTo(page, 'Register a device', true);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Register a device' }).waitFor();
  await focusOnHeading(page);
  const deviceId = `keys-${Date.now().toString(36)}`;
  await tabTo(page, 'reg-deviceId');
  await page.keyboard.type(deviceId);
  await page.keyboard.press('Tab');
  await page.keyboard.type('Keyboard sensor');
  await page.keyboard.press('Tab');
  await page.keyboard.type('thermostat');
  await page.keyboard.press('Enter');
  await page.locator('#token-value').waitFor();
  await focusOnHeading(page);
  await tabTo(page, 'Open Keyboard sensor');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Keyboard sensor' }).waitFor();
  await focusOnHeading(page);
  await tabTo(page, 'Delete device…');
  await page.keyboard.press('Enter');
  // Focus moves to the confirming button.
  await page.waitForFunction(() => document.activeElement?.textContent === 'Delete device');
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
  await page.locator('tr[data-device="thermo-kitchen"]').waitFor();
  assert.equal(await page.locator(`tr[data-device="${deviceId}"]`).count(), 0);
});

test('a device silent past its interval shows offline with an offline alarm, and online once it reports', async ({ page, base, dynamodb }) => {
  assert.ok(dynamodb.endpoint && dynamodb.table, "fleet-dev's banner names DynamoDB Local and the table");
  await signIn(page, base, 'demo-bob');
  await page.getByRole('link', { name: 'Register a device' }).click();
  await page.getByRole('heading', { name: 'Register a device' }).waitFor();
  const deviceId = `meter-${Date.now().toString(36)}`;
  await page.getByLabel('Device id').fill(deviceId);
  await page.getByLabel('Name').fill('Cellar meter');
  await page.getByLabel('Type').fill('power-meter');
  // A bad interval: the API's 400, beside its field.
  await page.getByLabel('Reports every (seconds, optional)').fill('5m');
  await page.getByRole('button', { name: 'Register' }).click();
  await page.locator('#reg-reportEverySeconds-error').waitFor();
  assert.match(await text(page.locator('#reg-reportEverySeconds-error')), /reportEverySeconds/);
  await page.getByLabel('Reports every (seconds, optional)').fill('300');
  await page.getByRole('button', { name: 'Register' }).click();
  await page.locator('#token-value').waitFor();
  const token = await page.locator('#token-value').inputValue();
  assert.equal(await sendEvent(base, deviceId, token, 230), 200);

  // The device page says what it expects, and the interval can be changed there.
  await page.getByRole('link', { name: 'Open Cellar meter' }).click();
  await page.getByRole('heading', { level: 1, name: 'Cellar meter' }).waitFor();
  assert.match(await text(page.locator('[data-connectivity]')), /^Connectivity: online · expected to report every 300 s/);
  await page.getByLabel('Reports every (seconds)').fill('60');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('[data-connectivity]', { hasText: 'expected to report every 60 s' }).waitFor();

  // The schedule's run, half an hour on: the meter has been silent past its 60 s (and the rest
  // of its 15-minute window), so it is offline.
  const at = new Date(Date.now() + 30 * 60_000).toISOString();
  const eventFile = join(targetDir, 'browser-offline-check.json');
  writeFileSync(eventFile, JSON.stringify({ 'detail-type': 'Scheduled Event', source: 'aws.events', time: at }));
  const { body: run } = JSON.parse(
    execFileSync(devBin, ['invoke', 'AlarmWatchFunction', eventFile, '--endpoint', dynamodb.endpoint, '--table', dynamodb.table], { cwd: repo, encoding: 'utf8', env: { ...process.env, RUST_LOG: 'warn' } }),
  );
  assert.ok(run.raised >= 1, `the run raised the meter's offline alarm: ${JSON.stringify(run)}`);
  await reloadSignedIn(page, 'demo-bob');
  await page.locator('[data-connectivity]', { hasText: 'offline' }).waitFor();
  const history = page.locator('section[aria-labelledby="device-alarms-title"] tbody tr').first();
  await history.waitFor();
  assert.match(await text(history), /offline/i);
  await axe(page, 'device (offline)');
  await page.getByRole('link', { name: 'Fleet' }).click();
  const row = page.locator(`tr[data-device="${deviceId}"]`);
  await row.waitFor();
  assert.equal(await text(row.locator('[data-connectivity]')), 'offline');

  // Its next report clears the alarm: online again.
  assert.equal(await sendEvent(base, deviceId, token, 231), 200);
  await page.goto(`${base}/#/devices/${deviceId}`);
  await page.locator('[data-connectivity]', { hasText: 'online' }).waitFor();
  const alarms = (await callApi(base, await userToken(base, 'demo-bob'), 'GET', `/me/devices/${deviceId}/alarms`)).body.alarms;
  assert.equal(alarms.length, 1, JSON.stringify(alarms));
  assert.equal(alarms[0].state, 'cleared');
});

// ------------------------------------------------------------------ organizations (issue 33)
/** The demo organization (local/testkit/src/demo_orgs.rs): Alice owns it, Carol is its admin, Dave its operator, Bob and Erin its viewers; the utility is no member. */
const ACME = 'Acme Facilities';

/** The demo organization's id, as its admin's `GET /orgs` lists it. */
async function acmeId(base) {
  const answer = await callApi(base, await userToken(base, 'demo-carol'), 'GET', '/orgs');
  if (answer.status === 404 && (answer.body?.message === 'Not Found' || answer.body?.error?.message === 'Not Found')) throw new Skip('the API has no route GET /orgs yet');
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const org = answer.body.orgs.find((o) => o.name === ACME);
  assert.ok(org, `${ACME} is among Carol's organizations: ${JSON.stringify(answer.body)}`);
  return org.orgId;
}

/** Chooses a fleet in the header's switcher and waits for its dashboard. */
async function switchFleet(page, label, heading) {
  await page.getByLabel('Fleet', { exact: true }).selectOption({ label });
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/** The buttons a viewer must not see on the page as it is (none may exist at all). */
const MANAGING_BUTTONS = [/^Register$/, /Save changes/, /Rotate token/, /Revoke token/, /Delete device/, /Save desired state/, /Send command/, /^Acknowledge$/, /Create rule/, /^Edit$/, /^Delete…$/, /Save role/, /^Remove…$/, /Create invitation/, /^Revoke…$/, /Hand ownership over/, /^Rename$/, /Delete organization/, /Move device/, /Save retention/, /Restore default/, /Add endpoint/, /Send test/, /^Redeliver/, /Rotate secret/, /^Disable$/, /^Enable$/, /Confirm endpoint/];

async function buttonsAmong(page, names) {
  const found = [];
  for (const name of names) if ((await page.getByRole('button', { name }).count()) > 0) found.push(String(name));
  return found;
}

test("an admin invites by link with the viewer role; the invitee signs in, accepts, and sees the organization's fleet with no button a viewer cannot use; the API refuses the rest with 403 role_required", async ({ page, base, browser }) => {
  const orgId = await acmeId(base);
  // Carol, the organization's admin, switches to it and creates a viewer invitation.
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  await signIn(page, base, 'demo-carol');
  await switchFleet(page, `${ACME} (admin)`, ACME);
  assert.equal(new URL(page.url()).hash, `#/orgs/${orgId}`, 'the address names the fleet');
  await page.locator('tr[data-device="acme-boiler"]').waitFor();
  // An admin has every device action (so the viewer's missing buttons below are the role's doing).
  await page.getByRole('link', { name: 'Boiler' }).click();
  await page.getByRole('heading', { level: 1, name: 'Boiler' }).waitFor();
  for (const name of ['Save changes', 'Rotate token…', 'Delete device…', 'Save desired state', 'Send command']) await page.getByRole('button', { name }).waitFor();
  await page.getByRole('link', { name: 'Invitations' }).click();
  await page.getByRole('heading', { level: 1, name: `Invitations to ${ACME}` }).waitFor();
  assert.deepEqual(await page.locator('#invite-role option').allTextContents(), ['viewer', 'operator', 'admin'], 'an admin invites up to admin');
  await page.getByLabel('Role').selectOption('viewer');
  await page.getByRole('button', { name: 'Create invitation' }).click();
  const linkInput = page.locator('#invite-link');
  await linkInput.waitFor();
  const link = await linkInput.inputValue();
  assert.match(link, new RegExp(`^${base}/#/invitations/${orgId}\\.[0-9a-f]{32}$`));
  await page.getByRole('button', { name: 'Copy link' }).click();
  await page.getByText('link copied').waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), link, 'the copied link is the one shown');
  // Listed among the open ones (the demo's own open invitation included).
  await page.locator('table.invitations tbody tr').first().waitFor();
  const openBefore = (await page.locator('table.invitations tbody tr').count()) - 1;
  assert.ok(openBefore >= 0);
  await axe(page, 'invitations (link shown)');
  await shot(page, 'org-invitations');

  // The utility, no member yet, opens the link in its own browser, signs in there, and accepts.
  const invitee = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-GB', timezoneId: 'UTC' });
  try {
    const other = await invitee.newPage();
    other.on('request', (r) => recordRequest(base, r));
    await other.goto(link);
    await other.getByRole('button', { name: 'demo-utility', exact: true }).click();
    await other.getByRole('heading', { level: 1, name: 'Invitation to an organization' }).waitFor();
    await axe(other, 'accept an invitation');
    await other.getByRole('button', { name: 'Accept invitation' }).click();
    await other.getByRole('heading', { level: 1, name: ACME }).waitFor();
    assert.equal(new URL(other.url()).hash, `#/orgs/${orgId}`, "the accepted organization's fleet opens");
    assert.equal(await other.getByLabel('Fleet', { exact: true }).inputValue(), orgId, 'the switcher names it');
    assert.match(await text(other.locator('[data-role]')), /your role: viewer/);
    // The organization's dashboard and devices show.
    for (const device of ['acme-boiler', 'acme-pump']) await other.locator(`tr[data-device="${device}"]`).waitFor();
    assert.equal(await other.locator('tr[data-device="utility-meter-1"]').count(), 0, "the utility's own devices are not the organization's");
    assert.equal(await other.locator('tr[data-device="thermo-kitchen"]').count(), 0, "nor its owner's");
    assert.equal(await other.getByRole('link', { name: 'Register a device' }).count(), 0, 'no registration for a viewer');
    assert.equal(await other.getByRole('link', { name: 'Invitations' }).count(), 0, 'no invitations for a viewer');
    await axe(other, 'organization dashboard (viewer)');
    await shot(other, 'org-dashboard');
    // A device page: history and settings readable, nothing to change.
    await other.getByRole('link', { name: 'Boiler' }).click();
    await other.getByRole('heading', { level: 1, name: 'Boiler' }).waitFor();
    assert.equal(new URL(other.url()).hash, `#/orgs/${orgId}/devices/acme-boiler`);
    await other.getByText(/^\d+ events? in the range/).waitFor();
    await other.locator('section[aria-labelledby="device-alarms-title"] tbody tr').first().waitFor();
    await other.locator('#twin-desired-view').waitFor();
    assert.deepEqual(await buttonsAmong(other, MANAGING_BUTTONS), [], 'device page: no button a viewer cannot use');
    await axe(other, 'organization device (viewer)');
    // Alarms, rules, members: read, never changed.
    for (const [link, heading] of [['Alarms', 'Alarms'], ['Alarm rules', 'Alarm rules'], ['Members', `Members of ${ACME}`]]) {
      await other.getByRole('navigation').getByRole('link', { name: link, exact: true }).click();
      await other.getByRole('heading', { level: 1, name: heading }).waitFor();
      await other.locator('tbody tr').first().waitFor();
      assert.deepEqual(await buttonsAmong(other, MANAGING_BUTTONS), [], `${link}: no button a viewer cannot use`);
    }
    const roles = await other.locator('table.members tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-role')));
    for (const role of ['owner', 'admin', 'operator', 'viewer']) assert.ok(roles.includes(role), `a member of every role: ${roles}`);
    assert.equal(await other.locator('tr[data-member="demo-utility"]').getAttribute('data-role'), 'viewer');
    assert.equal(await other.getByRole('button', { name: 'Leave organization…' }).count(), 1, 'a viewer can leave');
    await axe(other, 'organization members (viewer)');
    await shot(other, 'org-members');
    // Typed addresses of admin pages say what role they need.
    await other.goto(`${base}/#/orgs/${orgId}/register`);
    await other.getByText('This needs the admin role').waitFor();
  } finally {
    await invitee.close();
  }

  // The API refuses what the console does not offer: 403 role_required, naming the role.
  const viewer = await userToken(base, 'demo-utility');
  const refused = await callApi(base, viewer, 'POST', `/orgs/${orgId}/devices`, { deviceId: `viewer-${Date.now().toString(36)}`, name: 'Nope', type: 'pump' });
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'role_required');
  assert.equal(refused.body.error.requiredRole, 'admin');
  const desired = await callApi(base, viewer, 'PUT', `/orgs/${orgId}/devices/acme-pump/desired`, { desired: { speed: 1 } }, { 'if-match': '0' });
  assert.equal(desired.status, 403, JSON.stringify(desired.body));
  assert.equal(desired.body.error.requiredRole, 'operator');
  // The invitation was used: it is gone from the admin's list, and a second accept is refused.
  await page.reload();
  await page.getByRole('button', { name: 'demo-carol', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: `Invitations to ${ACME}` }).waitFor();
  await page.locator('table.invitations, p:text("None.")').first().waitFor();
  assert.equal(await page.locator('table.invitations tbody tr').count(), openBefore, 'the used invitation is no longer open');
  const code = decodeURIComponent(link.split('#/invitations/')[1]);
  const again = await callApi(base, await userToken(base, 'demo-operator'), 'POST', `/invitations/${encodeURIComponent(code)}/accept`);
  assert.equal(again.status, 404, JSON.stringify(again.body));
});

test("an organization's operator acknowledges its alarm and sets a desired state, but sees no admin action; a role lowered meanwhile is the API's 403, said on the page", async ({ page, base }) => {
  const orgId = await acmeId(base);
  await signIn(page, base, 'demo-dave');
  await switchFleet(page, `${ACME} (operator)`, ACME);
  assert.equal(await page.getByRole('link', { name: 'Register a device' }).count(), 0);
  await page.getByRole('navigation').getByRole('link', { name: 'Alarms', exact: true }).click();
  const row = page.locator('table.alarms tbody tr[data-device="acme-boiler"][data-state="active"]').first();
  await row.waitFor();
  await row.getByRole('button', { name: /^Acknowledge/ }).click();
  await page.getByText(/^Acknowledged: /).waitFor();
  await page.goto(`${base}/#/orgs/${orgId}/devices/acme-pump`);
  await page.getByRole('heading', { level: 1, name: 'Circulation pump' }).waitFor();
  await page.getByRole('button', { name: 'Save desired state' }).waitFor();
  assert.deepEqual(await buttonsAmong(page, [/Save changes/, /Rotate token/, /Revoke token/, /Delete device/]), [], 'no admin action for an operator');
  // The owner lowers the operator to viewer; the next change is refused and the page says why.
  const alice = await userToken(base, 'demo-alice');
  const lowered = await callApi(base, alice, 'PATCH', `/orgs/${orgId}/members/demo-dave`, { role: 'viewer' });
  assert.equal(lowered.status, 200, JSON.stringify(lowered.body));
  try {
    await page.getByLabel('Desired state (JSON)').fill('{"valve": "open"}');
    await page.getByRole('button', { name: 'Save desired state' }).click();
    await page.locator('#twin-refused', { hasText: 'this needs the operator role; yours is viewer' }).waitFor();
    // ...and the console follows the lowered role: the form goes away, the message stays.
    await page.locator('#twin-desired-view').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Save desired state' }).count(), 0);
    await page.getByLabel('Fleet', { exact: true }).locator('option', { hasText: `${ACME} (viewer)` }).waitFor({ state: 'attached' });
  } finally {
    const restored = await callApi(base, alice, 'PATCH', `/orgs/${orgId}/members/demo-dave`, { role: 'operator' });
    assert.equal(restored.status, 200, JSON.stringify(restored.body));
  }
});

test('a person creates an organization and becomes its owner: it opens empty, is renamed, and is deleted; one with devices is not', async ({ page, base }) => {
  await acmeId(base);
  await signIn(page, base, 'demo-alice');
  await page.getByRole('link', { name: 'New organization' }).click();
  await page.getByRole('heading', { level: 1, name: 'New organization' }).waitFor();
  await page.getByRole('button', { name: 'Create organization' }).click();
  await page.locator('#org-name-error').waitFor();
  assert.match(await text(page.locator('#org-name-error')), /name/i, "the API's 400 beside the name");
  await axe(page, 'new organization (with a field error)');
  const name = `Night shift ${Date.now().toString(36)}`;
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create organization' }).click();
  await page.getByRole('heading', { level: 1, name }).waitFor();
  const orgId = splitHash(page.url());
  assert.match(orgId, /^o[0-9a-f]{20}$/);
  assert.match(await text(page.locator('[data-role]')), /your role: owner/);
  await page.getByRole('link', { name: 'Register the first device' }).waitFor();
  assert.equal(await page.getByLabel('Fleet', { exact: true }).inputValue(), orgId);

  await page.getByRole('navigation').getByRole('link', { name: 'Members' }).click();
  await page.getByRole('heading', { level: 1, name: `Members of ${name}` }).waitFor();
  await page.locator('tr[data-member="demo-alice"][data-role="owner"]').waitFor();
  assert.equal(await page.locator('table.members tbody tr').count(), 1, 'its owner alone');
  assert.equal(await page.getByRole('button', { name: 'Leave organization…' }).count(), 0, 'the owner cannot leave');
  await page.getByLabel('Name').fill(`${name} (renamed)`);
  await page.getByRole('button', { name: 'Rename' }).click();
  await page.getByText(`Renamed to ${name} (renamed).`).waitFor();
  await page.getByLabel('Fleet', { exact: true }).locator('option', { hasText: `${name} (renamed) (owner)` }).waitFor({ state: 'attached' });
  await axe(page, 'organization members (owner)');
  await page.getByRole('button', { name: 'Delete organization…' }).click();
  await page.getByRole('button', { name: 'Delete organization', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Your fleet' }).waitFor();
  assert.equal(await page.getByLabel('Fleet', { exact: true }).locator(`option[value="${orgId}"]`).count(), 0, 'gone from the switcher');

  // The demo organization has devices: deleting it is the API's 409, said on the page.
  await switchFleet(page, `${ACME} (owner)`, ACME);
  await page.getByRole('navigation').getByRole('link', { name: 'Members' }).click();
  await page.getByRole('button', { name: 'Delete organization…' }).click();
  await page.getByRole('button', { name: 'Delete organization', exact: true }).click();
  await page.getByRole('alert').filter({ hasText: /has \d+ devices: move or delete them first/ }).waitFor();
});

/** Goes to a console address in the signed-in page (a reload would sign out). */
async function goTo(page, hash) {
  await page.evaluate((h) => {
    window.location.hash = h;
  }, hash);
}

test("an admin sets a device's offline detection to tight, moves it into an organization and back from its page, and sets a device type's raw retention on the settings page; an operator sees neither action", async ({ page, base }) => {
  const orgId = await acmeId(base);
  const alice = await userToken(base, 'demo-alice');
  const deviceId = `mover-${Date.now().toString(36)}`;
  const registered = await callApi(base, alice, 'POST', '/me/devices', { deviceId, name: 'Mover', type: 'meter' });
  assert.equal(registered.status, 201, JSON.stringify(registered.body));

  await signIn(page, base, 'demo-alice');
  await goTo(page, `#/devices/${deviceId}`);
  await page.getByRole('heading', { level: 1, name: 'Mover' }).waitFor();
  // Tight offline detection, where the interval is set.
  assert.equal(await page.getByLabel('Standard').isChecked(), true, 'a new device is standard');
  await page.getByLabel('Tight').check();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved.' }).waitFor();
  const tight = await callApi(base, alice, 'GET', `/me/devices/${deviceId}`);
  assert.equal(tight.body.device.offlineDetection, 'tight', JSON.stringify(tight.body));
  assert.equal(await page.getByLabel('Tight').isChecked(), true);
  await axe(page, 'device page (move and detection)');
  await shot(page, 'device-move');

  // Into the organization Alice owns: asked first, then said with the history's progress.
  await page.getByLabel('Move to').selectOption({ label: ACME });
  await page.getByRole('button', { name: 'Move device…' }).click();
  await page.getByRole('button', { name: 'Move device', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: `Mover moved to ${ACME}` }).waitFor();
  assert.match(await text(page.locator('[data-moved]')), /keeps its id and its token/);
  await shot(page, 'device-moved');
  assert.equal((await callApi(base, alice, 'GET', `/me/devices/${deviceId}`)).status, 404, 'gone from her own fleet');
  assert.equal((await callApi(base, alice, 'GET', `/orgs/${orgId}/devices/${deviceId}`)).status, 200, "in the organization's");

  // The organization's operator sees the device but neither the move nor the detection, and
  // the settings page without its form.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signIn(page, base, 'demo-dave');
  await goTo(page, `#/orgs/${orgId}/devices/${deviceId}`);
  await page.getByRole('heading', { level: 1, name: 'Mover' }).waitFor();
  assert.equal(await page.getByLabel('Move to').count(), 0, 'no move for an operator');
  assert.equal(await page.getByLabel('Tight').count(), 0, 'no detection choice for an operator');
  await goTo(page, `#/orgs/${orgId}/settings`);
  await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
  await page.locator('[data-retention-default]').waitFor();
  assert.match(await text(page.locator('[data-role-note]')), /needs the admin role; yours is operator/);
  assert.deepEqual(await buttonsAmong(page, MANAGING_BUTTONS), [], 'no managing button on the settings page');
  await page.getByRole('button', { name: 'Sign out' }).click();

  // Back to her own fleet, from the device's page in the organization: leaving it, the move
  // offers to rotate the token (its members know it), ticked, and shows the new one once.
  await signIn(page, base, 'demo-alice');
  await goTo(page, `#/orgs/${orgId}/devices/${deviceId}`);
  await page.getByRole('heading', { level: 1, name: 'Mover' }).waitFor();
  const rotate = page.getByLabel('Rotate the device token (the previous owner knows it)');
  assert.equal(await rotate.isChecked(), true, 'a move out of an organization rotates the token by default');
  await page.getByLabel('Move to').selectOption({ label: 'My fleet' });
  await page.getByRole('button', { name: 'Move device…' }).click();
  await page.getByRole('button', { name: 'Move device', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Mover moved to My fleet' }).waitFor();
  assert.match(await text(page.locator('[data-moved]')), /keeps its id and has a new token/);
  await page.locator('#token-value').waitFor();
  const newToken = await page.locator('#token-value').inputValue();
  assert.ok(newToken && newToken !== registered.body.token, 'the move shows a new token');
  assert.match(await text(page.locator('section.token')), /The previous token works until /);
  await page.getByRole('button', { name: 'Copy token' }).waitFor();
  assert.equal(await sendEvent(base, deviceId, newToken, 1), 200, 'the new token is accepted');
  await page.getByRole('link', { name: 'Open it in My fleet' }).click();
  await page.getByRole('heading', { level: 1, name: 'Mover' }).waitFor();
  assert.equal((await callApi(base, alice, 'GET', `/me/devices/${deviceId}`)).body.device.offlineDetection, 'tight', 'the detection moved with it');

  // The settings page: a bad value is the API's 400 beside its field; a type's retention is
  // shortened, listed, and restored.
  await page.getByRole('navigation').getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
  await page.getByLabel('Device type').fill('meter');
  await page.getByLabel('Raw readings kept (days)').fill('0');
  await page.getByRole('button', { name: 'Save retention' }).click();
  await page.locator('#retention-days-error').waitFor();
  assert.match(await text(page.locator('#retention-days-error')), /rawDays/);
  await page.getByLabel('Raw readings kept (days)').fill('7');
  await page.getByRole('button', { name: 'Save retention' }).click();
  const row = page.locator('tr[data-retention-type="meter"]');
  await row.waitFor();
  assert.match(await text(row), /7 days/);
  const kept = await callApi(base, alice, 'GET', '/me/retention');
  assert.deepEqual(kept.body.deviceTypes.find((t) => t.deviceType === 'meter'), { deviceType: 'meter', rawDays: 7 });
  await axe(page, 'settings');
  await shot(page, 'settings');
  await page.getByRole('button', { name: 'Restore default for meter' }).click();
  await row.waitFor({ state: 'detached' });
  assert.equal((await callApi(base, alice, 'GET', '/me/retention')).body.deviceTypes.some((t) => t.deviceType === 'meter'), false);
  await callApi(base, alice, 'DELETE', `/me/devices/${deviceId}`);
});

// ------------------------------------------------------------------ webhooks (issue 41)
/** The receiver's requests to `path` of one event type. */
const receivedAt = (receiver, path, type) => receiver.received.filter((r) => r.path === path && r.json?.type === type);

/** Waits until `check()` is truthy (every 200 ms, at most `seconds`), returning its value. */
async function eventually(check, seconds, what) {
  const until = Date.now() + seconds * 1000;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`${what} within ${seconds} s`);
    await sleep(200);
  }
}

test("webhooks: an endpoint is added (the API's 400 beside its field), its secret shown once, confirmed by its answer or by a pasted token, tested, its log shows the delivery and redelivers it (a 409 said in words), rotated, disabled, enabled and deleted", async ({ page, base, receiver }) => {
  const alice = await userToken(base, 'demo-alice');
  await needRoute(base, alice, 'GET', '/me/webhooks');
  await signIn(page, base, 'demo-alice');
  await page.getByRole('navigation').getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();

  // The form's own check, then the API's 400 naming `url` beside the field.
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.locator('#webhook-url-error').waitFor();
  assert.match(await text(page.locator('#webhook-url-error')), /Enter the URL/);
  await page.getByLabel('URL', { exact: true }).fill('http://169.254.169.254/latest');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await eventually(async () => /url/i.test(await text(page.locator('#webhook-url-error'))) && !/Enter the URL/.test(await text(page.locator('#webhook-url-error'))), 10, "the API's 400 beside the URL");
  assert.equal(await page.getByLabel('URL', { exact: true }).getAttribute('aria-invalid'), 'true');

  // An endpoint that confirms itself by answering its webhook.confirm delivery.
  const autoPath = `/auto/alice-${Date.now().toString(36)}`;
  await page.getByLabel('URL', { exact: true }).fill(receiver.url(autoPath));
  await page.getByLabel('Description (optional)').fill('Alice pager');
  await page.getByLabel(/A device goes offline/).check();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const secretInput = page.locator('#webhook-secret');
  await secretInput.waitFor();
  const secret = await secretInput.inputValue();
  assert.match(secret, /^whsec_/);
  assert.match(await text(page.locator('[data-secret]')), /Shown this once: you will not see it again/);
  await page.getByRole('button', { name: 'Copy secret' }).waitFor();
  await axe(page, 'webhooks (secret shown)');
  await page.getByRole('button', { name: 'I have saved it' }).click();
  await secretInput.waitFor({ state: 'detached' });
  const card = page.locator('li.webhook', { has: page.getByRole('heading', { name: 'Alice pager' }) });
  const webhookId = await card.getAttribute('data-webhook');
  assert.match(await text(card), /alarm\.raised, device\.offline/);
  assert.ok(!(await page.content()).includes(secret), 'the secret is gone from the page');
  const listed = await callApi(base, alice, 'GET', '/me/webhooks');
  assert.ok(!JSON.stringify(listed.body).includes(secret), 'and the API never lists it');
  // It confirms itself: the page sees it without a reload.
  await card.locator('[data-confirmed="true"]').waitFor({ timeout: 30_000 });

  // A test delivery: in the log as delivered, with its status code, signed with the shown secret.
  await card.getByRole('button', { name: 'Send test' }).click();
  await page.locator('[data-notice]', { hasText: /Test delivery msg_\S+ queued/ }).waitFor();
  const log = page.locator(`[data-log="${webhookId}"]`);
  const testRow = log.locator('tr[data-status="delivered"]', { has: page.getByRole('rowheader', { name: /webhook\.test/ }) });
  await testRow.waitFor({ timeout: 30_000 });
  assert.equal(await text(testRow.locator('[data-last-status]')), '200');
  assert.match(await text(testRow), /Delivered/);
  const tests = receivedAt(receiver, autoPath, 'webhook.test');
  assert.equal(tests.length, 1, 'the receiver got the test once');
  assert.ok(signedWith(tests[0], secret), 'signed with the secret shown once');
  assert.match(await text(log), /webhook\.confirm/, 'the confirmation is in the log too');
  await axe(page, 'webhooks (delivery log)');
  await shot(page, 'webhooks');

  // Redeliver: the same webhook-id again.
  await testRow.getByRole('button', { name: /^Redeliver/ }).click();
  await log.locator('[data-log-notice]', { hasText: /Redelivery of webhook\.test queued/ }).waitFor();
  await eventually(() => receivedAt(receiver, autoPath, 'webhook.test').length === 2, 30, 'the redelivery reaches the receiver');
  const [first, again] = receivedAt(receiver, autoPath, 'webhook.test');
  assert.equal(again.headers['webhook-id'], first.headers['webhook-id'], 'a redelivery keeps its webhook-id');

  // Rotate: a new secret, shown once, the old one signing beside it.
  await card.getByRole('button', { name: 'Rotate secret…' }).click();
  await card.getByRole('button', { name: 'Rotate secret', exact: true }).click();
  await secretInput.waitFor();
  const rotated = await secretInput.inputValue();
  assert.match(rotated, /^whsec_/);
  assert.notEqual(rotated, secret);
  assert.match(await text(page.locator('[data-secret]')), /previous secret keeps signing beside it until/);
  await page.getByRole('button', { name: 'I have saved it' }).click();
  await card.getByText(/signs too until/).waitFor();

  // Disabled: the test and the redelivery are the API's 409s, said as what to do.
  await card.getByRole('button', { name: 'Disable' }).click();
  await card.locator('[data-state="disabled"]').waitFor();
  assert.match(await text(card.locator('[data-state]')), /Disabled by a person/);
  await card.getByRole('button', { name: 'Send test' }).click();
  await page.locator('[data-notice]', { hasText: 'The endpoint is disabled: enable it first, then send the test again.' }).waitFor();
  await log.getByRole('button', { name: /^Redeliver webhook\.test/ }).first().click();
  await log.locator('[data-log-notice]', { hasText: 'The endpoint is disabled: enable it first, then send the redelivery again.' }).waitFor();
  await card.getByRole('button', { name: 'Enable' }).click();
  await card.locator('[data-state="enabled"]').waitFor();

  // An endpoint that does not echo its token: confirmed by pasting it (a wrong one is refused).
  const manualPath = `/manual/alice-${Date.now().toString(36)}`;
  await page.getByLabel('URL', { exact: true }).fill(receiver.url(manualPath));
  await page.getByLabel('Description (optional)').fill('Alice manual');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await secretInput.waitFor();
  await page.getByRole('button', { name: 'I have saved it' }).click();
  const manual = page.locator('li.webhook', { has: page.getByRole('heading', { name: 'Alice manual' }) });
  const confirmation = await eventually(() => receivedAt(receiver, manualPath, 'webhook.confirm')[0], 30, 'the confirmation reaches the receiver');
  assert.equal(await text(manual.locator('[data-confirmed]')), 'not confirmed');
  await manual.getByRole('button', { name: 'Send test' }).click();
  await page.locator('[data-notice]', { hasText: /not confirmed yet/ }).waitFor();
  const tokenInput = manual.getByLabel('Or paste the confirmation token it received');
  await tokenInput.fill('whconf_not-the-one');
  await manual.getByRole('button', { name: 'Confirm endpoint' }).click();
  await manual.locator('.field-error', { hasText: /not the token/ }).waitFor();
  await tokenInput.fill(confirmation.body);
  await manual.getByRole('button', { name: 'Confirm endpoint' }).click();
  await manual.locator('[data-confirmed="true"]').waitFor();

  // Deleted after asking.
  for (const [name, locator] of [['Alice manual', manual], ['Alice pager', card]]) {
    await locator.getByRole('button', { name: 'Delete…' }).click();
    await locator.getByRole('button', { name: 'Delete endpoint' }).click();
    await page.getByRole('heading', { name, exact: true }).waitFor({ state: 'detached' });
  }
  assert.deepEqual((await callApi(base, alice, 'GET', '/me/webhooks')).body.items.filter((w) => w.webhookId === webhookId), []);
});

test("webhooks: an organization's viewer reads its endpoints and their delivery log, with no button to change them", async ({ page, base, receiver }) => {
  const orgId = await acmeId(base);
  const carol = await userToken(base, 'demo-carol');
  await needRoute(base, carol, 'GET', `/orgs/${orgId}/webhooks`);
  const path = `/auto/acme-${Date.now().toString(36)}`;
  const created = await callApi(base, carol, 'POST', `/orgs/${orgId}/webhooks`, { url: receiver.url(path), events: ['alarm.raised'], description: 'Acme on-call' });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  try {
    await signIn(page, base, 'demo-erin');
    await goTo(page, `#/orgs/${orgId}/webhooks`);
    await page.getByRole('heading', { level: 1, name: 'Webhooks' }).waitFor();
    const card = page.locator(`li.webhook[data-webhook="${created.body.webhookId}"]`);
    await card.getByRole('heading', { name: 'Acme on-call' }).waitFor();
    await card.getByRole('button', { name: 'Delivery log' }).click();
    await page.locator(`[data-log="${created.body.webhookId}"] tr[data-delivery]`, { hasText: 'webhook.confirm' }).waitFor({ timeout: 30_000 });
    assert.deepEqual(await buttonsAmong(page, MANAGING_BUTTONS), [], 'no managing button for a viewer');
    assert.match(await text(page.locator('main')), /your role is viewer/);
    await axe(page, 'webhooks (viewer)');
  } finally {
    await callApi(base, carol, 'DELETE', `/orgs/${orgId}/webhooks/${created.body.webhookId}`);
  }
});

// ------------------------------------------------------------------ firmware (issue 40)
/** One run of the rollout worker (its scheduled event) against the dev stack's table, as `sam local invoke` would: its answer. */
function runRolloutWorker(dynamodb) {
  const out = execFileSync(devBin, ['invoke', 'RolloutWorkerFunction', join(repo, 'events', 'scheduled-rollouts.json'), '--endpoint', dynamodb.endpoint, '--table', dynamodb.table], { cwd: repo, encoding: 'utf8', env: { ...process.env, RUST_LOG: 'warn' } });
  return JSON.parse(out);
}

/** A device's check-in with its firmware report, through the device API (its token). */
async function reportFirmware(base, deviceId, token, firmware) {
  const response = await fetch(`${base}/devices/${deviceId}/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events: [{ type: 'temperature', value: 20, at: new Date().toISOString() }], firmware }),
  });
  assert.equal(response.status, 200, `${deviceId}'s check-in: ${await response.text()}`);
}

test("firmware: an image is uploaded (its SHA-256 computed in the browser) and checked ready, a staged rollout is started, its devices' failures pause it with the reason shown above its stage chart, the device page shows its update state, and it is resumed", async ({ page, base, dynamodb }) => {
  const alice = await userToken(base, 'demo-alice');
  await needRoute(base, alice, 'GET', '/me/rollouts');
  const run = Date.now().toString(36);
  const deviceType = `valve${run.slice(-4)}`;
  const devices = [];
  for (const n of [1, 2]) {
    const deviceId = `valve-${run}-${n}`;
    const registered = await callApi(base, alice, 'POST', '/me/devices', { deviceId, name: `Valve ${n}`, type: deviceType });
    assert.equal(registered.status, 201, JSON.stringify(registered.body));
    devices.push({ deviceId, token: registered.body.token });
  }
  // Just over two of the page's 4 MiB hashing slices (DIGEST_CHUNK_BYTES), so its SHA-256 spans
  // three reads and the last is partial; random, so no two slices are alike (one fed twice or out
  // of order would give another digest). The service checks the stored object's SHA-256 itself:
  // ready proves both the browser's sliced hash and the streamed PUT's bytes.
  const { createHash, randomBytes } = await import('node:crypto');
  const image = randomBytes(9 * 1024 * 1024 + 4321);
  const sha256 = createHash('sha256').update(image).digest('hex');

  await signIn(page, base, 'demo-alice');
  // The navigation has the page (opened by its address: a click racing the sign-in's own
  // navigation to the fleet can be undone by it).
  assert.equal(await page.getByRole('navigation').getByRole('link', { name: 'Firmware' }).getAttribute('href'), '#/firmware');
  await goTo(page, '#/firmware');
  await page.getByRole('heading', { level: 1, name: 'Firmware' }).waitFor();
  await focusOnHeading(page);
  // Nothing chosen: the form says what is missing, beside each field.
  await page.getByRole('button', { name: 'Upload firmware' }).click();
  await page.locator('#firmware-file-error', { hasText: 'Choose the image file.' }).waitFor();
  // Every text the file's hint and the upload's progress line show, as the page draws them.
  await page.evaluate(() => {
    window.__uploadTexts = [];
    const keep = () => {
      for (const node of document.querySelectorAll('#firmware-file-hint, [data-upload-progress]')) if (window.__uploadTexts.at(-1) !== node.textContent) window.__uploadTexts.push(node.textContent);
    };
    new window.MutationObserver(keep).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.setInputFiles('#firmware-file', { name: `valve-2.0.0.bin`, mimeType: 'application/octet-stream', buffer: image });
  await page.locator('[data-sha256]', { hasText: sha256 }).waitFor();
  assert.match(await text(page.locator('#firmware-file-hint')), new RegExp(`^${image.length} bytes, SHA-256 ${sha256}`));
  await page.locator('#firmware-type').fill(deviceType);
  // A version the API refuses: its 400 beside the field, nothing created.
  await page.locator('#firmware-version').fill('two');
  await page.getByRole('button', { name: 'Upload firmware' }).click();
  await page.locator('#firmware-version-error').waitFor();
  await page.locator('#firmware-version').fill('2.0.0');
  await page.getByRole('button', { name: 'Upload firmware' }).click();
  await page.locator('[data-upload-progress]', { hasText: `2.0.0 for ${deviceType} is ready.` }).waitFor({ timeout: 60_000 });
  // The page said how far it had got: the hash's percent between slices, then the upload's.
  const shown = await page.evaluate(() => window.__uploadTexts);
  const percents = (pattern) => shown.map((t) => t.match(pattern)?.[1]).filter(Boolean).map(Number);
  const hashedPercents = percents(/^Computing its SHA-256… (\d+)%$/);
  assert.ok(hashedPercents.some((p) => p > 0 && p < 100), `the hash's progress between slices was shown: ${JSON.stringify(shown)}`);
  assert.deepEqual(hashedPercents, [...hashedPercents].sort((a, b) => a - b), "the hash's progress only rose");
  const uploadedPercents = percents(new RegExp(`^Uploading valve-2\\.0\\.0\\.bin \\(${image.length} bytes\\): (\\d+)%…$`));
  assert.equal(uploadedPercents[0], 0, `the upload's progress was shown from 0%: ${JSON.stringify(shown)}`);
  assert.ok(Math.max(...uploadedPercents) > 0, `the upload's progress rose: ${JSON.stringify(shown)}`);
  assert.deepEqual(uploadedPercents, [...uploadedPercents].sort((a, b) => a - b), "the upload's progress only rose");
  const packageRow = page.locator('tr[data-status="ready"]', { hasText: deviceType });
  await packageRow.waitFor();
  assert.match(await text(packageRow), new RegExp(sha256));
  await axe(page, 'firmware');
  await shot(page, 'firmware');

  // A staged rollout of it: one stage, paused when half of at least 2 finished devices failed.
  await page.locator('#rollout-target').waitFor();
  assert.equal(await page.locator('#rollout-target').inputValue(), deviceType, 'the target defaults to the package’s type');
  await page.locator('#rollout-stages').fill('100');
  await page.locator('#rollout-soakSeconds').fill('0');
  await page.locator('#rollout-healthyCheckIns').fill('0');
  await page.locator('#rollout-successPercent').fill('100');
  await page.locator('#rollout-failurePercent').fill('50');
  await page.locator('#rollout-minFinished').fill('x');
  await page.getByRole('button', { name: 'Start rollout' }).click();
  await page.locator('#rollout-minFinished-error', { hasText: 'whole number' }).waitFor();
  await page.locator('#rollout-minFinished').fill('2');
  await page.getByRole('button', { name: 'Start rollout' }).click();
  await page.getByRole('heading', { level: 1, name: `Firmware 2.0.0 (${deviceType})` }).waitFor();
  const rolloutId = await page.locator('[data-rollout-page]').getAttribute('data-rollout-page');
  assert.equal(await page.locator('[data-rollout-page]').getAttribute('data-status'), 'running');

  // The worker offers both devices; both report a failed update; the next run pauses it.
  const offered = runRolloutWorker(dynamodb);
  assert.equal(offered.statusCode, 200, JSON.stringify(offered));
  for (const d of devices) await reportFirmware(base, d.deviceId, d.token, { version: '1.0.0', state: 'failed', reason: 'flash write error' });
  const paused = runRolloutWorker(dynamodb);
  assert.equal(paused.statusCode, 200, JSON.stringify(paused));
  // The page looks again by itself while the rollout lives.
  const reason = page.locator('[data-paused-reason]');
  await reason.waitFor({ timeout: 30_000 });
  assert.match(await text(reason), /^Paused: stage 0 \(100%\): 2 of 2 finished devices failed/);
  assert.equal(await page.locator('[data-rollout-page]').getAttribute('data-status'), 'paused');
  assert.match(await text(page.locator('[data-rollout-status]')), /Status: paused/);
  const stage = page.locator('[data-stage-chart] tr[data-stage="0"]');
  assert.match(await text(stage), /^stage 0: 100%/);
  assert.deepEqual(await stage.locator('td.num').allTextContents(), ['2', '0', '0', '2', '0', '0'], 'offered, succeeded, in progress, failed, timed out, retried');
  assert.equal(await stage.locator('.seg-failed').count(), 1, 'the bar shows the failed share');
  assert.equal(await page.getByRole('button', { name: 'Pause' }).count(), 0, 'no pause of a paused rollout');
  await axe(page, 'rollout (paused)');
  await shot(page, 'rollout-paused');

  // The rollouts page lists it, paused, with its reason; the device page shows its update state.
  await page.getByRole('navigation').getByRole('link', { name: 'Rollouts' }).click();
  await page.getByRole('heading', { level: 1, name: 'Rollouts' }).waitFor();
  const listed = page.locator(`tr[data-rollout="${rolloutId}"]`);
  await listed.waitFor();
  assert.equal(await listed.getAttribute('data-status'), 'paused');
  assert.match(await text(listed), /2 of 2 finished devices failed/);
  await axe(page, 'rollouts');
  await goTo(page, `#/devices/${devices[0].deviceId}`);
  const state = page.locator('[data-firmware="failed"]');
  await state.waitFor();
  assert.match(await text(state), /failed \((download|install)\): flash write error/);
  await state.getByRole('link', { name: 'its rollout' }).click();

  // Resumed by its owner: running again, the reason gone.
  await page.getByRole('button', { name: 'Resume' }).click();
  await page.locator('[data-notice]', { hasText: 'Resumed' }).waitFor();
  await page.locator('[data-rollout-page][data-status="running"]').waitFor();
  assert.equal(await reason.count(), 0);
  // Paused by its owner: the reason says so.
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.locator('[data-paused-reason]', { hasText: 'paused by its owner' }).waitFor();
  await page.getByRole('button', { name: 'Cancel rollout…' }).click();
  await page.getByRole('button', { name: 'Cancel rollout', exact: true }).click();
  await page.locator('[data-rollout-page][data-status="cancelled"]').waitFor();
  assert.equal(await page.getByRole('button', { name: /Pause|Resume|Cancel rollout/ }).count(), 0, 'nothing to do with an ended rollout');
});

test('firmware: a refused image upload says so with its status and S3\'s reason, and the package stays pending', async ({ page, base }) => {
  const deviceType = `gate${Date.now().toString(36).slice(-4)}`;
  const image = Buffer.from('an image the image store refuses');
  // The presigned PUT answered as S3 answers an expired URL (the request never reaches moto).
  await page.route(IMAGE_UPLOAD, (route) =>
    route.fulfill({
      status: 403,
      headers: { 'access-control-allow-origin': '*', 'content-type': 'application/xml' },
      body: '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>',
    }),
  );
  await signIn(page, base, 'demo-alice');
  await goTo(page, '#/firmware');
  await page.getByRole('heading', { level: 1, name: 'Firmware' }).waitFor();
  await page.setInputFiles('#firmware-file', { name: 'gate-1.0.0.bin', mimeType: 'application/octet-stream', buffer: image });
  await page.locator('[data-sha256]').waitFor();
  await page.locator('#firmware-type').fill(deviceType);
  await page.locator('#firmware-version').fill('1.0.0');
  await page.getByRole('button', { name: 'Upload firmware' }).click();
  const error = page.locator('form.firmware .error[role="alert"]');
  await error.waitFor();
  assert.equal(await text(error), 'The upload was refused (403 AccessDenied: Request has expired); the package stays pending.');
  assert.equal(await page.locator('[data-upload-progress]').count(), 0, 'no progress line left saying it is uploading');
  await page.locator('tr[data-status="pending"]', { hasText: deviceType }).waitFor();
  assert.equal(await page.locator('[data-sha256]').count(), 1, 'the chosen image is kept, to try again');
  await axe(page, 'firmware (upload refused)');
});

test("firmware: an organization's viewer reads its packages and rollouts with no button to change them", async ({ page, base }) => {
  const orgId = await acmeId(base);
  const erin = await userToken(base, 'demo-erin');
  await needRoute(base, erin, 'GET', `/orgs/${orgId}/rollouts`);
  await signIn(page, base, 'demo-erin');
  await goTo(page, `#/orgs/${orgId}/firmware`);
  await page.getByRole('heading', { level: 1, name: 'Firmware' }).waitFor();
  await page.getByText('No package yet.').or(page.locator('table.packages')).first().waitFor();
  assert.equal(await page.getByRole('button', { name: /Upload firmware|Start rollout|Delete…/ }).count(), 0, 'no managing button for a viewer');
  assert.match(await text(page.locator('main')), /your role is viewer/);
  await goTo(page, `#/orgs/${orgId}/rollouts`);
  await page.getByRole('heading', { level: 1, name: 'Rollouts' }).waitFor();
  await page.getByText('No rollout yet.').or(page.locator('table.rollouts')).first().waitFor();
  await axe(page, 'rollouts (viewer)');
});

/** The organization id in a console address (`#/orgs/{orgId}/...`). */
function splitHash(url) {
  return new URL(url).hash.match(/^#\/orgs\/([^/]+)/)?.[1] ?? '';
}

test('every request the console made is a catalog access pattern, and nothing came from elsewhere but firmware uploads to the image bucket', async () => {
  await Promise.all(rolloutStarts);
  metrics.requests = requests;
  assert.deepEqual(requests.unknown, [], 'requests outside the catalog');
  assert.deepEqual(requests.external, [], 'requests to another origin');
});

// ------------------------------------------------------------------ run
function bundleSize() {
  const assets = join(web, 'dist', 'assets');
  let raw = 0;
  let gzip = 0;
  const files = {};
  for (const name of readdirSync(assets)) {
    if (!/\.(js|css)$/.test(name)) continue;
    const bytes = readFileSync(join(assets, name));
    const zipped = gzipSync(bytes, { level: 9 }).length;
    raw += bytes.length;
    gzip += zipped;
    files[name] = { bytes: bytes.length, gzip: zipped };
  }
  return { raw, gzip, files };
}

async function main() {
  metrics.bundle = bundleSize();
  const receiver = await startReceiver();
  const stack = await startDevStack(receiver);
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: CHROMIUM_FLAGS });
  let passed = 0;
  let failed = 0;
  let ignored = 0;
  try {
    const only = process.env.BROWSER_ONLY ? new RegExp(process.env.BROWSER_ONLY) : null;
    for (const t of tests.filter((t) => !only || only.test(t.name))) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true, locale: 'en-GB', timezoneId: 'UTC' });
      context.setDefaultTimeout(15_000);
      const page = await context.newPage();
      page.on('request', (r) => recordRequest(stack.url, r));
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      // Every test runs under the console's Content-Security-Policy (the dev server sends
      // template.yaml's): any violation fails it, whether reported as an event or logged.
      const violations = [];
      const consoleErrors = [];
      await page.exposeFunction('__cspViolation', (v) => violations.push(v));
      await page.addInitScript(() =>
        document.addEventListener('securitypolicyviolation', (e) => window.__cspViolation(`${e.effectiveDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`)),
      );
      page.on('console', (m) => {
        if (m.type() !== 'error') return;
        consoleErrors.push(m.text());
        if (/Content.Security.Policy/i.test(m.text())) violations.push(m.text());
      });
      const started = Date.now();
      try {
        await t.fn({ page, base: stack.url, dynamodb: stack.dynamodb, consoleErrors, browser, receiver });
        assert.deepEqual(errors, [], 'uncaught errors in the page');
        assert.deepEqual(violations, [], 'Content-Security-Policy violations');
        passed++;
        console.log(`ok     ${t.name} (${Date.now() - started} ms)`);
      } catch (e) {
        if (e instanceof Skip) {
          ignored++;
          console.log(`skip   ${t.name}: ${e.message}`);
          await context.close();
          continue;
        }
        failed++;
        console.log(`FAILED ${t.name}\n       ${String(e.stack ?? e).split('\n').slice(0, 6).join('\n       ')}`);
        await page.screenshot({ path: join(targetDir, `console-failure-${tests.indexOf(t)}.png`) }).catch(() => {});
      }
      await context.close();
    }
  } finally {
    await browser.close();
    stack.stop();
    await Promise.race([stack.exited, sleep(10_000)]);
    receiver.stop();
  }
  metrics.axe = axeResults;
  mkdirSync(dirname(metricsPath), { recursive: true });
  writeFileSync(metricsPath, JSON.stringify(metrics, null, 2));
  console.log(`\nbundle: ${(metrics.bundle.gzip / 1024).toFixed(1)} KB gzipped JS+CSS (${(metrics.bundle.raw / 1024).toFixed(1)} KB raw)`);
  if (metrics.firstRenderMs) console.log(`dashboard first render: median ${metrics.firstRenderMs.median} ms (${metrics.firstRenderMs.runs.join(', ')})`);
  console.log(`requests by pattern: ${JSON.stringify(requests.byPattern)}; metrics in ${metricsPath}`);
  console.log(`test result: ${failed ? 'FAILED' : 'ok'}. ${passed} passed; ${failed} failed; ${ignored} ignored (browser)`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(e);
  console.log('test result: FAILED. 0 passed; 1 failed; 0 ignored (browser: the run did not start)');
  process.exitCode = 1;
});
