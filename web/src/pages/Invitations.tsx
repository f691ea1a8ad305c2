import { useEffect, useState } from 'preact/hooks';
import { api, bodyOf, fieldOf, messageOf } from '../api/client';
import { Confirm } from '../components/Confirm';
import { CopyButton } from '../components/CopyButton';
import { FieldError } from '../components/FieldError';
import { RoleNeeded } from '../components/RoleNeeded';
import { atLeast, invitableRoles, invitationLink, NEEDS, type InvitedRole, type OrgFleet, type Role } from '../fleet';
import { dateTime } from '../format';

/** An open invitation as `GET /orgs/{orgId}/invitations` lists it (never its code). */
interface Invitation {
  invitationId: string;
  role: Role;
  createdBy: string;
  createdAt: string;
  expiresAt: string;
}

/**
 * An organization's invitations (admins): create one with a role, whose link is shown once
 * with a copy button (only a hash of its code is stored); the open ones; revoke.
 */
export function Invitations({ org }: { org: OrgFleet }) {
  const orgId = org.orgId;
  const roles = invitableRoles(org.role);
  const [role, setRole] = useState<InvitedRole>('viewer');
  const [days, setDays] = useState('7');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [link, setLink] = useState<{ url: string; role: Role; expiresAt: string } | null>(null);
  const [list, setList] = useState<Invitation[] | null>(null);
  const [listError, setListError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const load = async () => {
    try {
      // Every open one, page by page (at most 200 open: two pages), so each can be revoked.
      const all: Invitation[] = [];
      let cursor: string | null = null;
      do {
        const page: { invitations: Invitation[]; cursor?: string | null } = bodyOf(await api.GET('/orgs/{orgId}/invitations', { params: { path: { orgId }, query: { cursor: cursor ?? undefined } } }));
        all.push(...page.invitations);
        cursor = page.cursor ?? null;
      } while (cursor);
      setList(all);
      setListError(null);
    } catch (e) {
      setListError(messageOf(e));
    }
  };
  const manage = atLeast(org.role, NEEDS.members);
  useEffect(() => {
    if (manage) void load();
  }, [orgId, manage]);

  if (!manage) return <RoleNeeded title={`Invitations to ${org.name}`} needed={NEEDS.members} org={org} />;

  const create = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setNotice(null);
    setBusy(true);
    try {
      const trimmed = days.trim();
      // A typed number of days that is no number is sent as typed, for the API's 400 to name it.
      const expiresInDays = trimmed === '' ? undefined : ((/^\d+$/.test(trimmed) ? Number(trimmed) : trimmed) as number);
      const { invitation } = bodyOf(await api.POST('/orgs/{orgId}/invitations', { params: { path: { orgId } }, body: { role, ...(expiresInDays === undefined ? {} : { expiresInDays }) } }));
      setLink({ url: invitationLink(invitation.code, location), role: invitation.role, expiresAt: invitation.expiresAt });
      void load();
    } catch (err) {
      const field = fieldOf(err);
      setErrors(field === 'role' || field === 'expiresInDays' ? { [field]: messageOf(err) } : { form: messageOf(err) });
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (invitation: Invitation) => {
    setNotice(null);
    try {
      await api.DELETE('/orgs/{orgId}/invitations/{invitationId}', { params: { path: { orgId, invitationId: invitation.invitationId } } });
      setNotice(`Revoked the ${invitation.role} invitation; its link no longer works.`);
    } catch (e) {
      setNotice(messageOf(e));
    }
    void load();
  };

  return (
    <section>
      <h1 tabIndex={-1}>Invitations to {org.name}</h1>
      <p class="muted">An invitation is a link for one person: whoever opens it signed in and accepts joins with its role. It works once and expires.</p>
      <form class="register" onSubmit={create} noValidate>
        {errors.form && (
          <p class="error" role="alert">
            {errors.form}
          </p>
        )}
        <div class="field">
          <label for="invite-role">Role</label>
          <select id="invite-role" value={role} aria-invalid={Boolean(errors.role)} aria-describedby={errors.role ? 'invite-role-error' : undefined} onChange={(e) => setRole(e.currentTarget.value as InvitedRole)}>
            {roles.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
          <FieldError id="invite-role-error" message={errors.role} />
        </div>
        <div class="field">
          <label for="invite-days">Expires after (days)</label>
          <input id="invite-days" inputMode="numeric" value={days} aria-invalid={Boolean(errors.expiresInDays)} aria-describedby={['invite-days-hint', errors.expiresInDays ? 'invite-days-error' : ''].filter(Boolean).join(' ')} onInput={(e) => setDays(e.currentTarget.value)} />
          <span id="invite-days-hint" class="hint">
            1 to 30
          </span>
          <FieldError id="invite-days-error" message={errors.expiresInDays} />
        </div>
        <button type="submit" class="primary" disabled={busy}>
          Create invitation
        </button>
      </form>
      {link && (
        <section class="token" aria-labelledby="invite-link-title">
          <h2 id="invite-link-title">Invitation link ({link.role})</h2>
          <p>
            <strong>Shown this once:</strong> send it to the person you invite. It works once, until {dateTime(link.expiresAt)}.
          </p>
          <label for="invite-link">Link</label>
          <input id="invite-link" class="mono" readOnly value={link.url} onFocus={(e) => e.currentTarget.select()} />
          <CopyButton text={link.url} what="link" />
        </section>
      )}
      <h2>Open invitations</h2>
      <p role="status" class="notice">
        {notice ?? ''}
      </p>
      {listError && (
        <p class="error" role="alert">
          {listError}
        </p>
      )}
      {list && list.length === 0 && <p class="muted">None.</p>}
      {list && list.length > 0 && (
        <div class="scroll">
          <table class="invitations">
            <caption class="sr-only">Open invitations to {org.name}</caption>
            <thead>
              <tr>
                <th scope="col">Role</th>
                <th scope="col">Created by</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((i) => (
                <tr key={i.invitationId} data-invitation={i.invitationId}>
                  <th scope="row">{i.role}</th>
                  <td class="mono">{i.createdBy}</td>
                  <td>{dateTime(i.createdAt)}</td>
                  <td>{dateTime(i.expiresAt)}</td>
                  <td>
                    <Confirm label="Revoke…" danger question={`Revoke this ${i.role} invitation? Its link stops working.`} confirmLabel="Revoke invitation" onConfirm={() => revoke(i)} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
