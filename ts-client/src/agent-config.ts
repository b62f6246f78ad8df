// The agent-configuration boundary, client side. Claude Code loads settings
// (with command hooks), MCP servers, plugins, skills, agents and
// instructions (CLAUDE.md and its @imports) from files, and files in the
// workspace are files the model can write with tools gatekeeper allows.
// Every SDK option is classified here, once: passed on, checked, composed
// with gatekeeper's own, or refused unless the caller sets
// `trustAgentConfiguration`. SECURITY.md ("Agent configuration boundary
// (client)") says why each class is what it is.

import { delimiter, isAbsolute, relative, resolve as resolvePath, sep } from 'node:path';
import type { AgentDefinition, Options, PermissionUpdate, Settings } from '@anthropic-ai/claude-agent-sdk';
import { GatekeeperConfigError } from './config.js';
import { RUN_TOOL, SANDBOX_SERVER } from './protocol.js';

/** What a check needs besides the value. */
export interface CheckContext {
  /** The caller set `trustAgentConfiguration: true`. */
  trust: boolean;
  /** Where the model may write: Claude Code's cwd, the additional directories and the policy's workspace_root once known, resolved. */
  dirs: readonly string[];
  /** Prompts are delivered as written (verbatimPrompts, on unless the caller turns it off). */
  verbatim: boolean;
}

type Check<K extends keyof Options> = (value: NonNullable<Options[K]>, ctx: CheckContext) => void;

/**
 * How gatekeeper treats one SDK option: `pass` (it carries no agent
 * configuration), `composed` (gatekeeper puts its own value in and keeps
 * the caller's, see buildOptions), or a check that throws
 * GatekeeperConfigError for a value it refuses.
 */
type Rule<K extends keyof Options> = 'pass' | 'composed' | Check<K>;

const UNLOCK = 'set trustAgentConfiguration: true to accept what that costs (SECURITY.md, "Agent configuration boundary (client)")';

/** refuse throws for a value no opt-in makes acceptable. */
function refuse(where: string, why: string): never {
  throw new GatekeeperConfigError(`gatekeeper refuses ${where}: ${why}`);
}

/** refuseUntrusted throws unless the caller trusts agent configuration. */
function refuseUntrusted(trust: boolean, where: string, why: string): void {
  if (!trust) throw new GatekeeperConfigError(`gatekeeper refuses ${where}: ${why}; ${UNLOCK}`);
}

/** trusted is the rule of an option whose only use is to bring agent configuration in. */
function trusted<K extends keyof Options>(name: K, why: string): Check<K> {
  return (value, ctx) => {
    if (Array.isArray(value) && value.length === 0) return;
    refuseUntrusted(ctx.trust, `options.${name}`, why);
  };
}

/**
 * OPTION_RULES classifies every option of the SDK's `Options`. The mapped
 * type makes a new SDK option a compile error here until it is classified;
 * at run time, a key that is not in this map (the SDK also reads options
 * its types do not declare) is refused.
 */
export const OPTION_RULES: { readonly [K in keyof Options]-?: Rule<K> } = {
  abortController: 'pass',
  // Claude Code loads nothing from these with settingSources [] (tested).
  additionalDirectories: 'pass',
  projectConfigRoot: trusted('projectConfigRoot', 'it names the directory Claude Code takes project settings, .mcp.json and the .claude trees from'),
  agent: 'pass',
  agents: (agents, ctx) => {
    for (const [name, def] of Object.entries(agents)) checkAgent(name, def, ctx);
  },
  // Allow rules do not override gatekeeper's hook (tested): the hook runs first.
  allowedTools: 'pass',
  canUseTool: 'composed',
  continue: 'pass',
  cwd: 'pass',
  disallowedTools: 'composed',
  // The PreToolUse hook sees the aliased tool's own name (tested).
  toolAliases: 'pass',
  tools: 'pass',
  env: (env, ctx) => checkEnv(env, 'options.env', ctx),
  executable: 'pass',
  executableArgs: trusted('executableArgs', 'they reach the Claude Code binary as command-line flags, --settings and --plugin-dir among them'),
  extraArgs: (args, ctx) => checkExtraArgs(args, ctx),
  fallbackModel: 'pass',
  enableFileCheckpointing: 'pass',
  toolConfig: 'pass',
  forkSession: 'pass',
  betas: 'pass',
  hooks: 'composed',
  onElicitation: 'pass',
  onUserDialog: 'pass',
  supportedDialogKinds: 'pass',
  perTaskStopAffordance: 'pass',
  persistSession: 'pass',
  sessionStore: 'pass',
  sessionStoreFlush: 'pass',
  loadTimeoutMs: 'pass',
  includeHookEvents: 'pass',
  includePartialMessages: 'pass',
  forwardSubagentText: 'pass',
  // Default true (isolation): an @path in a prompt reads the file without a Read.
  verbatimPrompts: 'composed',
  thinking: 'pass',
  effort: 'pass',
  maxThinkingTokens: 'pass',
  maxTurns: 'pass',
  maxBudgetUsd: 'pass',
  taskBudget: 'pass',
  mcpServers: (servers) => checkServerNames(servers, 'mcpServers'),
  mcpServersDelivery: 'pass',
  model: 'pass',
  outputFormat: 'pass',
  pathToClaudeCodeExecutable: (path, ctx) => {
    if (inside(path, ctx.dirs)) refuseUntrusted(ctx.trust, 'options.pathToClaudeCodeExecutable', `${path} lies in a directory the model can write, so a model could replace the program that runs it`);
  },
  permissionMode: (mode) => {
    if (mode === 'bypassPermissions') refuse("permissionMode 'bypassPermissions'", 'it would run tools without asking gatekeeper');
  },
  planModeInstructions: 'pass',
  allowDangerouslySkipPermissions: (v) => {
    if (v) refuse('allowDangerouslySkipPermissions', 'it would allow switching to bypassPermissions');
  },
  permissionPromptToolName: () => refuse('permissionPromptToolName', 'permission prompts go through its canUseTool; pass your own canUseTool instead'),
  // 'none' denies what would prompt: it can only take away.
  permissionPrompts: 'pass',
  plugins: trusted('plugins', 'a plugin brings hooks that run commands on the host, MCP servers, skills and agents'),
  pluginDelivery: 'pass',
  promptSuggestions: 'pass',
  agentProgressSummaries: 'pass',
  resume: 'pass',
  sessionId: 'pass',
  resumeSessionAt: 'pass',
  resumeDropsTurn: 'pass',
  sandbox: (s, ctx) => checkSandbox(s as Record<string, unknown>, 'options.sandbox', ctx.trust),
  settings: (s, ctx) => {
    if (typeof s === 'string') refuseUntrusted(ctx.trust, 'a settings file path in options.settings', 'Claude Code reads it at start, and a file can be written by the model; pass the settings as an object');
    else checkSettings(s as Record<string, unknown>, 'options.settings', ctx.trust);
  },
  // Policy-tier settings; the SDK keeps only restrictive keys.
  managedSettings: 'composed',
  // Default [] (isolation).
  settingSources: (sources, ctx) => {
    if (sources.length > 0) {
      refuseUntrusted(ctx.trust, `options.settingSources ${JSON.stringify(sources)}`, 'Claude Code would load settings with hooks, .mcp.json servers, skills, agents and CLAUDE.md from files the model can write');
    }
  },
  skills: 'pass',
  debug: 'pass',
  debugFile: 'pass',
  stderr: 'pass',
  // Default true (isolation).
  strictMcpConfig: (strict, ctx) => {
    if (!strict) refuseUntrusted(ctx.trust, 'options.strictMcpConfig false', 'Claude Code would start MCP servers from configuration files, .mcp.json among them, besides those in mcpServers');
  },
  systemPrompt: 'pass',
  title: 'pass',
  // The caller's own code; it gets the arguments gatekeeper set up.
  spawnClaudeCodeProcess: 'pass',
};

/**
 * checkAgentConfiguration applies OPTION_RULES to the caller's options (and
 * the env rule to the inherited environment when options.env is unset).
 * Where the model can write is the cwd, the additional directories and
 * `writable` (the policy's workspace_root, once the sidecar told it). It
 * throws GatekeeperConfigError naming the option and why.
 */
export function checkAgentConfiguration(o: Options, trust: boolean, writable: readonly string[] = []): void {
  const cwd = resolvePath(o.cwd ?? process.cwd());
  const ctx: CheckContext = { trust, dirs: [cwd, ...(o.additionalDirectories ?? []).map((d) => resolvePath(cwd, d)), ...writable], verbatim: o.verbatimPrompts !== false };
  const rules = OPTION_RULES as Record<string, Rule<keyof Options> | undefined>;
  for (const [key, value] of Object.entries(o)) {
    if (value === undefined) continue;
    if (value === null) refuse(`options.${key} null`, 'the SDK takes null for no option; leave it out');
    const rule = rules[key];
    if (rule === undefined) {
      refuse(
        `options.${key}`,
        'it is not an option of @anthropic-ai/claude-agent-sdk 0.3.330 that gatekeeper has classified, and the SDK reads options its types do not declare; gatekeeper passes on only options it knows',
      );
    }
    if (typeof rule === 'function') (rule as (v: unknown, c: CheckContext) => void)(value, ctx);
  }
  if (o.env === undefined) checkEnv(process.env, 'the environment Claude Code inherits (options.env is unset)', ctx);
}

/** The options isolation sets. */
export type Isolation = Pick<Options, 'settingSources' | 'strictMcpConfig' | 'verbatimPrompts' | 'managedSettings' | 'settings'>;

/**
 * SHELL_TOOLS are Claude Code's tools that run shell commands on the host.
 * Claude Code also runs the `` !`command` `` lines of a skill or slash
 * command (its bundled /security-review runs `git status` and three more)
 * through these tools' permission check alone, under the command's own
 * allowed-tools, without the PreToolUse hook or canUseTool (measured with
 * SDK 0.3.330). An ask rule for them makes that check ask, which nobody
 * answers there, so those lines do not run; the model's own calls still
 * reach gatekeeper's hook and, through the ask, its canUseTool. The rules
 * go into the flag settings, which an administrator's managed settings do
 * not displace (they do displace the SDK's managedSettings tier: measured,
 * with /etc/claude-code/managed-settings.json present the skill's lines ran
 * again), and into the policy tier, which applyFlagSettings cannot replace.
 * The Go declaration is gate/client/claudecode's ShellTools (`gatekeeper
 * claude-code install` denies them); both are pinned to
 * gate/client/claudecode/testdata/shell-tools.json.
 */
export const SHELL_TOOLS: readonly string[] = ['Bash', 'PowerShell'];

/** askingShell returns permissions with ask rules for SHELL_TOOLS added to theirs. */
export function askingShell<P extends { ask?: string[] }>(permissions: P | undefined): P & { ask: string[] } {
  return { ...(permissions ?? ({} as P)), ask: [...new Set([...(permissions?.ask ?? []), ...SHELL_TOOLS])] };
}

/**
 * ISOLATED_ENV is the environment the flag settings give Claude Code.
 * CLAUDE_CODE_DISABLE_CRON: Claude Code reads the workspace's
 * `.claude/scheduled_tasks.json` (durable CronCreate tasks) whatever
 * settingSources says and sends each task's prompt as a user turn when it
 * fires, one whose time has passed at once (measured): a repository could
 * speak as the user. Only the flag settings' env stops it (the policy tier
 * does not carry it, measured).
 */
const ISOLATED_ENV: Readonly<Record<string, string>> = { CLAUDE_CODE_DISABLE_CRON: '1' };

/**
 * isolation returns the options gatekeeper sets so that Claude Code loads
 * no agent configuration from files: no setting sources, only the MCP
 * servers given in options, prompts delivered as written (an `@path` in a
 * prompt would otherwise put the file into the model's context without a
 * Read), auto memory off (Claude Code loads its MEMORY.md into the context
 * whatever settingSources says, from CLAUDE_CONFIG_DIR or a directory
 * CLAUDE_CODE_REMOTE_MEMORY_DIR or CLAUDE_COWORK_MEMORY_PATH_OVERRIDE
 * names, measured; where those lie in the workspace the model writes
 * instructions for every later session), no scheduled tasks
 * (ISOLATED_ENV), ask rules for every shell
 * command (SHELL_TOOLS) in the flag settings and the policy tier, and
 * (unless the caller trusts agent configuration) a policy tier that lets
 * only managed hooks run besides the SDK host's own callbacks. Each default
 * gives way to a value the caller sets (and the checks allow); the caller's
 * own settings and policy-tier settings are kept, the ask rules added to
 * theirs. A settings file path (trusted only) is passed on as it is: that
 * file decides, and only the policy tier's ask rules hold.
 */
export function isolation(caller: Options, trust: boolean): Isolation {
  const out: Isolation = {
    settingSources: caller.settingSources ?? [],
    strictMcpConfig: caller.strictMcpConfig ?? true,
    verbatimPrompts: caller.verbatimPrompts ?? true,
  };
  if (typeof caller.settings !== 'string') {
    const settings = caller.settings ?? {};
    out.settings = { autoMemoryEnabled: false, ...settings, env: { ...ISOLATED_ENV, ...settings.env }, permissions: askingShell(settings.permissions) };
  }
  const managed = caller.managedSettings ?? {};
  out.managedSettings = { ...managed, permissions: askingShell(managed.permissions) };
  if (!trust) out.managedSettings.allowManagedHooksOnly = true;
  return out;
}

type AgentCheck<K extends keyof AgentDefinition> = (value: NonNullable<AgentDefinition[K]>, where: string, ctx: CheckContext) => void;

/**
 * AGENT_RULES classifies every field of the SDK's AgentDefinition, as
 * OPTION_RULES does the options: `pass`, or a check. A field that is not
 * here is refused, with or without the opt-in: Claude Code reads more of an
 * agent definition than the SDK declares: `hooks`, as in an agent file's
 * frontmatter, ran command hooks on the host (measured), held only by the
 * allowManagedHooksOnly policy, which trustAgentConfiguration leaves out and
 * an administrator's managed settings displace.
 */
export const AGENT_RULES: { readonly [K in keyof AgentDefinition]-?: 'pass' | AgentCheck<K> } = {
  description: 'pass',
  prompt: 'pass',
  tools: 'pass',
  disallowedTools: 'pass',
  model: 'pass',
  criticalSystemReminder_EXPERIMENTAL: 'pass',
  // Skills are bundled ones only (settingSources []); their !`command`
  // lines meet the shell ask rules (SHELL_TOOLS).
  skills: 'pass',
  maxTurns: 'pass',
  autoCompactWindow: 'pass',
  background: 'pass',
  omitClaudeMd: 'pass',
  effort: 'pass',
  observer: 'pass',
  observerMessage: 'pass',
  mcpServers: (specs, where) => {
    for (const spec of specs) {
      if (typeof spec === 'object' && spec !== null) checkServerNames(spec, `${where}.mcpServers`);
    }
  },
  permissionMode: (mode, where) => {
    if (mode === 'bypassPermissions') refuse(`${where}.permissionMode 'bypassPermissions'`, "the subagent's tools would run without asking gatekeeper");
  },
  initialPrompt: (_prompt, where, ctx) => {
    if (!ctx.verbatim) return;
    refuse(
      `${where}.initialPrompt`,
      'Claude Code expands its @path file mentions and runs its slash commands whatever verbatimPrompts says (measured), so a mention reads any file into the model\'s context without a Read; put the text in the prompt, or set verbatimPrompts: false if every prompt is yours',
    );
  },
  memory: (_scope, where, ctx) => {
    refuseUntrusted(ctx.trust, `${where}.memory`, 'agent memory files (.claude/agent-memory and the like) are loaded into the agent\'s context, and the model can write them');
  },
};

/** checkAgent applies AGENT_RULES to one subagent definition. */
function checkAgent(name: string, def: AgentDefinition, ctx: CheckContext): void {
  const where = `options.agents.${name}`;
  const rules = AGENT_RULES as Record<string, 'pass' | ((v: unknown, w: string, c: CheckContext) => void) | undefined>;
  for (const [key, value] of Object.entries(def)) {
    if (value === undefined) continue;
    const rule = rules[key];
    if (rule === undefined) {
      refuse(
        `${where}.${key}`,
        'it is not a field of AgentDefinition in @anthropic-ai/claude-agent-sdk 0.3.330 that gatekeeper has classified, and Claude Code reads fields the SDK does not declare (hooks among them, which run commands on the host)',
      );
    }
    if (typeof rule === 'function') rule(value, where, ctx);
  }
}

/** checkServerNames refuses a caller's server that would stand in for ours. */
export function checkServerNames(servers: Record<string, unknown>, where = 'mcpServers'): void {
  for (const name of Object.keys(servers)) {
    if (normalizeServerName(name) === SANDBOX_SERVER) {
      throw new GatekeeperConfigError(
        `${where}.${name}: the MCP server name ${JSON.stringify(SANDBOX_SERVER)} is reserved by gatekeeper, whose ${RUN_TOOL} tool runs code in its sandbox; rename your server`,
      );
    }
  }
}

/** normalizeServerName spells a server name as Claude Code does in tool names. */
export function normalizeServerName(name: string): string {
  return name.replace(/[^a-zA-Z0-9_-]/g, '_');
}

/**
 * SAFE_SETTINGS are the settings keys gatekeeper passes on without the
 * opt-in: none runs a command, names a file or directory to load, brings
 * hooks, MCP servers or plugins, or widens what a tool may do past
 * gatekeeper's hook. Any other key (and every key the SDK adds later) is
 * refused unless the caller trusts agent configuration.
 */
export const SAFE_SETTINGS: ReadonlySet<keyof Settings> = new Set<keyof Settings>([
  '$schema',
  'model',
  'fallbackModel',
  'availableModels',
  'enforceAvailableModels',
  'deniedModels',
  'modelOverrides',
  'effortLevel',
  'maxEffortLevel',
  'alwaysThinkingEnabled',
  'showThinkingSummaries',
  'ultracode',
  'fastMode',
  'fastModePerSessionOptIn',
  'autoCompactEnabled',
  'autoCompactWindow',
  'promptCacheTtl',
  'subagentPromptCacheTtl',
  'permissions',
  'cleanupPeriodDays',
  'attribution',
  'includeCoAuthoredBy',
  'includeGitInstructions',
  'respectGitignore',
  'language',
  'outputStyle',
  'verbose',
  'todoFeatureEnabled',
  'promptSuggestionEnabled',
  'theme',
  'spinnerTipsEnabled',
  'syntaxHighlightingDisabled',
  // Restrictive switches: each can only take something away.
  'disableAllHooks',
  'allowManagedHooksOnly',
  'allowManagedPermissionRulesOnly',
  'allowManagedMcpServersOnly',
  'deniedMcpServers',
  'disableBundledSkills',
  'disableSkillShellExecution',
  'disableClaudeAiConnectors',
  'disableAutoMode',
  'disableWorkflows',
  'disableSideloadFlags',
  'disableCommandPluginSources',
  'strictPluginOnlyCustomization',
  'skillOverrides',
  'sandbox',
]);

/**
 * checkSettings checks a settings object (options.settings, Query
 * applyFlagSettings). Always refused: anything that switches gatekeeper's
 * hook or prompts off. Without the opt-in, every key outside SAFE_SETTINGS.
 */
export function checkSettings(s: Record<string, unknown>, where: string, trust: boolean): void {
  if (s.disableAllHooks !== undefined && s.disableAllHooks !== null && s.disableAllHooks !== false && s.disableAllHooks !== 'false') {
    refuse(`${where}.disableAllHooks`, 'gatekeeper decides tool calls in a PreToolUse hook');
  }
  const perms = s.permissions;
  if (typeof perms === 'object' && perms !== null && (perms as Record<string, unknown>).defaultMode === 'bypassPermissions') {
    refuse(`${where}.permissions.defaultMode 'bypassPermissions'`, 'it would run tools without asking gatekeeper');
  }
  if (trust) return;
  for (const [key, value] of Object.entries(s)) {
    if (value === undefined) continue;
    if (!SAFE_SETTINGS.has(key as keyof Settings)) {
      refuseUntrusted(false, `${where}.${key}`, 'it is not a setting gatekeeper knows to carry no agent configuration (hooks, MCP servers, plugins, commands, files to load)');
    }
    if (key === 'sandbox' && typeof value === 'object' && value !== null) checkSandbox(value as Record<string, unknown>, `${where}.sandbox`, false);
  }
}

/** SANDBOX_COMMANDS are Claude Code sandbox settings that name programs it runs. */
const SANDBOX_COMMANDS = ['ripgrep', 'bwrapPath', 'socatPath'] as const;

function checkSandbox(s: Record<string, unknown>, where: string, trust: boolean): void {
  for (const key of SANDBOX_COMMANDS) {
    if (s[key] !== undefined) refuseUntrusted(trust, `${where}.${key}`, 'it names a program Claude Code runs on the host');
  }
}

/**
 * EXTRA_ARGS are the Claude Code flags gatekeeper passes on in extraArgs
 * without the opt-in: none loads configuration or names a file. It is an
 * allowlist, so a flag Claude Code adds later is refused until it is
 * classified.
 */
export const EXTRA_ARGS: ReadonlySet<string> = new Set([
  'disable-slash-commands',
  'no-chrome',
  'replay-user-messages',
  'name',
  'append-system-prompt',
  'exclude-dynamic-system-prompt-sections',
  'autocompact',
  'ax-screen-reader',
]);

/** NEVER_ARGS take tool calls out of gatekeeper's hands: refused even with the opt-in. */
const NEVER_ARGS: ReadonlySet<string> = new Set([
  'dangerously-skip-permissions',
  'allow-dangerously-skip-permissions',
  'permission-mode',
  'permission-prompt-tool',
]);

function checkExtraArgs(args: Record<string, string | null>, ctx: CheckContext): void {
  for (const key of Object.keys(args)) {
    // The SDK writes `--${key}`; a key may carry its own "=value".
    const flag = key.replace(/^-+/, '').split('=')[0] ?? '';
    if (NEVER_ARGS.has(flag)) refuse(`options.extraArgs["${key}"]`, 'it would take tool calls out of gatekeeper\'s hands; use the SDK option instead');
    if (!EXTRA_ARGS.has(key)) {
      refuseUntrusted(
        ctx.trust,
        `options.extraArgs["${key}"]`,
        `gatekeeper passes on only the flags ${[...EXTRA_ARGS].join(', ')}; others (--settings, --setting-sources, --mcp-config, --plugin-dir, --add-dir, --agents, …) bring configuration in`,
      );
    }
  }
}

/**
 * CONFIG_ENV are environment variables of Claude Code (as bundled with SDK
 * 0.3.330, found in its binary) that load configuration, plugins, MCP
 * servers, instructions or code, wherever they point: CLAUDE_CODE_PLUGIN_DIRS
 * loads a plugin's hooks even with settingSources [] (tested), and the Bun
 * runtime the binary is built on takes its own command-line flags from
 * BUN_OPTIONS (`--preload`, `-r`, `--config`) and a script to preload from
 * BUN_INSPECT_PRELOAD, and runs that script in Claude Code's process at
 * start (tested). Refused unless trusted. CLAUDE_CONFIG_DIR is not here:
 * with settingSources [] and auto memory off nothing in it is loaded as
 * configuration (tested).
 */
export const CONFIG_ENV: readonly string[] = [
  'CLAUDE_CODE_PLUGIN_DIRS',
  'CLAUDE_CODE_PLUGIN_SEED_DIR',
  'CLAUDE_CODE_PLUGIN_CACHE_DIR',
  'CLAUDE_CODE_PLUGIN_MCPB_DIR',
  'CLAUDE_CODE_DESKTOP_SKILLS_PLUGIN_DIR',
  'CLAUDE_CODE_USE_COWORK_PLUGINS',
  'CLAUDE_CODE_SYNC_PLUGINS',
  'CLAUDE_CODE_SYNC_PLUGIN_INSTALL',
  'CLAUDE_CODE_MANAGED_SETTINGS_PATH',
  'CLAUDE_CODE_REMOTE_SETTINGS_PATH',
  'CLAUDE_CODE_MCP_SERVE_SETTINGS',
  'CLAUDE_CODE_BRIDGE_CHILD_MACHINE_SETTINGS',
  'CLAUDE_CODE_REMOTE_MCP_CONFIG',
  'CLAUDE_CODE_SHELL_MCP_SERVERS',
  'CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD',
  'CLAUDE_CODE_ENABLE_FUNCTION_HOOKS',
  'CLAUDE_DEV_MODS_DIR',
  'BUN_OPTIONS',
  'BUN_INSPECT_PRELOAD',
];

/**
 * PROGRAM_ENV are variables naming a program Claude Code (or a shell it
 * starts) runs, a file a shell sources, or a configuration directory whose
 * commands a program Claude Code starts runs: refused unless trusted when
 * that path is relative or lies where the model can write. SHELL is the
 * shell Claude Code runs Bash commands in when CLAUDE_CODE_SHELL is unset;
 * XDG_CONFIG_HOME holds git's user configuration (`git/config`), and
 * Claude Code's `git status` at start runs the filter drivers it defines
 * (Claude Code switches off only those of the repository's own config;
 * tested).
 */
export const PROGRAM_ENV: readonly string[] = [
  'SHELL',
  'XDG_CONFIG_HOME',
  'CLAUDE_CODE_SHELL',
  'CLAUDE_CODE_SHELL_PREFIX',
  'CLAUDE_CODE_GIT_BASH_PATH',
  'CLAUDE_CODE_PROCESS_WRAPPER',
  'CLAUDE_CODE_TEAMMATE_COMMAND',
  'CLAUDE_ENV_FILE',
  'BASH_ENV',
  'ENV',
];

/**
 * SEARCH_ENV are lists of directories or files programs are loaded from,
 * with their separators: every entry must be absolute and lie where the
 * model cannot write (Claude Code runs git and the hooks' shells from PATH,
 * measured; the dynamic loader runs LD_AUDIT's libraries in Claude Code's
 * process, as LD_PRELOAD's, measured).
 */
const SEARCH_ENV: Readonly<Record<string, RegExp>> = { PATH: new RegExp(delimiter), LD_LIBRARY_PATH: new RegExp(delimiter), LD_PRELOAD: /[:\s]+/, LD_AUDIT: /[:\s]+/ };

function checkEnv(given: Record<string, string | undefined>, where: string, ctx: CheckContext): void {
  // Names compared without case: Windows reads the environment so.
  const env: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(given)) env[k.toUpperCase()] = v;
  for (const name of CONFIG_ENV) {
    const v = env[name];
    if (v !== undefined && v !== '') refuseUntrusted(ctx.trust, `${where} ${name}`, 'Claude Code loads configuration (plugins, settings, MCP servers, instructions, runtime flags or code) named by it');
  }
  const writable = (p: string): boolean => !isAbsolute(p) || inside(p, ctx.dirs);
  for (const name of PROGRAM_ENV) {
    const v = env[name]?.trim();
    if (v === undefined || v === '') continue;
    // The whole value (a path may hold spaces), the program of a command
    // line, and every absolute path among its arguments (`env /ws/x`).
    const [program = '', ...args] = v.split(/\s+/);
    const found = [program, v].find(writable) ?? args.find((a) => isAbsolute(a) && inside(a, ctx.dirs));
    if (found !== undefined) {
      refuseUntrusted(
        ctx.trust,
        `${where} ${name} ${JSON.stringify(found)}`,
        'it names a program, a shell file or a configuration directory that Claude Code or a program it starts runs or reads, and it is relative or lies in a directory the model can write',
      );
    }
  }
  for (const [name, separator] of Object.entries(SEARCH_ENV)) {
    const v = env[name];
    if (v === undefined || (name !== 'PATH' && v === '')) continue;
    for (const entry of v.split(separator)) {
      if (writable(entry)) {
        refuseUntrusted(ctx.trust, `${where} ${name} entry ${JSON.stringify(entry)}`, 'it is relative or lies in a directory the model can write, and programs Claude Code runs are found or loaded through it');
      }
    }
  }
}

/** inside says whether a path lies in (or is) one of dirs, lexically. */
function inside(path: string, dirs: readonly string[]): boolean {
  const p = resolvePath(path);
  return dirs.some((d) => {
    const r = relative(d, p);
    return r === '' || (r !== '..' && !r.startsWith(`..${sep}`) && !isAbsolute(r));
  });
}

/**
 * workspaceRoot reads an effective policy's workspace_root, when it is an
 * absolute path: the sidecar lets the model write below it.
 */
export function workspaceRoot(policy: Record<string, unknown> | undefined): string | undefined {
  const root = policy?.workspace_root;
  return typeof root === 'string' && isAbsolute(root) ? root : undefined;
}

/** What keptPermissionUpdates returns. */
export interface PermissionUpdates {
  kept: PermissionUpdate[];
  dropped: PermissionUpdate[];
}

/**
 * keptPermissionUpdates filters the updatedPermissions of a caller's
 * canUseTool answer or PermissionRequest hook. A switch to
 * bypassPermissions is always dropped. An update with a destination other
 * than `session` makes Claude Code write a settings file (for
 * `projectSettings`, `<cwd>/.claude/settings.json`) outside any tool call,
 * so outside gatekeeper: dropped unless the caller trusts agent
 * configuration. Session rules stay: they do not override gatekeeper's hook.
 */
export function keptPermissionUpdates(updates: readonly PermissionUpdate[], trust: boolean): PermissionUpdates {
  const kept: PermissionUpdate[] = [];
  const dropped: PermissionUpdate[] = [];
  for (const u of updates) {
    const bypass = u.type === 'setMode' && u.mode === 'bypassPermissions';
    if (bypass || (!trust && u.destination !== 'session')) dropped.push(u);
    else kept.push(u);
  }
  return { kept, dropped };
}
