package policy

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentgate/agentgate/internal/identity"
)

func testPolicy(t *testing.T) (*Policy, *identity.Directory) {
	t.Helper()
	dir, err := identity.LoadDirectory(filepath.Join("testdata", "directory.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(filepath.Join("testdata", "policy.json"), Options{Directory: dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p, dir
}

func compile(t *testing.T, js string, opts Options) (*Policy, error) {
	t.Helper()
	f, err := DecodeFile([]byte(js))
	if err != nil {
		return nil, err
	}
	return Compile(f, opts)
}

func TestEvaluateExamplePolicy(t *testing.T) {
	p, dir := testPolicy(t)
	ann := FactsFor(dir, identity.MustParse("Ann+x@Example.com"), nil)
	ivan := FactsFor(dir, identity.MustParse("ivan@example.com"), nil)
	secret := FactsFor(dir, identity.MustParse("bob@example.com"), map[string]string{"classification": "secret"})
	write := func(tool, args string, run RunFacts) Call {
		return Call{Tool: tool, Effect: "write", NeedsApproval: true, Args: json.RawMessage(args), Run: run}
	}
	read := func(tool, args string, run RunFacts) Call {
		return Call{Tool: tool, Effect: "read", Args: json.RawMessage(args), Run: run}
	}
	tests := []struct {
		name string
		call Call
		want Outcome
	}{
		{"deny with message", write("delete_document", `{"path":"prod/a.md"}`, ann),
			Outcome{Action: Deny, Rule: "no-prod-deletes", Message: "production documents are never deleted by an agent"}},
		{"deny rule's condition false: default for a write", write("delete_document", `{"path":"dev/a.md"}`, ann),
			Outcome{Action: RequireApproval, Rule: RuleDefault, RequiredApprovals: 1}},
		{"allow a write, with the rule's description for approvers", write("write_document", `{"path":"drafts/x.md","text":""}`, ann),
			Outcome{Action: Allow, Rule: "drafts", Description: "drafts are scratch space"}},
		{"condition over the initiator's groups", write("write_document", `{"path":"drafts/x.md","text":""}`, ivan),
			Outcome{Action: RequireApproval, Rule: RuleDefault, RequiredApprovals: 1}},
		{"quorum rule, MCP glob, double vs int", write("payments__charge", `{"amount":1500}`, ann),
			Outcome{Action: RequireApproval, Rule: "big-payments", Approvers: []string{"group:finance"}, RequiredApprovals: 2, FourEyes: true, AlwaysAsk: true, Description: "payments over 1000 need two people from finance"}},
		{"first match wins: the next rule", write("payments__charge", `{"amount":10}`, ann),
			Outcome{Action: RequireApproval, Rule: "payments", Approvers: []string{"group:finance"}, RequiredApprovals: 1}},
		{"approval for a read", read("read_document", `{"path":"hr/salaries.md"}`, ann),
			Outcome{Action: RequireApproval, Rule: "secret-reads", RequiredApprovals: 1}},
		{"approval for a read by run metadata", read("search_documents", `{"query":"x"}`, secret),
			Outcome{Action: RequireApproval, Rule: "secret-reads", RequiredApprovals: 1}},
		{"plain read: default allow", read("read_document", `{"path":"pub/a.md"}`, ann),
			Outcome{Action: Allow, Rule: RuleDefault}},
		{"allow an unannotated MCP tool", write("github__get_issue", `{"number":1}`, ann),
			Outcome{Action: Allow, Rule: "github-reads"}},
		{"other MCP tool: default", write("github__create_issue", `{}`, ann),
			Outcome{Action: RequireApproval, Rule: RuleDefault, RequiredApprovals: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Evaluate(context.Background(), tt.call, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Evaluate =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}

func TestNilPolicyIsTheDefault(t *testing.T) {
	var p *Policy
	if o := p.Evaluate(context.Background(), Call{Tool: "w", NeedsApproval: true}, nil); o.Action != RequireApproval || o.Rule != RuleDefault || o.RequiredApprovals != 1 {
		t.Errorf("nil policy, write = %+v, want require_approval by default", o)
	}
	if o := p.Evaluate(context.Background(), Call{Tool: "r"}, nil); o.Action != Allow || o.Rule != RuleDefault {
		t.Errorf("nil policy, read = %+v, want allow by default", o)
	}
}

func TestDefaultsApplyToEveryApproval(t *testing.T) {
	p, err := compile(t, `{"version":1,"defaults":{"required_approvals":2,"four_eyes":true},
		"rules":[{"id":"r","tools":["read_secret"],"outcome":"require_approval"},
		         {"id":"one","tools":["x"],"outcome":"require_approval","required_approvals":1}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Call{{Tool: "read_secret"}, {Tool: "write_document", NeedsApproval: true}, {Tool: "x"}} {
		o := p.Evaluate(context.Background(), c, nil)
		if o.Action != RequireApproval || o.RequiredApprovals != 2 || !o.FourEyes {
			t.Errorf("%s: %+v, want 2 approvals with four-eyes (the deployment minimum)", c.Tool, o)
		}
	}
}

func TestCompileErrorsNameTheRule(t *testing.T) {
	dir, err := identity.LoadDirectory(filepath.Join("testdata", "directory.json"))
	if err != nil {
		t.Fatal(err)
	}
	rule := func(fields string) string {
		return `{"version":1,"rules":[{"id":"ok","tools":["a"],"outcome":"allow"},` + fields + `]}`
	}
	tests := []struct {
		name, js string
		want     []string
	}{
		{"syntax error", rule(`{"id":"broken","tools":["a"],"when":"args.x ==","outcome":"deny"}`), []string{`rules[1] "broken": when:`, "Syntax error"}},
		{"undeclared variable", rule(`{"id":"r","tools":["a"],"when":"arg.x == 1","outcome":"deny"}`), []string{`rules[1] "r": when:`, "undeclared reference to 'arg'"}},
		{"typo in a run field", rule(`{"id":"r","tools":["a"],"when":"run.initator == 'x'","outcome":"deny"}`), []string{`rules[1] "r"`, "undefined field 'initator'"}},
		{"not a bool", rule(`{"id":"r","tools":["a"],"when":"tool + 'x'","outcome":"deny"}`), []string{"of type string, want bool"}},
		{"unknown function", rule(`{"id":"r","tools":["a"],"when":"exec('rm')","outcome":"deny"}`), []string{"undeclared reference to 'exec'"}},
		{"too long", rule(`{"id":"r","tools":["a"],"when":"` + strings.Repeat("true && ", 600) + `true","outcome":"deny"}`), []string{"longer than 4096"}},
		{"reserved id", rule(`{"id":"default","tools":["a"],"outcome":"deny"}`), []string{`"default" is reserved`}},
		{"duplicate id", rule(`{"id":"ok","tools":["a"],"outcome":"deny"}`), []string{`rules[1] "ok": id is also the id of rules[0]`}},
		{"no tools", rule(`{"id":"r","tools":[],"outcome":"deny"}`), []string{"at least one tool pattern"}},
		{"bad tool pattern", rule(`{"id":"r","tools":["a","b c"],"outcome":"deny"}`), []string{`rules[1] "r": tools[1]`}},
		{"no outcome", rule(`{"id":"r","tools":["a"]}`), []string{"outcome is required"}},
		{"unknown outcome", rule(`{"id":"r","tools":["a"],"outcome":"approve"}`), []string{`outcome "approve"`}},
		{"approvers on allow", rule(`{"id":"r","tools":["a"],"outcome":"allow","approvers":["bob@example.com"]}`), []string{"belong to outcome"}},
		{"quorum on deny", rule(`{"id":"r","tools":["a"],"outcome":"deny","required_approvals":2}`), []string{"belong to outcome"}},
		{"message on allow", rule(`{"id":"r","tools":["a"],"outcome":"allow","message":"hi"}`), []string{"use description"}},
		{"unknown group", rule(`{"id":"r","tools":["a"],"outcome":"require_approval","approvers":["group:admins"]}`), []string{`rules[1] "r": approvers[0] "group:admins": no such group`}},
		{"service account or bad approver", rule(`{"id":"r","tools":["a"],"outcome":"require_approval","approvers":["Bob <bob@example.com>"]}`), []string{`rules[1] "r": approvers[0]`}},
		{"quorum larger than the approvers", rule(`{"id":"r","tools":["a"],"outcome":"require_approval","approvers":["group:finance"],"required_approvals":4}`), []string{"needs 4 approvals but its approvers are 3 persons"}},
		{"quorum out of range", rule(`{"id":"r","tools":["a"],"outcome":"require_approval","required_approvals":21}`), []string{"between 0 and 20"}},
		{"version", `{"version":2,"rules":[]}`, []string{"version: got 2"}},
		{"unknown field", `{"version":1,"rules":[{"id":"r","tools":["a"],"outcome":"allow","unless":"x"}]}`, []string{`policy: rules[0] "r": json: unknown field "unless"`}},
		{"unknown field in a later rule", rule(`{"id":"r","tools":["a"],"outcome":"allow","extra":1}`), []string{`policy: rules[1] "r": json: unknown field "extra"`}},
		{"unknown field before the id", rule(`{"extra":1,"id":"r","tools":["a"],"outcome":"allow"}`), []string{`policy: rules[1] "r": json: unknown field "extra"`}},
		{"unknown field in a rule without id", rule(`{"tools":["a"],"outcome":"allow","extra":1}`), []string{`policy: rules[1]: json: unknown field "extra"`}},
		{"wrong type in a rule", rule(`{"id":"r","tools":"a","outcome":"allow"}`), []string{`policy: rules[1] "r": json: cannot unmarshal string`}},
		{"unknown field outside the rules", `{"version":1,"extra":1,"rules":[{"id":"r","tools":["a"],"outcome":"allow"}]}`, []string{`policy: json: unknown field "extra"`}},
		{"every broken rule", `{"version":1,"rules":[{"id":"a","tools":["a"],"when":"(","outcome":"deny"},{"id":"b","tools":["b"],"when":"nope","outcome":"deny"}]}`, []string{`rules[0] "a"`, `rules[1] "b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile(t, tt.js, Options{Directory: dir})
			if err == nil {
				t.Fatalf("Compile accepted %s", tt.js)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadErrorNamesFileAndRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	writeFile(t, path, `{"version":1,"rules":[{"id":"pay","tools":["p"],"when":"args.amount >","outcome":"deny"}]}`)
	_, err := Load(path, Options{})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `rules[0] "pay"`) {
		t.Errorf("Load = %v, want an error naming %s and the rule", err, path)
	}
}

// TestEvaluationErrorsFailClosed: a condition that cannot be evaluated never
// loosens the outcome.
func TestEvaluationErrorsFailClosed(t *testing.T) {
	p, err := compile(t, `{"version":1,"rules":[
		{"id":"small-refunds","tools":["refund"],"when":"args.amount < 10","outcome":"allow"},
		{"id":"deny-refunds-to-self","tools":["refund"],"when":"args.to == run.initiator","outcome":"deny","message":"no refunds to yourself"},
		{"id":"cheap-writes","tools":["write"],"when":"args.size < 100","outcome":"allow"},
		{"id":"flagged","tools":["flag"],"when":"args.flag","outcome":"require_approval","required_approvals":2},
		{"id":"blocked","tools":["block"],"when":"args.x.y","outcome":"deny"},
		{"id":"later-allow","tools":["flag","write"],"outcome":"allow"}
	]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := RunFacts{Initiator: "ann@example.com"}
	tests := []struct {
		name       string
		tool, args string
		wantAction Action
		wantRule   string
	}{
		{"missing key in an allow rule, later deny matches", "refund", `{"to":"ann@example.com"}`, Deny, "deny-refunds-to-self"},
		{"missing key in an allow rule, later rule does not match: approval", "refund", `{"to":"bob@example.com"}`, RequireApproval, "small-refunds"},
		{"wrong type in an allow rule, later allow: still approval", "write", `{"size":"big"}`, RequireApproval, "cheap-writes"},
		{"non-bool value of a require_approval rule", "flag", `{"flag":"yes"}`, RequireApproval, "flagged"},
		{"error in a deny rule: deny", "block", `{}`, Deny, "blocked"},
		{"args not an object", "refund", `[1,2]`, Deny, "deny-refunds-to-self"},
		{"no error: allow", "refund", `{"amount":5,"to":"x"}`, Allow, "small-refunds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := p.Evaluate(context.Background(), Call{Tool: tt.tool, Args: json.RawMessage(tt.args), Run: run}, nil)
			if o.Action != tt.wantAction || o.Rule != tt.wantRule {
				t.Errorf("Evaluate = %s by %q (%s), want %s by %q", o.Action, o.Rule, o.EvalError, tt.wantAction, tt.wantRule)
			}
			if (o.EvalError != "") != (tt.name != "no error: allow") {
				t.Errorf("EvalError = %q", o.EvalError)
			}
		})
	}
	// The flagged rule's quorum survives its own evaluation error.
	if o := p.Evaluate(context.Background(), Call{Tool: "flag", Args: json.RawMessage(`{"flag":1}`)}, nil); o.RequiredApprovals != 2 {
		t.Errorf("erroring require_approval rule = %+v, want its 2 approvals", o)
	}
}

func TestCostLimit(t *testing.T) {
	p, err := compile(t, `{"version":1,"rules":[
		{"id":"quadratic","tools":["t"],"when":"args.items.all(x, args.items.all(y, args.items.all(z, x + y + z != '')))","outcome":"allow"}]}`,
		Options{CostLimit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	small, _ := json.Marshal(map[string]any{"items": []string{"a", "b"}})
	if o := p.Evaluate(context.Background(), Call{Tool: "t", Args: small}, nil); o.Action != Allow || o.EvalError != "" {
		t.Errorf("small input = %+v, want allow", o)
	}
	items := make([]string, 200)
	for i := range items {
		items[i] = "item"
	}
	big, _ := json.Marshal(map[string]any{"items": items})
	o := p.Evaluate(context.Background(), Call{Tool: "t", Args: big}, nil)
	if o.Action != RequireApproval || !strings.Contains(o.EvalError, "cost limit exceeded") {
		t.Errorf("input over the cost limit = %+v, want require_approval with a cost-limit error", o)
	}
}

func TestCancelledContextFailsClosed(t *testing.T) {
	p, err := compile(t, `{"version":1,"rules":[{"id":"r","tools":["t"],"when":"args.items.all(x, args.items.all(y, x == y || true))","outcome":"allow"}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	items := make([]int, 100) // 10,000 iterations: under the cost limit, over the interrupt check frequency
	args, _ := json.Marshal(map[string]any{"items": items})
	if o := p.Evaluate(context.Background(), Call{Tool: "t", Args: args}, nil); o.Action != Allow {
		t.Fatalf("uncancelled evaluation = %+v, want allow", o)
	}
	if o := p.Evaluate(ctx, Call{Tool: "t", Args: args}, nil); o.Action != RequireApproval || !strings.Contains(o.EvalError, "cancel") {
		t.Errorf("cancelled evaluation = %+v, want require_approval with a cancellation error", o)
	}
}

func TestRunMayOnlyTighten(t *testing.T) {
	p, err := compile(t, `{"version":1,"defaults":{"required_approvals":2,"four_eyes":true},"rules":[
		{"id":"reads","description":"reads change nothing","tools":["read_*"],"outcome":"allow"},
		{"id":"nope","tools":["drop_table"],"outcome":"deny"}]}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, tr := false, true
	loosening := []struct {
		name string
		req  RunRequirements
		want string
	}{
		{"four-eyes off", RunRequirements{FourEyes: &f}, "four_eyes: false"},
		{"fewer approvals", RunRequirements{RequiredApprovals: 1}, "requires at least 2"},
	}
	for _, tt := range loosening {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.CheckRun(tt.req)
			if !errors.Is(err, ErrLoosens) || !errors.Is(err, ErrInvalidRun) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckRun = %v, want ErrLoosens mentioning %q", err, tt.want)
			}
		})
	}
	for _, bad := range []RunRequirements{{RequiredApprovals: -1}, {RequiredApprovals: 21}, {RequireApproval: []string{"a b"}}} {
		if _, err := p.CheckRun(bad); !errors.Is(err, ErrInvalidRun) || errors.Is(err, ErrLoosens) {
			t.Errorf("CheckRun(%+v) = %v, want a validation error", bad, err)
		}
	}

	rr, err := p.CheckRun(RunRequirements{RequireApproval: []string{"read_secret*"}, RequiredApprovals: 3, FourEyes: &tr})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool string
		want Outcome
	}{
		// The allow rule's description is kept, after why the call is held.
		{"read_secrets", Outcome{Action: RequireApproval, Rule: "reads", RequiredApprovals: 3, FourEyes: true, TightenedByRun: true,
			Description: "this run asks for approval of read_secrets calls, which the policy alone lets run (reads change nothing)"}},
		{"read_public", Outcome{Action: Allow, Rule: "reads", Description: "reads change nothing"}},
		{"write_document", Outcome{Action: RequireApproval, Rule: RuleDefault, RequiredApprovals: 3, FourEyes: true, TightenedByRun: true}},
		{"drop_table", Outcome{Action: Deny, Rule: "nope", Message: `denied by policy rule "nope"`}},
	}
	for _, tt := range tests {
		t.Run("tighten "+tt.tool, func(t *testing.T) {
			o := p.Evaluate(context.Background(), Call{Tool: tt.tool, NeedsApproval: strings.HasPrefix(tt.tool, "write")}, rr)
			if !reflect.DeepEqual(o, tt.want) {
				t.Errorf("Evaluate =\n  %+v\nwant\n  %+v", o, tt.want)
			}
		})
	}
	// A run asking for what the policy already says is not loosening.
	if _, err := p.CheckRun(RunRequirements{RequiredApprovals: 2, FourEyes: &tr}); err != nil {
		t.Errorf("CheckRun of the policy's own minimum = %v", err)
	}
	var none *Policy
	if _, err := none.CheckRun(RunRequirements{FourEyes: &f, RequiredApprovals: 1}); err != nil {
		t.Errorf("CheckRun without a policy = %v, want accepted", err)
	}
}

func TestFactsFor(t *testing.T) {
	_, dir := testPolicy(t)
	f := FactsFor(dir, identity.MustParse("Ivan+x@EXAMPLE.com"), map[string]string{"k": "v"})
	want := RunFacts{Initiator: "ivan@example.com", InitiatorPerson: "ivan", InitiatorGroups: []string{"interns"}, Metadata: map[string]string{"k": "v"}}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("FactsFor = %+v, want %+v", f, want)
	}
	f = FactsFor(nil, identity.MustParse("arn:aws:sts::123456789012:assumed-role/Dev/s1"), nil)
	if f.Initiator != "arn:aws:iam::123456789012:role/dev" || f.InitiatorPerson != "" || len(f.InitiatorGroups) != 0 || f.Metadata == nil {
		t.Errorf("FactsFor(session, no directory) = %+v", f)
	}
}

func TestUnusedRules(t *testing.T) {
	p, _ := testPolicy(t)
	got := p.UnusedRules([]string{"read_document", "write_document", "delete_document", "payments__charge"})
	if want := []string{"github-reads"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UnusedRules = %v, want %v", got, want)
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	p, dir := testPolicy(t)
	run := FactsFor(dir, identity.MustParse("ann@example.com"), nil)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				o := p.Evaluate(context.Background(), Call{Tool: "payments__charge", Args: json.RawMessage(`{"amount":5000}`), Run: run}, nil)
				if o.Rule != "big-payments" {
					t.Errorf("concurrent Evaluate = %+v", o)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestAnEvaluationErrorKeepsALaterRulesTerms: an allow rule whose
// condition fails reads as require_approval on the terms of the rule
// after it that requires approval (the tester's bypass: a failing
// "ticketed" allow rule took the call out of the pricing rule's
// approvers, quorum and four-eyes); two require_approval readings keep
// the stricter of each term, and different approvers (a rule's, or the
// run's) are refused.
func TestAnEvaluationErrorKeepsALaterRulesTerms(t *testing.T) {
	dir, err := identity.LoadDirectory(filepath.Join("testdata", "directory.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile(t, `{"version":1,"rules":[
		{"id":"ticketed","tools":["write"],"when":"args.ticket == 'T-1'","outcome":"allow"},
		{"id":"quorum","tools":["vote"],"when":"args.x.y","outcome":"require_approval","required_approvals":3},
		{"id":"ops","tools":["deploy"],"when":"args.x.y","outcome":"require_approval","approvers":["group:interns"]},
		{"id":"pricing","tools":["write","vote","deploy"],"when":"args.path == 'pricing'","outcome":"require_approval",
		 "approvers":["group:finance"],"required_approvals":2,"four_eyes":true}
	]}`, Options{Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	eval := func(tool string) Outcome {
		return p.Evaluate(context.Background(), Call{Tool: tool, Args: json.RawMessage(`{"path":"pricing"}`), NeedsApproval: true}, nil)
	}
	o := eval("write")
	if o.Action != RequireApproval || o.Rule != "pricing" || !slices.Equal(o.Approvers, []string{"group:finance"}) || o.RequiredApprovals != 2 || !o.FourEyes || o.EvalError == "" {
		t.Errorf("failing allow before pricing = %+v, want pricing's terms", o)
	}
	if o = eval("vote"); o.Action != Deny || !strings.Contains(o.Message, "different approvers") {
		t.Errorf("failing quorum rule (the run's approvers) before pricing (finance) = %+v, want a denial", o)
	}
	o = p.Evaluate(context.Background(), Call{Tool: "vote", Args: json.RawMessage(`{"path":"other"}`), NeedsApproval: true}, nil)
	if o.Action != RequireApproval || o.Rule != "quorum" || len(o.Approvers) != 0 || o.RequiredApprovals != 3 {
		t.Errorf("failing quorum rule before the default = %+v, want its 3 approvals by the run's approvers", o)
	}
	if o = eval("deploy"); o.Action != Deny || !strings.Contains(o.Message, "different approvers") {
		t.Errorf("failing ops rule before pricing = %+v, want a denial", o)
	}
}
