package client_test

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/client"
	"github.com/agentgate/agentgate/internal/apispec"
)

// TestTypesMatchSpec compares each client type with its schema in
// openapi.yaml (planned parts included): the same JSON fields, and every
// property the spec requires always encoded (no omitempty).
func TestTypesMatchSpec(t *testing.T) {
	doc, err := apispec.Full()
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]any{
		"StartRequest":          client.StartRunRequest{},
		"Message":               client.Message{},
		"Block":                 client.Block{},
		"ClientTool":            client.ClientTool{},
		"Run":                   client.Run{},
		"Counters":              client.Counters{},
		"Pending":               client.Pending{},
		"PendingCall":           client.PendingCall{},
		"UnverifiedDefinition":  client.UnverifiedDefinition{},
		"RecordedDecision":      client.RecordedDecision{},
		"DecidedCall":           client.DecidedCall{},
		"Decision":              client.Decision{},
		"CallDecision":          client.CallDecision{},
		"Output":                client.Output{},
		"RunLinks":              client.RunLinks{},
		"Vote":                  client.Vote{},
		"VoteChoice":            client.VoteChoice{},
		"ApprovalRule":          client.ApprovalRule{},
		"ClientCall":            client.ClientCall{},
		"PendingToolResults":    client.PendingToolResults{},
		"Event":                 client.Event{},
		"EventPage":             client.EventPage{},
		"ToolResult":            client.ToolResult{},
		"ToolResultsSubmission": client.ToolResults{},
		"ApprovalInboxEntry":    client.PendingApproval{},
		"ApprovalInboxPage":     client.ApprovalPage{},
		"WebhookSubscription":   client.WebhookSubscription{},
	}
	for name, v := range pairs {
		t.Run(name, func(t *testing.T) {
			ref := doc.Components.Schemas[name]
			if ref == nil {
				t.Fatalf("openapi.yaml has no schema %s", name)
			}
			var specProps []string
			for p := range ref.Value.Properties {
				specProps = append(specProps, p)
			}
			slices.Sort(specProps)
			goFields := map[string]bool{} // json name -> omitempty
			typ := reflect.TypeOf(v)
			for i := range typ.NumField() {
				tag := typ.Field(i).Tag.Get("json")
				jname, opts, _ := strings.Cut(tag, ",")
				if jname == "" || jname == "-" {
					t.Errorf("field %s has no JSON name", typ.Field(i).Name)
					continue
				}
				goFields[jname] = strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			}
			var goNames []string
			for n := range goFields {
				goNames = append(goNames, n)
			}
			slices.Sort(goNames)
			if !slices.Equal(goNames, specProps) {
				t.Errorf("client.%s fields %v, spec %s properties %v", typ.Name(), goNames, name, specProps)
			}
			for _, req := range ref.Value.Required {
				if goFields[req] {
					t.Errorf("client.%s: %s is required by the spec but omitted when empty", typ.Name(), req)
				}
			}
		})
	}
}

// TestEnumsMatchSpec compares the client's statuses and error codes with
// the spec's enums.
func TestEnumsMatchSpec(t *testing.T) {
	full, err := apispec.Full()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	statuses := []client.Status{client.StatusQueued, client.StatusRunning, client.StatusWaiting, client.StatusResuming,
		client.StatusCompleted, client.StatusFailed, client.StatusCancelled, client.StatusExpired, client.StatusWaitingForToolResults}
	var got, want []string
	for _, s := range statuses {
		got = append(got, string(s))
	}
	for _, v := range full.Components.Schemas["Status"].Value.Enum {
		want = append(want, v.(string))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("client statuses %v, spec %v", got, want)
	}
	codes := []string{client.CodeBadRequest, client.CodeUnauthorized, client.CodeForbidden, client.CodeNotFound,
		client.CodeMethodNotAllowed, client.CodeConflict, client.CodeGone, client.CodeTooLarge, client.CodeUnsupportedMediaType,
		client.CodeUnprocessable, client.CodeInternal}
	var specCodes []string
	for _, v := range cur.Components.Schemas["ErrorCode"].Value.Enum {
		specCodes = append(specCodes, v.(string))
	}
	slices.Sort(codes)
	slices.Sort(specCodes)
	if !slices.Equal(codes, specCodes) {
		t.Errorf("client codes %v, spec (current) %v", codes, specCodes)
	}
}

// TestPageSizesMatchSpec compares the client's largest page sizes with
// the spec's maximum limit of each route.
func TestPageSizesMatchSpec(t *testing.T) {
	doc, err := apispec.Current()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/runs/{id}/events", client.MaxEventsPageSize},
		{"/approvals", client.MaxApprovalsPageSize},
	} {
		item := doc.Paths.Find(tt.path)
		if item == nil || item.Get == nil {
			t.Fatalf("openapi.yaml has no GET %s", tt.path)
		}
		p := item.Get.Parameters.GetByInAndName("query", "limit")
		if p == nil || p.Schema == nil || p.Schema.Value.Max == nil {
			t.Fatalf("GET %s has no limit with a maximum", tt.path)
		}
		if got := int(*p.Schema.Value.Max); got != tt.want {
			t.Errorf("GET %s: spec limit maximum %d, client %d", tt.path, got, tt.want)
		}
	}
}

// TestNoInternalImports: the package is public, so neither it nor anything
// it imports from this module may be internal.
func TestNoInternalImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/agentgate/agentgate/") && p != "github.com/agentgate/agentgate/client" {
			t.Errorf("client depends on %s", p)
		}
	}
}
