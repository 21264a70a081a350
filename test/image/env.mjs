import { readFileSync } from 'node:fs';

/**
 * The final stage's `ENV NAME=value` lines of the Dockerfile: the environment the image's process starts
 * with (NODE_ENV, NODE_OPTIONS). make image-check and make bench run the sidecar with it.
 */
export function imageEnv(dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8')) {
  const env = {};
  for (const [, name, value] of dockerfile
    .split(/^FROM\s/m)
    .at(-1)
    .matchAll(/^ENV\s+([A-Z_][A-Z0-9_]*)=(\S+)\s*$/gm))
    env[name] = value;
  return env;
}
