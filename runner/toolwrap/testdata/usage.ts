// A program using the generated types, as a sandboxed program would; the
// types test typechecks it with tsc. Each @ts-expect-error line is a
// mistake the types must catch: were they `any`, tsc would fail on the
// unused directive.
import { count, get_records, lookup, update, type GetRecordsOutput } from 'gatekeeper-tools/records';
import * as evil from 'gatekeeper-tools/evil';
import { call, servers, ToolCallDenied, ToolCallError, type FileItem } from 'gatekeeper-tools';

declare const console: { log(...args: unknown[]): void };

export async function main(): Promise<void> {
  const page: GetRecordsOutput = await get_records({ page: 1, size: 10, order: 'asc' });
  const next: number | null = page.next_page;
  const name: string = page.records[0].name;
  const balance: number | undefined = page.records[0].balance;
  const looked = await lookup({ id: 'c-7' });
  // A tool with no output schema: its text, or its items when it returned files or links.
  const text: string = typeof looked === 'string' ? looked : looked.filter((i) => typeof i === 'string').join('\n');
  const files: FileItem[] = typeof looked === 'string' ? [] : looked.filter((i): i is FileItem => typeof i !== 'string' && i.type === 'file');
  const where: string | undefined = files[0]?.path;
  const size: number | undefined = files[0]?.size;
  const n: number = await count();
  const updated: boolean = (await update({ record: { id: 'c-7', fields: { name: 'Ada' } }, priority: 'high', limit: 3 })).updated;
  const t = await evil.a_b({ 'not an identifier': 'x', from: 1, '9lives': '*/ x /*', __proto__: 'p' });
  const ctor: object = await evil.constructor_();
  await evil.Any_({ anything: [1, 2] });

  // @ts-expect-error page is required
  await get_records({ size: 10 });
  // @ts-expect-error order is one of its enum's values
  await get_records({ page: 1, order: 'sideways' });
  // @ts-expect-error page is a number
  await get_records({ page: '1' });
  // @ts-expect-error a field's value is a string
  await update({ record: { id: 'c-7', fields: { name: 1 } } });
  // @ts-expect-error limit is the constant 3
  await update({ record: { id: 'c-7', fields: {} }, limit: 4 });
  // @ts-expect-error lookup resolves to its text or its items
  const wrong: number = await lookup({ id: 'c-7' });
  // @ts-expect-error it may be items, not text
  const notOnlyText: string = await lookup({ id: 'c-7' });
  // @ts-expect-error the required property's name is not an identifier
  await evil.a_b({ not_an_identifier: 'x' });

  const result = await call('records', 'lookup', { id: 'c-7' });
  const kind: string = result.content[0].type;
  try {
    await call('records', 'x', {});
  } catch (e) {
    if (e instanceof ToolCallDenied) {
      const rule: string = e.rule;
      console.log(rule);
    } else if (e instanceof ToolCallError) {
      const k: string = e.kind;
      console.log(k, e.message, e.result?.isError);
    }
  }
  const tools: { [tool: string]: string } = servers()['records'].tools;
  console.log(next, name, balance, text, where, size, n, updated, t, ctor, wrong, notOnlyText, kind, tools);
}
