// The console's one way to gpuboxd: the public API (docs/api.md), with the
// tab's token. Every answer is the envelope {code, msg, data}; anything but
// code 200 becomes an ApiError carrying the API's own message, which the
// page shows where the user acted. A 401 (token expired, revoked or wrong)
// forgets the token and sends the tab back to the login.

/**
 * The API's words as the console's: gpuboxd phrases its advice for any
 * client ("pull it first", "create the volume first") and says "replica
 * set", the API's name for an instance; the console names its own pages
 * and never an API path (the CLI does the same with its commands,
 * src/cli/words.c).
 */
const CONSOLE_WORDS: [RegExp, string][] = [
  [/\b(GET|POST|PUT|PATCH|DELETE) \/api\/[^\s,;)]*/g, 'this request'],
  [/\bpull it first\b/g, 'pull it on the Images page first'],
  [/\bcreate the volume first\b/g, 'create it on the Volumes page first'],
  [/\bthe list of GPUs\b/g, 'the Overview page'],
  [/\bthe list of nodes\b/g, 'the Overview page'],
  [/\bscale it instead\b/g, 'use Scale instead'],
  [/\binspect the replica set to see them\b/g, 'the instance page lists them'],
  [/\bReplica sets\b/g, 'Instances'],
  [/\bReplica set\b/g, 'Instance'],
  [/\breplica set\(s\)/g, 'instance(s)'],
  [/\breplica sets\b/g, 'instances'],
  [/\breplica set\b/g, 'instance'],
];

export function userMessage(msg: string): string {
  return CONSOLE_WORDS.reduce((m, [re, to]) => m.replace(re, to), msg);
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: number;
  constructor(status: number, code: number, msg: string) {
    super(userMessage(msg));
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

const TOKEN_KEY = 'gpubox.token';

/** The token lives in sessionStorage: this tab only, gone when it closes. */
export function getToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(token: string | null): void {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage refused (private mode): the token lives as long as the page */
  }
  memoryToken = token;
}

let memoryToken: string | null = null;
let unauthorized: (msg: string) => void = () => {};

/** Called with the API's message when a request answers 401. */
export function onUnauthorized(cb: (msg: string) => void): void {
  unauthorized = cb;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Calls `path` (for example "/api/v1/replicaSet") and returns the envelope's
 * `data`. Throws ApiError with the API's `msg` when `code` is not 200, and
 * on a network failure (status 0, code 0).
 */
export async function api<T>(method: Method, path: string, body?: unknown): Promise<T> {
  const env = await call<T>(method, path, body);
  return env.data;
}

/** As api(), but returns the whole envelope (some answers say more in msg). */
export async function call<T>(
  method: Method,
  path: string,
  body?: unknown,
): Promise<{ code: number; msg: string; data: T }> {
  const headers = authHeaders('application/json');
  let payload: string | undefined;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 0, `gpuboxd did not answer (${(e as Error).message})`);
  }
  let env: { code: number; msg: string; data: T };
  try {
    env = await res.json();
  } catch {
    throw new ApiError(res.status, 0, `gpuboxd answered HTTP ${res.status} without a JSON envelope`);
  }
  if (res.status === 401) {
    setToken(null);
    unauthorized(env.msg);
  }
  if (env.code !== 200) throw new ApiError(res.status, env.code, env.msg);
  return { ...env, msg: userMessage(env.msg) };
}

/** Accept and, when there is a token, its Authorization header. */
function authHeaders(accept: string): Record<string, string> {
  const headers: Record<string, string> = { Accept: accept };
  const token = getToken() ?? memoryToken;
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

/**
 * GETs `path`, an answer of one JSON object a line (application/x-ndjson,
 * as the logs' follow=true), calling `onObject` with each as soon as its
 * line is complete. Returns when the stream ends; `signal` hangs up (the
 * promise then resolves quietly). An answer that is not a stream (an error
 * envelope) throws ApiError with the API's message, as call() does.
 */
export async function streamNdjson(path: string, onObject: (o: unknown) => void, signal: AbortSignal): Promise<void> {
  let res: Response;
  try {
    res = await fetch(path, { method: 'GET', headers: authHeaders('application/x-ndjson'), cache: 'no-store', signal });
  } catch (e) {
    if (signal.aborted) return;
    throw new ApiError(0, 0, `gpuboxd did not answer (${(e as Error).message})`);
  }
  const type = res.headers?.get?.('Content-Type') ?? '';
  if (res.status !== 200 || !res.body || type.startsWith('application/json')) {
    let env: { code: number; msg: string } | null = null;
    try {
      env = await res.json();
    } catch {
      /* below */
    }
    if (res.status === 401) {
      setToken(null);
      unauthorized(env?.msg ?? 'unauthorized');
    }
    throw new ApiError(res.status, env?.code ?? 0, env?.msg ?? `gpuboxd answered HTTP ${res.status} without a stream`);
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let rest = '';
  const emit = (line: string) => {
    if (!line.trim()) return;
    try {
      onObject(JSON.parse(line));
    } catch {
      /* not JSON: skip it rather than stop the stream */
    }
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
      const lines = rest.split('\n');
      rest = lines.pop() ?? '';
      lines.forEach(emit);
    }
    emit(rest + decoder.decode());
  } catch (e) {
    if (signal.aborted) return;
    throw new ApiError(0, 0, `the stream broke off (${(e as Error).message})`);
  } finally {
    reader.releaseLock?.();
  }
}

/** A path segment, escaped. */
export const seg = (s: string): string => encodeURIComponent(s);
