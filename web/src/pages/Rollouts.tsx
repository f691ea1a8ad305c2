import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, bodyOf, isRoleRefusal, messageOf } from '../api/client';
import { Confirm } from '../components/Confirm';
import { PagedTable } from '../components/ListTable';
import { dateTime } from '../format';
import { useCursorPages, type CursorPage } from '../hooks/useCursorPages';
import { useFleet } from '../hooks/useFleet';
import { healthLines, progressText, rolloutActions, rolloutRefusalText, stageSegments, stageStatusText, targetText, type Rollout, type RolloutStage } from '../firmware';

/** Rollouts a page of the list. */
const PAGE = 20;
/** How often, and how many times, a live rollout's page looks again by itself (each look is 2 requests). */
const POLL_MS = 3000;
const POLLS = 200;

/** A rollout's kind and subject, as a list says it. */
function subjectOf(r: Rollout): string {
  return r.firmware ? `Firmware ${r.firmware.version} (${r.firmware.deviceType})` : `Desired state ${JSON.stringify(r.desired ?? {})}`;
}

/** The fleet's rollouts of both kinds, newest first (`GET /me/rollouts`). */
export function Rollouts() {
  const { api, org, href } = useFleet();
  const readPage = async (cursor: string | null): Promise<CursorPage<Rollout>> => {
    const page = bodyOf(await api.GET('/me/rollouts', { params: { query: { limit: PAGE, cursor: cursor ?? undefined } } }));
    return { items: page.rollouts, cursor: page.cursor ?? null };
  };
  const list = useCursorPages(readPage, org?.orgId ?? 'me', { idOf: (r) => r.rolloutId });
  return (
    <section>
      <h1 tabIndex={-1}>Rollouts</h1>
      <p class="muted">
        Fleet-wide changes: desired-state changes applied to every device of a tag or type, and staged firmware rollouts (started from <a href={href('/firmware')}>Firmware</a>). Newest first.{' '}
        <button type="button" class="link" onClick={() => void list.reload()}>
          Refresh
        </button>
      </p>
      <PagedTable
        list={list}
        loading="Loading rollouts…"
        empty="No rollout yet."
        more="Older rollouts"
        tableClass="rollouts"
        caption="Rollouts, newest first"
        columns={[{ label: 'Rollout' }, { label: 'Target' }, { label: 'Status' }, { label: 'Progress' }, { label: 'Started' }]}
        row={(r) => (
          <tr key={r.rolloutId} data-rollout={r.rolloutId} data-status={r.status}>
            <th scope="row">
              <a href={href(`/rollouts/${encodeURIComponent(r.rolloutId)}`)}>{subjectOf(r)}</a>
              <div class="muted mono">{r.rolloutId}</div>
            </th>
            <td>{targetText(r.target)}</td>
            <td>
              <span class={`badge rollout-${r.status}`}>{r.status}</span>
              {r.pausedReason && <div class="muted">{r.pausedReason}</div>}
            </td>
            <td>{progressText(r)}</td>
            <td>{dateTime(r.createdAt)}</td>
          </tr>
        )}
      />
    </section>
  );
}

/** The stages as a chart (numbered from 0, as the API's pause reasons number them): one stacked bar per stage (succeeded, in progress, failed, not started), scaled to the most offered; a table underneath, so it reads without the colours. */
function StageChart({ stages }: { stages: RolloutStage[] }) {
  const most = Math.max(1, ...stages.map((s) => s.offered));
  return (
    <figure class="stages" data-stage-chart>
      <figcaption>Devices of each stage by how far they got</figcaption>
      <ul class="legend" aria-hidden="true">
        <li>
          <span class="swatch seg-succeeded" /> succeeded
        </li>
        <li>
          <span class="swatch seg-inProgress" /> in progress
        </li>
        <li>
          <span class="swatch seg-failed" /> failed
        </li>
        <li>
          <span class="swatch seg-waiting" /> not started
        </li>
      </ul>
      <table>
        <thead>
          <tr>
            <th scope="col">Stage</th>
            <th scope="col">Status</th>
            <th scope="col" class="bar-cell">
              <span class="sr-only">Chart</span>
            </th>
            <th scope="col" class="num">
              Offered
            </th>
            <th scope="col" class="num">
              Succeeded
            </th>
            <th scope="col" class="num">
              In progress
            </th>
            <th scope="col" class="num">
              Failed
            </th>
            <th scope="col" class="num">
              Timed out
            </th>
            <th scope="col" class="num">
              Retried
            </th>
          </tr>
        </thead>
        <tbody>
          {stages.map((s, i) => (
            <tr key={i} data-stage={i} data-stage-status={s.status}>
              <th scope="row">
                stage {i}: {s.percent}%
              </th>
              <td>{stageStatusText(s)}</td>
              <td class="bar-cell">
                <span class="stack" style={{ width: `${(s.offered / most) * 100}%` }} aria-hidden="true">
                  {stageSegments(s)
                    .filter((seg) => seg.count > 0)
                    .map((seg) => (
                      <span key={seg.kind} class={`seg seg-${seg.kind}`} style={{ width: `${(seg.count / Math.max(1, s.offered)) * 100}%` }} title={`${seg.count} ${seg.label}`} />
                    ))}
                </span>
              </td>
              <td class="num">{s.offered}</td>
              <td class="num">{s.succeeded}</td>
              <td class="num">{s.inProgress}</td>
              <td class="num">{s.failed}</td>
              <td class="num">{s.timedOut}</td>
              <td class="num">{s.retried}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}

/** One rollout (`GET /me/rollouts/{rolloutId}`): its status, why it paused, each stage's progress as a chart, and pause, resume and cancel for the roles that may. */
export function RolloutPage({ rolloutId }: { rolloutId: string }) {
  const { api, org, href } = useFleet();
  const [rollout, setRollout] = useState<Rollout | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);
  const polls = useRef(POLLS);

  const load = async () => {
    try {
      const answer = bodyOf(await api.GET('/me/rollouts/{rolloutId}', { params: { path: { rolloutId } } }));
      setRollout(answer.rollout);
      setError(null);
    } catch (e) {
      setError(e instanceof ApiError && e.status === 404 ? 'No rollout of this fleet has this address.' : messageOf(e));
    }
  };
  useEffect(() => {
    polls.current = POLLS;
    void load();
  }, [rolloutId, org?.orgId]);
  // While it runs (or is paused, and may be resumed elsewhere), look again now and then.
  const live = rollout?.status === 'running' || rollout?.status === 'paused';
  useEffect(() => {
    if (!live || polls.current <= 0) return;
    const timer = setTimeout(() => {
      polls.current -= 1;
      void load();
    }, POLL_MS);
    return () => clearTimeout(timer);
  }, [rollout]);

  const act = async (action: 'pause' | 'resume' | 'cancel') => {
    setNotice(null);
    try {
      const path = { params: { path: { rolloutId } } };
      const answer = bodyOf(
        action === 'pause' ? await api.POST('/me/rollouts/{rolloutId}/pause', path) : action === 'resume' ? await api.POST('/me/rollouts/{rolloutId}/resume', path) : await api.POST('/me/rollouts/{rolloutId}/cancel', path),
      );
      setNotice({ text: action === 'pause' ? 'Paused: no device is offered anything until it is resumed.' : action === 'resume' ? 'Resumed: the next worker run offers its open stages again.' : 'Cancelled.', error: false });
      polls.current = POLLS;
      // The action's answer has no stage counts: read the rollout again for them.
      setRollout((old) => ({ ...answer.rollout, stages: answer.rollout.stages && old?.stages ? old.stages : answer.rollout.stages }));
      void load();
    } catch (e) {
      setNotice({ text: isRoleRefusal(e) ? `Refused: ${messageOf(e)}` : rolloutRefusalText(e), error: true });
      void load();
    }
  };

  if (error)
    return (
      <section>
        <h1 tabIndex={-1}>Rollout</h1>
        <p class="error" role="alert">
          {error}
        </p>
        <a href={href('/rollouts')}>All rollouts</a>
      </section>
    );
  if (!rollout)
    return (
      <section>
        <h1 tabIndex={-1}>Rollout</h1>
        <p role="status">Loading the rollout…</p>
      </section>
    );
  const can = rolloutActions(rollout, org?.role ?? null);
  const plan = rollout.firmware;
  return (
    <section data-rollout-page={rollout.rolloutId} data-status={rollout.status}>
      <h1 tabIndex={-1}>{subjectOf(rollout)}</h1>
      <p class="muted">
        <a href={href('/rollouts')}>All rollouts</a> · <span class="mono">{rollout.rolloutId}</span> · {targetText(rollout.target)} · started {dateTime(rollout.createdAt)}
      </p>
      <p class="rollout-status" data-rollout-status={rollout.status}>
        Status: <span class={`badge rollout-${rollout.status}`}>{rollout.status}</span>
        {rollout.finishedAt && <span class="muted"> finished {dateTime(rollout.finishedAt)}</span>}
        {rollout.cancelledAt && <span class="muted"> cancelled {dateTime(rollout.cancelledAt)}</span>}
      </p>
      {rollout.status === 'paused' && (
        <div class="paused-reason" role="alert" data-paused-reason>
          <strong>Paused:</strong> {rollout.pausedReason ?? 'no reason recorded'}
          <div class="muted">No device is offered anything while it is paused; devices already on it still report and are counted.</div>
        </div>
      )}
      {rollout.health && (
        <section data-health>
          <h2>Health, as the last walk of the target saw it</h2>
          <p class="muted">The rollout pauses itself when a stage’s updated devices are offline or alarmed clearly more often than the devices not yet updated (one-sided Fisher’s exact test, p below 0.001).</p>
          <ul>
            {healthLines(rollout.health).map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
        </section>
      )}
      {notice && (
        <p class={notice.error ? 'error' : 'notice'} role={notice.error ? 'alert' : 'status'} data-notice>
          {notice.text}
        </p>
      )}
      {(can.pause || can.resume || can.cancel) && (
        <div class="actions">
          {can.pause && (
            <button type="button" onClick={() => void act('pause')}>
              Pause
            </button>
          )}
          {can.resume && (
            <button type="button" class="primary" onClick={() => void act('resume')}>
              Resume
            </button>
          )}
          {can.cancel && <Confirm label="Cancel rollout…" danger question="Cancel this rollout? Devices keep what they got; nothing more is offered or changed." confirmLabel="Cancel rollout" onConfirm={() => act('cancel')} />}
        </div>
      )}
      {org && !can.pause && !can.resume && !can.cancel && live && <p class="muted">An operator pauses and cancels, an admin resumes; your role is {org.role}.</p>}
      {plan && (
        <>
          <h2>Stages</h2>
          {rollout.stages && <StageChart stages={rollout.stages} />}
          <dl class="plan">
            <div>
              <dt>Package</dt>
              <dd>
                {plan.deviceType} {plan.version} <span class="mono muted">{plan.firmwareId}</span>
              </dd>
            </div>
            <div>
              <dt>Soak</dt>
              <dd>{plan.soakSeconds} s</dd>
            </div>
            <div>
              <dt>Success</dt>
              <dd>
                {plan.successPercent}% of a stage, after {plan.healthyCheckIns} healthy check-ins each
              </dd>
            </div>
            <div>
              <dt>Pauses when</dt>
              <dd>
                {plan.abort.failurePercent}% of at least {plan.abort.minFinished} finished devices of a stage failed
              </dd>
            </div>
            {plan.maintenanceWindow && (
              <div>
                <dt>Window</dt>
                <dd>
                  {plan.maintenanceWindow.startHour}:00 to {plan.maintenanceWindow.endHour}:00 UTC
                </dd>
              </div>
            )}
          </dl>
        </>
      )}
      {!plan && (
        <>
          <h2>Progress</h2>
          <p>{progressText(rollout)}</p>
          <pre class="mono">{JSON.stringify(rollout.desired ?? {}, null, 2)}</pre>
          {rollout.failures.length > 0 && (
            <ul>
              {rollout.failures.map((f) => (
                <li key={f.deviceId}>
                  <span class="mono">{f.deviceId}</span>: {f.reason}
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
