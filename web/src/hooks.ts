import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

/** How often a page asks again: changes made elsewhere show within 2 s. */
export const POLL_MS = 1000;

export interface Poll<T> {
  data: T | undefined;
  /** The last failure's message; cleared by the next success. */
  error: string | null;
  /** Ask again now (after an action), returning when the answer is in. */
  reload: () => Promise<void>;
}

/**
 * Calls `load` now and every `ms` while the tab is visible, keeping the last
 * good answer when a later call fails (nothing shown is lost). `key` restarts
 * the polling when it changes.
 */
export function usePoll<T>(load: () => Promise<T>, key = '', ms = POLL_MS): Poll<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const loadRef = useRef(load);
  loadRef.current = load;
  const alive = useRef(true);

  const reload = useCallback(async () => {
    try {
      const d = await loadRef.current();
      if (alive.current) {
        setData(d);
        setError(null);
      }
    } catch (e) {
      if (alive.current) setError((e as Error).message);
    }
  }, []);

  useEffect(() => {
    alive.current = true;
    setData(undefined);
    void reload();
    const timer = setInterval(() => {
      if (typeof document === 'undefined' || document.visibilityState !== 'hidden') void reload();
    }, ms);
    return () => {
      alive.current = false;
      clearInterval(timer);
    };
  }, [key, ms, reload]);

  return { data, error, reload };
}

/**
 * Runs an action (a button's click), remembering whether it runs and what it
 * failed with, so the page can show the API's message beside the button.
 */
export function useAction(): {
  busy: boolean;
  error: string | null;
  run: <R>(fn: () => Promise<R>) => Promise<R | undefined>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async <R,>(fn: () => Promise<R>) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (e) {
      setError((e as Error).message);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}
