package nethost_test

import (
	"fmt"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

func ExampleNormalize() {
	for _, h := range []string{"Example.COM.", "bücher.example", "0x7f.1", "2130706433", "[::ffff:169.254.169.254]", "1.2.3.256"} {
		n, err := nethost.Normalize(h)
		if err != nil {
			fmt.Printf("%s: refused\n", h)
			continue
		}
		fmt.Printf("%s: %s\n", h, n)
	}
	// Output:
	// Example.COM.: example.com
	// bücher.example: xn--bcher-kva.example
	// 0x7f.1: 127.0.0.1
	// 2130706433: 127.0.0.1
	// [::ffff:169.254.169.254]: 169.254.169.254
	// 1.2.3.256: refused
}

func ExampleMatch() {
	for _, host := range []string{"a.example.com", "a.b.example.com", "example.com", "notexample.com"} {
		ok, _ := nethost.Match("*.example.com", host, 443)
		fmt.Printf("%s: %v\n", host, ok)
	}
	// Output:
	// a.example.com: true
	// a.b.example.com: true
	// example.com: false
	// notexample.com: false
}
