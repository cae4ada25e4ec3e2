package stack

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// Helpers shared by the tests: synthesizing a stack, reading its template as
// plain Go values, and rendering CloudFormation intrinsics as strings.

const testStackName = "Agentgate"

// testModelArn is the model ARN the default test stack is configured with.
const testModelArn = "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"

// synthesized is one synthesized stack: the assertions template and its JSON.
type synthesized struct {
	assert assertions.Template
	json   map[string]any
}

var (
	defaultOnce sync.Once
	defaultTmpl synthesized
)

// defaultTemplate is the stack with default props plus one model ARN,
// synthesized once for all tests that do not vary the props.
func defaultTemplate(t *testing.T) synthesized {
	t.Helper()
	defaultOnce.Do(func() {
		defaultTmpl = synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}})
	})
	return defaultTmpl
}

// synth builds the stack with props (and placeholder function zips) and
// returns its template.
func synth(t *testing.T, props AgentgateStackProps) synthesized {
	t.Helper()
	return synthApp(t, props, nil)
}

// synthApp is synth in an app with appProps (nil: the defaults).
func synthApp(t *testing.T, props AgentgateStackProps, appProps *awscdk.AppProps) synthesized {
	t.Helper()
	if props.AssetDir == "" {
		props.AssetDir = fakeAssets(t)
	}
	app := awscdk.NewApp(appProps)
	st := NewAgentgateStack(app, testStackName, &props)
	tmpl := assertions.Template_FromStack(st, nil)
	return synthesized{assert: tmpl, json: *tmpl.ToJSON()}
}

var (
	assetsOnce sync.Once
	assetsDir  string
)

// fakeAssets writes startrun.zip, resume.zip and purge.zip, each holding a
// placeholder bootstrap, into a directory shared by the tests.
func fakeAssets(t *testing.T) string {
	t.Helper()
	assetsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentgate-infra-assets-")
		if err != nil {
			t.Fatalf("temp dir: %v", err)
		}
		for _, name := range FunctionNames {
			f, err := os.Create(filepath.Join(dir, name+".zip"))
			if err != nil {
				t.Fatalf("create zip: %v", err)
			}
			zw := zip.NewWriter(f)
			w, err := zw.Create("bootstrap")
			if err == nil {
				_, err = w.Write([]byte("placeholder " + name))
			}
			if err == nil {
				err = zw.Close()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatalf("write %s.zip: %v", name, err)
			}
		}
		assetsDir = dir
	})
	return assetsDir
}

// must runs an assertions call and turns its panic (a failed CDK assertion
// surfaces as a jsii exception) into a test error.
func must(t *testing.T, what string, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assertion()
}

// resources returns the template's resources of type typ by logical id.
func (s synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// resource returns the only resource of type typ whose properties satisfy match.
func (s synthesized) resource(t *testing.T, typ string, match func(props map[string]any) bool) (string, map[string]any) {
	t.Helper()
	var ids []string
	var found map[string]any
	for id, r := range s.resources(typ) {
		props, _ := r["Properties"].(map[string]any)
		if match(props) {
			ids = append(ids, id)
			found = r
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want exactly one %s matching, got %d: %v", typ, len(ids), ids)
	}
	return ids[0], found
}

// isStateKey matches the state bucket's KMS key (the alarm topic has its own).
func isStateKey(p map[string]any) bool {
	return p["Description"] == "agentgate state bucket (S3 bucket key)"
}

// functionByName returns the logical id and properties of the function named name.
func (s synthesized) functionByName(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	id, r := s.resource(t, "AWS::Lambda::Function", func(p map[string]any) bool { return p["FunctionName"] == name })
	return id, r["Properties"].(map[string]any)
}

// render turns a template value into a readable string: {Ref: X} is ${X},
// {Fn::GetAtt: [X, A]} is ${X.A}, Fn::Join is concatenated, lists are
// joined with " | ".
func render(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case string:
		return x
	case float64, bool:
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = render(e)
		}
		return strings.Join(parts, " | ")
	case map[string]any:
		if ref, ok := x["Ref"]; ok {
			return "${" + render(ref) + "}"
		}
		if att, ok := x["Fn::GetAtt"].([]any); ok && len(att) == 2 {
			return "${" + render(att[0]) + "." + render(att[1]) + "}"
		}
		if join, ok := x["Fn::Join"].([]any); ok && len(join) == 2 {
			sep := render(join[0])
			var parts []string
			for _, e := range join[1].([]any) {
				parts = append(parts, render(e))
			}
			return strings.Join(parts, sep)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + render(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprintf("%v", x)
	}
}

// strings converts a template value that is a string or a list into a list.
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func sortedStrings(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, render(e))
	}
	sort.Strings(out)
	return out
}

func obj(m map[string]any) *map[string]any { return &m }

func arr(v ...any) *[]any { return &v }

func str(s string) *string { return jsii.String(s) }
