import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Route, Router, Switch } from 'wouter-preact';
import { useHashLocation } from 'wouter-preact/use-hash-location';
import './style.css';
import { configureApi } from './api/client';
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

function App({ config, initial }: { config: Config; initial: Session | null }) {
  const [session, setSession] = useState<Session | null>(initial);
  const [path] = useHashLocation();
  const signOut = () => {
    clearSession();
    setSession(null);
    configureApi(config.mode === 'cognito' ? config.apiUrl : '', null, () => {});
    if (config.mode === 'cognito') location.assign(cognitoSignOutUrl(config));
    else location.hash = '#/';
  };
  configureApi(config.mode === 'cognito' ? config.apiUrl : '', session?.token ?? null, () => {
    clearSession();
    setSession(null);
  });
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

  const current = (href: string) => (path === href ? 'page' : undefined);
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.querySelector<HTMLElement>('main h1')?.focus(); }}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Device Fleet</span>
        <nav aria-label="Console">
          <a href="#/" aria-current={current('/')}>Fleet</a>
          <a href="#/alarms" aria-current={current('/alarms')}>Alarms</a>
          <a href="#/rules" aria-current={current('/rules')}>Alarm rules</a>
          <a href="#/register" aria-current={current('/register')}>Register a device</a>
          {session.admin && (
            <a href="#/operators" aria-current={current('/operators')}>Operators</a>
          )}
        </nav>
        <span class="who">
          Signed in as <strong>{session.name}</strong>
          <button type="button" class="link" onClick={signOut}>Sign out</button>
        </span>
      </header>
      <Banner />
      <main id="main">
        <Router hook={useHashLocation}>
          <Switch>
            <Route path="/devices/:deviceId">{(params) => <DevicePage deviceId={segment(params.deviceId)} />}</Route>
            <Route path="/register" component={Register} />
            <Route path="/alarms" component={Alarms} />
            <Route path="/rules" component={Rules} />
            {session.admin && <Route path="/operators" component={Operators} />}
            {/* Any other address: the fleet. */}
            <Route component={Dashboard} />
          </Switch>
        </Router>
      </main>
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
