// embed.mjs DIST OUT.c - write the console's built files (Vite's output in
// DIST) as C: each file's bytes, the same gzip-compressed (level 9), its
// content type and ETag, in the table `gpubox_console` that gpuboxd serves
// (src/http/static.h). Files under assets/ carry a content hash in their
// names, so they may be cached for good. Only Node's own modules are used.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';

const [dist, out] = process.argv.slice(2);
if (!dist || !out) {
  console.error('usage: node embed.mjs DIST OUT.c');
  process.exit(2);
}

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};

function walk(dir) {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const p = join(dir, name);
      return statSync(p).isDirectory() ? walk(p) : [p];
    });
}

function cArray(name, bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    lines.push(Array.from(bytes.subarray(i, i + 16), (b) => `0x${b.toString(16).padStart(2, '0')}`).join(','));
  }
  return `static const unsigned char ${name}[] = {\n${lines.join(',\n')}${bytes.length ? '' : '0'}};\n`;
}

const files = walk(dist);
if (!files.some((f) => relative(dist, f) === 'index.html')) {
  console.error(`embed.mjs: ${dist} has no index.html; did the Vite build run?`);
  process.exit(1);
}
let c = `/* Generated from the console's build (${relative(process.cwd(), dist) || dist}) by web/scripts/embed.mjs; do not edit. */\n`;
c += '#include "daemon/console.h"\n\n';
const entries = [];
files.forEach((file, i) => {
  const path = '/' + relative(dist, file).split(sep).join('/');
  const ext = path.slice(path.lastIndexOf('.'));
  const type = TYPES[ext];
  if (!type) {
    console.error(`embed.mjs: no content type for ${path}`);
    process.exit(1);
  }
  const body = readFileSync(file);
  const gz = gzipSync(body, { level: 9 });
  const etag = createHash('sha256').update(body).digest('hex').slice(0, 20);
  c += cArray(`f${i}`, body) + cArray(`f${i}_gz`, gz);
  // A compressed copy only when it is smaller (a PNG is not).
  const gzip = gz.length < body.length;
  entries.push(
    `    {${JSON.stringify(path)}, ${JSON.stringify(type)}, f${i}, ${body.length}, ` +
      `${gzip ? `f${i}_gz` : 'NULL'}, ${gzip ? gz.length : 0}, "\\"${etag}\\"", ${path.startsWith('/assets/')}},`,
  );
});
c += `\nstatic const http_static_file files[] = {\n${entries.join('\n')}\n};\n\n`;
c += `const http_static_set gpubox_console = {files, sizeof(files) / sizeof(files[0]), "/index.html"};\n`;
writeFileSync(`${out}.tmp`, c);
renameSync(`${out}.tmp`, out);
