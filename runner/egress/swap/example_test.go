package swap_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/swap"
)

// The proxy's use of a Set for one request: plan, (judge,) inject, scrub.
func Example() {
	const sentinel = "gksentinel_5f0c2a9e8d7b6a5f4e3d2c1b0a998877"
	set, err := swap.New([]runner.Secret{{
		Name:    "github",
		Hosts:   []string{"api.github.com"},
		Inject:  runner.SecretPlace{Header: "Authorization"},
		Require: true,
		Value:   runner.NewHidden("ghp_example_value_1234"),
	}}, map[string]string{"github": sentinel})
	if err != nil {
		panic(err)
	}

	r := httptest.NewRequest("GET", "https://api.github.com/user", nil)
	r.Header.Set("Authorization", "Bearer "+sentinel)
	names, refusal := set.Plan(r, "api.github.com", nil, true)
	fmt.Println(names, refusal == nil)

	// The policy allowed the request: only now is the value in it.
	set.Inject(r, names)
	fmt.Println(r.Header.Get("Authorization") == "Bearer ghp_example_value_1234")

	// The upstream echoes the credential; the program reads the sentinel.
	body, _ := io.ReadAll(set.Scrub(strings.NewReader(`{"auth":"Bearer ghp_example_value_1234"}`), names))
	fmt.Println(strings.Contains(string(body), sentinel))

	// The same sentinel to another host is refused, naming no value.
	r2 := httptest.NewRequest("GET", "https://example.org/", nil)
	r2.Header.Set("Authorization", "Bearer "+sentinel)
	_, refusal = set.Plan(r2, "example.org", nil, true)
	fmt.Println(refusal.Rule)
	// Output:
	// [github] true
	// true
	// true
	// egress.secret_wrong_host
}
