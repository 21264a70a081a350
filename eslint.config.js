// ESLint flat config: typescript-eslint with type information (the project service reads tsconfig.json).
// `make lint` runs it over src/; the formatter (prettier, .prettierrc.json) owns layout, so no style rules here.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/**', 'node_modules/**', '.cache/**', 'coverage/**'] },
  {
    files: ['src/**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Promises: every one is awaited, returned, or explicitly `void`ed; none is handed to a callback that ignores it.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // A switch over a union names every member: a `default` does not excuse a missing one.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: false, requireDefaultForNonUnion: false }],
      // The sidecar validates protocol text (headers, paths, Slack messages): matching control characters is the point.
      'no-control-regex': 'off',
      // In-memory stores implement async interfaces (the Redis ones await): an async method without await is fine.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'separate-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Size: a file reads in one sitting, a function fits on a screen.
      'max-lines': ['error', { max: 300, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true, IIFEs: true }],
    },
  },
  {
    // The request path's phases and endpoint definitions are typed so that nothing needs `!`.
    files: ['src/pipeline/**/*.ts', 'src/endpoints/**/*.ts', 'src/admin/**/*.ts', 'src/app/**/*.ts', 'src/sidecar/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'error' },
  },
);
