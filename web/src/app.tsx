// The console's shell: who is logged in, the navigation, and which page
// shows. Logged out when there is no token, or when any request answers 401
// (token expired or revoked): back to the login with the API's message.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, ApiError, onUnauthorized, setToken } from './api';
import { Login } from './pages/Login';
import { Overview } from './pages/Overview';
import { Instances } from './pages/Instances';
import { InstanceDetail } from './pages/InstanceDetail';
import { Volumes } from './pages/Volumes';
import { Images } from './pages/Images';
import { UsagePage } from './pages/Usage';
import { QueuePage } from './pages/Queue';
import { href, useRoute } from './router';
import { SessionContext, sessionFor } from './session';
import type { WhoAmI } from './types';

type Auth =
  | { state: 'checking' }
  | { state: 'out'; reason: string | null }
  | { state: 'in'; me: WhoAmI; fleet: boolean };

/**
 * Asks who the token is, and whether this gpuboxd is in a fleet: whoami's
 * `fleet` says so, so a single server is never asked for /api/v1/nodes
 * (which would answer 404 and log it in the browser on every load).
 */
export async function whoAmI(): Promise<{ me: WhoAmI; fleet: boolean }> {
  const me = await api<WhoAmI>('GET', '/api/v1/whoami');
  return { me, fleet: me.fleet === true };
}

const PAGES: { page: string; label: string; show: (role: string) => boolean }[] = [
  { page: 'overview', label: 'Overview', show: () => true },
  { page: 'instances', label: 'Instances', show: () => true },
  { page: 'volumes', label: 'Volumes', show: () => true },
  { page: 'queue', label: 'Queue', show: () => true },
  { page: 'images', label: 'Images', show: () => true },
  { page: 'usage', label: 'Usage', show: (r) => r !== 'viewer' },
];

export function App() {
  const [auth, setAuth] = useState<Auth>({ state: 'checking' });
  const route = useRoute();

  const logout = (reason: string | null = null) => {
    setToken(null);
    setAuth({ state: 'out', reason });
  };

  useEffect(() => {
    onUnauthorized((msg) => setAuth({ state: 'out', reason: `Logged out: ${msg}` }));
    // A stored token, or none at all (gpuboxd without --token-file).
    whoAmI()
      .then(({ me, fleet }) => setAuth({ state: 'in', me, fleet }))
      .catch((e: Error) => {
        if (!(e instanceof ApiError && e.status === 401)) setAuth({ state: 'out', reason: e.message });
        else setAuth((a) => (a.state === 'checking' ? { state: 'out', reason: null } : a));
      });
  }, []);

  const session = useMemo(
    () => (auth.state === 'in' ? sessionFor(auth.me, auth.fleet, () => logout()) : null),
    [auth],
  );

  if (auth.state === 'checking') return <p class="loading">Loading…</p>;
  if (auth.state === 'out' || !session)
    return (
      <Login
        reason={auth.state === 'out' ? auth.reason : null}
        onLogin={(me, fleet) => setAuth({ state: 'in', me, fleet })}
      />
    );

  const page = PAGES.some((p) => p.page === route.page) ? route.page : 'overview';
  return (
    <SessionContext.Provider value={session}>
      <header class="top">
        <span class="brand">gpubox</span>
        <nav aria-label="Pages">
          {PAGES.filter((p) => p.show(session.me.role)).map((p) => (
            <a key={p.page} href={href(p.page)} aria-current={page === p.page ? 'page' : undefined}>
              {p.label}
            </a>
          ))}
        </nav>
        <span class="who">
          {session.me.name} <span class={`role role-${session.me.role}`}>{session.me.role}</span>
          {session.me.source !== 'none' && (
            <button type="button" class="link" onClick={() => logout()}>
              Log out
            </button>
          )}
        </span>
      </header>
      <main>
        {page === 'overview' && <Overview />}
        {page === 'instances' && !route.args[0] && <Instances />}
        {page === 'instances' && route.args[0] && <InstanceDetail name={route.args[0]} />}
        {page === 'volumes' && <Volumes />}
        {page === 'queue' && <QueuePage />}
        {page === 'images' && <Images />}
        {page === 'usage' && <UsagePage />}
      </main>
    </SessionContext.Provider>
  );
}
