// make image-check: what the container image does, without a container engine. Production dependencies
// only (npm ci --omit=dev), the built dist/, started as the image's non-root user (uid 10001) when run
// as root: the sidecar must start, answer /readyz and exit 0 on SIGTERM.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { imageEnv } from './env.mjs';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const app = mkdtempSync(join(tmpdir(), 'agents-chain-image-'));
chmodSync(app, 0o755);
try {
  for (const f of ['package.json', 'package-lock.json']) cpSync(join(ROOT, f), join(app, f));
  execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: app, stdio: 'inherit' });
  cpSync(join(ROOT, 'dist'), join(app, 'dist'), { recursive: true, filter: (src) => !/test-results\.json$/.test(src) });
  cpSync(join(ROOT, 'config/policy.schema.json'), join(app, 'config/policy.schema.json'));
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? ['setpriv', '--reuid=10001', '--regid=10001', '--clear-groups', process.execPath] : [process.execPath];
  const child = spawn(
    command[0],
    [
      ...command.slice(1),
      'dist/cli/main.js',
      'serve',
      '--policy',
      join(ROOT, 'config/examples/billing.yaml'),
      '--upstream',
      'http://127.0.0.1:9',
      '--listen',
      '127.0.0.1:0',
      '--admin',
      '127.0.0.1:0',
      '--no-watch',
    ],
    // As the image runs it: the Dockerfile's ENV (NODE_ENV, NODE_OPTIONS) over this environment.
    { cwd: app, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...imageEnv() } },
  );
  const line = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no "sidecar listening" line within 15 s:\n${out}`)), 15_000);
    child.stdout.on('data', (d) => {
      out += d;
      const l = out.split('\n').find((x) => x.includes('sidecar listening'));
      if (l) {
        clearTimeout(timer);
        resolve(l);
      }
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before listening:\n${out}`)));
  });
  const { admin } = JSON.parse(line);
  const ready = await fetch(`${admin}/readyz`);
  if (ready.status !== 200) throw new Error(`/readyz answered ${ready.status}`);
  child.kill('SIGTERM');
  const code = await new Promise((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`exit code ${code} after SIGTERM`);
  console.log(
    `image-check: production dependencies only, ${JSON.stringify(imageEnv())}, ${asRoot ? 'uid 10001' : 'current user (not root: no user switch)'}, ready, clean exit on SIGTERM`,
  );
} finally {
  rmSync(app, { recursive: true, force: true });
}
