// Workload 4: a document generator. Templates (a base and an invoice that
// extends it), a generator script and customer data (made here) go in as
// files; jinja2 renders one invoice per customer, and the invoices come
// back as files, each checked against totals computed here.

import { RUN } from '../lib/agent.js';
import { cents, mulberry32, pick, ranOk, type Workload } from './lib.js';

interface Item {
  sku: string;
  desc: string;
  qty: number;
  unit_cents: number;
}
interface Customer {
  id: string;
  name: string;
  items: Item[];
}

const NAMES = ['Ada Lovelace Ltd', 'Grace Hopper & Co', 'Edsger Dijkstra BV', 'Barbara Liskov Inc'];
const GOODS: [string, string][] = [['BRK-10', 'brackets, box of 10'], ['CBL-2M', 'cable, 2 m'], ['SNS-T1', 'temperature sensor'], ['PWR-12', '12 V power supply'], ['MNT-S', 'mounting kit']];

function customers(seed: number): Customer[] {
  const rnd = mulberry32(seed);
  return NAMES.map((name, i) => ({
    id: `C${String(101 + i)}`,
    name,
    items: Array.from({ length: 2 + Math.floor(rnd() * 3) }, () => {
      const [sku, desc] = pick(rnd, GOODS);
      return { sku, desc, qty: 1 + Math.floor(rnd() * 9), unit_cents: 250 + Math.floor(rnd() * 20000) };
    }),
  }));
}

const RULE = '='.repeat(40);
const TEMPLATES: Record<string, string> = {
  'templates/base.txt.j2': `{% block header %}{% endblock %}

${RULE}
{% block body %}{% endblock %}
${'-'.repeat(40)}
Thank you for your business.
`,
  'templates/invoice.txt.j2': `{% extends "base.txt.j2" %}
{% block header %}ACME Parts · INVOICE {{ customer.id }}{% endblock %}
{% block body %}
Bill to: {{ customer.name }}
{% for item in customer["items"] %}
{{ "%-8s"|format(item.sku) }} {{ "%-22s"|format(item.desc) }} {{ "%3d"|format(item.qty) }} x {{ item.unit_cents|money }} = {{ (item.qty * item.unit_cents)|money }}
{% endfor %}
Lines: {{ customer["items"]|length }}
TOTAL: {{ customer["items"]|sum(attribute="line_cents")|money }}
{% endblock %}
`,
  'gen.py': `"""Render one invoice per customer from templates/invoice.txt.j2."""
import json
import os
import sys

from jinja2 import Environment, FileSystemLoader, StrictUndefined

env = Environment(loader=FileSystemLoader("templates"), undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
env.filters["money"] = lambda c: f"{c // 100}.{c % 100:02d}"
template = env.get_template("invoice.txt.j2")
customers = json.load(open(sys.argv[1]))
os.makedirs("out", exist_ok=True)
for c in customers:
    for item in c["items"]:
        item["line_cents"] = item["qty"] * item["unit_cents"]
    with open(f"out/invoice-{c['id']}.txt", "w") as f:
        f.write(template.render(customer=c))
print("rendered", len(customers))
`,
};

export const docgen: Workload = {
  n: 4,
  name: 'document generator (jinja2)',
  about: [
    'Templates (base + invoice extending it), a generator and customer data go in as files; jinja2 renders one',
    'invoice per customer; the invoices come back as files, checked line by line against totals computed here (python-data).',
  ],
  async run(c) {
    const data = customers(7);
    const w = await c.world({ policy: { image: 'python-data', timeout: '60s' } });
    let totals = '';
    await c.agent(w, [
      {
        say: 'the model renders the invoices with its generator',
        call: { name: RUN, input: { language: 'sh', code: 'python gen.py data/customers.json', files: { ...TEMPLATES, 'data/customers.json': JSON.stringify(data, null, 2) } } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.stdout === `rendered ${String(data.length)}\n`, `rendered ${String(data.length)}`, JSON.stringify(r?.stdout));
          const back = (r?.files ?? []).filter((f) => f.path.startsWith('out/'));
          const names = data.map((d) => `out/invoice-${d.id}.txt`);
          t.expect(JSON.stringify(back.map((f) => f.path)) === JSON.stringify(names), `the ${String(names.length)} invoices came back, and nothing else under out/`, JSON.stringify(back.map((f) => f.path)));
          for (const d of data) {
            const text = back.find((f) => f.path === `out/invoice-${d.id}.txt`)?.text ?? '';
            const total = d.items.reduce((s, i) => s + i.qty * i.unit_cents, 0);
            const lines = d.items.map((i) => `${i.sku.padEnd(8)} ${i.desc.padEnd(22)} ${String(i.qty).padStart(3)} x ${cents(i.unit_cents)} = ${cents(i.qty * i.unit_cents)}`);
            const want = [`ACME Parts · INVOICE ${d.id}`, RULE, `Bill to: ${d.name}`, ...lines, `Lines: ${String(d.items.length)}`, `TOTAL: ${cents(total)}`, '-'.repeat(40), 'Thank you for your business.'].join('\n');
            t.expect(text === want, `invoice ${d.id} (${d.name}): ${String(d.items.length)} lines, TOTAL ${cents(total)}, exactly as expected`, `got:\n${text}\nwant:\n${want}`);
            totals += `${totals === '' ? '' : ', '}${cents(total)}`;
          }
        },
      },
    ], { tag: 'w4', prompt: 'Generate an invoice per customer from the templates.', timeoutMs: 180_000 });
    return `${String(data.length)} invoices, totals ${totals}`;
  },
};
