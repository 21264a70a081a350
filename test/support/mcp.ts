import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/**
 * A real MCP server (the official SDK's McpServer + StreamableHTTPServerTransport on plain node:http)
 * and a real SDK client, for tests that put the sidecar between the two.
 * Notes on what the SDK does on the wire: /work/notes/sdk.md.
 */

/** One JSON-RPC message as it arrived, recorded before the SDK saw it. `method` is '' for a client's response. */
export interface ReceivedMessage {
  method: string;
  params: unknown;
  id?: string | number;
  headers: IncomingHttpHeaders;
}

/** One HTTP request to /mcp (GET and DELETE carry no message, so `received` alone misses them). */
export interface ReceivedRequest {
  method: string;
  headers: IncomingHttpHeaders;
}

export interface McpServerOptions {
  responseMode: 'json' | 'sse';
  /** New server and transport per request, no session id; GET and DELETE answer 405 (the SDK's stateless example). */
  stateless?: boolean;
  /** Adds `invoice_total` {id} with an outputSchema {total: number}, answering structuredContent {total: 120}. */
  outputSchemaTool?: boolean;
}

export interface RunningMcpServer {
  url: string;
  origin: string;
  port: number;
  received: ReceivedMessage[];
  requests: ReceivedRequest[];
  close(): Promise<void>;
}

function buildServer(opts: McpServerOptions): McpServer {
  const server = new McpServer({ name: 'billing-test', version: '1.0.0' });
  const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
  server.registerTool('refund', { description: 'Refund an invoice', inputSchema: { invoice: z.string(), amount: z.number() } }, async ({ invoice, amount }) =>
    text(`refunded ${amount} on ${invoice}`),
  );
  server.registerTool('lookup_invoice', { description: 'Look an invoice up', inputSchema: { id: z.string() } }, async ({ id }) =>
    text(`invoice ${id}: 120 EUR, open`),
  );
  server.registerTool('delete_everything', { description: 'Delete all data', inputSchema: {} }, async () => text('deleted'));
  server.registerTool(
    'transfer',
    { description: 'Transfer money', inputSchema: { amount: z.number(), account: z.object({ country: z.string() }) } },
    async ({ amount, account }) => text(`transferred ${amount} to ${account.country}`),
  );
  if (opts.outputSchemaTool) {
    server.registerTool(
      'invoice_total',
      { description: 'Total of an invoice', inputSchema: { id: z.string() }, outputSchema: { total: z.number() } },
      async () => ({ ...text('{"total":120}'), structuredContent: { total: 120 } }),
    );
  }
  server.registerPrompt('summarize', { description: 'Summarize an invoice', argsSchema: { invoice: z.string() } }, ({ invoice }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Summarize invoice ${invoice}` } }],
  }));
  server.registerResource('invoice', new ResourceTemplate('invoice://{id}', { list: undefined }), { mimeType: 'text/plain' }, async (uri, vars) => ({
    contents: [{ uri: uri.href, mimeType: 'text/plain', text: `invoice ${String(vars.id)}` }],
  }));
  return server;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function rpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function record(into: ReceivedMessage[], body: unknown, headers: IncomingHttpHeaders): void {
  for (const msg of Array.isArray(body) ? body : [body]) {
    const m = (msg ?? {}) as { method?: unknown; params?: unknown; id?: string | number };
    into.push({ method: typeof m.method === 'string' ? m.method : '', params: m.params, ...(m.id !== undefined ? { id: m.id } : {}), headers: { ...headers } });
  }
}

/** Starts the server on 127.0.0.1:0; the endpoint is /mcp. */
export async function startMcpServer(opts: McpServerOptions): Promise<RunningMcpServer> {
  const received: ReceivedMessage[] = [];
  const requests: ReceivedRequest[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const open = new Set<{ close(): Promise<void> }>();
  const enableJsonResponse = opts.responseMode === 'json';

  const statefulTransport = async (): Promise<StreamableHTTPServerTransport> => {
    const server = buildServer(opts);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse,
      onsessioninitialized: (sid) => void sessions.set(sid, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
      open.delete(server);
    };
    open.add(server);
    await server.connect(transport);
    return transport;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return rpcError(res, 404, -32000, 'Not found');
    requests.push({ method: req.method ?? '', headers: { ...req.headers } });
    let body: unknown;
    if (req.method === 'POST') {
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        return rpcError(res, 400, -32700, 'Parse error: Invalid JSON');
      }
      record(received, body, req.headers);
    }
    if (opts.stateless) {
      if (req.method !== 'POST') return rpcError(res, 405, -32000, 'Method not allowed.', { allow: 'POST' });
      const server = buildServer(opts);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse });
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      return transport.handleRequest(req, res, body);
    }
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (typeof sid === 'string' && !transport) return rpcError(res, 404, -32001, 'Session not found');
    if (!transport && req.method === 'POST' && isInitializeRequest(body)) transport = await statefulTransport();
    // The SDK's own example answers so; a transport would say 'Server not initialized'.
    if (!transport) return rpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
    return transport.handleRequest(req, res, body);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) rpcError(res, 500, -32603, String(err));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const port = (http.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/mcp`,
    origin,
    port,
    received,
    requests,
    async close() {
      await Promise.all([...open].map((s) => s.close().catch(() => undefined)));
      // Open SSE streams (the client's GET) would keep close() waiting forever.
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

export interface ConnectedMcpClient {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** client.close(): aborts open streams; sends no DELETE (call transport.terminateSession() for that). */
  close(): Promise<void>;
}

/** Connects (initialize + notifications/initialized; then the SDK opens its GET stream in the background). */
export async function connectMcpClient(url: string, opts: { fetch?: typeof fetch; requestInit?: RequestInit } = {}): Promise<ConnectedMcpClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
    ...(opts.requestInit ? { requestInit: opts.requestInit } : {}),
    // A closed client's GET stream ends; the SDK would reopen it a second later (and hold a stream open through the sidecar's shutdown).
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
  });
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, close: () => client.close() };
}
