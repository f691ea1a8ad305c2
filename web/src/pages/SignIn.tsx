import { useEffect, useState } from 'preact/hooks';
import { signInStandIn, standInUsers, startCognitoSignIn, type Config, type Session, type StandInUser } from '../auth';

export function SignIn({ config, onSignedIn }: { config: Config; onSignedIn: (s: Session) => void }) {
  const [users, setUsers] = useState<StandInUser[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (config.mode === 'local') standInUsers().then(setUsers, (e: Error) => setError(e.message));
  }, [config]);
  return (
    <section class="signin">
      <h1 tabIndex={-1}>Sign in to Device Fleet</h1>
      {config.mode === 'cognito' ? (
        <>
          <p>You sign in with the fleet's Cognito user pool.</p>
          <button type="button" class="primary" onClick={() => void startCognitoSignIn(config)}>
            Sign in
          </button>
        </>
      ) : (
        <>
          <p>
            Local development: the dev server's stand-in users. Each button signs in as that user
            with a stand-in token (no password; it exists only in <code>make dev</code>).
          </p>
          {users === null && !error && <p role="status">Loading users…</p>}
          <ul class="users">
            {users?.map((u) => (
              <li key={u.userId}>
                <button
                  type="button"
                  class="primary"
                  onClick={() => signInStandIn(u.userId).then(onSignedIn, (e: Error) => setError(e.message))}
                >
                  {u.userId}
                </button>
                <span class="muted">
                  {u.name}
                  {u.admin ? ' · operator (admin group)' : ''}
                </span>
              </li>
            ))}
          </ul>
        </>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
