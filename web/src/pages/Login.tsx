import { useState } from 'preact/hooks';
import { setToken } from '../api';
import { whoAmI } from '../app';
import { ErrorNote } from '../components/ui';
import type { WhoAmI } from '../types';

/** The token is kept for this tab only (sessionStorage). */
export function Login({ reason, onLogin }: { reason: string | null; onLogin: (me: WhoAmI, fleet: boolean) => void }) {
  const [token, setTok] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    setToken(token.trim());
    try {
      const { me, fleet } = await whoAmI();
      onLogin(me, fleet);
    } catch (err) {
      setToken(null);
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <h1>gpubox</h1>
      <form onSubmit={submit} aria-label="Log in">
        {reason && <p class="notice">{reason}</p>}
        <label for="token">API token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          required
          value={token}
          onInput={(e) => setTok((e.target as HTMLInputElement).value)}
        />
        <p class="hint">Your administrator gives you a token (<code>gpbx_…</code>). It is kept in this tab only.</p>
        <ErrorNote error={error} />
        <button type="submit" class="primary" disabled={busy || !token.trim()}>
          Log in
        </button>
      </form>
    </main>
  );
}
