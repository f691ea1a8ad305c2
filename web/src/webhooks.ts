// The webhooks page's rules (issue 41), unit-tested in webhooks.test.ts: the endpoint form's
// body, which API field a message belongs beside, an endpoint's state and a delivery's in
// words, and the API's 409s said as what the person can do about them.

import { ApiError, type Schemas } from './api/client';

export type Webhook = Schemas['Webhook'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookEventName = Schemas['WebhookBody']['events'][number];
export type WebhookFormat = NonNullable<Schemas['WebhookBody']['format']>;

/**
 * The events a person subscribes an endpoint to, in the form's order. `webhook.test` and
 * `webhook.confirm` are sent to every endpoint whatever it subscribes to, so they are no choice.
 */
export const SUBSCRIBABLE_EVENTS: readonly { name: WebhookEventName; label: string }[] = [
  { name: 'alarm.raised', label: 'An alarm is raised' },
  { name: 'alarm.cleared', label: 'An alarm clears' },
  { name: 'alarm.acknowledged', label: 'An alarm is acknowledged' },
  { name: 'device.offline', label: 'A device goes offline' },
  { name: 'device.online', label: 'A device is heard again' },
  { name: 'webhook.disabled', label: 'Another endpoint of this fleet is disabled after failing for days' },
];

/** What the new-endpoint form holds, as typed. */
export interface WebhookForm {
  url: string;
  events: WebhookEventName[];
  description: string;
  format: WebhookFormat;
}

export const EMPTY_WEBHOOK_FORM: WebhookForm = { url: '', events: ['alarm.raised'], description: '', format: 'standard' };

/** The form's fields a message may stand beside (`form`: the form as a whole). */
export type WebhookField = 'url' | 'events' | 'description' | 'format' | 'form';

/**
 * The create body of the form, or the errors that keep it from being sent. Only what the API
 * cannot be asked about is checked here (an empty URL, no event); the URL's rules (https, no
 * private address) are the API's, whose 400 names `url`.
 */
export function webhookBody(form: WebhookForm): { body: Schemas['WebhookBody'] | null; errors: Partial<Record<WebhookField, string>> } {
  const errors: Partial<Record<WebhookField, string>> = {};
  const url = form.url.trim();
  if (!url) errors.url = 'Enter the URL the deliveries are sent to.';
  if (form.events.length === 0) errors.events = 'Choose at least one event.';
  if (Object.keys(errors).length) return { body: null, errors };
  const description = form.description.trim();
  // The form's order, whatever order the boxes were ticked in.
  const events = SUBSCRIBABLE_EVENTS.map((e) => e.name).filter((name) => form.events.includes(name));
  return { body: { url, events, format: form.format, ...(description ? { description } : {}) }, errors };
}

/** Which form field an API error names (`events[3]` is `events`); null for none of them. */
export function webhookFieldOf(field: string | undefined): WebhookField | null {
  if (!field) return null;
  const name = field.replace(/\[\d+\].*$/, '');
  return name === 'url' || name === 'events' || name === 'description' || name === 'format' ? name : null;
}

/** An endpoint's state as a short word and, when it needs one, why. */
export function endpointState(webhook: Webhook): { word: 'enabled' | 'disabled' | 'failing'; detail: string | null } {
  if (!webhook.enabled) {
    // disabledAt is set only when the delivery worker disabled it; otherwise a person did.
    if (webhook.disabledAt) return { word: 'disabled', detail: `Disabled automatically: ${webhook.disabledReason ?? 'its deliveries failed for days'}` };
    return { word: 'disabled', detail: 'Disabled by a person of this fleet' };
  }
  if (webhook.failingSince) return { word: 'failing', detail: 'Every attempt fails; it is disabled after 3 days of it' };
  return { word: 'enabled', detail: null };
}

/** A delivery's latency for people: "85 ms", "1.2 s"; empty without an answer. */
export function latencyText(ms: number | null): string {
  if (ms === null) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A delivery's state in words: delivered, given up (with why), or retried (when next). */
export function deliveryStateText(delivery: WebhookDelivery): string {
  switch (delivery.status) {
    case 'delivered':
      return 'Delivered';
    case 'abandoned':
      return delivery.lastError ? `Given up: ${delivery.lastError}` : 'Given up';
    case 'pending':
      if (delivery.attempts === 0) return 'Queued';
      return 'Retrying';
  }
}

/** Whether a delivery may be redelivered now: the API refuses one still being retried (409 `delivery_pending`). */
export function canRedeliver(delivery: WebhookDelivery): boolean {
  return delivery.status !== 'pending';
}

/**
 * What a refused redelivery or test means for the person, from the API's 409 code; any other
 * error keeps the API's own message.
 */
export function refusalText(error: unknown, what: 'redelivery' | 'test'): string {
  const message = error instanceof Error ? error.message : String(error);
  if (!(error instanceof ApiError)) return message;
  switch (error.code) {
    case 'delivery_pending':
      return 'This delivery is still being retried; redeliver it once it is delivered or given up.';
    case 'webhook_disabled':
      return `The endpoint is disabled: enable it first, then send the ${what} again.`;
    case 'webhook_unconfirmed':
      return `The endpoint is not confirmed yet: it receives nothing but its confirmation. Confirm it, then send the ${what} again.`;
    case 'not_found':
      return what === 'redelivery' ? 'This delivery or its endpoint no longer exists.' : 'This endpoint no longer exists.';
    default:
      return message;
  }
}

/**
 * A confirmation token as pasted: trimmed, and taken out of the whole `webhook.confirm` body
 * or its `data` when that is what was pasted (people copy the delivery they received).
 */
export function pastedToken(text: string): string {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) return trimmed;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    const data = (parsed as { data?: unknown })?.data ?? parsed;
    const token = (data as { confirmationToken?: unknown })?.confirmationToken;
    return typeof token === 'string' ? token : trimmed;
  } catch {
    return trimmed;
  }
}
