/**
 * Injection over a manifest stream (what `agents-chain inject` reads as a Helm post-renderer):
 * every workload's pod template, then, in port capture mode, the Services in the same stream that
 * would still reach the app's port by number.
 */
import { ANNOTATION } from './annotations.js';
import { injectPodTemplate, type InjectDefaults, type Injection, type PodTemplate } from './inject.js';

type Obj = Record<string, unknown>;

export interface StreamReport {
  injected: string[];
  refused: string[];
  unprotected: string[];
  warnings: string[];
  /** "Service/web: port 80 → targetPort http (was 8080)" */
  servicesRewritten: string[];
  /** What each injected workload's sidecar will load, so the caller can check a policy shipped in the same stream. */
  pods: { workload: string; namespace?: string; policy: string; annotations: Record<string, string> }[];
}

const WORKLOADS = ['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'ReplicationController'];

/** Where a workload keeps its pod template. */
export function podTemplateOf(doc: Obj): PodTemplate | undefined {
  const kind = doc.kind;
  const spec = doc.spec as Obj | undefined;
  if (kind === 'Pod') return doc;
  if (WORKLOADS.includes(String(kind))) return spec?.template as PodTemplate | undefined;
  if (kind === 'CronJob') return ((spec?.jobTemplate as Obj | undefined)?.spec as Obj | undefined)?.template as PodTemplate | undefined;
  return undefined;
}

/** List, DeploymentList, PodList...: anything with items. */
const isList = (doc: Obj): boolean => typeof doc.kind === 'string' && doc.kind.endsWith('List') && Array.isArray(doc.items);
const nameOf = (doc: Obj): string => {
  const name = (doc.metadata as Obj | undefined)?.name;
  return `${String(doc.kind)}/${typeof name === 'string' ? name : '?'}`;
};
const namespaceOf = (doc: Obj): string | undefined => (doc.metadata as Obj | undefined)?.namespace as string | undefined;

interface Taken {
  injection: Injection;
  labels: Record<string, string>;
  namespace: string | undefined;
  workload: string;
}

/** Injects every pod template of `docs` (Lists too). Pure: returns new documents and what happened. */
export function injectManifests(docs: Obj[], defaults: InjectDefaults): { docs: Obj[]; changed: boolean[]; report: StreamReport } {
  const report: StreamReport = { injected: [], refused: [], unprotected: [], warnings: [], servicesRewritten: [], pods: [] };
  const taken: Taken[] = [];
  const one = (doc: Obj): Obj => {
    if (isList(doc)) return { ...doc, items: (doc.items as Obj[]).map(one) };
    const template = podTemplateOf(doc);
    const name = nameOf(doc);
    const own = (doc.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[ANNOTATION.inject];
    if (!template) {
      const nested = ((doc.spec as Obj | undefined)?.template as PodTemplate | undefined)?.metadata?.annotations?.[ANNOTATION.inject];
      if (nested === 'true')
        report.warnings.push(`${name}: a pod template asks for the sidecar in a kind inject does not know; its pods get it only from the webhook`);
      return doc;
    }
    if (own !== undefined && doc.kind !== 'Pod' && template.metadata?.annotations?.[ANNOTATION.inject] === undefined) {
      report.refused.push(
        `${name}: ${ANNOTATION.inject} is on the ${String(doc.kind)} itself; put it on the pod template (spec.template.metadata.annotations), which its pods inherit`,
      );
      return doc;
    }
    const replicas = typeof (doc.spec as Obj | undefined)?.replicas === 'number' ? ((doc.spec as Obj).replicas as number) : undefined;
    const r = injectPodTemplate(template, defaults, { kind: String(doc.kind), ...(replicas !== undefined ? { replicas } : {}) });
    if (r.outcome === 'refused') report.refused.push(...r.reasons.map((x) => `${name}: ${x}`));
    if (r.outcome === 'unprotected') {
      report.unprotected.push(...r.reasons.map((x) => `${name}: ${x}`));
      report.warnings.push(`${name}: runs WITHOUT the sidecar (agents-chain.io/allow-unprotected: "true")`);
    }
    if (r.outcome !== 'injected' && r.outcome !== 'unprotected') return doc;
    if (r.outcome === 'injected') {
      report.injected.push(name);
      const annotations = template.metadata?.annotations ?? {};
      report.pods.push({ workload: name, ...(namespaceOf(doc) ? { namespace: namespaceOf(doc) } : {}), policy: annotations[ANNOTATION.policy]!, annotations });
      report.warnings.push(...r.warnings.map((w) => `${name}: ${w}`));
      taken.push({ injection: r.injection, labels: template.metadata?.labels ?? {}, namespace: namespaceOf(doc), workload: name });
    }
    const copy = structuredClone(doc);
    const target = podTemplateOf(copy)!;
    target.metadata = r.template.metadata;
    target.spec = r.template.spec;
    return copy;
  };
  const out = docs.map(one);
  const changed = out.map((d, i) => d !== docs[i]);
  out.forEach((doc, i) => {
    if (rewriteServices(doc, taken, report)) changed[i] = true;
  });
  return { docs: out, changed, report };
}

/**
 * Port mode: the sidecar took the app's port *name*; a Service that targets the app's port by
 * number (or by leaving targetPort to default to `port`) would still go around it. Rewritten in place.
 */
function rewriteServices(doc: Obj, taken: Taken[], report: StreamReport): boolean {
  if (isList(doc)) return (doc.items as Obj[]).map((d) => rewriteServices(d, taken, report)).some(Boolean);
  if (doc.kind !== 'Service') return false;
  const spec = doc.spec as Obj | undefined;
  const selector = spec?.selector as Record<string, string> | undefined;
  if (!selector || Object.keys(selector).length === 0 || !Array.isArray(spec?.ports)) return false;
  let changed = false;
  for (const t of taken) {
    // An object without a namespace lands in the release's: treat it as matching any (a wrong rewrite breaks a
    // Service, a missed one goes around the sidecar).
    const ns = namespaceOf(doc);
    if (t.injection.capture !== 'port' || (t.namespace !== undefined && ns !== undefined && t.namespace !== ns)) continue;
    if (!Object.entries(selector).every(([k, v]) => t.labels[k] === v)) continue;
    for (const p of spec.ports as Obj[]) {
      if ((p.protocol ?? 'TCP') !== 'TCP') continue;
      const target = p.targetPort ?? p.port;
      if (String(target) !== String(t.injection.app.number)) continue;
      p.targetPort = t.injection.portName;
      changed = true;
      report.servicesRewritten.push(
        `${nameOf(doc)}: port ${String(p.port)} → targetPort ${t.injection.portName} (was ${String(target)}), the sidecar of ${t.workload}`,
      );
    }
  }
  return changed;
}
