import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Route, Router, Switch } from 'wouter-preact';
import { useHashLocation } from 'wouter-preact/use-hash-location';
import './style.css';
import { api, bodyOf, configureApi, messageOf } from './api/client';
import {
  ConfigError,
  clearSession,
  cognitoSignOutUrl,
  currentSession,
  finishCognitoSignIn,
  loadConfig,
  saveSession,
  type Config,
  type Session,
} from './auth';
import { connection, onConnection } from './connection';
import { SignIn } from './pages/SignIn';
import { Dashboard } from './pages/Dashboard';
import { DevicePage } from './pages/Device';
import { Register } from './pages/Register';
import { Operators } from './pages/Operators';
import { Alarms } from './pages/Alarms';
import { Rules } from './pages/Rules';
import { Webhooks } from './pages/Webhooks';
import { FirmwarePage } from './pages/Firmware';
import { RolloutPage, Rollouts } from './pages/Rollouts';
import { Settings } from './pages/Settings';
import { NewOrg } from './pages/NewOrg';
import { Members } from './pages/Members';
import { Invitations } from './pages/Invitations';
import { AcceptInvitation } from './pages/AcceptInvitation';
import { fleetHref, NEEDS, splitRoute, type OrgFleet } from './fleet';
import { FleetContext, fleetView } from './hooks/useFleet';

/** Hash routes: the console is one index.html, so any static host serves every page. */
function route(): string {
  return location.hash.replace(/^#/, '') || '/';
}

/** A path segment as typed in the address bar, decoded (as it was when it is no valid escape). */
function segment(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function Banner() {
  const [state, setState] = useState(connection());
  useEffect(() => onConnection(setState), []);
  if (state.offline)
    return (
      <div class="banner offline" role="alert">
        Connection lost: the API cannot be reached. Retrying by itself…
      </div>
    );
  if (state.retryAfter !== null)
    return (
      <div class="banner busy" role="status">
        The API asked us to slow down; trying again in {state.retryAfter} s.
      </div>
    );
  return null;
}

/** The switcher between My fleet and each of the person's organizations (the address names the fleet). */
function FleetSwitcher({ orgs, orgId }: { orgs: OrgFleet[] | null; orgId: string | null }) {
  return (
    <span class="switcher">
      <label for="fleet-switcher">Fleet</label>
      <select id="fleet-switcher" value={orgId ?? ''} onChange={(e) => (location.hash = fleetHref(e.currentTarget.value || null, '/'))}>
        <option value="">My fleet</option>
        {orgId && !orgs?.some((o) => o.orgId === orgId) && <option value={orgId}>{orgId}</option>}
        {orgs?.map((o) => (
          <option key={o.orgId} value={o.orgId}>
            {o.name} ({o.role})
          </option>
        ))}
      </select>
      <a href="#/orgs/new">New organization</a>
    </span>
  );
}

/** An organization the person is not (or no longer) a member of: the API's 404 says no more. */
function NoSuchOrg({ error }: { error: string | null }) {
  return (
    <section>
      <h1 tabIndex={-1}>Organization not found</h1>
      <p class="error" role="alert">
        {error ?? 'No organization of yours has this address: it does not exist, or you are not a member of it (any more).'}
      </p>
      <a href="#/">Back to my fleet</a>
    </section>
  );
}

function App({ config, initial }: { config: Config; initial: Session | null }) {
  const [session, setSession] = useState<Session | null>(initial);
  const [orgs, setOrgs] = useState<OrgFleet[] | null>(null);
  const [orgsError, setOrgsError] = useState<string | null>(null);
  const [path] = useHashLocation();
  const signOut = () => {
    clearSession();
    setSession(null);
    configureApi(config.mode === 'cognito' ? config.apiUrl : '', null, () => {});
    if (config.mode === 'cognito') location.assign(cognitoSignOutUrl(config));
    else location.hash = '#/';
  };
  /** The person's organizations with their role (`GET /orgs`): the switcher and every page's buttons follow them. */
  const loadOrgs = async () => {
    try {
      // Every page (a person is in at most 100: one page, but the cursor is followed all the same).
      const all: OrgFleet[] = [];
      let cursor: string | null = null;
      do {
        const answer: { orgs: OrgFleet[]; cursor?: string | null } = bodyOf(await api.GET('/orgs', { params: { query: { cursor: cursor ?? undefined } } }));
        all.push(...answer.orgs.map((o) => ({ orgId: o.orgId, name: o.name, role: o.role })));
        cursor = answer.cursor ?? null;
      } while (cursor);
      setOrgs(all);
      setOrgsError(null);
    } catch (e) {
      setOrgsError(messageOf(e));
    }
  };
  configureApi(
    config.mode === 'cognito' ? config.apiUrl : '',
    session?.token ?? null,
    () => {
      clearSession();
      setSession(null);
    },
    () => void loadOrgs(),
  );
  useEffect(() => {
    setOrgs(null);
    if (session) void loadOrgs();
  }, [session?.token]);
  // Focus the page's heading on navigation, so keyboard and screen reader users start there.
  useEffect(() => {
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, [path, session]);

  if (!session)
    return (
      <>
        <Banner />
        <main id="main">
          <SignIn
            config={config}
            onSignedIn={(s) => {
              saveSession(s);
              setSession(s);
              if (route().startsWith('/operators') && !s.admin) location.hash = '#/';
            }}
          />
        </main>
      </>
    );

  const { orgId, page } = splitRoute(path);
  const accepting = /^\/invitations\/([^/]+)$/.exec(path);
  const org = orgId ? (orgs?.find((o) => o.orgId === orgId) ?? null) : null;
  const fleet = fleetView(org);
  const current = (target: string) => (page === target ? 'page' : undefined);
  const fleetRoutes = (
    <Switch>
      <Route path="/devices/:deviceId">{(params) => <DevicePage deviceId={segment(params.deviceId)} orgs={orgs} />}</Route>
      <Route path="/register" component={Register} />
      <Route path="/alarms" component={Alarms} />
      <Route path="/rules" component={Rules} />
      <Route path="/webhooks" component={Webhooks} />
      <Route path="/firmware" component={FirmwarePage} />
      <Route path="/rollouts" component={Rollouts} />
      <Route path="/rollouts/:rolloutId">{(params) => <RolloutPage rolloutId={segment(params.rolloutId)} />}</Route>
      <Route path="/settings" component={Settings} />
      {org && <Route path="/members">{() => <Members org={org} me={session.userId} onOrgsChanged={loadOrgs} />}</Route>}
      {org && <Route path="/invitations">{() => <Invitations org={org} />}</Route>}
      {!org && session.admin && <Route path="/operators" component={Operators} />}
      {/* Any other address: the fleet. */}
      <Route component={Dashboard} />
    </Switch>
  );
  let content;
  if (path === '/orgs/new') content = <NewOrg onCreated={loadOrgs} />;
  else if (accepting) content = <AcceptInvitation code={segment(accepting[1])} onAccepted={loadOrgs} />;
  else if (orgId && orgs === null && !orgsError) content = <p role="status">Loading your organizations…</p>;
  else if (orgId && !org) content = <NoSuchOrg error={orgsError} />;
  else
    content = (
      <FleetContext.Provider value={fleet} key={orgId ?? 'me'}>
        {org ? (
          <Router hook={useHashLocation} base={`/orgs/${encodeURIComponent(org.orgId)}`}>
            {fleetRoutes}
          </Router>
        ) : (
          <Router hook={useHashLocation}>{fleetRoutes}</Router>
        )}
      </FleetContext.Provider>
    );
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.querySelector<HTMLElement>('main h1')?.focus(); }}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Device Fleet</span>
        <FleetSwitcher orgs={orgs} orgId={orgId} />
        <nav aria-label="Console">
          <a href={fleet.href('/')} aria-current={current('/')}>Fleet</a>
          <a href={fleet.href('/alarms')} aria-current={current('/alarms')}>Alarms</a>
          <a href={fleet.href('/rules')} aria-current={current('/rules')}>Alarm rules</a>
          <a href={fleet.href('/webhooks')} aria-current={current('/webhooks')}>Webhooks</a>
          <a href={fleet.href('/firmware')} aria-current={current('/firmware')}>Firmware</a>
          <a href={fleet.href('/rollouts')} aria-current={page.startsWith('/rollouts') ? 'page' : undefined}>Rollouts</a>
          <a href={fleet.href('/settings')} aria-current={current('/settings')}>Settings</a>
          {fleet.can(NEEDS.manage) && (
            <a href={fleet.href('/register')} aria-current={current('/register')}>Register a device</a>
          )}
          {org && (
            <a href={fleet.href('/members')} aria-current={current('/members')}>Members</a>
          )}
          {org && fleet.can(NEEDS.members) && (
            <a href={fleet.href('/invitations')} aria-current={current('/invitations')}>Invitations</a>
          )}
          {session.admin && (
            <a href="#/operators" aria-current={orgId ? undefined : current('/operators')}>Operators</a>
          )}
        </nav>
        <span class="who">
          Signed in as <strong>{session.name}</strong>
          <button type="button" class="link" onClick={signOut}>Sign out</button>
        </span>
      </header>
      <Banner />
      <main id="main">{content}</main>
    </>
  );
}

/** The console could not read its configuration: it says so and offers nothing else. */
function ConfigFailure({ message }: { message: string }) {
  useEffect(() => {
    document.querySelector<HTMLElement>('main h1')?.focus();
  }, []);
  return (
    <main id="main">
      <section class="signin">
        <h1 tabIndex={-1}>The console cannot start</h1>
        <p class="error" role="alert">
          {message}
        </p>
        <p>Reload the page in a moment. If this stays, the console was deployed without its configuration: <code>make deploy</code> writes <code>config.json</code> beside it.</p>
      </section>
    </main>
  );
}

async function start() {
  const root = document.getElementById('app')!;
  let config: Config;
  try {
    config = await loadConfig();
  } catch (e) {
    render(<ConfigFailure message={e instanceof ConfigError ? e.message : 'The console could not read its configuration.'} />, root);
    return;
  }
  let session = currentSession();
  if (config.mode === 'cognito') {
    try {
      const fresh = await finishCognitoSignIn(config);
      if (fresh) {
        saveSession(fresh);
        session = fresh;
      }
    } catch (e) {
      console.error(e);
    }
  }
  render(<App config={config} initial={session} />, root);
}

void start();
