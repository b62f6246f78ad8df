// The notebook-style analysis of walkthrough 9 (sessions): an orders CSV
// generated here, the programs a model writes one call at a time, each
// using what the one before left in the interpreter, and the figures they
// must print, computed here from the same rows.

/** ORDERS is how many rows the CSV has; CUSTOMERS how many customers they belong to. */
export const ORDERS = 240;
export const CUSTOMERS = 20;

/** Order is one row of the CSV. */
export interface Order {
  id: number;
  customer: number;
  amount: number;
}

/** orders are the CSV's rows: customer and amount follow from the id, so every figure can be computed here. */
export function orders(): Order[] {
  return Array.from({ length: ORDERS }, (_, i) => ({ id: i + 1, customer: (((i + 1) * 7) % CUSTOMERS) + 1, amount: (((i + 1) * 37) % 101) + 5 }));
}

/** ordersCSV is the file the model sends in with its first call. */
export function ordersCSV(): string {
  return `order_id,customer_id,amount\n${orders()
    .map((o) => `${String(o.id)},${String(o.customer)},${String(o.amount)}`)
    .join('\n')}\n`;
}

/** byCustomer is each customer's total, largest first; the data is chosen so that no two totals tie. */
export function byCustomer(): [number, number][] {
  const totals = new Map<number, number>();
  for (const o of orders()) totals.set(o.customer, (totals.get(o.customer) ?? 0) + o.amount);
  const sorted = [...totals.entries()].sort(([, a], [, b]) => b - a);
  if (new Set(sorted.map(([, v]) => v)).size !== sorted.length) throw new Error('two customers have the same total: the top three would depend on pandas\' order of ties');
  return sorted;
}

/** TOP is how many customers the second call ranks. */
export const TOP = 3;

/** LOAD is the first call: it reads the CSV into df and prints a summary. */
export const LOAD = `import pandas as pd
df = pd.read_csv("data/orders.csv")
print(f"rows {len(df)} customers {df['customer_id'].nunique()} total {df['amount'].sum()}")
`;

/** loadSummary is what LOAD prints. */
export function loadSummary(): string {
  const rows = orders();
  return `rows ${String(rows.length)} customers ${String(new Set(rows.map((o) => o.customer)).size)} total ${String(rows.reduce((n, o) => n + o.amount, 0))}\n`;
}

/**
 * RANK is the second call: it removes the CSV first, so that only the df
 * the first call left in the interpreter can answer, ranks the customers,
 * and ends in a bare expression, whose value a notebook shows.
 */
export const RANK = `import os
os.remove("data/orders.csv")
by_customer = df.groupby("customer_id")["amount"].sum()
top = by_customer.nlargest(${String(TOP)})
[(int(c), int(a)) for c, a in top.items()]
`;

/** rankShown is what RANK shows: the repr of its last expression, on a line. */
export function rankShown(): string {
  return `[${byCustomer()
    .slice(0, TOP)
    .map(([c, a]) => `(${String(c)}, ${String(a)})`)
    .join(', ')}]\n`;
}

/**
 * NAMES is the third call, a code-mode call in the middle of the analysis:
 * it looks each top customer up in the crm MCP server through gatekeeper's
 * bridge, using the top the second call left.
 */
export const NAMES = `import gatekeeper_tools.crm as crm
for c, a in top.items():
    print(crm.lookup(id=int(c))["name"], int(a))
`;

/** namesPrinted is what NAMES prints: mcptest's crm names its records crm-<id>. */
export function namesPrinted(): string {
  return byCustomer()
    .slice(0, TOP)
    .map(([c, a]) => `crm-${String(c)} ${String(a)}\n`)
    .join('');
}

/**
 * PLOT is the fourth call: a bar chart of by_customer, left open; the
 * session's Python saves the figures a run leaves open as PNG files of
 * /workspace, which come back to the model as images. It saves nothing
 * itself.
 */
export const PLOT = `import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
by_customer.sort_index().plot.bar(ax=ax)
ax.set_title("revenue by customer")
print("plotted", len(by_customer))
`;

/** plotPrinted is what PLOT prints. */
export function plotPrinted(): string {
  return `plotted ${String(CUSTOMERS)}\n`;
}

/** The shell's two calls: the first changes directory and exports a variable, the second relies on both. */
export const REPORT_DIR = 'reports/2026';
export const REPORT_TAG = 'q4-sales';
export const SHELL_CD = `mkdir -p ${REPORT_DIR} && cd ${REPORT_DIR} && export REPORT_TAG=${REPORT_TAG}
echo "in $(pwd)"
`;
export const SHELL_AFTER = `pwd
echo "tag=$REPORT_TAG"
`;
