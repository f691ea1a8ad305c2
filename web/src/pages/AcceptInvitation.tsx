import { useState } from 'preact/hooks';
import { api, ApiError, bodyOf, messageOf } from '../api/client';
import { fleetHref, orgOfCode } from '../fleet';

/**
 * An invitation link (`#/invitations/{code}`), opened signed in: accepting it
 * (`POST /invitations/{code}/accept`) joins the organization and opens its fleet. Nothing is
 * sent until the person chooses to accept.
 */
export function AcceptInvitation({ code, onAccepted }: { code: string; onAccepted: () => Promise<void> }) {
  const [error, setError] = useState<{ text: string; orgId?: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const accept = async () => {
    setError(null);
    setBusy(true);
    try {
      const { org } = bodyOf(await api.POST('/invitations/{code}/accept', { params: { path: { code } } }));
      await onAccepted();
      location.hash = fleetHref(org.orgId, '/');
    } catch (e) {
      if (e instanceof ApiError && e.code === 'already_member') setError({ text: 'You are already a member of this organization.', orgId: orgOfCode(code) ?? undefined });
      else if (e instanceof ApiError && e.status === 404) setError({ text: 'This invitation cannot be used: it is unknown, was used or revoked, or has expired. Ask for a new one.' });
      else setError({ text: messageOf(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <section>
      <h1 tabIndex={-1}>Invitation to an organization</h1>
      <p>You were invited to join an organization's fleet with a role. Accepting it adds the organization to your fleets.</p>
      {error && (
        <p class="error" role="alert">
          {error.text}
          {error.orgId && (
            <>
              {' '}
              <a href={fleetHref(error.orgId, '/')}>Open its fleet</a>
            </>
          )}
        </p>
      )}
      <p class="actions">
        <button type="button" class="primary" disabled={busy} onClick={() => void accept()}>
          Accept invitation
        </button>
        <a href="#/">Not now</a>
      </p>
    </section>
  );
}
