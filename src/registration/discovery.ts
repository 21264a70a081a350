import type { Policy } from '../policy/types.js';

/**
 * GET /.well-known/agent-configuration, after the Agent Auth Protocol draft
 * (1.0-draft) as the agents-chain library serves it. Only endpoints this
 * sidecar actually serves are listed; capabilities are called on their own
 * routes (there is no generic execute endpoint). Pure.
 */
export function discoveryDocument(policy: Policy): Record<string, unknown> {
  const endpoints: Record<string, string> = {};
  for (const route of policy.routes) {
    if (route.kind !== 'endpoint') continue;
    const name = route.discoveryName;
    if (name) endpoints[name] = route.template.source;
  }
  const defaults = new Set<string>();
  for (const host of policy.hosts.values()) for (const name of host.defaults.keys()) defaults.add(name);
  return {
    version: '1.0-draft',
    provider_name: policy.provider.name,
    ...(policy.provider.description ? { description: policy.provider.description } : {}),
    issuer: policy.provider.issuer,
    algorithms: ['Ed25519'],
    modes: ['delegated', 'autonomous'],
    // A human approves with a one-time code delivered out of band: the device-authorization pattern.
    approval_methods: policy.accessRequests ? ['device_authorization'] : [],
    endpoints,
    default_capabilities: [...defaults].sort(),
  };
}
