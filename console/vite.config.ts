// The console is served by cellad at /console/ (docs/console.md): every asset under
// /console/assets/ with a content hash in its name (cellad caches those for good), no
// inline script (the page's CSP allows scripts from 'self' only), nothing from the network.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    sourcemap: false,
    target: 'es2022',
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 2048,
    assetsInlineLimit: 0,
  },
});
