import type { IncomingMessage, ServerResponse } from 'node:http';
import { injectPodTemplate, type InjectDefaults, type PodTemplate } from './inject.js';

const MAX_REVIEW_BYTES = 3 * 1024 * 1024;

/** An RFC 6902 operation; the webhook only ever adds or replaces whole arrays of the pod spec. */
export interface PatchOp {
  op: 'add' | 'replace';
  path: string;
  value: unknown;
}

/**
 * The JSONPatch that turns `pod` into the injected pod: containers,
 * initContainers and volumes, each added or replaced as a whole. Pure.
 */
export function injectionPatch(pod: PodTemplate, defaults: InjectDefaults): { patch: PatchOp[]; reason?: string } {
  const r = injectPodTemplate(pod, defaults);
  if (!r.injected) return { patch: [], reason: r.reason };
  const before = pod.spec ?? {};
  const after = r.template.spec!;
  const patch: PatchOp[] = [];
  for (const field of ['initContainers', 'containers', 'volumes'] as const) {
    if (JSON.stringify(before[field]) === JSON.stringify(after[field])) continue;
    patch.push({ op: before[field] === undefined ? 'add' : 'replace', path: `/spec/${field}`, value: after[field] });
  }
  return { patch };
}

interface AdmissionReview {
  apiVersion?: string;
  kind?: string;
  request?: { uid?: string; kind?: { kind?: string }; object?: PodTemplate; dryRun?: boolean };
}

/**
 * POST /mutate: a mutating admission webhook (AdmissionReview v1). Pods with
 * the inject annotation get the sidecar as a JSONPatch; everything else is
 * allowed unchanged. Never denies: whether a broken webhook blocks pods is
 * the MutatingWebhookConfiguration's failurePolicy.
 */
export function webhookHandler(defaults: InjectDefaults, log: (msg: string, fields: Record<string, unknown>) => void) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && (path === '/healthz' || path === '/readyz')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    if (req.method !== 'POST' || path !== '/mutate') return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}');
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (status: number, message: string): void => {
      if (!res.headersSent) res.writeHead(status, { 'content-type': 'application/json', connection: 'close' }).end(JSON.stringify({ error: 'invalid_body', message }));
    };
    req.on('error', () => res.destroy());
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_REVIEW_BYTES) {
        fail(413, 'AdmissionReview over 3 MiB');
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      try {
        const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AdmissionReview;
        const uid = review?.request?.uid;
        if (review?.kind !== 'AdmissionReview' || typeof uid !== 'string') return fail(400, 'an AdmissionReview v1 with request.uid is required');
        const pod = review.request?.kind?.kind === 'Pod' ? review.request.object : undefined;
        const { patch, reason } = pod ? injectionPatch(pod, defaults) : { patch: [], reason: 'not a Pod' };
        const name = (pod?.metadata as { name?: string; generateName?: string } | undefined);
        log(patch.length ? 'sidecar injected' : 'pod not injected', { uid, pod: name?.name ?? name?.generateName, ...(reason ? { reason } : {}) });
        const response = {
          uid,
          allowed: true,
          ...(patch.length ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') } : {}),
        };
        const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
      } catch (err) {
        // A malformed object must not take the webhook down (and with it every pod creation under failurePolicy: Fail).
        log('admission review refused', { error: (err as Error).message });
        fail(400, `not a usable AdmissionReview: ${(err as Error).message}`);
      }
    });
  };
}
