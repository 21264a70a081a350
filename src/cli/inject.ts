import { parseAllDocuments, stringify } from 'yaml';
import { ANNOTATION } from '../kubernetes/annotations.js';
import { DEFAULT_IMAGE, INJECT_DEFAULTS, loadInjectDefaults, type InjectDefaults } from '../kubernetes/defaults.js';
import { injectManifests, type StreamReport } from '../kubernetes/manifests.js';
import { loadPolicyText } from '../policy/load.js';
import { adminStartupProblem } from '../admin/handler.js';
import { parseCommand } from './args.js';

export { DEFAULT_IMAGE } from '../kubernetes/defaults.js';

const USAGE = `Usage: agents-chain inject [--defaults FILE] [--image IMAGE] [--native-sidecar] < manifests.yaml > injected.yaml

Adds the agents-chain sidecar to every pod template annotated
${ANNOTATION.inject}: "true" (Pods, Deployments, StatefulSets, DaemonSets,
ReplicaSets, Jobs, CronJobs, and Lists of them) in multi-document YAML read
from stdin. Other documents are written out unchanged. Injecting twice
changes nothing. Works as a Helm post-renderer:

  helm install web ./chart --post-renderer agents-chain --post-renderer-args inject

Fails closed: when an annotated pod template cannot get the sidecar (no
policy, a bad annotation, a port clash...), nothing is written to stdout and
the exit code is 1, naming each object and reason, so helm and GitOps
pipelines stop. ${ANNOTATION.allowUnprotected}: "true" on a pod lets it
through without the sidecar, with a warning and a status annotation.

In capture mode "port", Services in the same stream that select an injected
pod and target the app's port by number are pointed at the sidecar.

Pod annotations (docs/guides/kubernetes.md has the full table):
  ${ANNOTATION.policy} (required), ${ANNOTATION.upstreamPort},
  ${ANNOTATION.capture} [iptables | port], ${ANNOTATION.excludeInboundPorts},
  ${ANNOTATION.port} [17480], ${ANNOTATION.adminPort} [17490],
  ${ANNOTATION.redisSecret}, ${ANNOTATION.adminTokenSecret},
  ${ANNOTATION.auditKeySecret}, ${ANNOTATION.auditExport}, ${ANNOTATION.logLevel},
  ${ANNOTATION.cpuRequest}, ${ANNOTATION.memoryRequest}, ${ANNOTATION.memoryLimit},
  ${ANNOTATION.nativeSidecar}, ${ANNOTATION.allowUnprotected}.

Options:
  --defaults FILE    injection defaults (YAML; the chart's <release>-injection ConfigMap)
                                                           AGENTS_CHAIN_INJECT_DEFAULTS
  --image IMAGE      the sidecar image [${DEFAULT_IMAGE}]   AGENTS_CHAIN_IMAGE
  --native-sidecar   inject as a native sidecar unless a pod says otherwise (Kubernetes >= 1.29)
`;

/** Defaults from --defaults (or the embedded ones), then --image / --native-sidecar on top. */
export function injectDefaultsFrom(v: { defaults?: string; image?: string; 'native-sidecar'?: boolean }, env: NodeJS.ProcessEnv): InjectDefaults {
  const file = v.defaults ?? env.AGENTS_CHAIN_INJECT_DEFAULTS;
  const base = file ? loadInjectDefaults(file) : { ...INJECT_DEFAULTS };
  const image = v.image ?? env.AGENTS_CHAIN_IMAGE;
  return { ...base, ...(image ? { image } : {}), ...(v['native-sidecar'] ? { nativeSidecar: true } : {}) };
}

/**
 * A policy ConfigMap shipped in the same manifests is checked as the sidecar will load it, so a bad policy
 * (or approvals without an admin token, which the sidecar refuses to start with) stops the install here
 * instead of crash-looping the pods.
 */
async function policyProblems(docs: Record<string, unknown>[], report: StreamReport): Promise<string[]> {
  const maps = new Map<string, string>();
  const walk = (d: Record<string, unknown>): void => {
    if (Array.isArray(d.items)) for (const i of d.items as Record<string, unknown>[]) walk(i);
    const meta = d.metadata as { name?: string; namespace?: string } | undefined;
    const text = (d.data as Record<string, unknown> | undefined)?.['policy.yaml'];
    if (d.kind === 'ConfigMap' && meta?.name && typeof text === 'string') maps.set(`${meta.namespace ?? ''}/${meta.name}`, text);
  };
  docs.forEach(walk);
  const problems: string[] = [];
  for (const pod of report.pods) {
    const text = maps.get(`${pod.namespace ?? ''}/${pod.policy}`) ?? (pod.namespace === undefined ? undefined : maps.get(`/${pod.policy}`));
    if (text === undefined) continue; // not in this stream: the sidecar checks it at start
    try {
      const policy = await loadPolicyText(text, `ConfigMap/${pod.policy}:policy.yaml`);
      const problem = adminStartupProblem({
        adminToken: pod.annotations[ANNOTATION.adminTokenSecret] ? 'set' : undefined,
        approvals: Boolean(policy.accessRequests),
      });
      if (problem)
        problems.push(
          `${pod.workload}: its policy has accessRequests, so the sidecar would refuse to start: set ${ANNOTATION.adminTokenSecret} (a Secret with key "token")`,
        );
    } catch (err) {
      problems.push(`${pod.workload}: its policy would not load:\n  ${(err as Error).message.split('\n').join('\n  ')}`);
    }
  }
  return problems;
}

export async function injectCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, { defaults: { type: 'string' }, image: { type: 'string' }, 'native-sidecar': { type: 'boolean' } }, USAGE);
  if (!args) return 0;
  const defaults = injectDefaultsFrom(args.values, process.env);
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  // YAML 1.1, as helm and kubectl (Go's yaml) read it: `hostNetwork: yes` is true and `<<` merges, there and here.
  const parsed = parseAllDocuments(Buffer.concat(chunks).toString('utf8'), { version: '1.1' });
  if (!Array.isArray(parsed)) throw new Error('stdin is not YAML');
  for (const doc of parsed) {
    const e = doc.errors[0];
    if (e) throw new Error(`stdin:${e.linePos?.[0]?.line ?? '?'}:${e.linePos?.[0]?.col ?? '?'}: ${e.message}`);
  }
  const kept = parsed
    .map((doc) => ({ doc, value: doc.toJS() as unknown }))
    .filter((d): d is { doc: typeof d.doc; value: Record<string, unknown> } => !!d.value && typeof d.value === 'object');
  const { docs, changed, report } = injectManifests(
    kept.map((d) => d.value),
    defaults,
  );
  const say = (line: string): void => void process.stderr.write(`agents-chain inject: ${line}\n`);
  report.refused.push(...(await policyProblems(docs, report)));
  for (const w of report.warnings) say(`warning: ${w}`);
  if (report.refused.length) {
    for (const r of report.refused) say(`cannot inject ${r}`);
    say(
      `refused: ${report.refused.length} problem${report.refused.length === 1 ? '' : 's'}; nothing written (set ${ANNOTATION.allowUnprotected}: "true" on a pod to run it without the sidecar)`,
    );
    return 1;
  }
  for (const s of report.servicesRewritten) say(`rewrote ${s}`);
  // Untouched documents keep their text (and comments) exactly.
  const out = docs.map((d, i) =>
    changed[i] ? stringify(d, { lineWidth: 0, version: '1.1' }) : kept[i]!.doc.toString({ lineWidth: 0 }).replace(/^---[ \t]*\n/, ''),
  );
  process.stdout.write(out.map((d) => (d.endsWith('\n') ? d : `${d}\n`)).join('---\n'));
  const n = report.injected.length;
  say(`${n} pod template${n === 1 ? '' : 's'} injected`);
  return 0;
}
