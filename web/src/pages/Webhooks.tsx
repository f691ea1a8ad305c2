import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, bodyOf, isRoleRefusal, messageOf } from '../api/client';
import { Confirm } from '../components/Confirm';
import { CopyButton } from '../components/CopyButton';
import { FieldError } from '../components/FieldError';
import { PagedTable } from '../components/ListTable';
import { NEEDS } from '../fleet';
import { dateTime } from '../format';
import { useCursorPages, type CursorPage } from '../hooks/useCursorPages';
import { useFleet } from '../hooks/useFleet';
import {
  canRedeliver,
  deliveryStateText,
  EMPTY_WEBHOOK_FORM,
  endpointState,
  latencyText,
  pastedToken,
  refusalText,
  SUBSCRIBABLE_EVENTS,
  webhookBody,
  webhookFieldOf,
  type Webhook,
  type WebhookDelivery,
  type WebhookField,
  type WebhookForm,
} from '../webhooks';

type Errors = Partial<Record<WebhookField, string>>;

/** How often, and how many times, the page looks again while an endpoint may still confirm itself or a delivery is still on its way. */
const POLL_MS = 2000;
const POLLS = 30;
/** Deliveries a page of the log. */
const LOG_PAGE = 20;

/** An endpoint as a heading names it: its description, else its URL. */
const nameOf = (w: Webhook) => w.description || w.url;

/** A secret shown once, after creation or rotation: the API never shows it again. */
function SecretPanel({ secret, onDone }: { secret: { name: string; value: string; previousUntil: string | null }; onDone: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => heading.current?.focus(), [secret.value]);
  return (
    <section class="token" aria-labelledby="webhook-secret-title" data-secret>
      <h2 id="webhook-secret-title" tabIndex={-1} ref={heading}>
        Signing secret for {secret.name}
      </h2>
      <p>
        <strong>Shown this once: you will not see it again.</strong> Copy it into your receiver now; it verifies the <code>webhook-signature</code> header of every delivery (Standard Webhooks).
        {secret.previousUntil ? ` The previous secret keeps signing beside it until ${dateTime(secret.previousUntil)}.` : ''}
      </p>
      <label for="webhook-secret">Secret</label>
      <input id="webhook-secret" class="mono" readOnly value={secret.value} onFocus={(e) => e.currentTarget.select()} />
      <div class="actions">
        <CopyButton text={secret.value} what="secret" />
        <button type="button" onClick={onDone}>
          I have saved it
        </button>
      </div>
    </section>
  );
}

/** The two ways an endpoint confirms: it answers its `webhook.confirm` delivery with the token, or the person pastes the token here. */
function ConfirmEndpoint({ webhook, waiting, onCheck, onConfirmed }: { webhook: Webhook; waiting: boolean; onCheck: () => void; onConfirmed: (w: Webhook) => void }) {
  const { api } = useFleet();
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const id = `confirm-${webhook.webhookId}`;
  const submit = async (e: Event) => {
    e.preventDefault();
    const pasted = pastedToken(token);
    if (!pasted) return setError('Paste the confirmationToken of the webhook.confirm delivery.');
    setBusy(true);
    setError(null);
    try {
      const { webhook: confirmed } = bodyOf(await api.POST('/me/webhooks/{webhookId}/confirm', { params: { path: { webhookId: webhook.webhookId } }, body: { token: pasted } }));
      onConfirmed(confirmed);
    } catch (err) {
      setError(err instanceof ApiError && err.field === 'token' ? 'That is not the token of this endpoint’s confirmation: paste the confirmationToken of its latest webhook.confirm delivery.' : messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="confirm-endpoint">
      <p>
        <strong>Not confirmed yet:</strong> it receives nothing but its <code>webhook.confirm</code> delivery. It confirms itself when it answers that delivery with a 2xx whose body contains its <code>confirmationToken</code>
        {waiting ? <span role="status"> (waiting for its answer…)</span> : '.'}{' '}
        <button type="button" class="link" onClick={onCheck}>
          Check again
        </button>
      </p>
      <form class="inline" onSubmit={submit} noValidate>
        <div class="field">
          <label for={`${id}-token`}>Or paste the confirmation token it received</label>
          <input id={`${id}-token`} class="mono" value={token} aria-invalid={Boolean(error)} aria-describedby={error ? `${id}-error` : undefined} onInput={(e) => setToken(e.currentTarget.value)} />
          <FieldError id={`${id}-error`} message={error} />
        </div>
        <button type="submit" disabled={busy}>
          Confirm endpoint
        </button>
      </form>
    </div>
  );
}

/** One endpoint's delivery log, newest first, a page at a time, with a redeliver button each (for a role that manages). */
function DeliveryLog({ webhook, manage, refresh }: { webhook: Webhook; manage: boolean; refresh: number }) {
  const { api } = useFleet();
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);
  const polls = useRef(0);
  const readPage = async (cursor: string | null): Promise<CursorPage<WebhookDelivery>> => {
    const page = bodyOf(await api.GET('/me/webhooks/{webhookId}/deliveries', { params: { path: { webhookId: webhook.webhookId }, query: { limit: LOG_PAGE, cursor: cursor ?? undefined } } }));
    return { items: page.items, cursor: page.cursor };
  };
  const log = useCursorPages(readPage, `${webhook.webhookId}:${refresh}`, { idOf: (d) => d.deliveryId });
  // A test or redelivery was just queued: look again (a bounded number of times) while the
  // newest page still has a delivery being sent, so its outcome appears without a click.
  useEffect(() => {
    polls.current = POLLS;
  }, [refresh]);
  const sending = log.items?.slice(0, LOG_PAGE).some((d) => d.status === 'pending');
  useEffect(() => {
    if (!sending || polls.current <= 0 || log.loading) return;
    const timer = setTimeout(() => {
      polls.current -= 1;
      void log.reload();
    }, POLL_MS);
    return () => clearTimeout(timer);
  }, [log.items, log.loading]);

  const redeliver = async (d: WebhookDelivery) => {
    setNotice(null);
    try {
      const { delivery } = bodyOf(await api.POST('/me/webhooks/{webhookId}/deliveries/{deliveryId}/retry', { params: { path: { webhookId: webhook.webhookId, deliveryId: d.deliveryId } } }));
      log.replace(delivery);
      polls.current = POLLS;
      setNotice({ text: `Redelivery of ${d.event} queued, under the same webhook-id (${d.deliveryId}).`, error: false });
    } catch (e) {
      setNotice({ text: refusalText(e, 'redelivery'), error: true });
    }
  };

  return (
    <section aria-labelledby="log-title" data-log={webhook.webhookId}>
      <h2 id="log-title">Deliveries to {nameOf(webhook)}</h2>
      <p class="muted">
        Newest first, kept 30 days. A failed delivery is retried with backoff for 24 hours, always under the same <code>webhook-id</code>.{' '}
        <button type="button" class="link" onClick={() => void log.reload()}>
          Refresh
        </button>
      </p>
      {notice && (
        <p class={notice.error ? 'error' : 'notice'} role={notice.error ? 'alert' : 'status'} data-log-notice>
          {notice.text}
        </p>
      )}
      <PagedTable
        list={log}
        loading="Loading deliveries…"
        empty="No delivery yet."
        more="Older deliveries"
        tableClass="deliveries"
        caption={`Deliveries to ${nameOf(webhook)}, newest first`}
        columns={[{ label: 'Event' }, { label: 'Created' }, { label: 'State' }, { label: 'Attempts', num: true }, { label: 'Last status', num: true }, { label: 'Latency', num: true }, { label: 'Next retry' }]}
        actions={manage}
        row={(d) => (
          <tr key={d.deliveryId} data-delivery={d.deliveryId} data-status={d.status}>
            <th scope="row">
              {d.event}
              <div class="muted mono">{d.deliveryId}</div>
            </th>
            <td>{dateTime(d.createdAt)}</td>
            <td>
              <span class={`badge delivery-${d.status}`}>{deliveryStateText(d)}</span>
              {d.status !== 'abandoned' && d.lastError && <div class="muted">{d.lastError}</div>}
              {d.redeliveredAt && <div class="muted">redelivered {dateTime(d.redeliveredAt)}</div>}
            </td>
            <td class="num">{d.attempts}</td>
            <td class="num" data-last-status>
              {d.lastStatus ?? <span class="muted">{d.attempts ? 'no answer' : '—'}</span>}
            </td>
            <td class="num">{latencyText(d.lastLatencyMs)}</td>
            <td>{d.status === 'pending' ? dateTime(d.nextRetryAt) : ''}</td>
            {manage && (
              <td>
                <button type="button" aria-label={`Redeliver ${d.event} ${d.deliveryId}`} title={canRedeliver(d) ? undefined : 'Still being retried'} onClick={() => void redeliver(d)}>
                  Redeliver
                </button>
              </td>
            )}
          </tr>
        )}
      />
    </section>
  );
}

/**
 * The fleet's webhook endpoints (issue 41): every member reads them and their delivery logs;
 * a role that manages adds one (its secret shown once), confirms, tests, rotates the secret,
 * enables, disables and deletes them, and redelivers.
 */
export function Webhooks() {
  const { api, can, org } = useFleet();
  const manage = can(NEEDS.manage);
  const [hooks, setHooks] = useState<Webhook[] | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);
  const [secret, setSecret] = useState<{ name: string; value: string; previousUntil: string | null } | null>(null);
  const [form, setForm] = useState<WebhookForm>(EMPTY_WEBHOOK_FORM);
  const [errors, setErrors] = useState<Errors>({});
  const [busy, setBusy] = useState(false);
  const [logOf, setLogOf] = useState<string | null>(null);
  const [logRefresh, setLogRefresh] = useState(0);
  // Looks left while an endpoint may still confirm itself by answering (reset on each creation).
  const [confirmPolls, setConfirmPolls] = useState(POLLS);

  const load = async () => {
    try {
      const answer = bodyOf(await api.GET('/me/webhooks'));
      setHooks(answer.items);
      setLoadError(null);
    } catch (e) {
      setLoadError(messageOf(e));
    }
  };
  useEffect(() => void load(), [org?.orgId]);

  const awaitingConfirmation = hooks?.some((w) => w.enabled && !w.confirmed) ?? false;
  useEffect(() => {
    if (!awaitingConfirmation || confirmPolls <= 0) return;
    const timer = setTimeout(() => {
      setConfirmPolls((n) => n - 1);
      void load();
    }, POLL_MS);
    return () => clearTimeout(timer);
  }, [hooks, confirmPolls]);

  const put = (w: Webhook) => setHooks((list) => list?.map((old) => (old.webhookId === w.webhookId ? w : old)) ?? [w]);
  const refused = (e: unknown, fallback: string) => setNotice({ text: isRoleRefusal(e) ? `Refused: ${messageOf(e)}` : fallback, error: true });

  const create = async (e: Event) => {
    e.preventDefault();
    setNotice(null);
    const { body, errors: local } = webhookBody(form);
    if (!body) {
      setErrors(local);
      setTimeout(() => document.querySelector<HTMLElement>('form.webhook [aria-invalid="true"]')?.focus());
      return;
    }
    setErrors({});
    setBusy(true);
    try {
      const created = bodyOf(await api.POST('/me/webhooks', { body }));
      setHooks((list) => [...(list ?? []), created.webhook]);
      setSecret({ name: nameOf(created.webhook), value: created.secret, previousUntil: null });
      setForm(EMPTY_WEBHOOK_FORM);
      setConfirmPolls(POLLS);
    } catch (err) {
      const field = err instanceof ApiError ? webhookFieldOf(err.field) : null;
      setErrors(field ? { [field]: messageOf(err) } : { form: err instanceof ApiError && err.code === 'webhook_limit' ? `${messageOf(err)}: delete one first.` : messageOf(err) });
      setTimeout(() => document.querySelector<HTMLElement>('form.webhook [aria-invalid="true"], form.webhook .error')?.focus());
    } finally {
      setBusy(false);
    }
  };

  const sendTest = async (w: Webhook) => {
    setNotice(null);
    try {
      const { deliveryId } = bodyOf(await api.POST('/me/webhooks/{webhookId}/test', { params: { path: { webhookId: w.webhookId } } }));
      setNotice({ text: `Test delivery ${deliveryId} queued to ${nameOf(w)}; it appears in the log below.`, error: false });
      setLogOf(w.webhookId);
      setLogRefresh((n) => n + 1);
    } catch (err) {
      refused(err, refusalText(err, 'test'));
    }
  };

  const setEnabled = async (w: Webhook, enabled: boolean) => {
    setNotice(null);
    try {
      const { webhook } = bodyOf(await api.PATCH('/me/webhooks/{webhookId}', { params: { path: { webhookId: w.webhookId } }, body: { enabled } }));
      put(webhook);
      setNotice({ text: enabled ? `Enabled ${nameOf(w)}.` : `Disabled ${nameOf(w)}: it receives nothing until enabled again.`, error: false });
    } catch (err) {
      refused(err, messageOf(err));
    }
  };

  const rotate = async (w: Webhook) => {
    setNotice(null);
    try {
      const rotated = bodyOf(await api.POST('/me/webhooks/{webhookId}/rotate-secret', { params: { path: { webhookId: w.webhookId } } }));
      setSecret({ name: nameOf(w), value: rotated.secret, previousUntil: rotated.previousSecretUntil });
      void load();
    } catch (err) {
      refused(err, messageOf(err));
    }
  };

  const remove = async (w: Webhook) => {
    setNotice(null);
    try {
      await api.DELETE('/me/webhooks/{webhookId}', { params: { path: { webhookId: w.webhookId } } });
      setNotice({ text: `Deleted ${nameOf(w)}.`, error: false });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setNotice({ text: `${nameOf(w)} was already deleted.`, error: false });
      else refused(err, messageOf(err));
    }
    if (logOf === w.webhookId) setLogOf(null);
    void load();
  };

  const toggleEvent = (name: Webhook['events'][number], on: boolean) => setForm({ ...form, events: on ? [...form.events, name] : form.events.filter((e) => e !== name) });
  const shown = hooks?.find((w) => w.webhookId === logOf) ?? null;

  return (
    <section>
      <h1 tabIndex={-1}>Webhooks</h1>
      <p class="muted">
        Each endpoint receives the fleet's events it subscribes to as signed HTTPS requests (the Standard Webhooks headers <code>webhook-id</code>, <code>webhook-timestamp</code>, <code>webhook-signature</code>), retried for 24 hours, or in Slack's incoming-webhook shape.
      </p>
      {secret && <SecretPanel secret={secret} onDone={() => setSecret(null)} />}
      {notice && (
        <p class={notice.error ? 'error' : 'notice'} role={notice.error ? 'alert' : 'status'} data-notice>
          {notice.text}
        </p>
      )}
      {loadError && (
        <p class="error" role="alert">
          {loadError}
        </p>
      )}
      {hooks === null && !loadError && <p role="status">Loading endpoints…</p>}
      {hooks && hooks.length === 0 && <p class="muted">No endpoint yet.</p>}
      {hooks && hooks.length > 0 && (
        <ul class="webhooks">
          {hooks.map((w) => {
            const state = endpointState(w);
            return (
              <li key={w.webhookId} class="webhook" data-webhook={w.webhookId}>
                <h2 class="webhook-name">{nameOf(w)}</h2>
                <dl class="webhook-facts">
                  <div>
                    <dt>URL</dt>
                    <dd class="mono">{w.url}</dd>
                  </div>
                  <div>
                    <dt>Events</dt>
                    <dd>{w.events.join(', ')}</dd>
                  </div>
                  <div>
                    <dt>Format</dt>
                    <dd>{w.format}</dd>
                  </div>
                  <div>
                    <dt>Rate limit</dt>
                    <dd>{w.rateLimit} a second</dd>
                  </div>
                  <div>
                    <dt>State</dt>
                    <dd data-state={state.word}>
                      <span class={`badge hook-${state.word}`}>{state.word}</span>
                      {state.detail && <span class="muted"> {state.detail}</span>}
                    </dd>
                  </div>
                  <div>
                    <dt>Confirmation</dt>
                    <dd data-confirmed={String(w.confirmed)}>{w.confirmed ? 'confirmed' : 'not confirmed'}</dd>
                  </div>
                  {w.previousSecretUntil && (
                    <div>
                      <dt>Previous secret</dt>
                      <dd>signs too until {dateTime(w.previousSecretUntil)}</dd>
                    </div>
                  )}
                </dl>
                {!w.confirmed && manage && <ConfirmEndpoint webhook={w} waiting={w.enabled && confirmPolls > 0} onCheck={() => { setConfirmPolls(POLLS); void load(); }} onConfirmed={(c) => { put(c); setNotice({ text: `${nameOf(c)} is confirmed: it now receives its events.`, error: false }); }} />}
                {!w.confirmed && !manage && <p class="muted">Not confirmed yet: it receives nothing but its confirmation.</p>}
                <div class="actions">
                  <button type="button" aria-pressed={logOf === w.webhookId} onClick={() => setLogOf(logOf === w.webhookId ? null : w.webhookId)}>
                    Delivery log
                  </button>
                  {manage && (
                    <>
                      <button type="button" onClick={() => void sendTest(w)}>
                        Send test
                      </button>
                      <button type="button" onClick={() => void setEnabled(w, !w.enabled)}>
                        {w.enabled ? 'Disable' : 'Enable'}
                      </button>
                      <Confirm label="Rotate secret…" question={`Make a new secret for ${nameOf(w)}? The current one keeps signing beside it for 24 hours.`} confirmLabel="Rotate secret" onConfirm={() => rotate(w)} />
                      <Confirm label="Delete…" danger question={`Delete ${nameOf(w)}? Its queued deliveries are abandoned.`} confirmLabel="Delete endpoint" onConfirm={() => remove(w)} />
                    </>
                  )}
                </div>
              </li>
            );
          })}
        </ul>
      )}
      {shown && <DeliveryLog webhook={shown} manage={manage} refresh={logRefresh} />}

      {!manage && <p class="muted">An admin of {org?.name ?? 'the organization'} adds and changes the endpoints; your role is {org?.role}, which reads them and their logs.</p>}
      {manage && (
        <>
          <h2>Add an endpoint</h2>
          <form class="webhook" onSubmit={create} noValidate>
            {errors.form && (
              <p class="error" role="alert" tabIndex={-1}>
                {errors.form}
              </p>
            )}
            <div class="field wide">
              <label for="webhook-url">URL</label>
              <input id="webhook-url" type="url" value={form.url} aria-invalid={Boolean(errors.url)} aria-describedby={['webhook-url-hint', errors.url ? 'webhook-url-error' : ''].filter(Boolean).join(' ')} onInput={(e) => setForm({ ...form, url: e.currentTarget.value })} />
              <span id="webhook-url-hint" class="hint">
                https, on a public address; it first receives a confirmation
              </span>
              <FieldError id="webhook-url-error" message={errors.url} />
            </div>
            <fieldset class="field group" aria-describedby={errors.events ? 'webhook-events-error' : undefined}>
              <legend>Events</legend>
              {SUBSCRIBABLE_EVENTS.map((e) => (
                <div class="field inline" key={e.name}>
                  <input type="checkbox" id={`webhook-event-${e.name}`} checked={form.events.includes(e.name)} aria-invalid={Boolean(errors.events)} onChange={(ev) => toggleEvent(e.name, ev.currentTarget.checked)} />
                  <label for={`webhook-event-${e.name}`}>
                    {e.label} <span class="mono muted">{e.name}</span>
                  </label>
                </div>
              ))}
              <FieldError id="webhook-events-error" message={errors.events} />
            </fieldset>
            <div class="field">
              <label for="webhook-description">Description (optional)</label>
              <input id="webhook-description" value={form.description} aria-invalid={Boolean(errors.description)} aria-describedby={errors.description ? 'webhook-description-error' : undefined} onInput={(e) => setForm({ ...form, description: e.currentTarget.value })} />
              <FieldError id="webhook-description-error" message={errors.description} />
            </div>
            <fieldset class="field group" aria-describedby={errors.format ? 'webhook-format-error' : undefined}>
              <legend>Format</legend>
              <div class="field inline">
                <input type="radio" name="webhook-format" id="webhook-format-standard" checked={form.format === 'standard'} onChange={() => setForm({ ...form, format: 'standard' })} />
                <label for="webhook-format-standard">Standard (signed JSON)</label>
              </div>
              <div class="field inline">
                <input type="radio" name="webhook-format" id="webhook-format-slack" checked={form.format === 'slack'} onChange={() => setForm({ ...form, format: 'slack' })} />
                <label for="webhook-format-slack">Slack incoming webhook</label>
              </div>
              <FieldError id="webhook-format-error" message={errors.format} />
            </fieldset>
            <button type="submit" class="primary" disabled={busy}>
              Add endpoint
            </button>
          </form>
        </>
      )}
    </section>
  );
}
