// Workload 3: CSV processing. A 1,000-row sales dataset, generated here
// from a fixed seed, goes in as a file; run 1 sums it and groups it by
// region with the standard library and writes out/by_region.csv; run 2 (the
// same query) reads that file and the dataset from the workspace, checks
// the grouping again with pandas, groups by product and draws a chart,
// which the model receives as an image. Every expected figure is computed
// here, in integer cents.

import { RUN } from '../lib/agent.js';
import { cents, fileText, imagesReceived, mulberry32, pick, pngSize, ranOk, type Workload } from './lib.js';

const REGIONS = ['north', 'south', 'east', 'west', 'central'] as const;
const PRODUCTS = ['widget', 'gadget', 'gizmo', 'sprocket'] as const;
const ROWS = 1000;

interface Sales {
  csv: string;
  totalCents: number;
  /** region → [orders, revenue in cents], regions sorted. */
  byRegion: [string, number, number][];
  /** product → units, products sorted. */
  unitsByProduct: [string, number][];
}

/** sales generates the dataset and its figures. */
export function sales(seed: number): Sales {
  const rnd = mulberry32(seed);
  const lines = ['order_id,date,region,product,quantity,unit_price'];
  const regions = new Map<string, [number, number]>();
  const units = new Map<string, number>();
  let total = 0;
  for (let i = 1; i <= ROWS; i++) {
    const region = pick(rnd, REGIONS);
    const product = pick(rnd, PRODUCTS);
    const qty = 1 + Math.floor(rnd() * 20);
    const price = 99 + Math.floor(rnd() * 9901); // cents: 0.99 to 99.99
    const day = 1 + Math.floor(rnd() * 28);
    const month = 1 + Math.floor(rnd() * 12);
    lines.push(`${String(10000 + i)},2024-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')},${region},${product},${String(qty)},${cents(price)}`);
    const r = regions.get(region) ?? [0, 0];
    regions.set(region, [r[0] + 1, r[1] + qty * price]);
    units.set(product, (units.get(product) ?? 0) + qty);
    total += qty * price;
  }
  return {
    csv: `${lines.join('\n')}\n`,
    totalCents: total,
    byRegion: [...regions.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([k, [n, c]]) => [k, n, c]),
    unitsByProduct: [...units.entries()].sort(([a], [b]) => a.localeCompare(b)),
  };
}

const SUM_AND_GROUP = `import csv
from collections import defaultdict
from decimal import Decimal
import os

orders, revenue = defaultdict(int), defaultdict(Decimal)
total = Decimal(0)
with open("data/sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    amount = int(r["quantity"]) * Decimal(r["unit_price"])
    orders[r["region"]] += 1
    revenue[r["region"]] += amount
    total += amount
os.makedirs("out", exist_ok=True)
with open("out/by_region.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\\n")
    w.writerow(["region", "orders", "revenue"])
    for region in sorted(orders):
        w.writerow([region, orders[region], f"{revenue[region]:.2f}"])
print("rows", len(rows))
print("total", f"{total:.2f}")
`;

const PANDAS_AND_CHART = `import pandas as pd
import matplotlib.pyplot as plt

sales = pd.read_csv("data/sales.csv")
sales["revenue"] = sales["quantity"] * sales["unit_price"]
mine = sales.groupby("region").agg(orders=("order_id", "count"), revenue=("revenue", "sum")).round(2)
before = pd.read_csv("out/by_region.csv", index_col="region")
print("pandas agrees with run 1:", bool((mine["orders"] == before["orders"]).all() and ((mine["revenue"] - before["revenue"]).abs() < 0.005).all()))
for product, units in sales.groupby("product")["quantity"].sum().sort_index().items():
    print("units", product, units)
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
before["revenue"].plot.bar(ax=ax, color="#4a7")
ax.set_title("Revenue by region")
ax.set_ylabel("revenue")
fig.tight_layout()
fig.savefig("out/revenue_by_region.png")
print("chart out/revenue_by_region.png")
`;

export const csv: Workload = {
  n: 3,
  name: 'CSV processing (1,000 rows)',
  about: [
    'A 1,000-row dataset generated here (seeded) goes in as a file; run 1 sums it and groups it by region (csv, decimal)',
    'into out/by_region.csv; run 2 reads that file back from the workspace, agrees with pandas, groups by product',
    'and draws a chart that reaches the model as an image block (python-data).',
  ],
  async run(c) {
    const data = sales(20241121);
    const expectedByRegion = `region,orders,revenue\n${data.byRegion.map(([r, n, v]) => `${r},${String(n)},${cents(v)}`).join('\n')}\n`;
    c.t.line('data', `${String(ROWS)} rows, ${String(data.csv.length)} bytes; total ${cents(data.totalCents)}; ${data.byRegion.map(([r, n]) => `${r} ${String(n)}`).join(', ')}`);
    const w = await c.world({ policy: { image: 'python-data', timeout: '60s' } });
    const run = await c.agent(w, [
      {
        say: 'the model sends the CSV in and sums and groups it with the standard library',
        call: { name: RUN, input: { language: 'python', code: SUM_AND_GROUP, files: { 'data/sales.csv': data.csv } } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.stdout === `rows ${String(ROWS)}\ntotal ${cents(data.totalCents)}\n`, `it read ${String(ROWS)} rows and the total is ${cents(data.totalCents)}`, JSON.stringify(r?.stdout));
          const got = fileText(r, 'out/by_region.csv');
          t.expect(got === expectedByRegion, 'out/by_region.csv came back with the expected orders and revenue per region', `got:\n${String(got)}\nwant:\n${expectedByRegion}`);
        },
      },
      {
        say: 'in the next run the model reads out/by_region.csv back, checks it with pandas, and draws a chart',
        call: { name: RUN, input: { language: 'python', code: PANDAS_AND_CHART } },
        check: (o, t) => {
          const r = ranOk(t, o);
          const out = r?.stdout ?? '';
          t.expect(out.includes('pandas agrees with run 1: True\n'), 'pandas\' group-by agrees with the file run 1 left in the workspace', out);
          const units = data.unitsByProduct.map(([p, u]) => `units ${p} ${String(u)}\n`).join('');
          t.expect(out.includes(units), `units per product: ${data.unitsByProduct.map(([p, u]) => `${p} ${String(u)}`).join(', ')}`, out);
          const f = r?.files?.find((x) => x.path === 'out/revenue_by_region.png');
          t.expect(f?.media_type === 'image/png' && f.change === 'created' && f.note === 'shown to you as an image', 'the chart is listed as a PNG shown to the model', JSON.stringify(r?.files));
        },
      },
    ], {
      tag: 'w3',
      prompt: 'Sum the sales CSV, group it by region, and chart it.',
      timeoutMs: 240_000,
      finalText: (os) => `The total is ${/total (\S+)/.exec(os[0]?.sandbox?.stdout ?? '')?.[1] ?? '?'}; the chart is above.`,
    });
    const images = imagesReceived(run.fake, run.outcomes[1]?.id ?? '');
    const size = images[0] === undefined ? undefined : pngSize(images[0].data);
    c.t.expect(
      images.length === 1 && images[0]?.mediaType === 'image/png' && size?.width === 400 && size.height === 300,
      'the fake model received the chart as an image block in the tool_result: a 400×300 PNG (4×3 in at 100 dpi)',
      JSON.stringify(images.map((i) => ({ mediaType: i.mediaType, bytes: i.data.length, size: pngSize(i.data) }))),
    );
    return `total ${cents(data.totalCents)}, ${String(data.byRegion.length)} regions, chart ${String(size?.width ?? '?')}×${String(size?.height ?? '?')} seen by the model`;
  },
};
