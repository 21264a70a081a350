/**
 * Egress presets: what a model provider's API looks like to the sidecar.
 * Data, not code: a provider is a base URL, how its key is sent, and a
 * route table mapping its endpoints to the agents-chain capability names.
 */
export interface PresetRoute {
  capability: string;
  method: 'POST' | 'GET';
  path: string;
  /** The same route read as another capability when a header is present or a body flag is true. */
  variants?: { capability: string; header?: string; bodyFlag?: string }[];
  /** multipart/form-data bodies: forwarded unmodified, never parsed, so they cannot carry constraints. */
  multipart?: boolean;
}

export interface Preset {
  name: 'openai' | 'anthropic';
  baseUrl: string;
  /** How the provider key is sent upstream. */
  credential: { header: string; prefix: string };
  routes: PresetRoute[];
}

/** Headers an SDK may carry a key in; all are removed before the sidecar sets its own. */
export const CREDENTIAL_HEADERS = ['authorization', 'x-api-key', 'api-key', 'openai-organization', 'openai-project'];

export const PRESETS: Record<Preset['name'], Preset> = {
  openai: {
    name: 'openai',
    baseUrl: 'https://api.openai.com',
    credential: { header: 'authorization', prefix: 'Bearer ' },
    routes: [
      { capability: 'chat.completion', method: 'POST', path: '/v1/chat/completions' },
      { capability: 'embedding', method: 'POST', path: '/v1/embeddings' },
      { capability: 'image.generation', method: 'POST', path: '/v1/images/generations' },
      { capability: 'audio.transcription', method: 'POST', path: '/v1/audio/transcriptions', multipart: true },
      { capability: 'audio.speech', method: 'POST', path: '/v1/audio/speech' },
      { capability: 'moderation', method: 'POST', path: '/v1/moderations' },
      { capability: 'response', method: 'POST', path: '/v1/responses' },
    ],
  },
  anthropic: {
    name: 'anthropic',
    baseUrl: 'https://api.anthropic.com',
    credential: { header: 'x-api-key', prefix: '' },
    routes: [
      {
        capability: 'message',
        method: 'POST',
        path: '/v1/messages',
        // ai.beta.messages.* sends anthropic-beta; ai.messages.stream() sends "stream": true.
        variants: [
          { capability: 'message.beta', header: 'anthropic-beta' },
          { capability: 'message.stream', bodyFlag: 'stream' },
        ],
      },
      { capability: 'message.count_tokens', method: 'POST', path: '/v1/messages/count_tokens' },
      { capability: 'completion', method: 'POST', path: '/v1/complete' },
    ],
  },
};
