package toolwrap_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// The wrappers for one server with one tool: the files to place under
// $GATEKEEPER_TOOLS (runner.Spec.ToolFiles), and the key to cache them under.
func ExampleGenerate() {
	files, err := toolwrap.Generate([]runner.ServerTools{{
		Name:        "crm",
		Description: "Customers and their orders.",
		Tools: []runner.ToolInfo{{
			Name:        "find-customers",
			Description: "Find customers by city.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"limit":{"type":"integer"}},"required":["city"]}`),
		}},
	}})
	if err != nil {
		panic(err)
	}
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Println(p)
	}
	for _, line := range strings.Split(string(files["python/gatekeeper_tools/crm.py"]), "\n") {
		if strings.HasPrefix(line, "def ") {
			fmt.Println(line)
		}
	}
	for _, line := range strings.Split(string(files["node/gatekeeper-tools/crm.d.ts"]), "\n") {
		if strings.HasPrefix(line, "export declare function") {
			fmt.Println(line)
		}
	}
	fmt.Println(len(toolwrap.Hash(files)))
	// Output:
	// node/gatekeeper-tools/crm.d.ts
	// node/gatekeeper-tools/crm.js
	// node/gatekeeper-tools/index.d.ts
	// node/gatekeeper-tools/index.js
	// python/gatekeeper_tools/__init__.py
	// python/gatekeeper_tools/crm.py
	// def find_customers(*, city: str, limit: int | None = None) -> str | list[Any]:
	// def __dir__():
	// export declare function find_customers(args: FindCustomersInput): Promise<ToolContent>;
	// 64
}
