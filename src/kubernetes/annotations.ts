/** The pod annotations injection reads and writes, in one place (the CLI usage and docs/guides/kubernetes.md list them). */
export const ANNOTATION = {
  inject: 'agents-chain.io/inject',
  policy: 'agents-chain.io/policy',
  upstreamPort: 'agents-chain.io/upstream-port',
  capture: 'agents-chain.io/capture',
  excludeInboundPorts: 'agents-chain.io/exclude-inbound-ports',
  port: 'agents-chain.io/port',
  adminPort: 'agents-chain.io/admin-port',
  redisSecret: 'agents-chain.io/redis-secret',
  adminTokenSecret: 'agents-chain.io/admin-token-secret',
  auditKeySecret: 'agents-chain.io/audit-key-secret',
  auditExport: 'agents-chain.io/audit-export',
  logLevel: 'agents-chain.io/log-level',
  cpuRequest: 'agents-chain.io/cpu-request',
  memoryRequest: 'agents-chain.io/memory-request',
  memoryLimit: 'agents-chain.io/memory-limit',
  nativeSidecar: 'agents-chain.io/native-sidecar',
  allowUnprotected: 'agents-chain.io/allow-unprotected',
  /** Written by injection: what was injected (JSON), or why a pod runs unprotected. */
  status: 'agents-chain.io/status',
} as const;

/** kubectl logs/exec pick this container when none is named: the app, not the sidecar. */
export const DEFAULT_CONTAINER = 'kubectl.kubernetes.io/default-container';

/** Every annotation a user may set; an unknown `agents-chain.io/` key is a typo and refuses injection. */
export const USER_ANNOTATIONS: ReadonlySet<string> = new Set(Object.values(ANNOTATION).filter((a) => a !== ANNOTATION.status));

export const CONTAINER = 'agents-chain';
export const CAPTURE_CONTAINER = 'agents-chain-capture';
