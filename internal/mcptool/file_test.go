package mcptool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentgate/agentgate/internal/mcptool"
)

func TestParseFileAcceptsTheDocumentedExample(t *testing.T) {
	f, err := mcptool.ParseFile([]byte(`{"servers": [
	  {"name": "crm", "url": "https://crm.example.com/mcp",
	   "headers": {"Authorization": {"secret_arn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:crm-token-AbCdEf", "prefix": "Bearer "}},
	   "trust_annotations": true, "timeout_seconds": 20,
	   "exclude": ["delete_everything"],
	   "approval": {"lookup_customer": "never", "export_data": "always", "create_ticket": "default"}},
	  {"name": "everything", "url": "http://127.0.0.1:3001/mcp"}
	]}`), mcptool.ParseOptions{})
	require.NoError(t, err)
	require.Len(t, f.Servers, 2)
	assert.Equal(t, []string{"arn:aws:secretsmanager:eu-west-1:123456789012:secret:crm-token-AbCdEf"}, f.SecretARNs())
	assert.Equal(t, mcptool.DefaultTimeout, f.Servers[1].Timeout())
	assert.Zero(t, f.Servers[1].ListEvery(), "no listing of its own unless the file asks")
}

func TestParseFileTakesTheListingSettings(t *testing.T) {
	f, err := mcptool.ParseFile([]byte(`{"servers": [
	  {"name": "crm", "url": "https://crm.example.com/mcp", "list_every_seconds": 300, "retry_interval_seconds": 10, "connect_timeout_seconds": 20},
	  {"name": "billing", "url": "https://billing.example.com/mcp", "list_every_seconds": 1, "retry_interval_seconds": 3600, "connect_timeout_seconds": 1}
	]}`), mcptool.ParseOptions{})
	require.NoError(t, err)
	assert.Equal(t, 5*time.Minute, f.Servers[0].ListEvery())
	assert.Equal(t, 10, f.Servers[0].RetryIntervalSeconds)
	assert.Equal(t, 20, f.Servers[0].ConnectTimeoutSeconds)
	assert.Equal(t, time.Second, f.Servers[1].ListEvery())
}

func TestParseFileNamesTheServerAndField(t *testing.T) {
	const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tok"
	tests := []struct {
		name, file, want string
		local            bool
	}{
		{"unknown field", `{"servers":[{"name":"a","url":"https://a/mcp","trust":true}]}`, `servers[0] (a): json: unknown field "trust"`, false},
		// A type error names the server and the field too (tester
		// helper-109 P3-7), whichever server and wherever its name is.
		{"wrong type in a later server", `{"servers":[{"name":"a","url":"https://a/mcp"},{"timeout_seconds":"30","name":"b","url":"https://b/mcp"}]}`, `servers[1] (b): timeout_seconds: json: cannot unmarshal string into int`, false},
		{"wrong type of the name", `{"servers":[{"name":5,"url":"https://a/mcp"}]}`, `servers[0]: name: json: cannot unmarshal number into string`, false},
		{"a server not an object", `{"servers":[1]}`, `servers[0]: json: cannot unmarshal number into a server object`, false},
		{"servers not an array", `{"servers":{}}`, `servers: json: cannot unmarshal object into an array of servers`, false},
		{"missing name", `{"servers":[{"url":"https://a/mcp"}]}`, "servers[0]: name: is required", false},
		{"bad name", `{"servers":[{"name":"a__b","url":"https://a/mcp"}]}`, `servers[0] (a__b): name: "a__b" must start with a letter`, false},
		{"trailing underscore", `{"servers":[{"name":"a_","url":"https://a/mcp"}]}`, "servers[0] (a_): name:", false},
		{"duplicate name", `{"servers":[{"name":"a","url":"https://a/mcp"},{"name":"a","url":"https://b/mcp"}]}`, `servers[1] (a): name: "a" is already used by servers[0]`, false},
		{"missing url", `{"servers":[{"name":"a"}]}`, "servers[0] (a): url: is required", false},
		{"relative url", `{"servers":[{"name":"a","url":"/mcp"}]}`, "servers[0] (a): url:", false},
		{"secret over http", `{"servers":[{"name":"a","url":"http://crm.internal/mcp","headers":{"Authorization":{"secret_arn":"` + arn + `"}}}]}`, "clear text", false},
		{"header value in the file", `{"servers":[{"name":"a","url":"https://a/mcp","headers":{"Authorization":{}}}]}`, "servers[0] (a): headers.Authorization: give secret_arn", false},
		{"not an ARN", `{"servers":[{"name":"a","url":"https://a/mcp","headers":{"X-Key":{"secret_arn":"my-secret"}}}]}`, "headers.X-Key.secret_arn: \"my-secret\" is not a Secrets Manager secret ARN", false},
		{"env on Lambda", `{"servers":[{"name":"a","url":"https://a/mcp","headers":{"X-Key":{"env":"KEY"}}}]}`, "headers.X-Key.env: environment variables are for the local server", false},
		{"reserved header", `{"servers":[{"name":"a","url":"https://a/mcp","headers":{"mcp-session-id":{"env":"KEY"}}}]}`, "set by the MCP transport", true},
		{"both sources", `{"servers":[{"name":"a","url":"https://a/mcp","headers":{"X-Key":{"env":"KEY","secret_arn":"` + arn + `"}}}]}`, "not both", true},
		{"timeout", `{"servers":[{"name":"a","url":"https://a/mcp","timeout_seconds":901}]}`, "servers[0] (a): timeout_seconds: 901 must be between 1 and 900", false},
		{"list_every_seconds negative", `{"servers":[{"name":"a","url":"https://a/mcp","list_every_seconds":-1}]}`, "servers[0] (a): list_every_seconds: -1 must be between 1 and 86400 (0: listed only when a run brings it about)", false},
		{"list_every_seconds over a day", `{"servers":[{"name":"a","url":"https://a/mcp","list_every_seconds":86401}]}`, "servers[0] (a): list_every_seconds: 86401 must be between 1 and 86400", false},
		{"list_every_seconds not a whole number", `{"servers":[{"name":"a","url":"https://a/mcp","list_every_seconds":1.5}]}`, `servers[0] (a): list_every_seconds: json: cannot unmarshal number 1.5 into int`, false},
		{"retry_interval_seconds negative", `{"servers":[{"name":"a","url":"https://a/mcp","retry_interval_seconds":-5}]}`, "servers[0] (a): retry_interval_seconds: -5 must be between 1 and 3600 (0: 30s)", false},
		{"retry_interval_seconds over an hour", `{"servers":[{"name":"a","url":"https://a/mcp","retry_interval_seconds":3601}]}`, "servers[0] (a): retry_interval_seconds: 3601 must be between 1 and 3600", false},
		{"connect_timeout_seconds negative", `{"servers":[{"name":"a","url":"https://a/mcp","connect_timeout_seconds":-1}]}`, "servers[0] (a): connect_timeout_seconds: -1 must be between 1 and 20 (0: the bound of the start-up attempt)", false},
		{"connect_timeout_seconds over API Gateway's wait", `{"servers":[{"name":"a","url":"https://a/mcp","connect_timeout_seconds":21}]}`, "servers[0] (a): connect_timeout_seconds: 21 must be between 1 and 20", false},
		{"approval value", `{"servers":[{"name":"a","url":"https://a/mcp","approval":{"t":"sometimes"}}]}`, `servers[0] (a): approval.t: "sometimes" must be "always", "never" or "default"`, false},
		{"approval of an excluded tool", `{"servers":[{"name":"a","url":"https://a/mcp","exclude":["t"],"approval":{"t":"never"}}]}`, "approval.t: names a tool that include/exclude leave out", false},
		{"include twice", `{"servers":[{"name":"a","url":"https://a/mcp","include":["t","t"]}]}`, `include[1]: "t" is listed twice`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mcptool.ParseFile([]byte(tt.file), mcptool.ParseOptions{AllowEnvHeaders: tt.local})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// A refused URL is named without its password, query or fragment.
	_, err := mcptool.ParseFile([]byte(`{"servers":[{"name":"a","url":"http://user:s3cretpw@127.0.0.1:1/mcp?key=qsecret"}]}`), mcptool.ParseOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "without user info")
	assert.NotContains(t, err.Error(), "s3cretpw")
	assert.NotContains(t, err.Error(), "qsecret")
}

func TestExposedName(t *testing.T) {
	assert.Equal(t, "crm__note_add", mcptool.ExposedName("crm", "note.add"))
	assert.Equal(t, "everything__get-sum", mcptool.ExposedName("everything", "get-sum"))
	assert.Equal(t, "a__x_y_z", mcptool.ExposedName("a", "x/y z"))
}
