// Reads the SDK's own type declarations, so that a test can pin a list in
// the client to a type of the SDK version installed.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/**
 * declaredFields returns the property names of a type alias declared as a
 * type literal in the SDK's sdk.d.ts, or undefined when there is none.
 */
export function declaredFields(typeName: string): string[] | undefined {
  const dts = join(dirname(createRequire(import.meta.url).resolve('@anthropic-ai/claude-agent-sdk')), 'sdk.d.ts');
  const sf = ts.createSourceFile(dts, readFileSync(dts, 'utf8'), ts.ScriptTarget.Latest, true);
  let declared: string[] | undefined;
  sf.forEachChild((n) => {
    if (ts.isTypeAliasDeclaration(n) && n.name.text === typeName && ts.isTypeLiteralNode(n.type)) {
      declared = n.type.members.filter(ts.isPropertySignature).map((p) => p.name.getText(sf));
    }
  });
  return declared;
}
