import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../http/respond.js';
import { ANNOTATION, CONTAINER } from './annotations.js';
import { injectedProblems, injectPodTemplate, type InjectDefaults, type InjectResult, type PodTemplate } from './inject.js';

const MAX_REVIEW_BYTES = 3 * 1024 * 1024;

/** An RFC 6902 operation; the webhook only ever adds or replaces whole fields of the pod. */
export interface PatchOp {
  op: 'add' | 'replace';
  path: string;
  value: unknown;
}

/** The JSONPatch from `pod` to `next`: the spec fields injection writes and the pod's annotations, each as a whole. Pure. */
export function patchBetween(pod: PodTemplate, next: PodTemplate): PatchOp[] {
  const patch: PatchOp[] = [];
  const before = pod.spec ?? {};
  const after = next.spec ?? {};
  for (const field of ['initContainers', 'containers', 'volumes', 'terminationGracePeriodSeconds'] as const) {
    if (JSON.stringify(before[field]) === JSON.stringify(after[field])) continue;
    patch.push({ op: before[field] === undefined ? 'add' : 'replace', path: `/spec/${field}`, value: after[field] });
  }
  const was = pod.metadata?.annotations;
  const now = next.metadata?.annotations;
  if (JSON.stringify(was) !== JSON.stringify(now)) {
    if (pod.metadata === undefined) patch.push({ op: 'add', path: '/metadata', value: { annotations: now } });
    else patch.push({ op: was === undefined ? 'add' : 'replace', path: '/metadata/annotations', value: now });
  }
  return patch;
}

/** The injection decision for one pod and the patch that applies it. */
export function injectionPatch(pod: PodTemplate, defaults: InjectDefaults): { result: InjectResult; patch: PatchOp[] } {
  const result = injectPodTemplate(pod, defaults, { kind: 'Pod' });
  const patch = result.outcome === 'injected' || result.outcome === 'unprotected' ? patchBetween(pod, result.template) : [];
  return { result, patch };
}

/**
 * The guard (POST /validate, a validating webhook over every namespace the injection webhook does not
 * watch, and after every mutation): a pod that asks for the sidecar must have it. It catches an
 * annotated pod in a namespace without the injection label, which the mutating webhook never sees.
 */
export function guardDecision(pod: PodTemplate): { allowed: boolean; message?: string; warning?: string } {
  const a = pod.metadata?.annotations ?? {};
  if (a[ANNOTATION.inject] === undefined || a[ANNOTATION.inject] === 'false') return { allowed: true };
  const spec = pod.spec ?? {};
  const all = [...(Array.isArray(spec.containers) ? spec.containers : []), ...(Array.isArray(spec.initContainers) ? spec.initContainers : [])];
  if (all.some((c) => c?.name === CONTAINER)) {
    const problems = injectedProblems(pod);
    if (!problems.length) return { allowed: true };
    if (a[ANNOTATION.allowUnprotected] === 'true')
      return { allowed: true, warning: `agents-chain: this pod runs WITHOUT the sidecar's protection (allow-unprotected): ${problems.join('; ')}` };
    return { allowed: false, message: `agents-chain: ${problems.join('; ')}` };
  }
  const why = `the pod asks for the sidecar (${ANNOTATION.inject}: "${a[ANNOTATION.inject]}") and has none: its namespace is not watched by the agents-chain injection webhook (label it agents-chain.io/injection=enabled), or injection did not run`;
  if (a[ANNOTATION.allowUnprotected] === 'true')
    return { allowed: true, warning: `agents-chain: this pod runs WITHOUT the sidecar (allow-unprotected): ${why}` };
  return { allowed: false, message: `agents-chain: ${why}` };
}

interface AdmissionReview {
  apiVersion?: string;
  kind?: string;
  request?: { uid?: string; kind?: { kind?: string }; namespace?: string; object?: PodTemplate; dryRun?: boolean };
}

/**
 * POST /mutate: a mutating admission webhook (AdmissionReview v1). Pods with
 * the inject annotation get the sidecar as a JSONPatch; a pod that asks for
 * the sidecar and cannot get it is denied with the reasons (the rollout
 * stops and says why), unless it opted into running unprotected, which is
 * admitted with a warning and marked on the pod. Other pods pass unchanged.
 * POST /validate: the guard (guardDecision).
 */
type Log = (msg: string, fields: Record<string, unknown>) => void;

type Who = Record<string, unknown>;

/** POST /mutate: the injector's answer as an AdmissionReview response (a JSON patch, warnings, or a refusal). */
function mutate(defaults: InjectDefaults, log: { info: Log; warn: Log }, uid: string, pod: PodTemplate | undefined, who: Who): Record<string, unknown> {
  const { result, patch } = pod ? injectionPatch(pod, defaults) : { result: { outcome: 'not-requested' } as InjectResult, patch: [] };
  const warnings: string[] = [];
  if (result.outcome === 'injected') warnings.push(...result.warnings.map((w) => `agents-chain: ${w}`));
  if (result.outcome === 'unprotected') warnings.push(`agents-chain: this pod runs WITHOUT the sidecar (allow-unprotected): ${result.reasons.join('; ')}`);
  if (result.outcome === 'refused') log.warn('pod refused: it asks for the sidecar and cannot get it', { ...who, reasons: result.reasons });
  else
    (result.outcome === 'unprotected' ? log.warn : log.info)(
      result.outcome === 'injected' ? 'sidecar injected' : result.outcome === 'unprotected' ? 'pod admitted WITHOUT the sidecar' : 'pod not injected',
      { ...who, outcome: result.outcome, ...(warnings.length ? { warnings } : {}) },
    );
  return {
    uid,
    allowed: result.outcome !== 'refused',
    ...(result.outcome === 'refused'
      ? {
          status: {
            code: 403,
            reason: 'Forbidden',
            message: `agents-chain: the pod asks for the sidecar (agents-chain.io/inject: "true") and cannot get it: ${result.reasons.join('; ')}`,
          },
        }
      : {}),
    ...(patch.length ? { patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') } : {}),
    ...(warnings.length ? { warnings } : {}),
  };
}

/** POST /validate: the guard's answer (a pod that asks for the sidecar and does not have it is refused). */
function guard(log: { warn: Log }, uid: string, pod: PodTemplate | undefined, who: Who): Record<string, unknown> {
  const d = pod ? guardDecision(pod) : { allowed: true };
  if (!d.allowed) log.warn('pod refused: it asks for the sidecar and was not injected', { ...who, reason: d.message });
  return {
    uid,
    allowed: d.allowed,
    ...(d.message ? { status: { code: 403, reason: 'Forbidden', message: d.message } } : {}),
    ...(d.warning ? { warnings: [d.warning] } : {}),
  };
}

export function webhookHandler(defaults: InjectDefaults, log: { info: Log; warn: Log }) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && (path === '/healthz' || path === '/readyz')) return sendJson(res, 200, { status: 'ok' });
    if (req.method !== 'POST' || (path !== '/mutate' && path !== '/validate'))
      return sendJson(res, 404, { error: 'not_found', message: `no webhook endpoint ${req.method ?? ''} ${path ?? ''}` });
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (status: number, message: string): void => {
      if (!res.headersSent) sendJson(res, status, { error: 'invalid_body', message }, { connection: 'close' });
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
        const meta = pod?.metadata as { name?: string; generateName?: string } | undefined;
        const who = { uid, namespace: review.request?.namespace, pod: meta?.name ?? meta?.generateName };
        const response = path === '/validate' ? guard(log, uid, pod, who) : mutate(defaults, log, uid, pod, who);
        sendJson(res, 200, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response });
      } catch (err) {
        // A malformed object must not take the webhook down (and with it every pod creation under failurePolicy: Fail).
        log.warn('admission review refused', { error: (err as Error).message });
        fail(400, `not a usable AdmissionReview: ${(err as Error).message}`);
      }
    });
  };
}
