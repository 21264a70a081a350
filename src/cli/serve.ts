import { parseKeyring } from '../audit/crypto.js';
import { exporterFromSpec } from '../audit/exporters.js';
import { isLogLevel, createLogger } from '../log.js';
import type { Logger } from '../log.js';
import { loadPolicyFile } from '../policy/load.js';
import { watchPolicyFile } from '../policy/watch.js';
import { DEFAULT_DRAIN_DELAY_MS, DEFAULT_MAX_BODY_BYTES, parseHostPort, startSidecar } from '../sidecar/start.js';
import type { Sidecar } from '../sidecar/start.js';
import type { JWK } from 'jose';
import { adminStartupProblem } from '../admin/handler.js';
import type { RedisSettings } from '../redis/connect.js';
import { DEFAULT_MAX_HEADERS } from '../http/headers.js';
import { DEFAULT_MAX_QUERY_PARAMS } from '../routing/query.js';
import { DEFAULT_MAX_IN_FLIGHT } from '../sidecar/limits.js';
import { parseCommand, required, UsageError } from './args.js';
import { readFlagFile, StartupError } from './startup.js';
import { APP_PROBES_ENV } from '../kubernetes/app-probes.js';
import { appProbesFrom, checkAddresses, drainDelay, isLoopback, listenerError, maxBody, positive, wholeMs } from './serve-flags.js';

const USAGE = `Usage: agents-chain serve --policy FILE --upstream URL [options]

Runs the sidecar: agents call --listen, checked calls go to --upstream.

Options (each also read from the environment variable shown):
  --policy FILE        policy YAML                         AGENTS_CHAIN_POLICY
  --upstream URL       the app, e.g. http://127.0.0.1:8081 AGENTS_CHAIN_UPSTREAM
                       (egress mode: the provider's API [the preset's public URL])
  --agent-key FILE     egress: the agent's private JWK      AGENTS_CHAIN_AGENT_KEY_FILE
  --agent ID           egress: the agent's id in the policy AGENTS_CHAIN_AGENT
  --provider-key-file FILE  egress: the provider API key    AGENTS_CHAIN_PROVIDER_KEY (the key)
  --egress-allow-remote  egress: allow a non-loopback --listen (default listen 127.0.0.1:8080)
  --listen HOST:PORT   agent-facing listener [0.0.0.0:8080] AGENTS_CHAIN_LISTEN
  --admin HOST:PORT    operator listener [0.0.0.0:9090]: /healthz, /readyz, /metrics
                       open; everything else needs the admin token
                                                            AGENTS_CHAIN_ADMIN
  --token-header NAME  header carrying the agent token [authorization]
                                                            AGENTS_CHAIN_TOKEN_HEADER
  --max-body BYTES     request body limit [${DEFAULT_MAX_BODY_BYTES}]        AGENTS_CHAIN_MAX_BODY
  --max-headers N      caller headers per request; more get 431 [${DEFAULT_MAX_HEADERS}]
                                                            AGENTS_CHAIN_MAX_HEADERS
  --max-query-params N query pairs per request; more get 400 [${DEFAULT_MAX_QUERY_PARAMS}]
                                                            AGENTS_CHAIN_MAX_QUERY_PARAMS
  --max-in-flight N    calls handled at once; more get 503 overloaded [${DEFAULT_MAX_IN_FLIGHT}]
                                                            AGENTS_CHAIN_MAX_IN_FLIGHT
  --max-event-loop-delay-ms N  while the event loop runs later than this, fewer calls
                       are admitted at once; the rest get 503 overloaded [0: off; 5 suggested]
                                                            AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS
  --replay-max-entries N  in-memory replay window bound, token ids
                       [40 % of the memory limit at 64 B each; 1000000]    AGENTS_CHAIN_REPLAY_MAX_ENTRIES
  --log-level LEVEL    debug | info | warn | error [info]   AGENTS_CHAIN_LOG_LEVEL
  --no-watch           do not watch the policy file (SIGHUP still reloads it)
  --shutdown-grace-ms N  on SIGTERM, how long calls in flight may take [15000];
                       the audit drain (--audit-drain-ms) follows
  --drain-delay-ms N   on SIGTERM, how long /readyz fails while new connections are
                       still accepted, before the grace starts [${DEFAULT_DRAIN_DELAY_MS}; 0: none;
                       SIGINT skips it]                     AGENTS_CHAIN_DRAIN_DELAY_MS
  --admin-token-file FILE  bearer token for /stats, audit entries, agents and approvals
                           on --admin (required when the policy has accessRequests)
                                                            AGENTS_CHAIN_ADMIN_TOKEN
  --admin-insecure-no-token  no admin token: serve all of --admin, approvals included,
                           to anyone who reaches it (local demos only)
                                                            AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN=true
  --audit-key-file FILE    base64 32-byte AES key(s), one per line, current first;
                           turns the encrypted audit trail on   AGENTS_CHAIN_AUDIT_KEY (the key text)
  --audit-spool DIR        spool directory [memory]            AGENTS_CHAIN_AUDIT_SPOOL
  --audit-export SPEC      stdout | file:PATH | http(s)://URL, repeatable
                           (HTTP API key from AGENTS_CHAIN_AUDIT_API_KEY) AGENTS_CHAIN_AUDIT_EXPORT (comma-separated)
  --audit-durability MODE  batched | strict [batched]          AGENTS_CHAIN_AUDIT_DURABILITY
  --audit-spool-max-bytes N  spool bound [268435456]
  --audit-flush-ms N       batch flush interval [1000]
  --audit-max-batch N      entries per batch [2000]
  --audit-drain-ms N       on SIGTERM, how long to keep delivering [10000]
  --redis URL              shared state for replicas (replay window, access requests):
                           redis://[user:pass@]host:port[/db] or rediss:// (TLS)
                                                            AGENTS_CHAIN_REDIS_URL
  --redis-password-file FILE                                AGENTS_CHAIN_REDIS_PASSWORD (the password)
  --redis-sentinels H:P,...  Sentinels instead of --redis, with --redis-sentinel-name NAME [mymaster]
                                                            AGENTS_CHAIN_REDIS_SENTINELS
  --redis-cluster H:P,...  Redis Cluster seed nodes instead of --redis
                                                            AGENTS_CHAIN_REDIS_CLUSTER
  --redis-prefix P         key prefix [agents-chain:{<provider name>}:]; token ids are
                           kept apart from it, under agents-chain-replay:, spent once for all services
                                                            AGENTS_CHAIN_REDIS_PREFIX
  --redis-timeout-ms N     command timeout; slower answers refuse the call [250]
  --metrics-agent-label    also count calls per agent (agents_chain_agent_requests_total)
                                                            AGENTS_CHAIN_METRICS_AGENT_LABEL=true
  --metrics-max-agents N   distinct agents labelled before "_other" [100]
  --admin-public-url URL   the admin listener as operators reach it, for
                           approve/deny links in notifications
                                                            AGENTS_CHAIN_ADMIN_PUBLIC_URL
  AGENTS_CHAIN_APP_PROBES  (environment only, written by injection in iptables capture mode)
                           JSON of the app's probes, answered on --admin at
                           /app-health/<container>/<livez|readyz|startupz>
  -h, --help           show this help
`;

/** serve's flags (parseArgs options); each is described in USAGE. */
const OPTIONS = {
  policy: { type: 'string' },
  upstream: { type: 'string' },
  listen: { type: 'string' },
  admin: { type: 'string' },
  'token-header': { type: 'string' },
  'max-body': { type: 'string' },
  'max-headers': { type: 'string' },
  'max-query-params': { type: 'string' },
  'max-in-flight': { type: 'string' },
  'max-event-loop-delay-ms': { type: 'string' },
  'replay-max-entries': { type: 'string' },
  'log-level': { type: 'string' },
  'admin-token-file': { type: 'string' },
  'admin-public-url': { type: 'string' },
  'admin-insecure-no-token': { type: 'boolean' },
  'audit-key-file': { type: 'string' },
  'audit-spool': { type: 'string' },
  'audit-export': { type: 'string', multiple: true },
  'audit-durability': { type: 'string' },
  'audit-spool-max-bytes': { type: 'string' },
  'audit-flush-ms': { type: 'string' },
  'audit-max-batch': { type: 'string' },
  'audit-drain-ms': { type: 'string' },
  'metrics-agent-label': { type: 'boolean' },
  redis: { type: 'string' },
  'agent-key': { type: 'string' },
  agent: { type: 'string' },
  'provider-key-file': { type: 'string' },
  'no-watch': { type: 'boolean' },
  'egress-allow-remote': { type: 'boolean' },
  'shutdown-grace-ms': { type: 'string' },
  'drain-delay-ms': { type: 'string' },
  'redis-password-file': { type: 'string' },
  'redis-sentinels': { type: 'string' },
  'redis-sentinel-name': { type: 'string' },
  'redis-cluster': { type: 'string' },
  'redis-prefix': { type: 'string' },
  'redis-timeout-ms': { type: 'string' },
  'metrics-max-agents': { type: 'string' },
} as const;

export async function serveCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, OPTIONS, USAGE);
  if (!args) return 0;
  const env = process.env;
  const v = args.values;
  const policyFile = required(v.policy ?? env.AGENTS_CHAIN_POLICY, '--policy', USAGE);
  const upstreamFlag = v.upstream ?? env.AGENTS_CHAIN_UPSTREAM;
  const level = v['log-level'] ?? env.AGENTS_CHAIN_LOG_LEVEL ?? 'info';
  if (!isLogLevel(level)) throw new UsageError(`--log-level must be debug, info, warn or error, got "${level}"`);
  const maxBodyBytes = maxBody(v['max-body'] ?? env.AGENTS_CHAIN_MAX_BODY);
  const log = createLogger(level);
  const tokenFile = v['admin-token-file'];
  const adminToken = (tokenFile ? (await readFlagFile('--admin-token-file', tokenFile)).trim() : env.AGENTS_CHAIN_ADMIN_TOKEN) || undefined;
  const adminInsecureNoToken = v['admin-insecure-no-token'] === true || env.AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN === 'true';

  // An invalid policy (a PolicyError) stops the start: main logs one "startup failed" line listing the issues.
  const policy = await loadPolicyFile(policyFile);

  const adminProblem = adminStartupProblem({ adminToken, insecureNoToken: adminInsecureNoToken, approvals: Boolean(policy.accessRequests) });
  if (adminProblem) throw new UsageError(`refusing to start: ${adminProblem}`);
  const upstream = upstreamFlag ?? policy.egress?.preset?.baseUrl ?? required(undefined, '--upstream', USAGE);
  const egress = policy.egress ? await egressOptions(v as Record<string, string | undefined>, env, policy.egress.preset !== undefined) : undefined;
  // Egress: whoever reaches the listener calls the provider as the agent, so it stays on loopback unless asked.
  const listen = v.listen ?? env.AGENTS_CHAIN_LISTEN ?? (egress ? '127.0.0.1:8080' : '0.0.0.0:8080');
  if (egress && !isLoopback(parseHostPort(listen, '--listen').host) && !v['egress-allow-remote']) {
    throw new UsageError(
      `in egress mode anyone who reaches --listen ${listen} acts as the agent: listen on 127.0.0.1 (the agent's own pod) or add --egress-allow-remote`,
    );
  }
  const audit = await auditOptions(v, env);
  const maxAgents = positive(v['metrics-max-agents'], '--metrics-max-agents') ?? 100;
  const perAgent = v['metrics-agent-label'] || env.AGENTS_CHAIN_METRICS_AGENT_LABEL === 'true' ? { maxAgents } : undefined;
  const listeners = { '--listen': listen, '--admin': v.admin ?? env.AGENTS_CHAIN_ADMIN ?? '0.0.0.0:9090' };
  checkAddresses(upstream, listeners, { upstream: v.upstream === undefined, listen: v.listen === undefined, admin: v.admin === undefined });
  const start = async (): Promise<Sidecar> =>
    startSidecar({
      audit,
      policy,
      upstream,
      listen,
      admin: listeners['--admin'],
      tokenHeader: v['token-header'] ?? env.AGENTS_CHAIN_TOKEN_HEADER,
      maxBodyBytes,
      maxHeaders: positive(v['max-headers'] ?? env.AGENTS_CHAIN_MAX_HEADERS, '--max-headers'),
      maxQueryParams: positive(v['max-query-params'] ?? env.AGENTS_CHAIN_MAX_QUERY_PARAMS, '--max-query-params'),
      maxInFlight: positive(v['max-in-flight'] ?? env.AGENTS_CHAIN_MAX_IN_FLIGHT, '--max-in-flight'),
      maxEventLoopDelayMs: wholeMs(v['max-event-loop-delay-ms'] ?? env.AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS, '--max-event-loop-delay-ms'),
      replayMaxEntries: positive(v['replay-max-entries'] ?? env.AGENTS_CHAIN_REPLAY_MAX_ENTRIES, '--replay-max-entries'),
      log,
      adminToken,
      adminInsecureNoToken,
      adminPublicUrl: v['admin-public-url'] ?? env.AGENTS_CHAIN_ADMIN_PUBLIC_URL,
      metrics: { perAgent },
      egress,
      shutdownGraceMs: positive(v['shutdown-grace-ms'], '--shutdown-grace-ms'),
      drainDelayMs: drainDelay(v['drain-delay-ms'] ?? env.AGENTS_CHAIN_DRAIN_DELAY_MS),
      redis: await redisOptions(v as Record<string, string | undefined>, env, policy.provider.name),
      appProbes: appProbesFrom(env[APP_PROBES_ENV]),
    }).catch((err: unknown) => {
      throw listenerError(err, listeners);
    });
  await runUntilSignalled(start, v['no-watch'] ? undefined : policyFile, log);
  return 0;
}

/**
 * Starts the sidecar with the signal handlers in place first: startSidecar logs "sidecar listening" before it
 * returns, and a SIGTERM right after that line must drain, not kill the process; one before the sidecar is up
 * just exits. `on`, not `once`: a second SIGTERM (a shell, tini, shareProcessNamespace) must not kill a drain
 * under way. With `watchFile`, the policy file is watched (ConfigMap symlink swaps included); SIGHUP always re-reads it.
 */
async function runUntilSignalled(start: () => Promise<Sidecar>, watchFile: string | undefined, log: Logger): Promise<void> {
  const control: { stop?: (signal: string) => void; reload?: () => void } = {};
  process.on('SIGTERM', () => (control.stop ? control.stop('SIGTERM') : process.exit(0)));
  process.on('SIGINT', () => (control.stop ? control.stop('SIGINT') : process.exit(0)));
  process.on('SIGHUP', () => control.reload?.());
  const sidecar = await start();
  const reload = (): void => void sidecar.reloadPolicy();
  control.reload = reload;
  const watcher = watchFile === undefined ? undefined : watchPolicyFile(watchFile, reload);
  control.stop = (signal: string): void => {
    log.info('shutting down', { signal });
    watcher?.close();
    // SIGTERM (kubelet, docker stop) drains with the delay; SIGINT (Ctrl-C) stops at once, and ends a delay under way.
    void sidecar.close(signal === 'SIGINT' ? { drainDelayMs: 0 } : undefined).then(() => process.exit(0));
  };
}

async function auditOptions(v: Record<string, string | string[] | boolean | undefined>, env: NodeJS.ProcessEnv) {
  const keyFile = v['audit-key-file'] as string | undefined;
  const keyText = keyFile ? await readFlagFile('--audit-key-file', keyFile) : env.AGENTS_CHAIN_AUDIT_KEY;
  if (!keyText) return undefined;
  const specs = (v['audit-export'] as string[] | undefined) ?? (env.AGENTS_CHAIN_AUDIT_EXPORT ? env.AGENTS_CHAIN_AUDIT_EXPORT.split(',') : []);
  const durability = (v['audit-durability'] as string | undefined) ?? env.AGENTS_CHAIN_AUDIT_DURABILITY ?? 'batched';
  if (durability !== 'batched' && durability !== 'strict') throw new UsageError('--audit-durability must be batched or strict');
  const num = (flag: string): number | undefined => positive(v[flag] as string | undefined, `--${flag}`);
  if (specs.length === 0) throw new UsageError('the audit trail needs somewhere to deliver batches: give --audit-export (stdout, file:PATH or a URL)');
  return {
    keyring: parseKeyring(keyText),
    exporters: specs.map((s) => exporterFromSpec(s.trim(), env.AGENTS_CHAIN_AUDIT_API_KEY)),
    spoolDir: (v['audit-spool'] as string | undefined) ?? env.AGENTS_CHAIN_AUDIT_SPOOL,
    spoolMaxBytes: num('audit-spool-max-bytes'),
    flushIntervalMs: num('audit-flush-ms'),
    maxBatch: num('audit-max-batch'),
    drainMs: num('audit-drain-ms'),
    durability: durability === 'strict' ? ('strict' as const) : ('batched' as const),
  };
}

function hostPorts(text: string, flag: string): { host: string; port: number }[] {
  return text
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(t);
      if (!m) throw new UsageError(`${flag} takes HOST:PORT[,HOST:PORT...], got "${t}"`);
      return { host: m[1] ?? m[2]!, port: Number(m[3]) };
    });
}

async function redisOptions(v: Record<string, string | undefined>, env: NodeJS.ProcessEnv, service: string): Promise<RedisSettings | undefined> {
  const url = v.redis ?? env.AGENTS_CHAIN_REDIS_URL;
  const sentinels = v['redis-sentinels'] ?? env.AGENTS_CHAIN_REDIS_SENTINELS;
  const cluster = v['redis-cluster'] ?? env.AGENTS_CHAIN_REDIS_CLUSTER;
  if ([url, sentinels, cluster].filter(Boolean).length > 1) throw new UsageError('give one of --redis, --redis-sentinels, --redis-cluster');
  if (!url && !sentinels && !cluster) return undefined;
  if (url && !/^rediss?:\/\//.test(url)) throw new UsageError(`--redis must be a redis:// or rediss:// URL, got "${url}"`);
  const passwordFile = v['redis-password-file'];
  const password = passwordFile ? (await readFlagFile('--redis-password-file', passwordFile)).trim() : env.AGENTS_CHAIN_REDIS_PASSWORD;
  const timeout = positive(v['redis-timeout-ms'], '--redis-timeout-ms') ?? 250;
  return {
    url,
    sentinels: sentinels ? hostPorts(sentinels, '--redis-sentinels') : undefined,
    sentinelName: v['redis-sentinel-name'] ?? env.AGENTS_CHAIN_REDIS_SENTINEL_NAME,
    cluster: cluster ? hostPorts(cluster, '--redis-cluster') : undefined,
    password: password || undefined,
    // The {hash tag} keeps one service's keys in one Cluster slot, so its multi-key commands work there.
    prefix: v['redis-prefix'] ?? env.AGENTS_CHAIN_REDIS_PREFIX ?? `agents-chain:{${service}}:`,
    commandTimeoutMs: timeout,
  };
}

async function egressOptions(v: Record<string, string | undefined>, env: NodeJS.ProcessEnv, providerKeyRequired: boolean) {
  const keyFile = v['agent-key'] ?? env.AGENTS_CHAIN_AGENT_KEY_FILE;
  const agentId = v.agent ?? env.AGENTS_CHAIN_AGENT;
  if (!keyFile || !agentId) throw new UsageError('egress mode needs --agent-key FILE and --agent ID (the agent whose calls this sidecar signs)');
  const providerFile = v['provider-key-file'];
  const providerKey = providerFile ? (await readFlagFile('--provider-key-file', providerFile)).trim() : env.AGENTS_CHAIN_PROVIDER_KEY;
  // A remote MCP server may need no key (or take the agent's own headers); a model provider always does.
  if (!providerKey && providerKeyRequired) throw new UsageError('egress mode needs the provider API key: AGENTS_CHAIN_PROVIDER_KEY or --provider-key-file');
  const keyText = await readFlagFile('--agent-key', keyFile);
  let agentKey: JWK;
  try {
    agentKey = JSON.parse(keyText) as JWK;
  } catch (err) {
    throw new StartupError(`--agent-key ${keyFile}: not a JSON private JWK (${(err as Error).message})`);
  }
  return { agentId, agentKey, providerKey };
}
