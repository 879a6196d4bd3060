import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { WhoAmI } from './types';

export interface Session {
  me: WhoAmI;
  /** false for a viewer: no button that would fail is shown. */
  canWrite: boolean;
  isAdmin: boolean;
  /** Started with --node: nodes exist and lists carry `node`. */
  fleet: boolean;
  logout: () => void;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside the logged-in console');
  return s;
}

export function sessionFor(me: WhoAmI, fleet: boolean, logout: () => void): Session {
  return {
    me,
    canWrite: me.role !== 'viewer',
    isAdmin: me.role === 'admin',
    fleet,
    logout,
  };
}
