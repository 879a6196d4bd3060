// An instance's logs: GET /api/v1/replicaSet/{name}/logs, the last lines
// with their times, or (Follow) the same request with follow=true read as a
// stream of NDJSON, new lines shown as the container writes them. Leaving
// the page or turning Follow off hangs up (an AbortController).
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, streamNdjson } from '../api';
import { ErrorNote } from '../components/ui';
import { isoUtc } from '../format';
import type { LogLine, LogsAnswer, LogVersion } from '../types';
import { setPath } from './instanceHelpers';

/** Lines kept in the page while following; older ones are dropped. */
export const MAX_LINES = 5000;

const TAILS = ['100', '200', '1000', 'all'];

interface Shown {
  versions: LogVersion[];
  lines: LogLine[];
  truncated: boolean;
}

/** "2026-11-22T01:28:28.123456789Z" -> "2026-11-22T01:28:28Z" (UTC, to the second, as the CLI). */
function lineTime(t: string | undefined): string {
  if (!t) return '';
  const d = new Date(t.replace(/(\.\d{3})\d+/, '$1'));
  return Number.isNaN(d.getTime()) ? t : isoUtc(d);
}

export function logsQuery(tail: string, all: boolean, follow: boolean): string {
  const q = [`tail=${tail}`, 'timestamps=true'];
  if (all) q.push('versions=all');
  if (follow) q.push('follow=true');
  return `?${q.join('&')}`;
}

export function LogsPanel({ name }: { name: string }) {
  const [tail, setTail] = useState('200');
  const [all, setAll] = useState(false);
  const [follow, setFollow] = useState(false);
  const [shown, setShown] = useState<Shown | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [ended, setEnded] = useState<string | null>(null);
  const [again, setAgain] = useState(0);
  const pre = useRef<HTMLPreElement>(null);

  useEffect(() => {
    const ctl = new AbortController();
    const path = setPath(name, 'logs') + logsQuery(tail, all, follow);
    setError(null);
    setEnded(null);
    if (!follow) {
      api<LogsAnswer>('GET', path)
        .then((d) => !ctl.signal.aborted && setShown({ versions: d.versions ?? [], lines: d.lines ?? [], truncated: d.truncated }))
        .catch((e: Error) => !ctl.signal.aborted && setError(e.message));
    } else {
      setShown({ versions: [], lines: [], truncated: false });
      streamNdjson(
        path,
        (o) => {
          if (ctl.signal.aborted || !o || typeof o !== 'object') return;
          const m = o as Record<string, unknown>;
          if (m.end) setEnded(typeof m.error === 'string' ? `Stopped following: ${m.error}` : `Stopped following: ${String(m.reason ?? 'the stream ended')}`);
          else if (typeof m.error === 'string') setError(m.error);
          else if (Array.isArray(m.versions) && !('text' in m)) setShown((s) => ({ ...(s as Shown), versions: m.versions as LogVersion[] }));
          else if (typeof m.text === 'string') {
            const line = m as unknown as LogLine;
            setShown((s) => {
              const lines = [...(s?.lines ?? []), line];
              return { ...(s as Shown), lines: lines.length > MAX_LINES ? lines.slice(-MAX_LINES) : lines };
            });
          }
        },
        ctl.signal,
      )
        .then(() => !ctl.signal.aborted && setEnded((e) => e ?? 'Stopped following: the stream ended'))
        .catch((e: Error) => !ctl.signal.aborted && setError(e.message));
    }
    return () => ctl.abort();
  }, [name, tail, all, follow, again]);

  // Following: keep the newest line in view.
  useLayoutEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [shown, follow]);

  const labelled = all || (shown?.versions.length ?? 0) > 1;
  const none = shown?.versions.filter((v) => v.source === 'none' && v.note) ?? [];
  return (
    <div class="logs-panel">
      <div class="logs-controls">
        <span class="field inline">
          <label for="lg-tail">Last lines</label>
          <select id="lg-tail" value={tail} onChange={(e) => setTail((e.currentTarget as HTMLSelectElement).value)}>
            {TAILS.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </span>
        <span class="field check inline">
          <input id="lg-all" type="checkbox" checked={all} onChange={(e) => setAll((e.currentTarget as HTMLInputElement).checked)} />
          <label for="lg-all">All versions</label>
        </span>
        <span class="field check inline">
          <input
            id="lg-follow"
            type="checkbox"
            checked={follow}
            onChange={(e) => setFollow((e.currentTarget as HTMLInputElement).checked)}
          />
          <label for="lg-follow">Follow</label>
        </span>
        {!follow && (
          <button type="button" onClick={() => setAgain((n) => n + 1)}>
            Refresh logs
          </button>
        )}
      </div>
      <ErrorNote error={error} />
      {none.map((v) => (
        <p key={v.version} class="hint">
          Version {v.version}: no logs ({v.note})
        </p>
      ))}
      {shown?.truncated && <p class="hint">Cut: the oldest lines were left out (at most 16 MB); ask for fewer lines.</p>}
      {shown && (
        <pre class="output logs" ref={pre} aria-label="Log lines" tabIndex={0}>
          {shown.lines.length === 0 && !follow ? (
            <span class="hint">(no lines)</span>
          ) : (
            shown.lines.map((l, i) => (
              <div key={i} class={`log-line${l.stream === 'stderr' ? ' stderr' : ''}`}>
                {labelled && <span class="log-version">v{l.version} </span>}
                {l.time && <span class="log-time">{lineTime(l.time)} </span>}
                {l.stream === 'stderr' && <span class="log-stream">stderr </span>}
                <span class="log-text">{l.text}</span>
              </div>
            ))
          )}
        </pre>
      )}
      {follow && !ended && !error && (
        <p class="hint" role="status">
          Following: new lines show as they are written.
        </p>
      )}
      {ended && (
        <p class="hint" role="status">
          {ended}
        </p>
      )}
    </div>
  );
}
