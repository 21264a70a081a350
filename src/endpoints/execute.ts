import { deny } from '../errors.js';
import { EXECUTE_PATH } from '../auth/profile.js';
import { defineEndpoint } from './endpoint.js';

/**
 * POST /capability/execute {capability, arguments}: the Agent Auth Protocol's
 * way to call a capability. Defined here for the route table and discovery;
 * the pipeline runs it (src/pipeline/execute.ts) as the direct call it maps
 * to, so this handler is never reached.
 */
export const execute = defineEndpoint({
  name: 'execute',
  method: 'POST',
  path: EXECUTE_PATH,
  // The token is checked as the capability's own (its aud, in the seed profile, the capability name).
  audience: '',
  auth: 'agent',
  discoveryName: 'execute',
  readsBody: true,
  // In egress the agent calls the provider's own API: there is no capability route to execute.
  needs: 'ingress',
  handle: () => deny('internal_error', 'execute is run by the pipeline, not as an endpoint'),
});
