package wire

// RuleTag is how every text a model reads names the rule that decided:
// "[gatekeeper rule: R]". @gatekeeper/client's ruleTag is the TypeScript
// copy; both are pinned to testdata/rule-text.json.
func RuleTag(rule string) string { return "[gatekeeper rule: " + rule + "]" }

// WithRule returns text followed by a space and rule's tag, the form of a
// deny, an ask or a refused run the model reads: the hook's answer, the
// client's hook and canUseTool, a run the sidecar refused. An empty rule
// names nothing, so text comes back alone.
func WithRule(text, rule string) string {
	if rule == "" {
		return text
	}
	return text + " " + RuleTag(rule)
}
