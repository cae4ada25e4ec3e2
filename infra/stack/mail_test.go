package stack

import (
	"slices"
	"testing"
)

// TestSESAPI: SESAPI is AGENTGATE_SES_API of all three functions (the
// workers send the first mails, purge the reminders); unset, the variable
// is left out and the functions use SES v2. Either API is the IAM action
// ses:SendEmail, so the roles do not change.
func TestSESAPI(t *testing.T) {
	def := defaultTemplate(t)
	v1 := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, SESAPI: "v1"})
	for _, name := range FunctionNames {
		_, fn := def.functionByName(t, testStackName+"-"+name)
		if v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_SES_API"]; ok {
			t.Errorf("%s: AGENTGATE_SES_API = %v without SESAPI, want none", name, v)
		}
		_, fn = v1.functionByName(t, testStackName+"-"+name)
		if v := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_SES_API"]; v != "v1" {
			t.Errorf("%s: AGENTGATE_SES_API = %v, want v1", name, v)
		}
		var sends [2][]string
		for i, s := range []synthesized{def, v1} {
			for _, st := range roleStatements(t, s, functionRole(t, s, name)) {
				if st.sid == sidSendMail {
					sends[i] = append(sends[i], st.actions...)
				}
			}
		}
		if !slices.Equal(sends[0], []string{"ses:SendEmail"}) || !slices.Equal(sends[1], sends[0]) {
			t.Errorf("%s: mail actions %v with SES v2, %v with v1; want ses:SendEmail both", name, sends[0], sends[1])
		}
	}
	for _, bad := range []string{"v3", "sesv2"} {
		if err := (AgentgateStackProps{SESAPI: bad}).Validate(); err == nil {
			t.Errorf("Validate(SESAPI %q) = nil, want an error", bad)
		}
	}
}
