import { defineConfig } from 'vite';

// Preact through esbuild's automatic JSX runtime: no Vite plugin needed.
export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    target: 'es2022',
    // Everything the console loads is in these files: no CDN, no font or script at run time.
    assetsInlineLimit: 0,
    reportCompressedSize: true,
  },
  test: { include: ['src/**/*.test.ts'], environment: 'node' },
});
