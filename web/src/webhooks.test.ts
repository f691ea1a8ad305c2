import { describe, expect, it } from 'vitest';
import { ApiError } from './api/client';
import { canRedeliver, deliveryStateText, EMPTY_WEBHOOK_FORM, endpointState, latencyText, pastedToken, refusalText, webhookBody, webhookFieldOf, type Webhook, type WebhookDelivery } from './webhooks';

const hook = (change: Partial<Webhook>): Webhook => ({
  webhookId: 'wh_1',
  url: 'https://example.com/hooks',
  events: ['alarm.raised'],
  format: 'standard',
  enabled: true,
  confirmed: true,
  rateLimit: 50,
  createdAt: '2026-11-29T06:00:00Z',
  updatedAt: '2026-11-29T06:00:00Z',
  ...change,
});

const delivery = (change: Partial<WebhookDelivery>): WebhookDelivery => ({
  deliveryId: 'msg_1',
  event: 'webhook.test',
  status: 'delivered',
  attempts: 1,
  lastStatus: 200,
  lastError: null,
  lastLatencyMs: 12,
  nextRetryAt: null,
  createdAt: '2026-11-29T06:00:00Z',
  redeliveredAt: null,
  ...change,
});

describe('the endpoint form builds the create body', () => {
  it('trims, keeps the events in the form order and leaves out an empty description', () => {
    const { body, errors } = webhookBody({ url: '  https://example.com/h  ', events: ['device.offline', 'alarm.raised'], description: '  ', format: 'slack' });
    expect(errors).toEqual({});
    expect(body).toEqual({ url: 'https://example.com/h', events: ['alarm.raised', 'device.offline'], format: 'slack' });
  });
  it('sends a description when there is one', () => {
    expect(webhookBody({ ...EMPTY_WEBHOOK_FORM, url: 'https://x.example', description: ' Pager ' }).body?.description).toBe('Pager');
  });
  it('refuses an empty URL and no event, naming each field', () => {
    const { body, errors } = webhookBody({ ...EMPTY_WEBHOOK_FORM, url: ' ', events: [] });
    expect(body).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(['events', 'url']);
  });
  it("leaves the URL's rules to the API (http and private hosts are its 400)", () => {
    expect(webhookBody({ ...EMPTY_WEBHOOK_FORM, url: 'http://10.0.0.1/' }).body?.url).toBe('http://10.0.0.1/');
  });
});

describe("an API error's field", () => {
  it('is the form field it names, an item of a list its list', () => {
    expect(webhookFieldOf('url')).toBe('url');
    expect(webhookFieldOf('events[3]')).toBe('events');
    expect(webhookFieldOf('cursor')).toBeNull();
    expect(webhookFieldOf(undefined)).toBeNull();
  });
});

describe("an endpoint's state", () => {
  it('enabled, failing, disabled by a person or by the worker with its reason', () => {
    expect(endpointState(hook({}))).toEqual({ word: 'enabled', detail: null });
    expect(endpointState(hook({ failingSince: '2026-11-28T00:00:00Z' })).word).toBe('failing');
    expect(endpointState(hook({ enabled: false }))).toEqual({ word: 'disabled', detail: 'Disabled by a person of this fleet' });
    expect(endpointState(hook({ enabled: false, disabledAt: '2026-11-29T00:00:00Z', disabledReason: 'failing for 3 days' })).detail).toBe('Disabled automatically: failing for 3 days');
  });
});

describe('a delivery in words', () => {
  it('delivered, queued, retrying, given up with why', () => {
    expect(deliveryStateText(delivery({}))).toBe('Delivered');
    expect(deliveryStateText(delivery({ status: 'pending', attempts: 0, lastStatus: null }))).toBe('Queued');
    expect(deliveryStateText(delivery({ status: 'pending', attempts: 2, lastStatus: 500 }))).toBe('Retrying');
    expect(deliveryStateText(delivery({ status: 'abandoned', lastError: 'the endpoint was deleted' }))).toBe('Given up: the endpoint was deleted');
  });
  it('only one no longer retried may be redelivered', () => {
    expect(canRedeliver(delivery({ status: 'pending' }))).toBe(false);
    expect(canRedeliver(delivery({ status: 'abandoned' }))).toBe(true);
    expect(canRedeliver(delivery({}))).toBe(true);
  });
  it('latency in ms under a second, in seconds above, nothing without an answer', () => {
    expect(latencyText(85)).toBe('85 ms');
    expect(latencyText(1234)).toBe('1.2 s');
    expect(latencyText(null)).toBe('');
  });
});

describe("the API's refusals in words", () => {
  it('each 409 says what to do; other errors keep their message', () => {
    expect(refusalText(new ApiError(409, 'delivery_pending', 'x'), 'redelivery')).toMatch(/still being retried/);
    expect(refusalText(new ApiError(409, 'webhook_disabled', 'x'), 'redelivery')).toMatch(/enable it first, then send the redelivery/);
    expect(refusalText(new ApiError(409, 'webhook_unconfirmed', 'x'), 'test')).toMatch(/not confirmed yet.*send the test again/);
    expect(refusalText(new ApiError(404, 'not_found', 'x'), 'test')).toBe('This endpoint no longer exists.');
    expect(refusalText(new ApiError(500, 'internal', 'boom'), 'test')).toBe('boom');
    expect(refusalText(new Error('offline'), 'test')).toBe('offline');
  });
});

describe('a pasted confirmation token', () => {
  it('is trimmed, or taken out of a pasted delivery body or its data', () => {
    expect(pastedToken('  whconf_abc \n')).toBe('whconf_abc');
    expect(pastedToken('{"type":"webhook.confirm","data":{"webhookId":"wh_1","confirmationToken":"whconf_x"}}')).toBe('whconf_x');
    expect(pastedToken('{"confirmationToken":"whconf_y"}')).toBe('whconf_y');
    expect(pastedToken('{not json')).toBe('{not json');
  });
});
