import { useEffect, useState } from 'preact/hooks';

// Hash routes (#/instances/foo), so gpuboxd serves one page at "/".

export interface Route {
  /** "overview", "instances", "volumes", "usage" */
  page: string;
  /** The rest of the path, decoded: ["foo"] for #/instances/foo. */
  args: string[];
}

export function parseHash(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] ?? 'overview', args: parts.slice(1) };
}

export function href(page: string, ...args: string[]): string {
  return `#/${[page, ...args].map(encodeURIComponent).join('/')}`;
}

export function navigate(page: string, ...args: string[]): void {
  location.hash = href(page, ...args);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}
