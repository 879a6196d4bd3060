// xterm.js in the page, loaded only when a terminal opens (a chunk of its
// own: the rest of the console does not wait for it).
//
// gpuboxd's Content-Security-Policy allows no inline styles (docs/web.md),
// and xterm.js's DOM renderer sizes its rows and colours its text with
// <style> elements it writes at run time, which the browser then ignores.
// Stylesheets built through the CSSOM are not inline styles: each such
// <style> element's text is mirrored into a constructed stylesheet adopted
// by the document, and kept in step as xterm.js rewrites it.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import type { TermView } from './terminalSession';

export interface XtermView extends TermView {
  fit(): void;
  focus(): void;
  dispose(): void;
}

function mirrorStyles(root: HTMLElement): () => void {
  const doc = root.ownerDocument;
  if (!('adoptedStyleSheets' in doc) || typeof CSSStyleSheet === 'undefined') return () => {};
  const sheets = new Map<HTMLStyleElement, CSSStyleSheet>();
  const sync = () => {
    const seen = new Set<HTMLStyleElement>();
    root.querySelectorAll('style').forEach((el) => {
      seen.add(el);
      let sheet = sheets.get(el);
      if (!sheet) {
        sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        doc.adoptedStyleSheets = [...doc.adoptedStyleSheets, sheet];
      }
      sheet.replaceSync(el.textContent ?? '');
    });
    for (const [el, sheet] of sheets) {
      if (!seen.has(el)) {
        sheets.delete(el);
        doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => s !== sheet);
      }
    }
  };
  const obs = new MutationObserver(sync);
  obs.observe(root, { subtree: true, childList: true, characterData: true });
  sync();
  return () => {
    obs.disconnect();
    const mine = new Set(sheets.values());
    doc.adoptedStyleSheets = doc.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}

export function createXterm(container: HTMLElement): XtermView {
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace',
    fontSize: 14,
    scrollback: 5000,
  });
  const fitter = new FitAddon();
  term.loadAddon(fitter);
  const unmirror = mirrorStyles(container);
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
      unmirror();
    },
  };
}
