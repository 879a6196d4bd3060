// The instance page's terminal: a ticket, then a WebSocket with it and the
// view's size; keys out as binary, output in to the view, resizes as
// control messages; a dropped connection reconnects with a new ticket; an
// exit shows its code and offers a new shell. A fake view and socket stand
// in for xterm.js and the browser's WebSocket.
import { fireEvent, screen, waitFor } from '@testing-library/preact';
import { mockApi, renderAs } from '../testing';
import { TerminalPanel } from './TerminalPanel';
import type { SocketLike } from './terminalSession';
import type { XtermView } from './xtermView';

afterEach(() => vi.unstubAllGlobals());

class FakeView implements XtermView {
  cols = 100;
  rows = 30;
  written: string[] = [];
  dataCb: ((d: string) => void) | null = null;
  resizeCb: ((s: { cols: number; rows: number }) => void) | null = null;
  disposed = false;
  write(d: Uint8Array | string) {
    this.written.push(typeof d === 'string' ? d : new TextDecoder().decode(d));
  }
  onData(cb: (d: string) => void) {
    this.dataCb = cb;
    return { dispose: () => (this.dataCb = null) };
  }
  onResize(cb: (s: { cols: number; rows: number }) => void) {
    this.resizeCb = cb;
    return { dispose: () => (this.resizeCb = null) };
  }
  fit() {}
  focus() {}
  dispose() {
    this.disposed = true;
  }
}

class FakeSocket implements SocketLike {
  binaryType = 'blob';
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  sent: (string | Uint8Array)[] = [];
  closed: number | null = null;
  constructor(readonly url: string) {}
  send(d: string | ArrayBufferLike | Uint8Array) {
    this.sent.push(typeof d === 'string' ? d : new Uint8Array(d as ArrayBuffer));
  }
  close(code?: number) {
    this.closed = code ?? 1000;
  }
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  drop(code: number, reason = '') {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

function setup() {
  let n = 0;
  const sent = mockApi((req) =>
    req.method === 'POST' && req.url === '/api/v1/replicaSet/foo/terminal/ticket'
      ? { data: { ticket: `t${++n}`, expiresInSeconds: 30 } }
      : undefined,
  );
  const view = new FakeView();
  const sockets: FakeSocket[] = [];
  const ui = renderAs(
    'user',
    <TerminalPanel
      name="foo"
      view={async () => view}
      session={{ openSocket: (url) => (sockets.push(new FakeSocket(url)), sockets[sockets.length - 1]), backoff: [1] }}
    />,
  );
  return { sent, view, sockets, ui };
}

test('opens the WebSocket with a fresh ticket and the view size, and joins keys and output', async () => {
  const { sent, view, sockets } = setup();
  await waitFor(() => expect(sockets).toHaveLength(1));
  expect(sent.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /api/v1/replicaSet/foo/terminal/ticket']);
  const url = new URL(sockets[0].url);
  expect(url.protocol).toBe('ws:');
  expect(url.pathname).toBe('/api/v1/replicaSet/foo/terminal');
  expect(url.searchParams.get('ticket')).toBe('t1');
  expect(url.searchParams.get('cols')).toBe('100');
  expect(url.searchParams.get('rows')).toBe('30');
  expect(sockets[0].binaryType).toBe('arraybuffer');

  sockets[0].open();
  await screen.findByText('Connected');
  view.dataCb!('ls\r');
  expect(new TextDecoder().decode(sockets[0].sent[0] as Uint8Array)).toBe('ls\r');
  view.resizeCb!({ cols: 120, rows: 40 });
  expect(JSON.parse(sockets[0].sent[1] as string)).toEqual({ resize: { cols: 120, rows: 40 } });
  sockets[0].onmessage!({ data: new TextEncoder().encode('file1  file2\r\n').buffer });
  expect(view.written).toEqual(['file1  file2\r\n']);
});

test('reconnects after a network blip with a new ticket', async () => {
  const { sent, sockets } = setup();
  await waitFor(() => expect(sockets).toHaveLength(1));
  sockets[0].open();
  sockets[0].drop(1006);
  await waitFor(() => expect(sockets).toHaveLength(2));
  expect(new URL(sockets[1].url).searchParams.get('ticket')).toBe('t2');
  expect(sent.filter((r) => r.method === 'POST')).toHaveLength(2);
  sockets[1].open();
  await screen.findByText('Connected');
});

test('an exit shows its code, does not reconnect, and New shell starts another', async () => {
  const { sockets, view, ui } = setup();
  await waitFor(() => expect(sockets).toHaveLength(1));
  sockets[0].open();
  sockets[0].onmessage!({ data: '{"exit":3}' });
  sockets[0].drop(1000);
  await screen.findByText(/exit code 3/);
  await new Promise((r) => setTimeout(r, 20));
  expect(sockets).toHaveLength(1);
  fireEvent.click(screen.getByRole('button', { name: 'New shell' }));
  await waitFor(() => expect(sockets).toHaveLength(2));
  ui.unmount();
  await waitFor(() => expect(sockets[1].closed).toBe(1000));
  expect(view.disposed).toBe(true);
});

test('an idle close says why and waits for the user', async () => {
  const { sockets } = setup();
  await waitFor(() => expect(sockets).toHaveLength(1));
  sockets[0].open();
  sockets[0].drop(1001, 'idle for too long');
  await screen.findByText(/idle for too long/);
  await new Promise((r) => setTimeout(r, 20));
  expect(sockets).toHaveLength(1);
});
