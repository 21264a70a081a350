# syntax=docker/dockerfile:1
# agents-chain sidecar: Node 24 LTS, production dependencies only, non-root, read-only root filesystem.
# Pin by digest in release builds: --build-arg NODE_IMAGE=node:24-bookworm-slim@sha256:...
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npx tsc -p tsconfig.json \
 && chmod 0755 dist/cli/main.js \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
# Under a 256Mi limit V8 sizes its semi-spaces from the limit: 1 MiB, a scavenge per MiB of garbage (a call
# makes ~50 KiB). 4 MiB costs about 5 MiB resident and 17 % less CPU per call (docs/design/benchmarks.md,
# "V8 heap flags"); the old space stays derived from the limit. A pod that sets NODE_OPTIONS replaces this.
ENV NODE_OPTIONS=--max-semi-space-size=4
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY config/policy.schema.json ./config/policy.schema.json
RUN ln -s /app/dist/cli/main.js /usr/local/bin/agents-chain
# iptables-restore/-save (nf_tables) for `agents-chain capture`, run by the agents-chain-capture init
# container in iptables capture mode (it alone gets NET_ADMIN and NET_RAW); the sidecar never runs them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables \
 && rm -rf /var/lib/apt/lists/*
# A numeric user, so Kubernetes can verify runAsNonRoot; it writes only to the spool volume and /tmp.
USER 10001:10001
EXPOSE 8080 9090
# Node is PID 1 and handles SIGTERM and SIGINT itself (graceful drain); no shell in between.
ENTRYPOINT ["agents-chain"]
CMD ["serve"]
