/** Library surface: the client helper for TypeScript agents, and the sidecar for embedding and tests. */
export {
  createAgentSigner,
  mintAgentToken,
  createAgentProof,
  registrationRequest,
  createHostSigner,
  hostTokenHash,
  AGENT_TOKEN_TYPE,
  AGENT_PROOF_TYPE,
  HOST_TOKEN_TYPE,
  MAX_TOKEN_LIFETIME_SECONDS,
  type AgentSigner,
  type AgentAuthProfile,
  type HostSigner,
  type HostSignerOptions,
  type RequestToBind,
} from './identity/client.js';
export { createMcpFetch, type McpFetchOptions, type McpCapability } from './identity/mcp-fetch.js';
export { generateAgentKeyPair, thumbprintOf, importAgentKey } from './identity/keys.js';
export { loadPolicyFile, loadPolicyText } from './policy/load.js';
export { PolicyError, formatIssue, type PolicyIssue } from './policy/issues.js';
export { startSidecar, type Sidecar, type SidecarOptions } from './sidecar/start.js';
export { MemoryReplayStore, ReplayStoreUnavailableError, type ReplayStore } from './auth/replay.js';
export { DENIAL_STATUS, type DenialCode, type ConstraintViolation } from './errors.js';
