import { useState } from 'preact/hooks';
import { api, bodyOf, fieldOf, messageOf } from '../api/client';
import { FieldError } from '../components/FieldError';
import { fleetHref } from '../fleet';

/** Creates an organization (`POST /orgs`); the person becomes its owner and its fleet opens. */
export function NewOrg({ onCreated }: { onCreated: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<{ field: boolean; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const { org } = bodyOf(await api.POST('/orgs', { body: { name } }));
      await onCreated();
      location.hash = fleetHref(org.orgId, '/');
    } catch (err) {
      setError({ field: fieldOf(err) === 'name', message: messageOf(err) });
      setTimeout(() => document.querySelector<HTMLElement>('[aria-invalid="true"], form .error')?.focus());
    } finally {
      setBusy(false);
    }
  };
  return (
    <section>
      <h1 tabIndex={-1}>New organization</h1>
      <p class="muted">An organization's fleet is run by a team: you become its owner, then invite members with a role (viewer, operator, admin).</p>
      <form onSubmit={submit} noValidate class="register">
        {error && !error.field && (
          <p class="error" role="alert" tabIndex={-1}>
            {error.message}
          </p>
        )}
        <div class="field">
          <label for="org-name">Name</label>
          <input id="org-name" value={name} aria-invalid={Boolean(error?.field)} aria-describedby={error?.field ? 'org-name-error' : undefined} onInput={(e) => setName(e.currentTarget.value)} />
          <FieldError id="org-name-error" message={error?.field ? error.message : undefined} />
        </div>
        <button type="submit" class="primary" disabled={busy}>
          Create organization
        </button>
      </form>
    </section>
  );
}
