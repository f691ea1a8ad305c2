import type { Schemas } from '../api/client';

type Severity = Schemas['Severity'];

/** A severity as a badge: the word is always there, the colour only adds to it. */
export function SeverityBadge({ severity }: { severity: Severity | string }) {
  return <span class={`badge sev-${severity}`}>{severity}</span>;
}

export function StateBadge({ state }: { state: Schemas['Alarm']['state'] | string }) {
  return <span class={`badge state-${state}`}>{state}</span>;
}

/** A device's connectivity from the API (`online`, `offline`: an offline alarm is open, `unknown`: never reported). */
export function ConnectivityBadge({ connectivity }: { connectivity: Schemas['Device']['connectivity'] | string | null | undefined }) {
  if (!connectivity) return <span class="muted">—</span>;
  return (
    <span class={`badge conn-${connectivity}`} title={connectivity === 'unknown' ? 'The device has not reported yet' : undefined}>
      {connectivity}
    </span>
  );
}

/** A device's active alarms on the dashboard: their count and the highest severity. */
export function ActiveAlarms({ alarms }: { alarms: Schemas['Device']['alarms'] | null | undefined }) {
  if (!alarms) return <span class="muted">—</span>;
  if (alarms.active === 0) return <span class="muted">none</span>;
  return (
    <a href="#/alarms" class="alarm-count">
      <span data-alarm-count>{alarms.active}</span>
      <span class="sr-only"> active alarm{alarms.active === 1 ? '' : 's'}{alarms.highestSeverity ? ', highest' : ''}</span> {alarms.highestSeverity && <SeverityBadge severity={alarms.highestSeverity} />}
    </a>
  );
}
