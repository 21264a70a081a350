import type { EndpointName } from '../policy/types.js';
import { agentStatus } from './agent-status.js';
import { capabilityList } from './capability-list.js';
import { constraintContextEndpoint } from './constraint-context.js';
import { discovery } from './discovery.js';
import type { AnyEndpoint } from './endpoint.js';
import { register } from './register.js';
import { requestPermission } from './request-permission.js';
import { requestStatus } from './request-status.js';
import { revoke } from './revoke.js';

/** The sidecar's own endpoints on the agent port: one entry each, checked complete by the compiler. */
export const ENDPOINTS: { readonly [N in EndpointName]: AnyEndpoint & { name: N } } = {
  discovery,
  capability_list: capabilityList,
  constraint_context: constraintContextEndpoint,
  request_permission: requestPermission,
  request_status: requestStatus,
  register,
  agent_status: agentStatus,
  revoke,
} as const;

export function endpointNamed(name: EndpointName): AnyEndpoint {
  return ENDPOINTS[name];
}
