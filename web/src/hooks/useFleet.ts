import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import { fleetApi, type Api } from '../api/client';
import { atLeast, fleetHref, type FleetScope, type Role } from '../fleet';

/** The fleet the current page shows, as its pages use it. */
export interface FleetView {
  /** The organization, or null for My fleet. */
  org: FleetScope;
  /** The fleet's API: `/me/...` paths, sent to the organization's twins when there is one. */
  api: Api;
  /** The address of one of this fleet's pages: `href('/devices/x')`. */
  href: (page: string) => string;
  /** Whether the signed-in person's role allows what needs `role` (always in My fleet). */
  can: (role: Role) => boolean;
  /** The fleet's name as a page says it. */
  title: string;
}

/** The view of a fleet: My fleet for `null`. */
export function fleetView(org: FleetScope): FleetView {
  const orgId = org?.orgId ?? null;
  return {
    org,
    api: fleetApi(orgId),
    href: (page) => fleetHref(orgId, page),
    can: (role) => (org ? atLeast(org.role, role) : true),
    title: org ? org.name : 'Your fleet',
  };
}

export const FleetContext = createContext<FleetView>(fleetView(null));

/** The fleet of the page being drawn (set by the router from the address). */
export function useFleet(): FleetView {
  return useContext(FleetContext);
}
