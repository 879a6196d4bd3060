// The console's build: one hashed JS and one hashed CSS file under assets/,
// index.html at the root. CMake passes --outDir (build/<type>/web); the
// files are then embedded into gpuboxd (scripts/web-embed.mjs). No source
// maps and no inline scripts or styles: gpuboxd's Content-Security-Policy
// allows only files of its own origin (docs/web.md).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: '/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
  test: {
    environment: 'jsdom',
    globals: true,
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
    // axe-core and 500-row renders in jsdom take seconds on a busy machine
    testTimeout: 60000,
  },
});
