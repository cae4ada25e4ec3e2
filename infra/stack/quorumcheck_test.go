package stack

import "testing"

// TestQuorumCheck: QuorumCheck is AGENTGATE_QUORUM_CHECK of the two
// workers, which schedule the checks at a suspension (purge makes the
// checks a run has, whatever it is set to); unset, the variable is left
// out and the workers schedule none (off in this release).
func TestQuorumCheck(t *testing.T) {
	def := defaultTemplate(t)
	on := synth(t, AgentgateStackProps{ModelArns: []string{testModelArn}, QuorumCheck: "on"})
	for _, name := range FunctionNames {
		_, fn := def.functionByName(t, testStackName+"-"+name)
		if v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK"]; ok {
			t.Errorf("%s: AGENTGATE_QUORUM_CHECK = %v without QuorumCheck, want none", name, v)
		}
		_, fn = on.functionByName(t, testStackName+"-"+name)
		v, ok := fn["Environment"].(map[string]any)["Variables"].(map[string]any)["AGENTGATE_QUORUM_CHECK"]
		switch name {
		case "purge":
			if ok {
				t.Errorf("purge: AGENTGATE_QUORUM_CHECK = %v, want none (it schedules no check)", v)
			}
		default:
			if v != "on" {
				t.Errorf("%s: AGENTGATE_QUORUM_CHECK = %v, want on", name, v)
			}
		}
	}
	for _, bad := range []string{"yes", "1", "true"} {
		if err := (AgentgateStackProps{QuorumCheck: bad}).Validate(); err == nil {
			t.Errorf("Validate(QuorumCheck %q) = nil, want an error", bad)
		}
	}
}
