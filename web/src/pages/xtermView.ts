// xterm.js in the page, loaded only when a terminal opens (a chunk of its
// own: the rest of the console does not wait for it).
//
// gpuboxd's Content-Security-Policy allows no inline styles (docs/web.md),
// and xterm.js's DOM renderer sizes its rows and colours its text through
// <style> elements whose text it writes at run time: the browser would
// refuse them (and report each refusal). Stylesheets built through the
// CSSOM are not inline styles, so while a terminal lives, each <style>
// element the document makes keeps its text in a constructed stylesheet
// the document adopts, and the element itself is an inert <template>.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import type { TermView } from './terminalSession';

export interface XtermView extends TermView {
  fit(): void;
  focus(): void;
  dispose(): void;
}

function adoptStyleElements(doc: Document): () => void {
  if (!('adoptedStyleSheets' in doc) || typeof CSSStyleSheet === 'undefined') return () => {};
  const original = doc.createElement;
  const sheets = new Set<CSSStyleSheet>();
  doc.createElement = function (this: Document, tag: string, opts?: ElementCreationOptions) {
    if (tag.toLowerCase() !== 'style') return original.call(this, tag, opts);
    // Even an empty <style> counts as an inline style: a <template> (never
    // rendered) stands in, its text kept in the adopted sheet.
    const el = original.call(this, 'template');
    const sheet = new CSSStyleSheet();
    sheets.add(sheet);
    doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
    let text = '';
    Object.defineProperty(el, 'textContent', {
      get: () => text,
      set: (v: string | null) => {
        text = v ?? '';
        sheet.replaceSync(text);
      },
    });
    return el;
  } as typeof doc.createElement;
  return () => {
    doc.createElement = original;
    doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => !sheets.has(s));
  };
}

export function createXterm(container: HTMLElement): XtermView {
  const unadopt = adoptStyleElements(container.ownerDocument);
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    fontSize: 14,
    scrollback: 5000,
  });
  const fitter = new FitAddon();
  term.loadAddon(fitter);
  term.open(container);
  fitter.fit();
  return {
    get cols() {
      return term.cols;
    },
    get rows() {
      return term.rows;
    },
    write: (d) => term.write(d),
    onData: (cb) => term.onData(cb),
    onResize: (cb) => term.onResize(cb),
    fit: () => {
      try {
        fitter.fit();
      } catch {
        /* not laid out (a hidden tab): the next resize fits */
      }
    },
    focus: () => term.focus(),
    dispose: () => {
      term.dispose();
      unadopt();
    },
  };
}
