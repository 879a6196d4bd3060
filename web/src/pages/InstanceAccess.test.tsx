// The instance page's access features: logs (and following them), start
// without GPUs, another image, and the SSH command.
import { fireEvent, screen, waitFor, within } from '@testing-library/preact';
import { changes, mockApi, renderAs, seriousViolations, type Handler, type Sent } from '../testing';
import type { ReplicaSetInfo } from '../types';
import { InstanceDetail } from './InstanceDetail';
import { info, spec } from './instancesTestUtil';
import { MAX_LINES } from './LogsPanel';

afterEach(() => {
  vi.unstubAllGlobals();
  location.hash = '';
});

const BASE = '/api/v1/replicaSet/foo';

function api(set: Partial<ReplicaSetInfo>, other: Handler = () => undefined): Sent[] {
  return mockApi((req) => (req.method === 'GET' && req.url === BASE ? { data: { info: info(set) } } : other(req)));
}

async function shown(role: 'user' | 'viewer' = 'user') {
  renderAs(role, <InstanceDetail name="foo" />);
  await screen.findByText('ubuntu:22.04');
}

const LOGS = {
  name: 'foo',
  version: 2,
  state: 'running',
  versions: [
    { version: 1, containerName: 'foo-1', current: false, source: 'kept' },
    { version: 2, containerName: 'foo-2', current: true, source: 'container', status: 'running' },
  ],
  lines: [
    { version: 1, stream: 'stdout', time: '2026-11-22T01:28:28.123456789Z', text: 'from the old one' },
    { version: 2, stream: 'stderr', time: '2026-11-22T01:30:02.000000001Z', text: 'warning: hot' },
  ],
  truncated: false,
};

/** The NDJSON a follow answers, in chunks cut anywhere (mid-line too). */
function ndjsonStream(chunks: string[]): { stream: ReadableStream<Uint8Array>; push: () => void; cancelled: () => boolean } {
  const enc = new TextEncoder();
  let ctl!: ReadableStreamDefaultController<Uint8Array>;
  let i = 0;
  let cancelled = false;
  const stream = new ReadableStream<Uint8Array>({
    start: (c) => {
      ctl = c;
    },
    cancel: () => {
      cancelled = true;
    },
  });
  return {
    stream,
    /** Sends the next chunk; after the last, ends the stream. */
    push: () => {
      if (i < chunks.length) ctl.enqueue(enc.encode(chunks[i++]));
      else ctl.close();
    },
    cancelled: () => cancelled,
  };
}

describe('InstanceDetail: logs', () => {
  it('shows the last 200 lines with their times, and every version labelled when asked', async () => {
    const sent = api({}, (req) => (req.url.startsWith(`${BASE}/logs?`) ? { data: LOGS } : undefined));
    await shown('viewer');
    fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
    const pre = await screen.findByLabelText('Log lines');
    await within(pre).findByText('warning: hot');
    expect(sent.map((r) => r.url)).toContain(`${BASE}/logs?tail=200&timestamps=true`);
    // Two versions in the answer: each line says which.
    expect(within(pre).getByText('v1')).toBeTruthy();
    expect(pre.textContent).toContain('from the old one');
    expect(pre.querySelector('.log-line.stderr')?.textContent).toContain('stderr');
    expect(pre.textContent).toContain('2026-11-22T01:28:28Z');

    fireEvent.click(screen.getByLabelText('All versions'));
    await waitFor(() => expect(sent.map((r) => r.url)).toContain(`${BASE}/logs?tail=200&timestamps=true&versions=all`));
    fireEvent.change(screen.getByLabelText('Last lines'), { target: { value: 'all' } });
    await waitFor(() =>
      expect(sent.map((r) => r.url)).toContain(`${BASE}/logs?tail=all&timestamps=true&versions=all`),
    );
    // Only when shown: no logs asked with the panel closed.
    fireEvent.click(screen.getByRole('button', { name: 'Hide logs' }));
    expect(screen.queryByLabelText('Log lines')).toBeNull();
  });

  it("shows the API's message when the logs cannot be read", async () => {
    api({}, (req) =>
      req.url.startsWith(`${BASE}/logs`) ? { status: 400, code: 1000, msg: "invalid tail 'x'" } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
    expect((await screen.findByRole('alert')).textContent).toBe("invalid tail 'x'");
  });

  it('follows: reads the NDJSON stream with the token, line by line, until its end; hangs up when turned off', async () => {
    sessionStorage.setItem('gpubox.token', 'tok-1');
    const s = ndjsonStream([
      '{"name":"foo","version":2,"state":"running","versions":[{"version":2,"containerName":"foo-2","current":true,"source":"container"}]}\n{"version":2,"stream":"stdout","text":"epoch 1',
      ' loss 0.93"}\n',
      '{"version":2,"stream":"stdout","time":"2026-11-22T01:30:02Z","text":"epoch 2 loss 0.71"}\n',
      '{"end":true,"reason":"the container is not running"}\n',
    ]);
    const follows: { url: string; init: RequestInit }[] = [];
    const envelope = mockApi((req) => (req.url === BASE ? { data: { info: info({}) } } : { data: LOGS }));
    const plain = globalThis.fetch;
    vi.stubGlobal('fetch', async (url: string, init: RequestInit) => {
      if (!url.includes('follow=true')) return plain(url, init);
      follows.push({ url, init });
      return {
        status: 200,
        headers: new Headers({ 'Content-Type': 'application/x-ndjson' }),
        body: s.stream,
        json: async () => {
          throw new Error('a stream');
        },
      } as unknown as Response;
    });
    try {
      await shown();
      fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
      await screen.findByLabelText('Log lines');
      fireEvent.click(screen.getByLabelText('Follow'));
      await waitFor(() => expect(follows).toHaveLength(1));
      expect(follows[0].url).toBe(`${BASE}/logs?tail=200&timestamps=true&follow=true`);
      expect((follows[0].init.headers as Record<string, string>).Authorization).toBe('Bearer tok-1');
      const pre = screen.getByLabelText('Log lines');

      s.push();
      await screen.findByText(/Following: new lines show/);
      // Half a line is not shown until its end comes.
      expect(pre.textContent).not.toContain('epoch 1');
      s.push();
      await within(pre).findByText('epoch 1 loss 0.93');
      s.push();
      await within(pre).findByText('epoch 2 loss 0.71');
      expect(within(pre).queryByText('v2')).toBeNull();
      s.push();
      expect((await screen.findByText(/Stopped following/)).textContent).toBe(
        'Stopped following: the container is not running',
      );

      // Off: the request is hung up (its signal aborted), and the plain tail asked again.
      const before = envelope.length;
      fireEvent.click(screen.getByLabelText('Follow'));
      await waitFor(() => expect(follows[0].init.signal?.aborted).toBe(true));
      await waitFor(() => expect(envelope.length).toBeGreaterThan(before));
    } finally {
      sessionStorage.removeItem('gpubox.token');
    }
  });

  it('hangs up the follow when the page goes, and keeps at most MAX_LINES lines', async () => {
    const lines = Array.from({ length: MAX_LINES + 5 }, (_, i) => `{"version":1,"stream":"stdout","text":"line ${i}"}\n`);
    const s = ndjsonStream(['{"name":"foo","version":1,"state":"running","versions":[]}\n', lines.join('')]);
    let signal: AbortSignal | undefined;
    mockApi((req) => (req.url === BASE ? { data: { info: info({}) } } : { data: LOGS }));
    const plain = globalThis.fetch;
    vi.stubGlobal('fetch', async (url: string, init: RequestInit) => {
      if (!url.includes('follow=true')) return plain(url, init);
      signal = init.signal ?? undefined;
      return { status: 200, headers: new Headers({ 'Content-Type': 'application/x-ndjson' }), body: s.stream } as unknown as Response;
    });
    const { unmount } = renderAs('user', <InstanceDetail name="foo" />);
    await screen.findByText('ubuntu:22.04');
    fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
    fireEvent.click(await screen.findByLabelText('Follow'));
    await waitFor(() => expect(signal).toBeDefined());
    s.push();
    s.push();
    const pre = screen.getByLabelText('Log lines');
    await within(pre).findByText(`line ${MAX_LINES + 4}`);
    expect(pre.querySelectorAll('.log-line')).toHaveLength(MAX_LINES);
    expect(within(pre).queryByText('line 4')).toBeNull();
    expect(signal?.aborted).toBe(false);
    unmount();
    await waitFor(() => expect(signal?.aborted).toBe(true));
  });

  it("shows a follow's refusal (a fleet forwards none) where the user acted", async () => {
    const msg = "follow=true is not forwarded: ask node 'n2' directly";
    api({}, (req) =>
      req.url.includes('follow=true') ? { status: 400, code: 1000, msg } : req.url.includes('/logs') ? { data: LOGS } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
    fireEvent.click(await screen.findByLabelText('Follow'));
    expect((await screen.findByRole('alert')).textContent).toBe(msg);
  });
});

describe('InstanceDetail: start without GPUs', () => {
  it('starts a stopped set without its cards after saying what that does, following the steps', async () => {
    const sent = api({ state: 'stopped', gpus: [], spec: spec({ gpuCount: 2 }) }, (req) =>
      req.url === `${BASE}/restart` ? { data: { version: 2, sameContainer: false, operationId: 'op5' } } : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Start without GPUs' }));
    const dialog = screen.getByRole('dialog', { name: 'Start foo without GPUs?' });
    expect(dialog.textContent).toContain('runs without its 2 GPUs');
    expect(changes(sent)).toEqual([]);
    fireEvent.click(within(dialog).getByRole('button', { name: 'Start without GPUs' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: `${BASE}/restart`, body: { gpuCount: 0 } }]);
  });

  it('says plainly when its cards are aside, and offers to take them again', async () => {
    const sent = api(
      { state: 'running', gpus: [], spec: spec({ gpuCount: 0 }), gpusAside: { gpuCount: 2, gpuMemory: 0, gpuShared: false } },
      (req) => (req.url === `${BASE}/restart` ? { data: { version: 3, operationId: 'op6' } } : undefined),
    );
    await shown();
    expect(screen.getByText('Runs without its 2 GPUs; Start/Restart takes them again.')).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Restart without GPUs' })).toBeNull();
    fireEvent.click(screen.getByRole('button', { name: 'Restart with GPUs' }));
    await waitFor(() => expect(changes(sent)).toHaveLength(1));
    expect(changes(sent)[0]).toEqual({ method: 'PATCH', url: `${BASE}/restart`, body: undefined });
  });

  it('says one GPU in the singular, on a stopped set too', async () => {
    api({ state: 'stopped', gpus: [], spec: spec({ gpuCount: 0 }), gpusAside: { gpuCount: 1 } });
    await shown();
    expect(screen.getByText('Runs without its 1 GPU; Start/Restart takes them again.')).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Start without GPUs' })).toBeNull();
  });
});

describe('InstanceDetail: change image', () => {
  it('warns before, patches imageName, and says the system disk was not carried', async () => {
    const sent = api({ version: 4 }, (req) =>
      req.method === 'PATCH' && req.url === BASE
        ? {
            data: {
              version: 5,
              changed: true,
              operationId: 'op8',
              imageName: 'pytorch:2.3',
              systemDiskCarried: false,
              carry: { method: 'none', note: 'another image: the system disk was not carried; binds and volumes were' },
            },
          }
        : undefined,
    );
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Change image' }));
    const dialog = screen.getByRole('dialog', { name: 'Change the image of foo' });
    expect(dialog.textContent).toContain('The system disk is not carried');
    expect(dialog.textContent).toContain('Only binds and volumes keep their data');
    expect(dialog.textContent).toContain('Rolling back to the current version returns to the old image');
    expect(changes(sent)).toEqual([]);
    fireEvent.input(within(dialog).getByLabelText('New image'), { target: { value: ' pytorch:2.3 ' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Change image' }));
    const result = await within(dialog).findByText(/Version 5 runs/);
    expect(result.textContent).toBe('Version 5 runs pytorch:2.3.');
    expect(within(dialog).getByText(/The system disk was not carried/).textContent).toContain(
      'Roll back to version 4 to return to ubuntu:22.04',
    );
    expect(changes(sent)).toEqual([{ method: 'PATCH', url: BASE, body: { imageName: 'pytorch:2.3' } }]);
  });

  it("shows the API's refusal in the dialog, keeping the image typed", async () => {
    const msg = "image 'nope:1' is not on the node and could not be pulled: not found";
    api({}, (req) => (req.method === 'PATCH' ? { status: 422, code: 1110, msg } : undefined));
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Change image' }));
    const dialog = screen.getByRole('dialog');
    fireEvent.input(within(dialog).getByLabelText('New image'), { target: { value: 'nope:1' } });
    fireEvent.click(within(dialog).getByRole('button', { name: 'Change image' }));
    expect((await within(dialog).findByRole('alert')).textContent).toBe(msg);
    expect((within(dialog).getByLabelText('New image') as HTMLInputElement).value).toBe('nope:1');
  });
});

describe('InstanceDetail: SSH', () => {
  it('shows the command to copy', async () => {
    const write = vi.fn(async () => {});
    vi.stubGlobal('navigator', { ...navigator, clipboard: { writeText: write } });
    api({ ssh: { command: 'ssh -p 40012 root@host', port: 40012, server: 'dropbear', running: true, message: '' } });
    await shown();
    expect(screen.getByText('ssh -p 40012 root@host').tagName).toBe('CODE');
    fireEvent.click(screen.getByRole('button', { name: 'Copy the SSH command' }));
    await screen.findByText('Copied');
    expect(write).toHaveBeenCalledWith('ssh -p 40012 root@host');
  });

  it('says why SSH does not work now', async () => {
    api({
      ssh: { command: 'ssh -p 40012 root@host', port: 40012, server: null, running: false, message: 'no SSH server in the image' },
    });
    await shown();
    expect(screen.getByText('no SSH server in the image')).toBeTruthy();
  });

  it('shows nothing of SSH when the API says nothing', async () => {
    api({});
    await shown();
    expect(screen.queryByText('SSH')).toBeNull();
  });

  it('passes axe with SSH, the logs and the change-image dialog', async () => {
    api({ ssh: { command: 'ssh -p 1 root@h', running: true } }, (req) => (req.url.includes('/logs') ? { data: LOGS } : undefined));
    await shown();
    fireEvent.click(screen.getByRole('button', { name: 'Show logs' }));
    await screen.findByText('warning: hot');
    expect(await seriousViolations()).toEqual([]);
    fireEvent.click(screen.getByRole('button', { name: 'Change image' }));
    expect(await seriousViolations()).toEqual([]);
  });
});
