import type { EndpointName } from '../policy/types.js';
import { agentStatus } from './agent-status.js';
import { capabilityList } from './capability-list.js';
import { constraintContextEndpoint } from './constraint-context.js';
import { describeCapability } from './describe-capability.js';
import { discovery } from './discovery.js';
import type { AnyEndpoint } from './endpoint.js';
import { execute } from './execute.js';
import { introspect } from './introspect.js';
import { register } from './register.js';
import { requestPermission } from './request-permission.js';
import { requestStatus } from './request-status.js';
import { revoke } from './revoke.js';
import { rotateKey } from './rotate-key.js';

/** The sidecar's own endpoints on the agent port: one entry each, checked complete by the compiler. */
export const ENDPOINTS: { readonly [N in EndpointName]: AnyEndpoint & { name: N } } = {
  discovery,
  capability_list: capabilityList,
  describe_capability: describeCapability,
  introspect,
  constraint_context: constraintContextEndpoint,
  request_permission: requestPermission,
  request_status: requestStatus,
  register,
  agent_status: agentStatus,
  revoke,
  rotate_key: rotateKey,
  execute,
} as const;

export function endpointNamed(name: EndpointName): AnyEndpoint {
  return ENDPOINTS[name];
}
