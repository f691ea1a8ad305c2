import type { FleetScope, Role } from '../fleet';
import { fleetHref } from '../fleet';

/** A page the person's role in the organization does not allow (reached by its address). */
export function RoleNeeded({ title, needed, org }: { title: string; needed: Role; org: FleetScope }) {
  return (
    <section>
      <h1 tabIndex={-1}>{title}</h1>
      <p class="error" role="alert">
        This needs the {needed} role in {org?.name ?? 'the organization'}; yours is {org?.role ?? 'none'}.
      </p>
      <a href={fleetHref(org?.orgId ?? null, '/')}>Back to the fleet</a>
    </section>
  );
}
