import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Used by `make test` / `make test-node24` (`--config test/vitest.config.ts`); the project root stays the working directory.
export default defineConfig({
  test: {
    // The shared test Redis gets an intact replay window before any file runs (see the file).
    globalSetup: [fileURLToPath(new URL('./support/global-setup.ts', import.meta.url))],
    // `serve` children stop at once on SIGTERM unless a test asks for the drain delay (shutdown.test.ts does).
    env: { AGENTS_CHAIN_DRAIN_DELAY_MS: '0' },
    // A hang guard, not a speed target: integration tests spawn several CLI processes (~0.5-1 s each on two
    // busy cores, beside helm, network namespaces and the Go/PHP backends); 5 s was hit by a 4-process test.
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
