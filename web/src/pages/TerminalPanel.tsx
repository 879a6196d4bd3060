// The instance page's terminal: xterm.js (loaded when the panel opens)
// joined to a shell in the instance by a TerminalSession. The view follows
// the panel's size (a ResizeObserver, so the window and the page layout
// both count); the status line says when it is connecting, reconnecting
// after a blip, or why it ended, with a button for a new shell.
import { useEffect, useRef, useState } from 'preact/hooks';
import { TerminalSession, type SessionOptions, type TermStatus } from './terminalSession';
import type { XtermView } from './xtermView';

/** Makes the view in its container (xterm.js by default; a fake in tests). */
export type ViewFactory = (container: HTMLElement) => Promise<XtermView>;

const xterm: ViewFactory = async (el) => (await import('./xtermView')).createXterm(el);

function statusText(s: TermStatus): string {
  switch (s.kind) {
    case 'connecting':
      return 'Connecting…';
    case 'open':
      return 'Connected';
    case 'reconnecting':
      return `Connection lost; reconnecting (try ${s.attempt})…`;
    case 'exited':
      return s.code === null ? 'The shell ended.' : `The shell ended with exit code ${s.code}.`;
    case 'closed':
      return `Closed: ${s.reason}.`;
  }
}

export function TerminalPanel({
  name,
  view = xterm,
  session,
}: {
  name: string;
  view?: ViewFactory;
  session?: Partial<SessionOptions>;
}) {
  const box = useRef<HTMLDivElement>(null);
  const sess = useRef<TerminalSession | null>(null);
  const [status, setStatus] = useState<TermStatus>({ kind: 'connecting' });

  useEffect(() => {
    let gone = false;
    let v: XtermView | null = null;
    let observer: ResizeObserver | null = null;
    void view(box.current!).then((made) => {
      if (gone) {
        made.dispose();
        return;
      }
      v = made;
      const s = new TerminalSession({ name, view: made, onStatus: setStatus, ...session });
      sess.current = s;
      if (typeof ResizeObserver !== 'undefined') {
        observer = new ResizeObserver(() => made.fit());
        observer.observe(box.current!);
      }
      made.focus();
      void s.connect();
    });
    return () => {
      gone = true;
      observer?.disconnect();
      sess.current?.dispose();
      sess.current = null;
      v?.dispose();
    };
  }, [name]);

  const ended = status.kind === 'exited' || status.kind === 'closed';
  return (
    <div class="terminal-panel">
      <div class="terminal-box" ref={box} role="application" aria-label={`Terminal of ${name}`} />
      <p class="terminal-status" role="status">
        {statusText(status)}{' '}
        {ended && (
          <button type="button" onClick={() => sess.current?.restart()}>
            New shell
          </button>
        )}
      </p>
    </div>
  );
}
