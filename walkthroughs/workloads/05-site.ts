// Workload 5: a static site generator. Markdown pages with a little front
// matter, a layout and a build script go in; the build writes one HTML
// page per Markdown file and an index; the HTML comes back as files and is
// checked here. Run 2 of the same query adds a page and builds again: only
// the new page and the index come back (the other pages were written with
// the same bytes, so the run did not change them).

import { RUN } from '../lib/agent.js';
import { ranOk, type Workload } from './lib.js';

interface Page {
  slug: string;
  title: string;
  order: number;
  md: string;
  /** Fragments the page's HTML must contain. */
  html: string[];
}

const PAGES: Page[] = [
  {
    slug: 'install',
    title: 'Installing',
    order: 2,
    md: '# Installing\n\nRun the installer, then check it:\n\n```python\nimport calc\nprint(calc.evaluate("6*7"))\n```\n\nSee [the guide](guide.html).\n',
    html: ['<h1>Installing</h1>', '<pre><code class="language-python">import calc\nprint(calc.evaluate(&quot;6*7&quot;))\n</code></pre>', '<a href="guide.html">the guide</a>'],
  },
  {
    slug: 'guide',
    title: 'User guide',
    order: 3,
    md: '# User guide\n\n| operator | meaning |\n|---|---|\n| `+` | add |\n| `/` | divide |\n\n* exact fractions\n* no floats\n',
    html: ['<h1>User guide</h1>', '<table>', '<td><code>+</code></td>\n<td>add</td>', '<li>exact fractions</li>\n<li>no floats</li>'],
  },
  {
    slug: 'about',
    title: 'About & credits',
    order: 1,
    md: '# About\n\nMade with *care* and **Python**.\n',
    html: ['<h1>About</h1>', '<p>Made with <em>care</em> and <strong>Python</strong>.</p>'],
  },
];

const LATER: Page = {
  slug: 'changelog',
  title: 'Changelog',
  order: 4,
  md: '# Changelog\n\n## 1.2.0\n\n- fractions everywhere\n',
  html: ['<h1>Changelog</h1>', '<h2>1.2.0</h2>', '<li>fractions everywhere</li>'],
};

const source = (p: Page): string => `title: ${p.title}\norder: ${String(p.order)}\n---\n${p.md}`;

const BUILD = `"""Build site/: one HTML page per content/*.md, and an index ordered by 'order'."""
import glob
import html
import os
from string import Template

import markdown

layout = Template(open("layout.html").read())
pages = []
for path in sorted(glob.glob("content/*.md")):
    head, _, body = open(path).read().partition("\\n---\\n")
    meta = dict(line.split(": ", 1) for line in head.splitlines())
    slug = os.path.basename(path)[:-3]
    pages.append((int(meta["order"]), slug, meta["title"]))
    content = markdown.markdown(body, extensions=["fenced_code", "tables"])
    os.makedirs("site", exist_ok=True)
    with open(f"site/{slug}.html", "w") as f:
        f.write(layout.substitute(title=html.escape(meta["title"]), content=content))
links = "\\n".join(f'<li><a href="{slug}.html">{html.escape(title)}</a></li>' for _, slug, title in sorted(pages))
with open("site/index.html", "w") as f:
    f.write(layout.substitute(title="Home", content=f"<ul>\\n{links}\\n</ul>"))
print("pages", len(pages))
`;

const LAYOUT = '<!doctype html>\n<html><head><meta charset="utf-8"><title>$title</title></head>\n<body>\n$content\n</body></html>\n';

const escape = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** indexLinks is the index's list as the build must write it. */
const indexLinks = (pages: Page[]): string =>
  `<ul>\n${[...pages].sort((a, b) => a.order - b.order).map((p) => `<li><a href="${p.slug}.html">${escape(p.title)}</a></li>`).join('\n')}\n</ul>`;

export const site: Workload = {
  n: 5,
  name: 'static site generator',
  about: [
    'Markdown pages, a layout and a build script go in; run 1 builds one HTML page per page and an index, which come',
    'back as files and are checked; run 2 adds a page and rebuilds: only the new page and the index come back (python-data).',
  ],
  async run(c) {
    const w = await c.world({ policy: { image: 'python-data', timeout: '60s' } });
    const files: Record<string, string> = { 'build.py': BUILD, 'layout.html': LAYOUT };
    for (const p of PAGES) files[`content/${p.slug}.md`] = source(p);
    const checkPage = (html: string | undefined, p: Page): boolean =>
      html !== undefined && html.startsWith('<!doctype html>') && html.includes(`<title>${escape(p.title)}</title>`) && p.html.every((h) => html.includes(h));
    let pages = 0;
    await c.agent(w, [
      {
        say: 'the model builds the site',
        call: { name: RUN, input: { language: 'sh', code: 'python3 build.py', files } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.stdout === `pages ${String(PAGES.length)}\n`, `pages ${String(PAGES.length)}`, JSON.stringify(r?.stdout));
          const back = new Map((r?.files ?? []).map((f) => [f.path, f]));
          const want = ['site/about.html', 'site/guide.html', 'site/index.html', 'site/install.html'];
          t.expect(JSON.stringify([...back.keys()]) === JSON.stringify(want), `the HTML came back, and only it: ${want.join(', ')}`, JSON.stringify([...back.keys()]));
          for (const p of PAGES) {
            const f = back.get(`site/${p.slug}.html`);
            t.expect(f?.media_type === 'text/html; charset=utf-8' && checkPage(f.text, p), `site/${p.slug}.html is ${p.title}'s HTML: ${p.html.length} fragments, title escaped`, f?.text);
          }
          const index = back.get('site/index.html')?.text ?? '';
          t.expect(index.includes(indexLinks(PAGES)), 'the index links every page, ordered by their order field', index);
          pages = back.size;
        },
      },
      {
        say: 'the model adds a changelog page and builds again',
        call: { name: RUN, input: { language: 'sh', code: 'python3 build.py', files: { [`content/${LATER.slug}.md`]: source(LATER) } } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.stdout === `pages ${String(PAGES.length + 1)}\n`, `pages ${String(PAGES.length + 1)}: the build found run 1's pages in the workspace`, JSON.stringify(r?.stdout));
          const back = (r?.files ?? []).map((f) => `${f.path} ${f.change}`);
          t.expect(
            JSON.stringify(back) === JSON.stringify(['site/changelog.html created', 'site/index.html modified']),
            'only the new page (created) and the index (modified) came back; the other pages have the same bytes',
            JSON.stringify(back),
          );
          t.expect(checkPage(r?.files?.find((f) => f.path === 'site/changelog.html')?.text, LATER), 'site/changelog.html is the changelog\'s HTML');
          t.expect((r?.files?.find((f) => f.path === 'site/index.html')?.text ?? '').includes(indexLinks([...PAGES, LATER])), 'the index now links the changelog last');
          pages += 1;
        },
      },
    ], { tag: 'w5', prompt: 'Build the static site from content/.', timeoutMs: 180_000 });
    return `${String(pages)} HTML files (${String(PAGES.length + 1)} pages + index) back and checked`;
  },
};
