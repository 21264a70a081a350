import { readFileSync } from 'node:fs';
import { parseAllDocuments, stringify } from 'yaml';
import { injectObject } from '../kubernetes/inject.js';
import { parseCommand } from './args.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
export const DEFAULT_IMAGE = `ghcr.io/agents-chain/sidecar:${VERSION}`;

const USAGE = `Usage: agents-chain inject [--image IMAGE] [--native-sidecar] < manifests.yaml > injected.yaml

Adds the agents-chain sidecar to every pod template annotated
agents-chain.io/inject: "true" (Pods, Deployments, StatefulSets, DaemonSets,
ReplicaSets, Jobs, CronJobs, and Lists of them) in multi-document YAML read
from stdin. Other documents are written out unchanged. Injecting twice
changes nothing. Works as a Helm post-renderer:

  helm install web ./chart --post-renderer agents-chain --post-renderer-args inject

Pod annotations: agents-chain.io/policy (ConfigMap with policy.yaml, required),
  agents-chain.io/upstream-port [8081], agents-chain.io/port [8080],
  agents-chain.io/admin-port [9090], agents-chain.io/audit-key-secret,
  agents-chain.io/audit-export [stdout], agents-chain.io/admin-token-secret,
  agents-chain.io/native-sidecar ("true": an init container with restartPolicy Always).

Options:
  --image IMAGE      the sidecar image [${DEFAULT_IMAGE}]   AGENTS_CHAIN_IMAGE
  --native-sidecar   inject as a native sidecar unless a pod says otherwise (Kubernetes >= 1.29)
`;

export async function injectCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, { image: { type: 'string' }, 'native-sidecar': { type: 'boolean' } }, USAGE);
  if (!args) return 0;
  const image = args.values.image ?? process.env.AGENTS_CHAIN_IMAGE ?? DEFAULT_IMAGE;
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const docs = parseAllDocuments(Buffer.concat(chunks).toString('utf8'));
  if (!Array.isArray(docs)) throw new Error('stdin is not YAML');
  const out: string[] = [];
  let injected = 0;
  for (const doc of docs) {
    if (doc.errors.length) {
      const e = doc.errors[0]!;
      throw new Error(`stdin:${e.linePos?.[0]?.line ?? '?'}:${e.linePos?.[0]?.col ?? '?'}: ${e.message}`);
    }
    const value = doc.toJS() as Record<string, unknown> | null;
    if (!value || typeof value !== 'object') continue;
    const r = injectObject(value, { image, nativeSidecar: args.values['native-sidecar'] === true });
    for (const s of r.skipped) process.stderr.write(`agents-chain inject: not injected: ${s}\n`);
    injected += r.injected;
    // Untouched documents keep their text (and comments) exactly.
    out.push(r.injected ? stringify(r.doc, { lineWidth: 0 }) : doc.toString({ lineWidth: 0 }).replace(/^---[ \t]*\n/, ''));
  }
  process.stdout.write(out.map((d) => (d.endsWith('\n') ? d : `${d}\n`)).join('---\n'));
  process.stderr.write(`agents-chain inject: ${injected} pod template${injected === 1 ? '' : 's'} injected\n`);
  return 0;
}
