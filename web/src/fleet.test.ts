import { describe, expect, it } from 'vitest';
import { assignableRoles, atLeast, fleetHref, fleetUrl, invitableRoles, invitationLink, moveTargets, orgOfCode, splitRoute } from './fleet';

const ORG = 'o0123456789abcdef0123';

describe('the fleet of a page', () => {
  it('is in its address: My fleet, or an organization with the page inside it', () => {
    expect(splitRoute('/')).toEqual({ orgId: null, page: '/' });
    expect(splitRoute('/devices/a')).toEqual({ orgId: null, page: '/devices/a' });
    expect(splitRoute(`/orgs/${ORG}`)).toEqual({ orgId: ORG, page: '/' });
    expect(splitRoute(`/orgs/${ORG}/devices/a%23b`)).toEqual({ orgId: ORG, page: '/devices/a%23b' });
    expect(splitRoute('/orgs/new')).toEqual({ orgId: null, page: '/orgs/new' });
    expect(splitRoute('/orgs/%E0%A4%A')).toEqual({ orgId: '%E0%A4%A', page: '/' });
  });
  it('names its fleet in every link', () => {
    expect(fleetHref(null, '/')).toBe('#/');
    expect(fleetHref(null, '/alarms')).toBe('#/alarms');
    expect(fleetHref(ORG, '/')).toBe(`#/orgs/${ORG}`);
    expect(fleetHref(ORG, '/devices/x')).toBe(`#/orgs/${ORG}/devices/x`);
    const { orgId, page } = splitRoute(fleetHref(ORG, '/rules').slice(1));
    expect([orgId, page]).toEqual([ORG, '/rules']);
  });
});

describe("a fleet route's API URL", () => {
  it('is the /me route for My fleet', () => {
    expect(fleetUrl('http://127.0.0.1:3000/me/dashboard', null, '')).toBe('http://127.0.0.1:3000/me/dashboard');
  });
  it("is the organization's twin, query kept, for an organization", () => {
    expect(fleetUrl('http://127.0.0.1:3000/me/devices/a%23b/events?from=x&limit=100', ORG, '')).toBe(`http://127.0.0.1:3000/orgs/${ORG}/devices/a%23b/events?from=x&limit=100`);
    expect(fleetUrl('https://api.example.com/prod/me/alarms/a1/ack', ORG, 'https://api.example.com/prod')).toBe(`https://api.example.com/prod/orgs/${ORG}/alarms/a1/ack`);
  });
  it('leaves the profile and every route that is not a fleet route alone', () => {
    for (const url of ['http://h/me', 'http://h/orgs', 'http://h/admin/devices', 'http://h/invitations/c/accept', 'http://h/meters/me/x'])
      expect(fleetUrl(url, ORG, '')).toBe(url);
  });
});

describe('roles', () => {
  it('each include the one before', () => {
    expect(atLeast('owner', 'admin')).toBe(true);
    expect(atLeast('admin', 'admin')).toBe(true);
    expect(atLeast('operator', 'admin')).toBe(false);
    expect(atLeast('viewer', 'operator')).toBe(false);
    expect(atLeast('viewer', 'viewer')).toBe(true);
  });
  it('let an admin change members up to admin, to at most admin; the owner anyone else, ownership included', () => {
    expect(assignableRoles('viewer', 'viewer')).toEqual([]);
    expect(assignableRoles('operator', 'viewer')).toEqual([]);
    expect(assignableRoles('admin', 'viewer')).toEqual(['viewer', 'operator', 'admin']);
    expect(assignableRoles('admin', 'admin')).toEqual(['viewer', 'operator', 'admin']);
    expect(assignableRoles('admin', 'owner')).toEqual([]);
    expect(assignableRoles('owner', 'admin')).toEqual(['viewer', 'operator', 'admin', 'owner']);
    expect(assignableRoles('owner', 'owner')).toEqual([]);
  });
  it('invite with at most their own role, never owner, and only from admin on', () => {
    expect(invitableRoles('viewer')).toEqual([]);
    expect(invitableRoles('operator')).toEqual([]);
    expect(invitableRoles('admin')).toEqual(['viewer', 'operator', 'admin']);
    expect(invitableRoles('owner')).toEqual(['viewer', 'operator', 'admin']);
  });
});

describe('invitations', () => {
  it('are a link to the accept page of this console, naming their organization', () => {
    const code = `${ORG}.0123456789abcdef0123456789abcdef`;
    expect(invitationLink(code, { origin: 'https://console.example.com', pathname: '/' })).toBe(`https://console.example.com/#/invitations/${code}`);
    expect(orgOfCode(code)).toBe(ORG);
    expect(orgOfCode('nodot')).toBeNull();
  });
});

describe('moving a device', () => {
  const orgs = [
    { orgId: 'oa', name: 'Acme', role: 'owner' as const },
    { orgId: 'ob', name: 'Beta', role: 'admin' as const },
    { orgId: 'oc', name: 'Gamma', role: 'operator' as const },
    { orgId: 'od', name: 'Delta', role: 'viewer' as const },
  ];
  it('goes to organizations the person administers, never the fleet it is in', () => {
    expect(moveTargets(orgs, null)).toEqual([
      { orgId: 'oa', label: 'Acme' },
      { orgId: 'ob', label: 'Beta' },
    ]);
  });
  it('from an organization, also back to My fleet', () => {
    expect(moveTargets(orgs, 'oa')).toEqual([
      { orgId: null, label: 'My fleet' },
      { orgId: 'ob', label: 'Beta' },
    ]);
  });
  it('has nowhere to go before the organizations are read', () => {
    expect(moveTargets(null, null)).toEqual([]);
  });
});
