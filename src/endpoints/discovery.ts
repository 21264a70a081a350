import { jsonReply } from '../http/respond.js';
import { discoveryDocument } from '../registration/discovery.js';
import { defineEndpoint } from './endpoint.js';

/** GET /.well-known/agent-configuration: public, cacheable for an hour. */
export const discovery = defineEndpoint({
  name: 'discovery',
  method: 'GET',
  path: '/.well-known/agent-configuration',
  audience: '',
  auth: 'none',
  handle: (_call, deps) => jsonReply(200, discoveryDocument(deps.policy), { 'cache-control': 'public, max-age=3600' }),
});
