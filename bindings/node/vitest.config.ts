import { defineConfig } from 'vitest/config'

// DSH's contract suites (read in place from ../shared/dsh-contract) import a type from
// `../src/index.ts`, their own package's source: point it at the published package.
export default defineConfig({
  resolve: {
    alias: [{ find: /^\.\.\/src\/index\.ts$/, replacement: '@deepseek-ai/dsh-session-persistence' }],
  },
  server: {
    fs: { strict: false },
  },
  test: {
    include: ['tests/**/*.spec.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
