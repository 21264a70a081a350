import { serviceUrl } from '../auth/profile.js';
import type { Policy } from '../policy/types.js';

/**
 * GET /.well-known/agent-configuration, after the Agent Auth Protocol draft
 * (1.0-draft) as the agents-chain library and the protocol's reference server
 * serve it. Only endpoints this sidecar actually serves are listed, as
 * absolute URLs on the issuer's origin (where agents reach this sidecar);
 * `default_location` is where capabilities are executed by name (the execute
 * endpoint), present when that is served: each capability is also called on
 * its own route. Pure.
 */
export function discoveryDocument(policy: Policy): Record<string, unknown> {
  const endpoints: Record<string, string> = {};
  for (const route of policy.routes) {
    if (route.kind !== 'endpoint') continue;
    const name = route.discoveryName;
    if (name) endpoints[name] = serviceUrl(policy, route.template.source);
  }
  const defaults = new Set<string>();
  for (const host of policy.hosts.values()) for (const name of host.defaults.keys()) defaults.add(name);
  for (const name of policy.dynamicHosts?.defaults.keys() ?? []) defaults.add(name);
  return {
    version: '1.0-draft',
    provider_name: policy.provider.name,
    ...(policy.provider.description ? { description: policy.provider.description } : {}),
    issuer: policy.provider.issuer,
    ...(endpoints.execute ? { default_location: endpoints.execute } : {}),
    algorithms: ['Ed25519'],
    modes: ['delegated', 'autonomous'],
    // A human approves with a one-time code delivered out of band: the device-authorization pattern.
    approval_methods: policy.accessRequests ? ['device_authorization'] : [],
    endpoints,
    default_capabilities: [...defaults].sort(),
  };
}
