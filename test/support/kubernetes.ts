import { execFileSync } from 'node:child_process';
import { Deployment, StatefulSet, DaemonSet, ReplicaSet } from 'kubernetes-models/apps/v1';
import { CronJob, Job } from 'kubernetes-models/batch/v1';
import { ConfigMap, Pod, Service } from 'kubernetes-models/v1';

// The Kubernetes OpenAPI schemas (kubernetes-models), so injector output is checked as the API server would.
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  Deployment,
  StatefulSet,
  DaemonSet,
  ReplicaSet,
  Job,
  CronJob,
  Pod,
  ConfigMap,
  Service,
} as never;

/** Throws when `doc` is not a valid object of its kind. */
export function validateObject(doc: Record<string, unknown>): void {
  const Model = MODELS[String(doc.kind)];
  if (!Model) throw new Error(`no schema for kind ${String(doc.kind)}`);
  new Model(doc as never).validate();
}

/** A self-signed EC certificate for 127.0.0.1 (and `localhost`) from the real openssl, for the webhook's HTTPS. */
export function selfSignedCert(certOut: string, keyOut: string, cn = 'localhost'): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
      '-keyout',
      keyOut,
      '-out',
      certOut,
    ],
    { stdio: 'ignore' },
  );
}

/**
 * Applies the webhook's JSONPatch: RFC 6902 add/replace of whole top-level fields of spec and metadata, all it
 * emits; any other op or path throws, so a patch the webhook should not make fails the test.
 */
export function applyPatch<T extends Record<string, any>>(doc: T, patch: string | { op: string; path: string; value: unknown }[]): T {
  const ops = typeof patch === 'string' ? (JSON.parse(Buffer.from(patch, 'base64').toString()) as { op: string; path: string; value: unknown }[]) : patch;
  const out = structuredClone(doc) as Record<string, any>;
  for (const o of ops) {
    const [, root, field, ...rest] = o.path.split('/');
    if (!['add', 'replace'].includes(o.op) || !['spec', 'metadata'].includes(root!) || !field || rest.length)
      throw new Error(`unexpected patch op ${o.op} ${o.path}`);
    out[root!][field] = o.value;
  }
  return out as T;
}
