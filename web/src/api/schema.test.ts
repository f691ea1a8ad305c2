import { describe, expect, it } from 'vitest';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import committed from './schema.d.ts?raw';

// schema.d.ts is generated from docs/openapi.yaml (`npm run api-types`); the contract changing
// without the console's types following it fails here, before it fails in a browser.
describe('the API types', () => {
  it('are generated from the current docs/openapi.yaml', async () => {
    const ast = await openapiTS(new URL('../../../docs/openapi.yaml', import.meta.url), { emptyObjectsUnknown: true });
    expect(committed, 'docs/openapi.yaml changed: run `npm run api-types` in web/').toBe(COMMENT_HEADER + astToString(ast));
  });
});
