// Shared helpers for the component tests: a fetch that answers envelopes from
// a handler and records every call, sessions of each role, and axe.
import { render } from '@testing-library/preact';
import axe from 'axe-core';
import type { ComponentChildren } from 'preact';
import { SessionContext, sessionFor } from './session';
import type { Role, WhoAmI } from './types';

// Preact runs effects after paint: a requestAnimationFrame raced by a 35 ms
// timer, whose callback calls cancelAnimationFrame. A render in a file's last
// test leaves that timer pending, and when it fires after jsdom is torn down
// the run fails with "cancelAnimationFrame is not defined". Every rendering
// test file imports this module: let such timers fire before the teardown.
afterAll(() => new Promise((done) => setTimeout(done, 100)));

export interface Sent {
  method: string;
  url: string;
  body: unknown;
}

export interface Answer {
  status?: number;
  code?: number;
  msg?: string;
  data?: unknown;
}

/** Answers a request; undefined is a 404 (code 1100). May wait (a long call). */
export type Handler = (req: Sent) => Answer | undefined | Promise<Answer | undefined>;

/** Stubs fetch with `handler`; returns the list every request is pushed to. */
export function mockApi(handler: Handler): Sent[] {
  const sent: Sent[] = [];
  vi.stubGlobal('fetch', async (url: string, init?: RequestInit) => {
    const req = {
      method: init?.method ?? 'GET',
      url,
      body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
    };
    sent.push(req);
    const a = (await handler(req)) ?? { status: 404, code: 1100, msg: `no such route ${req.method} ${url}` };
    const envelope = { code: a.code ?? 200, msg: a.msg ?? 'success', data: a.data ?? null };
    return { status: a.status ?? 200, json: async () => envelope } as Response;
  });
  return sent;
}

/**
 * A Handler from a table keyed "METHOD path" (the query cut off); a key ending
 * in "/*" answers for any one last path segment not named itself.
 */
export function routes(table: Record<string, Handler>): Handler {
  return (req) => {
    const key = `${req.method} ${req.url.split('?')[0]}`;
    return (table[key] ?? table[key.replace(/\/[^/]+$/, '/*')])?.(req);
  };
}

/** The requests other than GETs: what the page changed. */
export const changes = (sent: Sent[]) => sent.filter((r) => r.method !== 'GET');

/** The requests sent as `key` ("METHOD url"), in order. */
export const sentTo = (sent: Sent[], key: string) => sent.filter((r) => `${r.method} ${r.url}` === key);

export function whoami(role: Role): WhoAmI {
  const none = { cards: null, shareMiB: null, instances: null, volumeBytes: null };
  return { name: role === 'viewer' ? 'val' : 'alice', role, source: 'api', quota: none, usage: none, quotaApplies: false };
}

/** `ui` as someone of `role` sees it (also for a rerender, which must keep the same tree). */
export function asRole(role: Role, ui: ComponentChildren, fleet = false) {
  return <SessionContext.Provider value={sessionFor(whoami(role), fleet, () => {})}>{ui}</SessionContext.Provider>;
}

export const renderAs = (role: Role, ui: ComponentChildren, fleet = false) => render(asRole(role, ui, fleet));

/** axe's serious and critical findings on the page (contrast needs a real browser: not here). */
export async function seriousViolations(): Promise<string[]> {
  // jsdom has no canvas (axe asks for one to look at icon fonts); say "none"
  // quietly instead of jsdom's "not implemented" on every run
  HTMLCanvasElement.prototype.getContext = () => null;
  const r = await axe.run(document.body, { rules: { 'color-contrast': { enabled: false } } });
  return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.help}`);
}
