// The console's terminal, without the screen: a WebSocket to GET
// /api/v1/replicaSet/{name}/terminal (docs/access.md) joined to a terminal
// view (xterm.js in the page, a fake in the tests). The browser cannot put
// the Authorization header on a WebSocket, so each connection first asks
// for a single-use ticket (POST .../terminal/ticket) with the tab's token.
//
// Messages: keys typed go out as binary messages, the view's new size as
// {"resize": {...}}; binary messages in are the output; {"exit": N} ends
// the shell. A connection that drops without the shell ending (a network
// blip: close code 1006, or the server gone) is opened again after a short
// wait, a few times; the old shell ended with its connection, so a new
// one starts. An idle close (1001) or an exit does not reconnect: the user
// asks for a new shell.
import { api } from '../api';
import { setPath } from './instanceHelpers';

export interface Disposable {
  dispose(): void;
}

/** What the session needs of a terminal view. */
export interface TermView {
  readonly cols: number;
  readonly rows: number;
  write(data: Uint8Array | string): void;
  onData(cb: (data: string) => void): Disposable;
  onResize(cb: (size: { cols: number; rows: number }) => void): Disposable;
}

/** What the session needs of a WebSocket (the browser's, or a fake). */
export interface SocketLike {
  binaryType: string;
  readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  send(data: string | ArrayBufferLike | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type TermStatus =
  | { kind: 'connecting' }
  | { kind: 'open' }
  | { kind: 'reconnecting'; attempt: number }
  | { kind: 'exited'; code: number | null }
  | { kind: 'closed'; reason: string };

export interface SessionOptions {
  name: string;
  view: TermView;
  openSocket?: (url: string) => SocketLike;
  ticket?: (name: string) => Promise<string>;
  onStatus?: (s: TermStatus) => void;
  /** Waits before each reconnect, in ms (the last repeats). */
  backoff?: number[];
  maxAttempts?: number;
}

const OPEN = 1;

export async function fetchTicket(name: string): Promise<string> {
  const t = await api<{ ticket: string }>('POST', setPath(name, 'terminal/ticket'));
  return t.ticket;
}

export function terminalUrl(name: string, ticket: string, cols: number, rows: number, loc: Location = location): string {
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  const q = new URLSearchParams({ ticket, cols: String(cols), rows: String(rows) });
  return `${scheme}//${loc.host}${setPath(name, 'terminal')}?${q}`;
}

export class TerminalSession {
  private socket: SocketLike | null = null;
  private disposed = false;
  private ended = false;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly subs: Disposable[];
  private readonly enc = new TextEncoder();

  constructor(private readonly o: SessionOptions) {
    this.subs = [
      o.view.onData((d) => this.sendInput(d)),
      o.view.onResize(({ cols, rows }) => this.sendControl({ resize: { cols, rows } })),
    ];
  }

  private status(s: TermStatus): void {
    this.o.onStatus?.(s);
  }

  private sendInput(d: string): void {
    if (this.socket?.readyState === OPEN) this.socket.send(this.enc.encode(d));
  }

  private sendControl(msg: unknown): void {
    if (this.socket?.readyState === OPEN) this.socket.send(JSON.stringify(msg));
  }

  /** Open a connection (a new shell). */
  async connect(): Promise<void> {
    if (this.disposed) return;
    this.ended = false;
    this.status(this.attempt ? { kind: 'reconnecting', attempt: this.attempt } : { kind: 'connecting' });
    let ticket: string;
    try {
      ticket = await (this.o.ticket ?? fetchTicket)(this.o.name);
    } catch (e) {
      this.lost((e as Error).message);
      return;
    }
    if (this.disposed) return;
    const open = this.o.openSocket ?? ((url: string) => new WebSocket(url) as unknown as SocketLike);
    const ws = open(terminalUrl(this.o.name, ticket, this.o.view.cols, this.o.view.rows));
    this.socket = ws;
    ws.binaryType = 'arraybuffer';
    ws.onopen = () => {
      this.attempt = 0;
      this.status({ kind: 'open' });
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        try {
          const msg = JSON.parse(ev.data) as { exit?: number };
          if ('exit' in msg) {
            this.ended = true;
            this.status({ kind: 'exited', code: msg.exit ?? null });
          }
        } catch {
          /* not ours: ignored */
        }
      } else {
        this.o.view.write(new Uint8Array(ev.data as ArrayBuffer));
      }
    };
    ws.onclose = (ev) => {
      if (this.socket !== ws) return;
      this.socket = null;
      if (this.disposed || this.ended) return;
      if (ev.code === 1001 || ev.code === 1008 || ev.code === 1000) {
        this.ended = true;
        this.status({ kind: 'closed', reason: ev.reason || 'closed by the server' });
        return;
      }
      this.lost(ev.reason || 'the connection dropped');
    };
  }

  /** The connection is gone without the shell ending: try again, a few times. */
  private lost(reason: string): void {
    const backoff = this.o.backoff ?? [1000, 2000, 4000];
    const max = this.o.maxAttempts ?? 5;
    if (this.disposed) return;
    if (this.attempt >= max) {
      this.status({ kind: 'closed', reason });
      return;
    }
    const wait = backoff[Math.min(this.attempt, backoff.length - 1)];
    this.attempt += 1;
    this.status({ kind: 'reconnecting', attempt: this.attempt });
    this.timer = setTimeout(() => void this.connect(), wait);
  }

  /** Start a new shell after an exit or a close. */
  restart(): void {
    this.attempt = 0;
    void this.connect();
  }

  dispose(): void {
    this.disposed = true;
    clearTimeout(this.timer);
    this.subs.forEach((s) => s.dispose());
    const ws = this.socket;
    this.socket = null;
    if (ws) ws.close(1000, 'closed by the user');
  }
}
