package stack

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// statement is one IAM policy statement, rendered for comparison.
type statement struct {
	sid, effect string
	actions     []string
	resources   []string
	condition   string
}

func parseStatement(raw any) statement {
	m := raw.(map[string]any)
	st := statement{
		effect:    render(m["Effect"]),
		actions:   sortedStrings(m["Action"]),
		resources: sortedStrings(m["Resource"]),
	}
	if sid, ok := m["Sid"].(string); ok {
		st.sid = sid
	}
	if c, ok := m["Condition"]; ok {
		st.condition = render(c)
	}
	return st
}

// roleStatements returns every statement attached to the role with logical
// id roleID: its inline policies and the AWS::IAM::Policy resources naming it.
func roleStatements(t *testing.T, s synthesized, roleID string) []statement {
	t.Helper()
	var out []statement
	role := s.resources("AWS::IAM::Role")[roleID]["Properties"].(map[string]any)
	for _, p := range list(role["Policies"]) {
		for _, raw := range list(p.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"]) {
			out = append(out, parseStatement(raw))
		}
	}
	for _, pol := range s.resources("AWS::IAM::Policy") {
		props := pol["Properties"].(map[string]any)
		attached := false
		for _, r := range list(props["Roles"]) {
			if render(r) == "${"+roleID+"}" {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, raw := range list(props["PolicyDocument"].(map[string]any)["Statement"]) {
			out = append(out, parseStatement(raw))
		}
	}
	return out
}

// wantStatements are the exact statements of each function's role, by Sid:
// actions and resources. Anything added to a role must be added here.
func wantStatements(s synthesized, t *testing.T) map[string]map[string]statement {
	t.Helper()
	table, _ := s.resource(t, "AWS::DynamoDB::Table", func(map[string]any) bool { return true })
	bucket, _ := s.resource(t, "AWS::S3::Bucket", func(map[string]any) bool { return true })
	key, _ := s.resource(t, "AWS::KMS::Key", isStateKey)
	tableArn := "${" + table + ".Arn}"
	bucketArn := "${" + bucket + ".Arn}"
	fnArn := func(name string) string {
		return "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:Agentgate-" + name
	}
	logGroupArn := func(fn string) string { // the function's LoggingConfig {Ref: X} -> ${X.Arn}
		_, p := s.functionByName(t, "Agentgate-"+fn)
		ref := p["LoggingConfig"].(map[string]any)["LogGroup"].(map[string]any)["Ref"].(string)
		return "${" + ref + ".Arn}"
	}
	ses := "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/${SesIdentity}"
	sesCond := "{StringEquals={ses:FromAddress=${MailFrom}}}"
	workerTable := []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}
	kms := statement{sid: sidStateKey, actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, resources: []string{"${" + key + ".Arn}"}}
	model := statement{sid: sidInvokeModel, actions: []string{"bedrock:InvokeModel"}, resources: []string{testModelArn}}
	mail := statement{sid: sidSendMail, actions: []string{"ses:SendEmail"}, resources: []string{ses}, condition: sesCond}
	listBucket := statement{sid: sidListBucket, actions: []string{"s3:ListBucket"}, resources: []string{bucketArn}}
	queue, _ := s.resource(t, "AWS::SQS::Queue", func(map[string]any) bool { return true })
	inboxCond := "{ForAllValues:StringLike={dynamodb:LeadingKeys=INBOX#*}}"
	failed := statement{sid: sidFailedEvents, actions: []string{"sqs:SendMessage"}, resources: []string{"${" + queue + ".Arn}"}}

	byID := func(sts ...statement) map[string]statement {
		out := map[string]statement{}
		for _, st := range sts {
			st.effect = "Allow"
			out[st.sid] = st
		}
		return out
	}
	return map[string]map[string]statement{
		"startrun": byID(
			statement{sid: sidLogs, actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, resources: []string{logGroupArn("startrun")}},
			statement{sid: sidRunTable, actions: workerTable, resources: []string{tableArn}},
			statement{sid: sidStateBlobs, actions: []string{"s3:GetObject", "s3:PutObject"}, resources: []string{bucketArn + "/runs/*"}},
			statement{sid: sidDeleteState, actions: []string{"s3:DeleteObject"}, resources: []string{bucketArn + "/runs/*/state/*"}},
			statement{sid: sidDocuments, actions: []string{"s3:DeleteObject", "s3:GetObject", "s3:PutObject"}, resources: []string{bucketArn + "/content/*"}},
			listBucket, kms, mail, model, failed,
			statement{sid: sidDispatch, actions: []string{"lambda:InvokeFunction"}, resources: []string{fnArn("startrun")}},
		),
		"resume": byID(
			statement{sid: sidLogs, actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, resources: []string{logGroupArn("resume")}},
			statement{sid: sidRunTable, actions: workerTable, resources: []string{tableArn}},
			statement{sid: sidStateBlobs, actions: []string{"s3:GetObject", "s3:PutObject"}, resources: []string{bucketArn + "/runs/*"}},
			statement{sid: sidDeleteState, actions: []string{"s3:DeleteObject"}, resources: []string{bucketArn + "/runs/*/state/*"}},
			statement{sid: sidDocuments, actions: []string{"s3:DeleteObject", "s3:GetObject", "s3:PutObject"}, resources: []string{bucketArn + "/content/*"}},
			listBucket, kms, mail, model, failed,
			statement{sid: sidDispatch, actions: []string{"lambda:InvokeFunction"}, resources: []string{fnArn("resume")}},
			statement{sid: sidInboxEntries, actions: []string{"dynamodb:DeleteItem"}, resources: []string{tableArn}, condition: inboxCond},
		),
		"purge": byID(
			statement{sid: sidLogs, actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, resources: []string{logGroupArn("purge")}},
			statement{sid: sidRunTable, actions: []string{"dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"},
				resources: []string{tableArn}},
			statement{sid: sidDueIndex, actions: []string{"dynamodb:Query"}, resources: []string{tableArn + "/index/due-index"}},
			statement{sid: sidPurgeStateObj, actions: []string{"s3:DeleteObject"}, resources: []string{bucketArn + "/runs/*"}},
			listBucket, mail, failed,
			statement{sid: sidDispatch, actions: []string{"lambda:InvokeFunction"}, resources: []string{fnArn("resume"), fnArn("startrun")}},
		),
	}
}

// functionRole returns the logical id of the role of function name.
func functionRole(t *testing.T, s synthesized, name string) string {
	t.Helper()
	_, p := s.functionByName(t, "Agentgate-"+name)
	att := p["Role"].(map[string]any)["Fn::GetAtt"].([]any)
	return att[0].(string)
}

func TestFunctionPoliciesStatementByStatement(t *testing.T) {
	s := defaultTemplate(t)
	want := wantStatements(s, t)
	for _, name := range FunctionNames {
		t.Run(name, func(t *testing.T) {
			roleID := functionRole(t, s, name)
			role := s.resources("AWS::IAM::Role")[roleID]["Properties"].(map[string]any)
			if mp := role["ManagedPolicyArns"]; mp != nil {
				t.Errorf("role has managed policies %s, want explicit statements only", render(mp))
			}
			if got := render(role["AssumeRolePolicyDocument"]); !strings.Contains(got, "lambda.amazonaws.com") {
				t.Errorf("role trust %s, want lambda.amazonaws.com", got)
			}
			got := map[string]statement{}
			for _, st := range roleStatements(t, s, roleID) {
				if st.sid == "" {
					t.Errorf("statement without Sid (added outside iam.go?): %+v", st)
					continue
				}
				if _, dup := got[st.sid]; dup {
					t.Errorf("Sid %s used twice", st.sid)
				}
				got[st.sid] = st
			}
			for sid, w := range want[name] {
				g, ok := got[sid]
				if !ok {
					t.Errorf("missing statement %s: %+v", sid, w)
					continue
				}
				if g.effect != w.effect || !slices.Equal(g.actions, w.actions) || !slices.Equal(g.resources, w.resources) || g.condition != w.condition {
					t.Errorf("statement %s\n got %+v\nwant %+v", sid, g, w)
				}
			}
			for sid, g := range got {
				if _, ok := want[name][sid]; !ok {
					t.Errorf("unexpected statement %s: %+v", sid, g)
				}
			}
		})
	}
}

// The properties the issue names, checked on the actions alone, so that they
// hold however the statements are split.
func TestFunctionPrivilegeBoundaries(t *testing.T) {
	s := defaultTemplate(t)
	actions := map[string][]statement{}
	for _, name := range FunctionNames {
		actions[name] = roleStatements(t, s, functionRole(t, s, name))
	}
	has := func(fn, action string) []statement {
		var out []statement
		for _, st := range actions[fn] {
			if slices.Contains(st.actions, action) {
				out = append(out, st)
			}
		}
		return out
	}
	for _, st := range actions["startrun"] {
		for _, a := range st.actions {
			// startrun makes the writes the policy lets run unasked (a
			// document delete) and settles runs (their state blobs); it
			// deletes nothing else.
			if (strings.Contains(a, "Delete") && st.sid != sidDocuments && st.sid != sidDeleteState) || a == "dynamodb:BatchWriteItem" {
				t.Errorf("startrun may %s (%s); it deletes documents and state blobs only", a, st.sid)
			}
		}
	}
	// Both workers run the loop, so both make the document tool's writes.
	for _, fn := range []string{"startrun", "resume"} {
		for _, a := range []string{"s3:PutObject", "s3:DeleteObject"} {
			found := false
			for _, st := range has(fn, a) {
				found = found || st.sid == sidDocuments
			}
			if !found {
				t.Errorf("%s may not %s documents, but it runs the calls the policy lets run unasked", fn, a)
			}
		}
	}
	for _, fn := range []string{"startrun", "resume"} {
		for _, a := range []string{"dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} {
			for _, st := range has(fn, a) {
				// resume drops approvers' inbox entries, nothing else.
				if fn != "resume" || a != "dynamodb:DeleteItem" || st.condition != "{ForAllValues:StringLike={dynamodb:LeadingKeys=INBOX#*}}" {
					t.Errorf("%s may %s (condition %s); only purge deletes runs, events and tokens", fn, a, st.condition)
				}
			}
		}
	}
	for _, st := range has("resume", "s3:DeleteObject") {
		for _, r := range st.resources {
			if !strings.HasSuffix(r, "/runs/*/state/*") && !strings.HasSuffix(r, "/content/*") {
				t.Errorf("resume may delete %s, want state blobs and documents only", r)
			}
		}
	}
	if len(has("resume", "s3:DeleteObject")) == 0 {
		t.Error("resume cannot delete settled state blobs")
	}
	for _, a := range []string{"dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "s3:DeleteObject"} {
		if len(has("purge", a)) == 0 {
			t.Errorf("purge cannot %s", a)
		}
	}
	invoked := func(fn string) []string {
		var out []string
		for _, st := range has(fn, "lambda:InvokeFunction") {
			for _, r := range st.resources {
				out = append(out, r[strings.LastIndex(r, ":")+1:])
			}
		}
		sort.Strings(out)
		return out
	}
	for fn, want := range map[string][]string{
		"startrun": {"Agentgate-startrun"},
		"resume":   {"Agentgate-resume"},
		"purge":    {"Agentgate-resume", "Agentgate-startrun"},
	} {
		if got := invoked(fn); !slices.Equal(got, want) {
			t.Errorf("%s may invoke %v, want %v", fn, got, want)
		}
	}
	for _, fn := range FunctionNames {
		for _, st := range has(fn, "bedrock:InvokeModel") {
			if !slices.Equal(st.resources, []string{testModelArn}) {
				t.Errorf("%s may invoke models %v, want only %s", fn, st.resources, testModelArn)
			}
		}
	}
	if len(has("purge", "bedrock:InvokeModel")) > 0 {
		t.Error("purge may invoke models; it runs no agent loop")
	}
}

func TestNoModelsNoBedrock(t *testing.T) {
	s := synth(t, AgentgateStackProps{})
	for _, name := range FunctionNames {
		for _, st := range roleStatements(t, s, functionRole(t, s, name)) {
			for _, a := range st.actions {
				if strings.HasPrefix(a, "bedrock:") {
					t.Errorf("%s may %s without configured model ARNs", name, a)
				}
			}
		}
	}
}

// Every IAM document in the template, roles of CDK's own constructs
// included: no Allow of "*" or "service:*", no *FullAccess managed policy,
// and Resource "*" only for X-Ray, which has no resource-level permissions.
func TestNoWildcardsAnywhere(t *testing.T) {
	for _, tt := range []struct {
		name  string
		props AgentgateStackProps
	}{
		{"default", AgentgateStackProps{ModelArns: []string{testModelArn}}},
		{"tracing", AgentgateStackProps{Tracing: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := synth(t, tt.props)
			var docs []statement
			for id, r := range s.resources("AWS::IAM::Role") {
				p := r["Properties"].(map[string]any)
				for _, arn := range sortedStrings(p["ManagedPolicyArns"]) {
					if strings.Contains(arn, "FullAccess") || strings.HasSuffix(arn, "/AdministratorAccess") {
						t.Errorf("role %s has managed policy %s", id, arn)
					}
				}
				for _, pol := range list(p["Policies"]) {
					for _, raw := range list(pol.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"]) {
						docs = append(docs, parseStatement(raw))
					}
				}
			}
			for _, pol := range s.resources("AWS::IAM::Policy") {
				for _, raw := range list(pol["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"]) {
					docs = append(docs, parseStatement(raw))
				}
			}
			if len(docs) == 0 {
				t.Fatal("no IAM statements found")
			}
			xray := 0
			for _, st := range docs {
				if st.effect != "Allow" {
					continue
				}
				for _, a := range st.actions {
					if a == "*" || strings.HasSuffix(a, ":*") {
						t.Errorf("statement %q allows %s", st.sid, a)
					}
				}
				if slices.Contains(st.resources, "*") {
					onlyXRay := true
					for _, a := range st.actions {
						onlyXRay = onlyXRay && strings.HasPrefix(a, "xray:")
					}
					if !onlyXRay {
						t.Errorf("statement %q allows %v on every resource", st.sid, st.actions)
					}
					xray++
				}
			}
			if tt.props.Tracing && xray != 3 {
				t.Errorf("%d X-Ray statements, want one per function", xray)
			}
		})
	}
}
