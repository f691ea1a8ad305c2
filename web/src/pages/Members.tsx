import { useState } from 'preact/hooks';
import { api, bodyOf, fieldOf, messageOf } from '../api/client';
import { FieldError } from '../components/FieldError';
import { Confirm } from '../components/Confirm';
import { assignableRoles, fleetHref, NEEDS, atLeast, type OrgFleet, type Role } from '../fleet';
import { dateTime } from '../format';
import { useCursorPages } from '../hooks/useCursorPages';

/** A member as `GET /orgs/{orgId}/members` lists them. */
interface Member {
  userId: string;
  role: Role;
  joinedAt: string;
  email?: string;
}

/** One member's role, changed by a role that may (handing ownership over asks first). */
function RoleChange({ member, choices, onSave }: { member: Member; choices: Role[]; onSave: (role: Role) => Promise<void> }) {
  const [role, setRole] = useState<Role>(member.role);
  const id = `role-${member.userId}`;
  const who = member.email ?? member.userId;
  return (
    <div class="actions">
      <label for={id} class="sr-only">
        Role of {who}
      </label>
      <select id={id} value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
        {choices.map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
      {role === 'owner' ? (
        <Confirm label="Hand ownership over…" question={`Make ${who} the owner? You become an admin.`} confirmLabel="Hand ownership over" onConfirm={() => onSave(role)} />
      ) : (
        <button type="button" disabled={role === member.role} aria-label={`Save the role of ${who}`} onClick={() => void onSave(role)}>
          Save role
        </button>
      )}
    </div>
  );
}

/** The organization itself: an admin renames it; its owner deletes it (once it has no devices). */
function OrgSettings({ org, onOrgsChanged }: { org: OrgFleet; onOrgsChanged: () => Promise<void> }) {
  const [name, setName] = useState(org.name);
  const [error, setError] = useState<{ field: boolean; text: string } | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const rename = async (e: Event) => {
    e.preventDefault();
    setError(null);
    setSaved(null);
    try {
      const answer = bodyOf(await api.PATCH('/orgs/{orgId}', { params: { path: { orgId: org.orgId } }, body: { name } }));
      setSaved(`Renamed to ${answer.org.name}.`);
      await onOrgsChanged();
    } catch (err) {
      setError({ field: fieldOf(err) === 'name', text: messageOf(err) });
    }
  };
  const remove = async () => {
    setError(null);
    try {
      await api.DELETE('/orgs/{orgId}', { params: { path: { orgId: org.orgId } } });
      await onOrgsChanged();
      location.hash = '#/';
    } catch (err) {
      // 409 `org_not_empty` says how many devices are left to move or delete.
      setError({ field: false, text: messageOf(err) });
    }
  };
  return (
    <section aria-labelledby="org-settings-title">
      <h2 id="org-settings-title">Organization</h2>
      {saved && (
        <p role="status" class="notice">
          {saved}
        </p>
      )}
      {error && !error.field && (
        <p role="alert" class="error">
          {error.text}
        </p>
      )}
      <form class="edit" onSubmit={rename} noValidate>
        <div class="field">
          <label for="org-rename">Name</label>
          <input id="org-rename" value={name} aria-invalid={Boolean(error?.field)} aria-describedby={error?.field ? 'org-rename-error' : undefined} onInput={(e) => setName(e.currentTarget.value)} />
          <FieldError id="org-rename-error" message={error?.field ? error.text : undefined} />
        </div>
        <button type="submit" class="primary" disabled={name === org.name}>
          Rename
        </button>
      </form>
      {org.role === 'owner' && (
        <p class="actions">
          <Confirm label="Delete organization…" danger question={`Delete ${org.name}, its members, invitations and rules? Only an organization without devices can be deleted.`} confirmLabel="Delete organization" onConfirm={remove} />
        </p>
      )}
    </section>
  );
}

/**
 * An organization's members (`GET /orgs/{orgId}/members`, paged): everyone sees the list; an
 * admin changes roles (up to their own) and removes members; anyone but the owner can leave.
 */
export function Members({ org, me, onOrgsChanged }: { org: OrgFleet; me: string; onOrgsChanged: () => Promise<void> }) {
  const orgId = org.orgId;
  const { items: members, hasMore, error, loading, reload, more } = useCursorPages<Member>(async (cursor) => {
    const page = bodyOf(await api.GET('/orgs/{orgId}/members', { params: { path: { orgId }, query: { cursor: cursor ?? undefined } } }));
    return { items: page.members, cursor: page.cursor ?? null };
  }, orgId);
  const [notice, setNotice] = useState<{ text: string; error: boolean } | null>(null);

  const changeRole = async (member: Member, role: Role) => {
    setNotice(null);
    try {
      await api.PATCH('/orgs/{orgId}/members/{userId}', { params: { path: { orgId, userId: member.userId } }, body: { role } });
      setNotice({ text: `${member.email ?? member.userId}'s role is now ${role}.`, error: false });
      // Handing ownership over changes my own role too.
      if (role === 'owner') await onOrgsChanged();
    } catch (e) {
      setNotice({ text: messageOf(e), error: true });
    }
    void reload();
  };

  const remove = async (member: Member) => {
    setNotice(null);
    try {
      await api.DELETE('/orgs/{orgId}/members/{userId}', { params: { path: { orgId, userId: member.userId } } });
      if (member.userId === me) {
        await onOrgsChanged();
        location.hash = '#/';
        return;
      }
      setNotice({ text: `Removed ${member.email ?? member.userId}.`, error: false });
    } catch (e) {
      setNotice({ text: messageOf(e), error: true });
    }
    void reload();
  };

  const manage = atLeast(org.role, NEEDS.members);
  return (
    <section>
      <h1 tabIndex={-1}>Members of {org.name}</h1>
      <p class="muted">
        Your role: <strong>{org.role}</strong>. Viewers read the fleet; operators also acknowledge alarms, set desired states and send commands; admins also change devices, rules and members; the owner also deletes the organization.
        {manage && (
          <>
            {' '}
            <a href={fleetHref(orgId, '/invitations')}>Invite someone</a>
          </>
        )}
      </p>
      <p role="status" class={notice?.error ? 'error' : 'notice'}>
        {notice?.text ?? ''}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {members === null && !error && <p role="status">Loading members…</p>}
      {members && (
        <div class="scroll">
          <table class="members">
            <caption class="sr-only">Members of {org.name}</caption>
            <thead>
              <tr>
                <th scope="col">Member</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.map((m) => {
                const choices = m.userId === me ? [] : assignableRoles(org.role, m.role);
                const who = m.email ?? m.userId;
                return (
                  <tr key={m.userId} data-member={m.userId} data-role={m.role}>
                    <th scope="row">
                      {who}
                      {m.userId === me && <span class="muted"> (you)</span>}
                      {m.email && <div class="muted mono">{m.userId}</div>}
                    </th>
                    <td>{m.role}</td>
                    <td>{dateTime(m.joinedAt)}</td>
                    <td>
                      <div class="actions">
                        {choices.length > 0 && <RoleChange member={m} choices={choices} onSave={(role) => changeRole(m, role)} />}
                        {choices.length > 0 && <Confirm label="Remove…" danger question={`Remove ${who} from ${org.name}?`} confirmLabel="Remove member" onConfirm={() => remove(m)} />}
                        {m.userId === me && m.role !== 'owner' && <Confirm label="Leave organization…" danger question={`Leave ${org.name}? You need a new invitation to come back.`} confirmLabel="Leave" onConfirm={() => remove(m)} />}
                      </div>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {hasMore && (
        <button type="button" onClick={() => void more()} disabled={loading}>
          More members
        </button>
      )}
      {manage && <OrgSettings org={org} onOrgsChanged={onOrgsChanged} />}
    </section>
  );
}
