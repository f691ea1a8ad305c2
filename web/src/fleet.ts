// Which fleet a page shows: the signed-in person's own ("My fleet", the `/me/...` routes) or
// one of their organizations' (the `/orgs/{orgId}/...` twins, same method, body and answer).
// The fleet is in the page's address (`#/orgs/{orgId}/devices/...`), so a link names its fleet;
// this module is the one place that turns a page's route and an API path into the fleet's.

/** A member's role in an organization, each including the one before (docs/design.md). */
export type Role = 'viewer' | 'operator' | 'admin' | 'owner';

/** The roles from least to most. */
export const ROLES: readonly Role[] = ['viewer', 'operator', 'admin', 'owner'];

/** Whether `role` includes `needed` (an owner can do what an admin can, and so on). */
export function atLeast(role: Role, needed: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

/**
 * What a role may do, as the API enforces it: the console hides every button a role cannot use
 * (the API refuses them anyway, 403 `role_required`).
 */
export const NEEDS = {
  /** Acknowledge an alarm, set the desired state, send a command. */
  operate: 'operator',
  /** Register, change, delete devices; rotate and revoke tokens; edit rules; start rollouts. */
  manage: 'admin',
  /** Invite, change and remove members. */
  members: 'admin',
} as const satisfies Record<string, Role>;

/** An organization of the signed-in person, as the console holds it. */
export interface OrgFleet {
  orgId: string;
  name: string;
  role: Role;
}

/** The fleet a page shows: null for My fleet (where the person may do everything). */
export type FleetScope = OrgFleet | null;

/** A route of the console split into its fleet (an organization's id, or null) and the page. */
export function splitRoute(route: string): { orgId: string | null; page: string } {
  const org = /^\/orgs\/([^/]+)(\/.*)?$/.exec(route);
  // `/orgs/new` is the page that creates one, not a fleet (an id is `o` and 20 hex digits).
  if (!org || org[1] === 'new') return { orgId: null, page: route };
  let orgId = org[1];
  try {
    orgId = decodeURIComponent(orgId);
  } catch {
    // kept as typed
  }
  return { orgId, page: org[2] ?? '/' };
}

/** The address of a page of a fleet: `#/devices/x` for My fleet, `#/orgs/{orgId}/devices/x` for an organization's. */
export function fleetHref(orgId: string | null, page: string): string {
  if (!orgId) return `#${page}`;
  return `#/orgs/${encodeURIComponent(orgId)}${page === '/' ? '' : page}`;
}

/**
 * The API URL of a fleet route: a `/me/...` path (not `/me` itself, the profile) becomes the
 * organization's `/orgs/{orgId}/...` twin. `base` is the API's base URL (empty: this origin).
 */
export function fleetUrl(url: string, orgId: string | null, base: string): string {
  if (!orgId) return url;
  const target = new URL(url);
  const prefix = new URL(base || '/', target).pathname.replace(/\/$/, '');
  const me = `${prefix}/me/`;
  if (!target.pathname.startsWith(me)) return url;
  target.pathname = `${prefix}/orgs/${encodeURIComponent(orgId)}/${target.pathname.slice(me.length)}`;
  return target.toString();
}

/** The invitation link to share: this console's address of the accept page. */
export function invitationLink(code: string, here: { origin: string; pathname: string }): string {
  return `${here.origin}${here.pathname}#/invitations/${encodeURIComponent(code)}`;
}

/** The organization an invitation code is for (`{orgId}.{secret}`), to link to it once accepted. */
export function orgOfCode(code: string): string | null {
  const dot = code.indexOf('.');
  return dot > 0 ? code.slice(0, dot) : null;
}

/**
 * The roles `mine` may give a member whose role is `theirs` (null: that member is not mine to
 * change): an admin changes members up to admin, to at most admin; the owner anyone else, and
 * may hand ownership over. The owner's own role changes only by handing it over.
 */
export function assignableRoles(mine: Role, theirs: Role): Role[] {
  if (!atLeast(mine, 'admin') || theirs === 'owner') return [];
  if (mine === 'owner') return [...ROLES];
  return ROLES.filter((r) => r !== 'owner');
}

/** A role an invitation can give. */
export type InvitedRole = Exclude<Role, 'owner'>;

/** The roles `mine` may invite with (never owner: ownership is handed over, not invited). */
export function invitableRoles(mine: Role): InvitedRole[] {
  return atLeast(mine, 'admin') ? ROLES.filter((r): r is InvitedRole => r !== 'owner' && atLeast(mine, r)) : [];
}

/** A fleet a device may be moved into: an organization, or My fleet (`orgId` null). */
export interface MoveTarget {
  orgId: string | null;
  label: string;
}

/**
 * Where a device of the fleet `from` (null: My fleet) may be moved: My fleet (from an
 * organization's) and each other organization in which the person is at least an admin (the
 * API wants admin on both sides; the page offers the move only where they are admin).
 */
export function moveTargets(orgs: readonly OrgFleet[] | null, from: string | null): MoveTarget[] {
  const targets: MoveTarget[] = from ? [{ orgId: null, label: 'My fleet' }] : [];
  for (const o of orgs ?? []) if (o.orgId !== from && atLeast(o.role, NEEDS.manage)) targets.push({ orgId: o.orgId, label: o.name });
  return targets;
}
