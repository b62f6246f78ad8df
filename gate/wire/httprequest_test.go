package wire

import (
	"reflect"
	"testing"
)

func TestDecodeHTTPDecide(t *testing.T) {
	t.Parallel()
	const pre = `{"type":"decide","id":"1","query_id":"q","event":"http_request",`
	tests := []struct {
		name, in string
		want     *HTTPRequest // for an accepted frame
		msg      string       // for a refused one
	}{
		{name: "defaults fill what is left out", in: pre + `"http":{"method":"GET","host":"API.GitHub.com.","path":"/repos/our-org/x"}}`,
			want: &HTTPRequest{Method: "GET", Scheme: "https", Host: "api.github.com", Port: 443, Path: "/repos/our-org/x", Proto: "HTTP/1.1"}},
		{name: "every field", in: pre + `"http":{"run_id":"r_1","method":"POST","scheme":"http","host":"example.org","port":8080,"path":"/a","query":"x=1","proto":"HTTP/2.0","headers":["content-type","Accept","accept"],"body_bytes":-1,"body":"{}","secrets":["b","a"]}}`,
			want: &HTTPRequest{RunID: "r_1", Method: "POST", Scheme: "http", Host: "example.org", Port: 8080, Path: "/a", Query: "x=1", Proto: "HTTP/2.0",
				Headers: []string{"Accept", "Content-Type"}, BodyBytes: -1, Body: "{}", Secrets: []string{"a", "b"}}},
		{name: "the body's length is body_bytes by default", in: pre + `"http":{"method":"PUT","scheme":"http","host":"example.org","path":"/","body":"abc"}}`,
			want: &HTTPRequest{Method: "PUT", Scheme: "http", Host: "example.org", Port: 80, Path: "/", Proto: "HTTP/1.1", BodyBytes: 3, Body: "abc"}},
		{name: "no http", in: pre + `"tool_name":"Read"}`, msg: `decide: field "tool_name" is not part of a decide of event "http_request", which carries "http"`},
		{name: "http missing", in: pre[:len(pre)-1] + `}`, msg: `decide: missing field "http"`},
		{name: "http on a tool call", in: `{"type":"decide","id":"1","query_id":"q","event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t","http":{}}`, msg: `decide: field "http" is part of a decide of event "http_request" only`},
		{name: "a path without /", in: pre + `"http":{"method":"GET","host":"a.example","path":"x"}}`, msg: `decide: field "http.path" must start with "/"`},
		{name: "a bad host", in: pre + `"http":{"method":"GET","host":"a b","path":"/"}}`},
		{name: "a port out of range", in: pre + `"http":{"method":"GET","host":"a.example","path":"/","port":70000}}`, msg: `decide: field "http.port" must be an integer from 1 to 65535`},
		{name: "an unknown key", in: pre + `"http":{"method":"GET","host":"a.example","path":"/","url":"x"}}`, msg: `decide: unknown field "http.url"`},
		{name: "an unknown scheme", in: pre + `"http":{"method":"GET","host":"a.example","path":"/","scheme":"ftp"}}`, msg: `decide: field "http.scheme" is "ftp", want one of "https", "http"`},
		{name: "keys differing in case", in: pre + `"http":{"method":"GET","Method":"PUT","host":"a.example","path":"/"}}`},
		{name: "a header that is no string", in: pre + `"http":{"method":"GET","host":"a.example","path":"/","headers":[1]}}`, msg: `decide: field "http.headers" must be an array of non-empty strings`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, werr := Decode([]byte(tt.in))
			if tt.want == nil {
				if werr == nil || (tt.msg != "" && werr.Message != tt.msg) {
					t.Fatalf("Decode = %+v, %+v; want the error %q", req, werr, tt.msg)
				}
				return
			}
			if werr != nil {
				t.Fatal(werr)
			}
			if d := req.(*Decide); d.Event != EventHTTPRequest || !reflect.DeepEqual(d.HTTP, tt.want) || d.ToolName != "" {
				t.Errorf("decide = %+v, http %+v; want %+v", d, d.HTTP, tt.want)
			}
		})
	}
	d, werr := DecodeDryRun([]byte(`{"event":"http_request","http":{"method":"DELETE","host":"api.github.com","path":"/repos/x/y"},"sandbox_policy":{}}`), EventPreToolUse, EventHTTPRequest)
	if werr != nil || d.Decide.HTTP == nil || d.Decide.HTTP.Method != "DELETE" {
		t.Errorf("DecodeDryRun = %+v, %v", d, werr)
	}
}
