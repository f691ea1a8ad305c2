import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'src/api/schema.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      eqeqeq: 'error',
      // The console reports to people on screen; the browser console is for real faults.
      'no-console': ['error', { allow: ['warn', 'error'] }],
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['tests/**/*.mjs'],
    // Node runs these files and reports on stdout; the callbacks given to page.evaluate run in
    // the browser.
    languageOptions: {
      globals: Object.fromEntries(
        ['process', 'console', 'setTimeout', 'clearTimeout', 'URL', 'fetch', 'window', 'document', 'performance', 'sessionStorage', 'localStorage', 'navigator'].map((g) => [g, 'readonly']),
      ),
    },
    rules: { 'no-console': 'off' },
  },
);
